package ui_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/ui"
)

// statementLog is a GORM logger that records every statement run through
// it.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) LogMode(logger.LogLevel) logger.Interface { return l }
func (l *statementLog) Info(context.Context, string, ...any)     {}
func (l *statementLog) Warn(context.Context, string, ...any)     {}
func (l *statementLog) Error(context.Context, string, ...any)    {}
func (l *statementLog) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	s, _ := fc()
	l.mu.Lock()
	l.sql = append(l.sql, s)
	l.mu.Unlock()
}

// count returns how many recorded statements contain part.
func (l *statementLog) count(part string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.sql {
		if strings.Contains(strings.ToUpper(s), part) {
			n++
		}
	}
	return n
}

// TestGaleraPanelAbsentOffCluster: on the machine's lone MariaDB server
// and on SQLite, a console given the database (Config.DB) shows no
// Cluster panel and no "cluster" in api/overview; it asked MariaDB once
// whether it is a Galera node (one SHOW GLOBAL VARIABLES over three
// overviews and two Cluster calls) and read no wsrep status, and asked
// SQLite nothing. The Galera case runs in tools/internal/hatest
// (TestGaleraConsole).
func TestGaleraPanelAbsentOffCluster(t *testing.T) {
	for _, b := range []struct {
		name       string
		open       func(testing.TB) *gorm.DB
		detections int
	}{
		{"mariadb", testdb.MySQL, 1},
		{"sqlite", testdb.SQLite, 0},
	} {
		t.Run(b.name, func(t *testing.T) {
			log := &statementLog{}
			db := b.open(t).Session(&gorm.Session{Logger: log})
			e := seed(t, b.name, db)
			h, err := ui.New(ui.Config{Sources: e.sources, DB: db})
			if err != nil {
				t.Fatal(err)
			}
			srv := serveConsole(t, ui.Config{Sources: e.sources, DB: db})
			c := client(t)
			for range 2 {
				code, _, body := get(t, c, srv.URL+"/")
				if code != 200 || !strings.Contains(body, e.outboxT) {
					t.Fatalf("overview: %d\n%s", code, body)
				}
				if strings.Contains(body, `id="cluster"`) || strings.Contains(body, "<h2>Cluster") {
					t.Fatalf("overview of a database that is not a Galera node shows a Cluster panel:\n%s", body)
				}
			}
			code, _, body := get(t, c, srv.URL+"/api/overview")
			var v map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
				t.Fatalf("api/overview: %d, %v\n%s", code, err, body)
			}
			if _, ok := v["cluster"]; ok || v["tables"] == nil {
				t.Fatalf("api/overview of a database that is not a Galera node: %s; want tables and no cluster", body)
			}
			// The handler of its own has its own detection.
			for range 2 {
				if s := h.Cluster(context.Background()); s != nil {
					t.Fatalf("Cluster on %s = %+v; want nil", b.name, s)
				}
			}
			if n := log.count("SHOW GLOBAL VARIABLES"); n != 2*b.detections {
				t.Errorf("detections sent by two consoles: %d; want %d (one per console)", n, 2*b.detections)
			}
			if n := log.count("WSREP") - log.count("SHOW GLOBAL VARIABLES"); n != 0 {
				t.Errorf("%d wsrep statements beside the detection; want none", n)
			}
		})
	}
}

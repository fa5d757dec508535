//go:build linux

package hatest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/ui"
)

// consoleCluster is the "cluster" of a console's api/overview.
type consoleCluster struct {
	ClusterSize   int      `json:"clusterSize"`
	ClusterStatus string   `json:"clusterStatus"`
	LocalState    string   `json:"localState"`
	Members       []string `json:"members"`
	Serving       bool     `json:"serving"`
	Error         string   `json:"error"`
}

// consoleRead returns the body of GET base+path, failing the test unless
// it is 200.
func consoleRead(t *testing.T, base, path string) string {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d\n%s", base, path, resp.StatusCode, b)
	}
	return string(b)
}

// consoleState returns the cluster of base's api/overview, nil when it
// has none.
func consoleState(t *testing.T, base string) *consoleCluster {
	t.Helper()
	var v struct {
		Cluster *consoleCluster `json:"cluster"`
	}
	body := consoleRead(t, base, "/api/overview")
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("api/overview: %v\n%s", err, body)
	}
	return v.Cluster
}

// awaitConsoleState polls base's api/overview until ok holds of its
// cluster, for at most a minute, and returns it.
func awaitConsoleState(t *testing.T, base, want string, ok func(*consoleCluster) bool) *consoleCluster {
	t.Helper()
	start := time.Now()
	for {
		st := consoleState(t, base)
		if st != nil && ok(st) {
			t.Logf("%s: %s after %v", base, want, time.Since(start).Round(time.Millisecond))
			return st
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%s a minute on: cluster %+v; want %s", base, st, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// panelFact returns whether page's Cluster panel shows value for the
// fact name (its data-cluster attribute).
func panelFact(page, name, value string) bool {
	return strings.Contains(page, fmt.Sprintf(`data-cluster=%q>%s<`, name, value)) ||
		strings.Contains(page, fmt.Sprintf(`data-cluster=%q class="bad">%s<`, name, value))
}

// serveGaleraConsole serves the console (package ui) over the lease
// table table through db, a node's pool, with Config.DB set to db, until
// the test ends, and returns its URL.
func serveGaleraConsole(t *testing.T, db *gorm.DB, table string) string {
	t.Helper()
	leases, err := sqlstore.NewLeases(db, table)
	if err != nil {
		t.Fatal(err)
	}
	src, err := ui.Leases(table, leases)
	if err != nil {
		t.Fatal(err)
	}
	// A lease table has no card on the overview: the page shows the
	// cluster alone.
	h, err := ui.New(ui.Config{Sources: []ui.Source{src}, DB: db, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// serveClaimstoreUI runs `claimstore ui --backend mariadb` on dsn, its
// tables restricted to table, until the test ends, and returns its URL.
func serveClaimstoreUI(t *testing.T, dsn, table string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root := cli.NewRoot()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, stderr, err := clitest.Run(ctx, root, "ui", "--backend", "mariadb", "--dsn", dsn, "--addr", addr, "--tables", table, "--read-only")
		if err != nil && stderr != "" {
			err = fmt.Errorf("%w\n%s", err, stderr)
		}
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("claimstore ui ended with %v", err)
		}
	})
	base := "http://" + addr
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/api/overview")
		if err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("claimstore ui ended before serving: %v", err)
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("claimstore ui not serving on %s after 30 s: %v", addr, err)
		}
	}
}

// TestGaleraConsole: the console's overview over a Galera node shows the
// Cluster panel (page and api/overview): on g1 (the library's console,
// Config.DB) and on g2 (`claimstore ui`, which turns it on by itself),
// each node Synced and serving in a Primary component of 3 with three
// members. g2 desynced (wsrep_desync) shows the warning style: state
// Donor/Desynced, not serving. With g3 killed, the panel through the
// survivor g1 shows a component of 2 once the cluster dropped it, and the
// console over g3 itself shows the panel with the read's error, in the
// warning style.
func TestGaleraConsole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	dbs := openGaleraNodes(ctx, t, c, 4)
	table := testdb.Table(t, dbs[0], "ui_galera_lease")
	leases, err := sqlstore.NewLeases(dbs[0], table)
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, held, err := leases.AcquireLease(ctx, "relay", "worker-g1", time.Minute); err != nil || !held {
		t.Fatalf("acquire: held %v, %v", held, err)
	}

	g1 := serveGaleraConsole(t, dbs[0], table)
	g3 := serveGaleraConsole(t, dbs[2], table)
	g2 := serveClaimstoreUI(t, c.DSN("g2"), table)
	for _, base := range []string{g1, g2, g3} {
		st := consoleState(t, base)
		if st == nil || st.ClusterSize != 3 || st.LocalState != "Synced" || st.ClusterStatus != "Primary" || !st.Serving || len(st.Members) != 3 || st.Error != "" {
			t.Fatalf("api/overview of %s: cluster %+v; want a synced node serving in a Primary component of 3 members", base, st)
		}
		page := consoleRead(t, base, "/")
		if !strings.Contains(page, `<section class="card cluster" id="cluster">`) || !strings.Contains(page, "<h2>Cluster") {
			t.Fatalf("overview of %s: no Cluster panel in its normal style:\n%s", base, page)
		}
		for name, want := range map[string]string{"clusterSize": "3", "localState": "Synced", "serving": "yes", "clusterStatus": "Primary", "ready": "yes", "connected": "yes"} {
			if !panelFact(page, name, want) {
				t.Errorf("overview of %s: the Cluster panel does not show %s %s:\n%s", base, name, want, page)
			}
		}
	}

	// A desynced node (as a donor of a state transfer is) does not serve
	// clients as a full member: the panel takes its warning style.
	if err := dbs[1].WithContext(ctx).Exec("SET GLOBAL wsrep_desync = ON").Error; err != nil {
		t.Fatal(err)
	}
	synced := false
	t.Cleanup(func() {
		if !synced {
			_ = dbs[1].Exec("SET GLOBAL wsrep_desync = OFF").Error
		}
	})
	st := awaitConsoleState(t, g2, "g2 desynced, not serving", func(s *consoleCluster) bool { return !s.Serving && s.LocalState != "Synced" })
	page := consoleRead(t, g2, "/")
	if !strings.Contains(page, `<section class="card cluster warn" id="cluster">`) || !panelFact(page, "serving", "no") ||
		!strings.Contains(page, `data-cluster="serving" class="bad">no<`) || !panelFact(page, "localState", st.LocalState) {
		t.Errorf("overview of desynced g2 (%+v): no Cluster panel in the warning style:\n%s", st, page)
	}
	t.Logf("g2 desynced: state %q, component %s of %d", st.LocalState, st.ClusterStatus, st.ClusterSize)
	if err := dbs[1].WithContext(ctx).Exec("SET GLOBAL wsrep_desync = OFF").Error; err != nil {
		t.Fatal(err)
	}
	synced = true
	awaitConsoleState(t, g2, "g2 synced again", func(s *consoleCluster) bool { return s.Serving && s.LocalState == "Synced" })

	if err := c.KillNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		if err := c.StartNode(context.Background(), "g3"); err != nil {
			t.Errorf("start g3 again: %v", err)
		}
	})
	awaitConsoleState(t, g1, "g1 serving in a component of 2", func(s *consoleCluster) bool { return s.Serving && s.ClusterSize == 2 })
	page = consoleRead(t, g1, "/")
	if !strings.Contains(page, `<section class="card cluster" id="cluster">`) || !panelFact(page, "clusterSize", "2") || !panelFact(page, "localState", "Synced") {
		t.Errorf("overview of g1 with g3 killed: the Cluster panel does not show a synced node in a component of 2:\n%s", page)
	}
	if st := consoleState(t, g2); st == nil || !st.Serving || st.ClusterSize != 2 {
		t.Errorf("api/overview of g2 with g3 killed: cluster %+v; want serving in a component of 2", st)
	}
	// The console over the dead node keeps its panel, with the error.
	st = consoleState(t, g3)
	page = consoleRead(t, g3, "/")
	if st == nil || st.Error == "" || st.Serving || !strings.Contains(page, `<section class="card cluster warn" id="cluster">`) {
		t.Errorf("console over the killed g3: cluster %+v; want the panel with the read's error in the warning style:\n%s", st, page)
	}
	if st != nil {
		t.Logf("console over the killed g3: %s", st.Error)
	}

	restarted = true
	if err := c.StartNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	awaitConsoleState(t, g3, "g3 serving in a component of 3 again", func(s *consoleCluster) bool { return s.Serving && s.ClusterSize == 3 })
}

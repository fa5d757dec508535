package jobs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/ncruces/go-sqlite3"
	sqlitedrv "github.com/ncruces/go-sqlite3/driver"
	"github.com/ncruces/go-sqlite3/gormlite"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// idleWindow is how long BenchmarkIdleQueries counts an idle client's
// statements.
const idleWindow = 10 * time.Second

// BenchmarkIdleQueries counts the statements an idle client (one queue,
// no job, the library's defaults: poll interval 1 s, signal interval 25 ms) sends
// to its database per second, on SQLite (every statement the SQLite
// library starts on the client's connections: sqlite3_trace_v2,
// SQLITE_TRACE_STMT) and MariaDB (every COM_QUERY, COM_STMT_PREPARE and
// COM_STMT_EXECUTE through a counting proxy), with the change signal on
// (queries/s) and off (SignalInterval -1, queries-off/s):
//
//	go test -run '^$' -bench IdleQueries -benchtime 1x ./jobs/
func BenchmarkIdleQueries(b *testing.B) {
	for _, be := range []struct {
		name string
		open func(b *testing.B, count *atomic.Int64) *gorm.DB
	}{{"sqlite", countedSQLite}, {"mariadb", countedMariaDB}} {
		b.Run(be.name, func(b *testing.B) {
			var count atomic.Int64
			db := be.open(b, &count)
			for b.Loop() {
				b.ReportMetric(idleRate(b, db, &count, 0), "queries/s")
				b.ReportMetric(idleRate(b, db, &count, -1), "queries-off/s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// idleRate runs an idle client with poll interval poll over fresh tables
// of db and returns the statements counted per second during idleWindow,
// after a second for its start.
func idleRate(b *testing.B, db *gorm.DB, count *atomic.Int64, poll time.Duration) float64 {
	b.Helper()
	js, qs := benchStores(b, db)
	defer dropStores(b, js, qs)
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[benchArgs](func(context.Context, *jobs.Job[benchArgs]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: js, QueueStore: qs, Workers: ws, Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}}, SignalInterval: poll})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	time.Sleep(time.Second)
	before, began := count.Load(), time.Now()
	time.Sleep(idleWindow)
	n, took := count.Load()-before, time.Since(began)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return float64(n) / took.Seconds()
}

// countedSQLite opens a SQLite database file whose connections count in
// count every statement they start.
func countedSQLite(b *testing.B, count *atomic.Int64) *gorm.DB {
	b.Helper()
	path := filepath.Join(b.TempDir(), "idle.db")
	sqlDB, err := sqlitedrv.Open(testdb.SQLiteDSN(path), func(c *sqlite3.Conn) error {
		return c.Trace(sqlite3.TRACE_STMT, func(sqlite3.TraceEvent, any, any) error {
			count.Add(1)
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	db, err := gorm.Open(gormlite.OpenDB(sqlDB), testdb.Config())
	if err != nil {
		b.Fatal(err)
	}
	return testdb.CloseAtCleanup(b, db)
}

// countedMariaDB opens the MariaDB test database through a proxy that
// counts in count the statements the client sends.
func countedMariaDB(b *testing.B, count *atomic.Int64) *gorm.DB {
	b.Helper()
	cfg, err := mysqldrv.ParseDSN(testdb.MySQLDSN())
	if err != nil {
		b.Fatal(err)
	}
	cfg.Addr = countingProxy(b, cfg.Addr, count)
	db, err := gorm.Open(gormmysql.Open(cfg.FormatDSN()), testdb.Config())
	if err == nil {
		err = db.Exec("SELECT 1").Error
	}
	if err != nil {
		testdb.Unreachable(b, "mysql", err)
	}
	return testdb.CloseAtCleanup(b, db)
}

// countingProxy listens on a loopback port, forwards each connection to
// addr, and counts in count the client's command packets that run a
// statement (MySQL client/server protocol: COM_QUERY 0x03,
// COM_STMT_PREPARE 0x16, COM_STMT_EXECUTE 0x17, each the first packet of
// its command, sequence id 0). It returns the port's address and closes
// it when b ends.
func countingProxy(b *testing.B, addr string, count *atomic.Int64) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
			wg.Go(func() { countCommands(in, out, count); out.Close() })
		}
	})
	return ln.Addr().String()
}

// countCommands copies the client's packets from in to out, counting the
// statements among them.
func countCommands(in io.Reader, out io.Writer, count *atomic.Int64) {
	var head [4]byte
	for {
		if _, err := io.ReadFull(in, head[:]); err != nil {
			return
		}
		size := int(binary.LittleEndian.Uint32(append(head[:3:3], 0)))
		body := make([]byte, size)
		if _, err := io.ReadFull(in, body); err != nil {
			return
		}
		if head[3] == 0 && size > 0 && (body[0] == 0x03 || body[0] == 0x16 || body[0] == 0x17) {
			count.Add(1)
		}
		if _, err := out.Write(append(head[:], body...)); err != nil && !errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

package sqlstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// Environment of TestLeaderProcessChild.
const (
	envLeaderChild   = "CLAIMSTORE_LEADER_CHILD" // the candidate id
	envLeaderBackend = "CLAIMSTORE_LEADER_BACKEND"
	envLeaderDSN     = "CLAIMSTORE_LEADER_DSN"
	envLeaderTable   = "CLAIMSTORE_LEADER_TABLE"
)

// TestLeaderProcessChild is one candidate of TestLeaderProcesses, in a
// process of its own: it campaigns until SIGTERM (then resigns) or
// SIGKILL, printing "elected <term>" and "deposed <term>" lines.
func TestLeaderProcessChild(t *testing.T) {
	id := os.Getenv(envLeaderChild)
	if id == "" {
		t.Skip("run as a child process of TestLeaderProcesses only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := sqlstore.Open(ctx, os.Getenv(envLeaderBackend), os.Getenv(envLeaderDSN))
	if err != nil {
		t.Fatal(err)
	}
	leases, err := sqlstore.NewLeases(db, os.Getenv(envLeaderTable))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	cfg := conformance.LeaderConfig("processes", id)
	cfg.OnElected = func(_ context.Context, l coord.Leader) { say("elected %d", l.Term()) }
	cfg.OnDeposed = func(l coord.Leader) { say("deposed %d", l.Term()) }
	e, err := coord.NewElector(leases, cfg)
	if err != nil {
		t.Fatal(err)
	}
	say("ready")
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// candidateProc is a running child of TestLeaderProcesses.
type candidateProc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
}

// leaderEvent is a line a child printed, with when the parent read it.
type leaderEvent struct {
	id, what string
	term     int64
	at       time.Time
}

// TestLeaderProcesses runs three candidates as operating-system processes
// over one lease table: the leader is killed with SIGKILL (no renewal,
// no release) and another must take over within TTL plus one renew
// interval (generously bounded); that one then resigns on SIGTERM and
// another must take over within one poll. Every term has one holder and
// terms strictly increase. The handover times are logged.
func TestLeaderProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; skipped with -short")
	}
	for _, c := range []struct {
		backend string
		open    func(t *testing.T) (*gorm.DB, string)
	}{
		{"sqlite", func(t *testing.T) (*gorm.DB, string) {
			dsn := sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "leader.db"))
			db, err := sqlstore.Open(context.Background(), "sqlite", dsn)
			if err != nil {
				t.Fatal(err)
			}
			testdb.CloseAtCleanup(t, db)
			return db, dsn
		}},
		{"postgres", func(t *testing.T) (*gorm.DB, string) { return testdb.Postgres(t), testdb.PostgresDSN() }},
		{"mysql", func(t *testing.T) (*gorm.DB, string) { return testdb.MySQL(t), testdb.MySQLDSN() }},
	} {
		t.Run(c.backend, func(t *testing.T) {
			db, dsn := c.open(t)
			leaderProcesses(t, c.backend, dsn, sqlstoretest.Leases(t, db).Table())
		})
	}
}

func leaderProcesses(t *testing.T, backend, dsn, table string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan leaderEvent, 100)
	ready := make(chan string, 3)
	procs := map[string]*candidateProc{}
	for i := range 3 {
		id := fmt.Sprintf("proc-%d", i)
		cmd := exec.Command(exe, "-test.run", "^TestLeaderProcessChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envLeaderChild+"="+id, envLeaderBackend+"="+backend, envLeaderDSN+"="+dsn, envLeaderTable+"="+table)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &candidateProc{id: id, cmd: cmd, done: make(chan struct{})}
		procs[id] = p
		go func() {
			defer close(p.done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				what, term, _ := strings.Cut(sc.Text(), " ")
				switch what {
				case "ready":
					ready <- id
				case "elected", "deposed":
					n, _ := strconv.ParseInt(term, 10, 64)
					events <- leaderEvent{id: id, what: what, term: n, at: time.Now()}
				}
			}
			if err := cmd.Wait(); err != nil && cmd.ProcessState != nil && !cmd.ProcessState.Exited() {
				return // killed by the test
			} else if err != nil {
				t.Errorf("%s: %v\n%s", id, err, stderr.String())
			}
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-p.done
		})
	}
	for range 3 {
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			t.Fatal("the candidate processes did not start within 30 s")
		}
	}
	holders := map[int64]string{}
	var lastTerm int64
	// nextElected waits for the next election, checking terms on the way.
	nextElected := func(within time.Duration) leaderEvent {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case ev := <-events:
				if ev.what != "elected" {
					continue
				}
				if h, ok := holders[ev.term]; ok && h != ev.id {
					t.Errorf("term %d won by %s and %s", ev.term, h, ev.id)
				}
				if ev.term <= lastTerm {
					t.Errorf("%s won term %d after term %d", ev.id, ev.term, lastTerm)
				}
				holders[ev.term], lastTerm = ev.id, ev.term
				return ev
			case <-deadline:
				t.Fatalf("no election within %v", within)
			}
		}
	}
	first := nextElected(conformance.LeaderHandoverBound)
	t.Logf("%s: first leader %s, term %d", backend, first.id, first.term)

	killed := time.Now()
	if err := procs[first.id].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := nextElected(conformance.LeaderHandoverBound)
	t.Logf("%s: handover after SIGKILL of %s (term %d): %s won term %d after %v", backend, first.id, first.term, second.id, second.term, second.at.Sub(killed).Round(time.Millisecond))

	resigned := time.Now()
	if err := procs[second.id].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	third := nextElected(conformance.LeaderHandoverBound)
	took := third.at.Sub(resigned)
	t.Logf("%s: handover after resign of %s (term %d): %s won term %d after %v", backend, second.id, second.term, third.id, third.term, took.Round(time.Millisecond))
	// The resigned lease could not have expired by itself before TTL minus
	// one renew interval.
	if bound := coordBound(); took >= bound {
		t.Errorf("handover after resign took %v, not less than %v: the lease was not released", took, bound)
	}
	select {
	case <-procs[second.id].done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not exit after SIGTERM", second.id)
	}
}

// coordBound is the lease minus renew interval of the conformance electors.
func coordBound() time.Duration {
	c := conformance.LeaderConfig("x", "y")
	return c.Lease - c.Lease/3
}

// TestLeaderConnectionKilled elects a leader whose lease store runs on a
// pool of its own, then kills that pool's server connections
// (pg_terminate_backend, KILL) and closes the pool, so that the leader
// can neither renew nor release: a follower on another pool must take
// over within TTL plus one renew interval (generously bounded), and the
// old leader must have given up locally by then.
func TestLeaderConnectionKilled(t *testing.T) {
	for _, c := range []struct {
		backend string
		open    func(testing.TB) *gorm.DB
		dsn     string
		killSQL string
		ownID   string
	}{
		{"postgres", testdb.Postgres, testdb.PostgresDSN(), "SELECT pg_terminate_backend(?)", "SELECT pg_backend_pid()"},
		{"mysql", testdb.MySQL, testdb.MySQLDSN(), "KILL ?", "SELECT CONNECTION_ID()"},
	} {
		t.Run(c.backend, func(t *testing.T) {
			db := c.open(t)
			table := sqlstoretest.Leases(t, db).Table()
			// The leader's own pool of one connection.
			own, err := sqlstore.Open(context.Background(), c.backend, c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			ownDB, _ := own.DB()
			ownDB.SetMaxOpenConns(1)
			t.Cleanup(func() { ownDB.Close() })
			var connID int64
			if err := ownDB.QueryRow(c.ownID).Scan(&connID); err != nil {
				t.Fatal(err)
			}
			ownLeases, err := sqlstore.NewLeases(own, table)
			if err != nil {
				t.Fatal(err)
			}
			followerLeases, err := sqlstore.NewLeases(db, table)
			if err != nil {
				t.Fatal(err)
			}
			elected := make(chan coord.Leader, 4)
			start := func(id string, ls coord.LeaseStore) *coord.Elector {
				cfg := conformance.LeaderConfig("killed-connection", id)
				cfg.OnElected = func(_ context.Context, l coord.Leader) { elected <- l }
				e, err := coord.NewElector(ls, cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); _ = e.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
				return e
			}
			leader := start("own-pool", ownLeases)
			var first coord.Leader
			select {
			case first = <-elected:
			case <-time.After(conformance.LeaderHandoverBound):
				t.Fatal("own-pool not elected")
			}
			start("follower", followerLeases)
			killed := time.Now()
			if err := db.Exec(c.killSQL, connID).Error; err != nil {
				t.Fatalf("kill connection %d: %v", connID, err)
			}
			ownDB.Close()
			select {
			case next := <-elected:
				t.Logf("%s: connection of %s (term %d) killed; %s won term %d after %v",
					c.backend, first.ID(), first.Term(), next.ID(), next.Term(), time.Since(killed).Round(time.Millisecond))
				if next.ID() != "follower" || next.Term() <= first.Term() {
					t.Errorf("after the kill %s won term %d; want follower in a term above %d", next.ID(), next.Term(), first.Term())
				}
				if _, leading := leader.Leader(); leading || first.Active() {
					t.Error("the leader whose connection was killed still leads locally")
				}
			case <-time.After(conformance.LeaderHandoverBound):
				t.Fatalf("no new leader within %v of killing the leader's connection", conformance.LeaderHandoverBound)
			}
		})
	}
}

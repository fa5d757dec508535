package dispatch_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3/gormlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// envChild carries "backend|sqlite path|table|longest run time|stop file"
// to a child worker process started by TestExactlyOnceAcrossProcesses.
const envChild = "DISPATCH_TEST_CHILD"

// openShared opens the database a parent and its children share.
func openShared(t testing.TB, backend, path string) *gorm.DB {
	t.Helper()
	var d gorm.Dialector
	switch backend {
	case "sqlite":
		d = gormlite.Open(testdb.SQLiteDSN(path))
	case "postgres":
		d = postgres.Open(testdb.PostgresDSN())
	default:
		d = mysql.Open(testdb.MySQLDSN())
	}
	db, err := gorm.Open(d, testdb.Config())
	if err != nil {
		t.Fatalf("open %s: %v", backend, err)
	}
	return testdb.CloseAtCleanup(t, db)
}

// TestDispatchChild is a worker process of TestExactlyOnceAcrossProcesses:
// it fires schedules, printing "FIRE <key> <due>" for each fire, until the
// stop file exists or the longest run time has passed, then drains. It
// does nothing in a normal test run.
func TestDispatchChild(t *testing.T) {
	spec := os.Getenv(envChild)
	if spec == "" {
		t.Skip("runs as a child process only")
	}
	parts := strings.Split(spec, "|")
	runFor, err := time.ParseDuration(parts[3])
	if err != nil {
		t.Fatal(err)
	}
	db := openShared(t, parts[0], parts[1])
	store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(parts[2]))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	w, err := dispatch.NewScheduleWorker(store, func(ctx context.Context, f dispatch.Fire) error {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "FIRE %s %s\n", f.Schedule.Key, f.Schedule.NextFireAt.UTC().Format(time.RFC3339Nano))
		return out.Flush()
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 8, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(parts[4]); err == nil {
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExactlyOnceAcrossProcesses: three worker processes over one table
// fire 300 once schedules and three every-second cron schedules; every
// once schedule fires exactly once and no cron occurrence fires twice.
// The parent stops the children once every once schedule has fired and
// every cron schedule has fired three times (at most after a minute), so
// slow process start-up on a loaded machine shortens no one's run.
func TestExactlyOnceAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	if os.Getenv(envChild) != "" {
		t.Skip("in a child process")
	}
	for _, name := range []string{"sqlite", "postgres", "mariadb"} {
		t.Run(name, func(t *testing.T) {
			var db *gorm.DB
			path := filepath.Join(t.TempDir(), "dispatch.db")
			switch name {
			case "sqlite":
				db = openShared(t, name, path)
			case "postgres":
				db = testdb.Postgres(t)
			default:
				db = testdb.MySQL(t)
			}
			table := testdb.Table(t, db, "sched")
			ctx := context.Background()
			if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			sc := newSchedules(t, store, dispatch.SchedulesConfig{})
			const n = 300
			for i := range n {
				if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("once-%03d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("cron-%d", i), Cron: "* * * * * *"}); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			outs := make([]syncbuf.Buffer, 3)
			stop := filepath.Join(t.TempDir(), "stop")
			for i := range 3 {
				cmd := exec.Command(os.Args[0], "-test.run", "^TestDispatchChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), envChild+"="+strings.Join([]string{name, path, table, "1m", stop}, "|"))
				cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					if err := cmd.Wait(); err != nil {
						t.Errorf("child %d: %v\n%s", i, err, outs[i].String())
					}
				})
			}
			start := time.Now()
			for !enoughFires(countFires(outs)) && time.Since(start) < time.Minute {
				time.Sleep(100 * time.Millisecond)
			}
			if err := os.WriteFile(stop, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			t.Logf("children ran %v", time.Since(start).Round(time.Millisecond))
			fires := countFires(outs)
			byKey, byDue, perChild := fires.byKey, fires.byDue, fires.perChild
			for i := range n {
				if c := byKey[fmt.Sprintf("once-%03d", i)]; c != 1 {
					t.Errorf("once-%03d fired %d times", i, c)
				}
			}
			for k, c := range byDue {
				if c > 1 {
					t.Errorf("%s fired %d times", k, c)
				}
			}
			for i := range 3 {
				if c := byKey[fmt.Sprintf("cron-%d", i)]; c < 3 {
					t.Errorf("cron-%d fired %d times in a minute, want at least 3", i, c)
				}
			}
			fired, err := store.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, "once"), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired))))
			if err != nil || fired != n {
				t.Errorf("%d once schedules fired in the table (err %v), want %d", fired, err, n)
			}
			t.Logf("fires per process: %v", perChild)
		})
	}
}

// childFires counts what the children of TestExactlyOnceAcrossProcesses have
// printed so far.
type childFires struct {
	byKey    map[string]int // fires per schedule
	byDue    map[string]int // fires per schedule and due time
	perChild []int
}

func countFires(outs []syncbuf.Buffer) childFires {
	f := childFires{byKey: map[string]int{}, byDue: map[string]int{}, perChild: make([]int, len(outs))}
	for i := range outs {
		for line := range strings.SplitSeq(outs[i].String(), "\n") {
			w := strings.Fields(line)
			if len(w) == 3 && w[0] == "FIRE" {
				f.byKey[w[1]]++
				f.byDue[w[1]+"@"+w[2]]++
				f.perChild[i]++
			}
		}
	}
	return f
}

// enoughFires reports whether the 300 once schedules have fired and each
// of the three cron schedules has fired three times.
func enoughFires(f childFires) bool {
	for i := range 3 {
		if f.byKey[fmt.Sprintf("cron-%d", i)] < 3 {
			return false
		}
	}
	once := 0
	for k := range f.byKey {
		if strings.HasPrefix(k, "once-") {
			once++
		}
	}
	return once >= 300
}

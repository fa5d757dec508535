package dispatchbench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/cli"
)

// tallyRun returns a run over a fresh SQLite table holding schedules
// key(0)…key(len(status)-1) with the given statuses, and one worker file
// per element of fires holding a successful fire line per key index.
func tallyRun(t *testing.T, status []dispatch.Status, fires ...[]int) *run {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "t.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	if err := dispatch.MigrateSchedules(ctx, db, "s"); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable("s"))
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range status {
		if err := store.Create(ctx, &dispatch.Schedule{Key: key(i), Kind: dispatch.KindOnce, Status: st, NextFireAt: time.Now().UTC(), MaxFailures: 5}); err != nil {
			t.Fatal(err)
		}
	}
	r := &run{o: Options{Schedules: len(status)}, store: store, rep: &Report{}}
	for w, keys := range fires {
		wk := &worker{id: "w" + string(rune('1'+w)), file: filepath.Join(dir, "w"+string(rune('1'+w)))}
		f, err := os.Create(wk.file)
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for _, i := range keys {
			if err := enc.Encode(cli.Event{Type: "fire", Key: key(i), OK: true, Lag: float64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Encode(cli.Event{Type: "stop", Stats: &dispatch.Stats{Claimed: int64(len(keys))}}); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r.workers = append(r.workers, wk)
	}
	return r
}

// The tally counts a second fire of a schedule as a duplicate, and as
// missed a schedule the table shows fired with no fire line and one with a
// fire line that the table does not show fired.
func TestTallyFindsDuplicatesAndMissed(t *testing.T) {
	fired, active := dispatch.StatusFired, dispatch.StatusActive
	r := tallyRun(t, []dispatch.Status{fired, fired, fired, active, fired}, []int{0, 1}, []int{1, 3, 4})
	if err := r.tally(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep := r.rep
	if rep.Fires != 5 || rep.Distinct != 3 || rep.Duplicates != 1 || rep.Missed != 2 || rep.TableFired != 4 || rep.Left != 0 {
		t.Errorf("fires %d distinct %d duplicates %d missed %d table fired %d left %d; want 5 3 1 2 4 0",
			rep.Fires, rep.Distinct, rep.Duplicates, rep.Missed, rep.TableFired, rep.Left)
	}
	if rep.Err() == nil {
		t.Error("Err() is nil for a run with a duplicate and missed schedules")
	}
	if len(rep.Workers) != 2 || rep.Workers[0].Fires != 2 || rep.Workers[1].Fires != 3 || !rep.Workers[1].Stopped || rep.Workers[1].Stats.Claimed != 3 {
		t.Errorf("workers: %+v", rep.Workers)
	}
}

// A clean run passes; a partial one counts the schedules not reached as
// left, not missed.
func TestTallyCleanAndPartial(t *testing.T) {
	fired, active := dispatch.StatusFired, dispatch.StatusActive
	r := tallyRun(t, []dispatch.Status{fired, fired, fired}, []int{0, 2}, []int{1})
	if err := r.tally(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := r.rep; rep.Distinct != 3 || rep.Duplicates != 0 || rep.Missed != 0 || rep.Err() != nil || rep.Lag.N != 3 || rep.Lag.Max != 2*time.Second {
		t.Errorf("clean run: %+v, err %v", rep, rep.Err())
	}
	r = tallyRun(t, []dispatch.Status{fired, active, active}, []int{0})
	r.rep.Partial = true
	if err := r.tally(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := r.rep; rep.Distinct != 1 || rep.Left != 2 || rep.Missed != 0 || rep.Err() != nil {
		t.Errorf("partial run: %+v, err %v", rep, rep.Err())
	}
	// Not partial, the same table is two missed schedules.
	r = tallyRun(t, []dispatch.Status{fired, active, active}, []int{0})
	if err := r.tally(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := r.rep; rep.Missed != 2 || rep.Err() == nil {
		t.Errorf("full run with schedules left: missed %d, err %v", rep.Missed, rep.Err())
	}
}

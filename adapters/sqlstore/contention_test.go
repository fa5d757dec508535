package sqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// contendedJob is the row of the contention test: a status with an index,
// and the claimer that took it.
type contendedJob struct {
	ID     int64
	Status string `gorm:"size:16;not null;index"`
	Owner  string `gorm:"size:32;not null"`
}

// contentionOutcome is what the claimers of one contended burn-down did.
type contentionOutcome struct {
	rows       int
	roundTrips int64 // every statement of every claim, counted by the driver hook
	calls      int
	elapsed    time.Duration
}

// burnContended loads rows pending rows into a fresh MySQL/MariaDB table,
// then lets pools × workers claimers (pools stand for processes: each has
// its own store and connection pool) claim them limit at a time, ordered
// by id, until none is left. It checks every id: each row is returned to
// exactly one claimer, and the table says that claimer took it.
func burnContended(t *testing.T, pools, workers, rows, limit int, opts ...sqlstore.Option) contentionOutcome {
	t.Helper()
	ctx := context.Background()
	var rt roundtrip.Counter
	table := testdb.Table(t, testdb.MySQL(t), "contention")
	stores := make([]*dao.Table[contendedJob], pools)
	for p := range stores {
		db := counted(t, "mysql", testdb.MySQLDSN(), &rt)
		if sql, err := db.DB(); err == nil {
			sql.SetMaxOpenConns(workers)
			sql.SetMaxIdleConns(workers)
		}
		s, err := sqlstore.New[contendedJob](db, append(opts, sqlstore.WithTable(table))...)
		if err != nil {
			t.Fatal(err)
		}
		stores[p] = s
	}
	if err := stores[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	items := make([]*contendedJob, rows)
	for i := range items {
		items[i] = &contendedJob{Status: "pending"}
	}
	if err := stores[0].Create(ctx, items...); err != nil {
		t.Fatal(err)
	}

	received := make([][]int64, pools*workers)
	errs := make([]error, pools*workers)
	calls := make([]int, pools*workers)
	rt.Reset()
	began := time.Now()
	var wg sync.WaitGroup
	for c := range received {
		s, owner := stores[c%pools], fmt.Sprintf("claimer-%02d", c)
		wg.Go(func() {
			for {
				got, err := s.Claim(ctx, dao.ClaimRequest{
					Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "claimed", "owner": owner},
					Limit: limit, OrderBy: []dao.Order{dao.Asc("id")},
				})
				calls[c]++
				for _, r := range got {
					received[c] = append(received[c], r.ID)
					if r.Owner != owner || r.Status != "claimed" {
						errs[c] = fmt.Errorf("row %d returned to %s in state %s/%s", r.ID, owner, r.Status, r.Owner)
						return
					}
				}
				if err != nil {
					errs[c] = fmt.Errorf("%s: %w", owner, err)
					return
				}
				if len(got) > limit {
					errs[c] = fmt.Errorf("%s: Claim(limit %d) returned %d rows", owner, limit, len(got))
					return
				}
				if len(got) > 0 {
					continue
				}
				if n, err := s.Count(ctx, dao.Eq("status", "pending")); err != nil || n == 0 {
					errs[c] = err
					return
				}
			}
		})
	}
	wg.Wait()
	out := contentionOutcome{rows: rows, roundTrips: rt.Count(), elapsed: time.Since(began)}
	for c, err := range errs {
		out.calls += calls[c]
		if err != nil {
			t.Error(err)
		}
	}
	final, err := stores[0].Find(ctx, dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int64]string{}
	for c, ids := range received {
		for _, id := range ids {
			if prev, dup := owner[id]; dup {
				t.Errorf("DOUBLE CLAIM: row %d returned to %s and claimer-%02d", id, prev, c)
			}
			owner[id] = fmt.Sprintf("claimer-%02d", c)
		}
	}
	if len(final) != rows {
		t.Errorf("%d rows in the table, want %d", len(final), rows)
	}
	for _, r := range final {
		if w, ok := owner[r.ID]; !ok {
			t.Errorf("row %d was returned to no claimer (table: %s/%s)", r.ID, r.Status, r.Owner)
		} else if r.Status != "claimed" || r.Owner != w {
			t.Errorf("row %d was returned to %s but the table says %s/%s", r.ID, w, r.Status, r.Owner)
		}
	}
	return out
}

// TestPortableClaimUnderContention: claimers in two pools of eight that
// all read the same head of the queue on MariaDB/MySQL. The default
// portable claim spreads them over their candidates, so a claimed row
// costs its own guarded update and a small share of candidate reads and
// lost races; trying every candidate in order (WithClaimSpread(false))
// costs several statements per claimed row, most of them lost races.
func TestPortableClaimUnderContention(t *testing.T) {
	const pools, workers, rows, limit = 2, 8, 800, 20
	report := func(name string, o contentionOutcome) float64 {
		perRow := float64(o.roundTrips) / float64(o.rows)
		t.Logf("%s: %d claimers claimed %d rows in %v, %d claims, %.2f round trips per claimed row",
			name, pools*workers, o.rows, o.elapsed.Round(time.Millisecond), o.calls, perRow)
		return perRow
	}
	strict := report("spread off", burnContended(t, pools, workers, rows, limit, sqlstore.WithClaimSpread(false)))
	spread := report("default", burnContended(t, pools, workers, rows, limit))
	if spread > 3 {
		t.Errorf("the default portable claim cost %.2f round trips per claimed row under contention, want at most 3 (spread off: %.2f)", spread, strict)
	}
}

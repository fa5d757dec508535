package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
)

// claimJob is the row claimstore claims: the columns of the claim
// benchmark of claimstore-dev bench (tools/claimstore-dev).
type claimJob struct {
	ID       int64  `gorm:"primaryKey;autoIncrement:false"`
	Status   string `gorm:"size:16;not null"`
	LockedBy string `gorm:"size:64;not null;default:''"`
	Attempts int64  `gorm:"not null;default:0"`
	Payload  string `gorm:"size:255;not null"`
}

const claimPayload = "claimstore-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz..."

// runClaimstore loads cfg.Rows pending rows into a fresh table, then times
// cfg.Workers goroutines claiming cfg.Batch rows per call (status pending
// to claimed, locked_by, attempts + 1, smallest id first) until the table
// has none left. The table is dropped before it returns.
func runClaimstore(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "claimstore", Unit: "row claimed (1 UPDATE … SKIP LOCKED … RETURNING per batch)", Rows: cfg.Rows, Workers: cfg.Workers}
	var c counter
	db, closeDB, err := openGorm(ctx, cfg.DSN, cfg.Workers+1, &c)
	if err != nil {
		return res, err
	}
	defer closeDB()
	name := "peers_claim_" + suffix()
	store, err := sqlstore.New[claimJob](db, sqlstore.WithTable(name))
	if err != nil {
		return res, fmt.Errorf("peers: claimstore: %w", err)
	}
	defer dropTable(ctx, db, name, &err)

	setup := startTimer()
	if err := store.Migrate(ctx); err != nil {
		return res, fmt.Errorf("peers: claimstore: %w", err)
	}
	// The partial index the claim benchmark creates: only pending rows,
	// in claim order (PostgreSQL manual, "Partial Indexes").
	if err := db.WithContext(ctx).Exec(`CREATE INDEX ` + strconv.Quote(name+"_pending") + ` ON ` + strconv.Quote(name) + ` (id) WHERE status = 'pending'`).Error; err != nil {
		return res, fmt.Errorf("peers: claimstore: index: %w", err)
	}
	const loadBatch = 1000
	for first := 1; first <= cfg.Rows; first += loadBatch {
		n := min(loadBatch, cfg.Rows-first+1)
		rows := make([]claimJob, n)
		ptrs := make([]*claimJob, n)
		for i := range rows {
			rows[i] = claimJob{ID: int64(first + i), Status: "pending", Payload: claimPayload}
			ptrs[i] = &rows[i]
		}
		if err := store.Create(ctx, ptrs...); err != nil {
			return res, fmt.Errorf("peers: claimstore: load: %w", err)
		}
	}
	if err := db.WithContext(ctx).Exec(`ANALYZE ` + strconv.Quote(name)).Error; err != nil {
		return res, fmt.Errorf("peers: claimstore: analyze: %w", err)
	}
	setup.stop(&res)
	res.Setup = res.Wall

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t := newTally(cfg.Rows)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		before = c.n.Load()
	)
	timer := startServerTimer(&c)
	for w := range cfg.Workers {
		wg.Go(func() {
			req := dao.ClaimRequest{
				Where:   dao.Eq("status", "pending"),
				Set:     dao.Set{"status": "claimed", "locked_by": "worker-" + strconv.Itoa(w), "attempts": dao.Incr(1)},
				Limit:   cfg.Batch,
				OrderBy: []dao.Order{dao.Asc("id")},
			}
			for {
				got, err := store.Claim(ctx, req)
				for i := range got {
					t.mark(got[i].ID)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("peers: claimstore: worker %d: %w", w, err))
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	res.Done, res.Duplicates, res.Lost = t.count()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	claimed, err := store.Count(ctx, dao.Eq("status", "claimed"))
	if err != nil {
		return res, fmt.Errorf("peers: claimstore: count: %w", err)
	}
	if claimed != int64(cfg.Rows) {
		return res, fmt.Errorf("peers: claimstore: %d rows claimed in the table, want %d", claimed, cfg.Rows)
	}
	return res, nil
}

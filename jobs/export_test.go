package jobs

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
)

// MigrateTo is migrate: Migrate up to schema version version, for tests
// that make a table of an older version.
var MigrateTo = migrate

// ConfigOf returns the configuration c runs with: cfg as NewClient
// completed it (defaults applied, deprecated fields read).
func ConfigOf(c *Client) Config { return c.cfg }

// NewLimiter returns the limited claim of queue under lim on c's store,
// at the time it is given (the worker's clock): the claim a queue with
// QueueConfig.Limit runs, one limiter kept across calls as a queue's.
func NewLimiter(c *Client, queue string, lim Limit) (func(ctx context.Context, now time.Time, req dao.ClaimRequest) ([]Row, error), error) {
	if err := lim.check(); err != nil {
		return nil, err
	}
	l := &limiter{c: c, queue: queue, lim: lim, settings: encodeLimit(lim)}
	return l.claim, nil
}

// LimitSlots returns the job ids of the slot rows of queue on c's store,
// in ascending order.
func LimitSlots(ctx context.Context, c *Client, queue string) ([]int64, error) {
	var tx limitTx
	if db, ok := gormOf(c.store); ok {
		tx = slotTx(ctx, db.Session(&gorm.Session{NewDB: true}), c, queue)
	} else {
		memLimits.Lock()
		q := memLimits.queues[[2]string{c.table, queue}]
		memLimits.Unlock()
		if q == nil {
			return nil, nil
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		tx = memLimitTx{q: q, queue: queue, store: c.store}
	}
	slots, err := tx.slots(ctx, time.Now())
	ids := make([]int64, len(slots))
	for i, s := range slots {
		ids[i] = s.JobID
	}
	slices.Sort(ids)
	return ids, err
}

// FinishCancelled is finishCancelled: it finalizes the jobs of ids that a
// cancel request left waiting after their outcome was written.
func FinishCancelled(c *Client, ctx context.Context, ids []int64) error {
	return c.finishCancelled(ctx, ids)
}

// StaleSlots is how many slot rows of finished jobs a limited claim lets
// wait before it deletes them.
const StaleSlots = staleSlots

// DropFreeSlots runs a limited claim's sweep of queue's free slot rows
// in tx, a transaction on the database of c's SQL store, without the
// queue's lock.
func DropFreeSlots(ctx context.Context, tx *gorm.DB, c *Client, queue string) error {
	return slotTx(ctx, tx, c, queue).dropFree(ctx)
}

// slotTx is the limitTx of queue's slot rows on db, a session or
// transaction on the database of c's SQL store.
func slotTx(ctx context.Context, db *gorm.DB, c *Client, queue string) sqlLimitTx {
	return sqlLimitTx{tx: db.WithContext(ctx), slotTable: LimitSlotTable(c.table), jobTable: c.table, queue: queue}
}

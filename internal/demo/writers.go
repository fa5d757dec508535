package demo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/internal/outboxenv"
	"github.com/claimstore/claimstore/outbox"
)

// order is the business row the demo writes with each message.
type order struct {
	ID        int64 `gorm:"primaryKey"`
	Number    string
	Amount    int64
	CreatedAt time.Time
}

// writers are the goroutines writing the business rows.
type writers struct {
	written atomic.Int64
	errs    chan error    // the first error of each writer that failed
	done    chan struct{} // closed when every writer has returned
}

// startWriters starts o.Writers writers that together write o.Messages
// rows, o.PerTx per transaction, writer w taking every o.Writers-th group.
func (r *run) startWriters(ctx context.Context) *writers {
	w := &writers{errs: make(chan error, r.o.Writers), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := range r.o.Writers {
		wg.Go(func() { r.write(ctx, i, w) })
	}
	go func() { wg.Wait(); close(w.done) }()
	return w
}

// write is writer i: it writes its groups of rows, retrying the writes
// that find the database busy, and stops at the first other error.
func (r *run) write(ctx context.Context, i int, w *writers) {
	for first := i * r.o.PerTx; first < r.o.Messages; first += r.o.Writers * r.o.PerTx {
		n := min(r.o.PerTx, r.o.Messages-first)
		retries, err := outboxenv.Retry(ctx, func() error { return r.writeOrders(ctx, first, n) })
		r.busy.Add(retries)
		if err != nil {
			w.errs <- err
			return
		}
		w.written.Add(int64(n))
	}
}

// writeOrders writes n business rows, numbers first.., each with its outbox
// message, in one transaction (through the store directly on the memory
// backend, which has no transactions).
func (r *run) writeOrders(ctx context.Context, first, n int) error {
	rows := make([]order, n)
	msgs := make([]*outbox.Message, n)
	for i := range n {
		num := fmt.Sprintf("order-%s-%d", r.tag, first+i)
		rows[i] = order{Number: num, Amount: int64(100 + (first+i)%900)}
		msgs[i] = &outbox.Message{
			MessageID: num + "-created", Topic: r.subject, Type: "order.created",
			Payload: fmt.Appendf(nil, `{"order":%q,"amount":%d}`, num, rows[i].Amount), CorrelationID: num,
		}
	}
	if r.env.DB == nil {
		return r.env.Repo.Add(ctx, nil, msgs...)
	}
	return r.env.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Table(r.orders).Create(&rows).Error; err != nil {
			return err
		}
		return r.env.Repo.Add(ctx, tx, msgs...)
	})
}

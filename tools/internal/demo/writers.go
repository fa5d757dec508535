package demo

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
)

// order is the business row the demo writes with each message.
type order struct {
	ID        int64 `gorm:"primaryKey"`
	Number    string
	Amount    int64
	CreatedAt time.Time
}

// startWriters starts o.Writers writers that together write o.Messages
// rows, o.PerTx per transaction, retrying the writes that find the
// database busy (counted in r.busy).
func (r *run) startWriters(ctx context.Context) *outboxenv.Writers {
	return outboxenv.StartWriters(ctx, r.o.Writers, r.o.PerTx, r.o.Messages, func(ctx context.Context, first, n int) error {
		retries, err := outboxenv.Retry(ctx, func() error { return r.writeOrders(ctx, first, n) })
		r.busy.Add(retries)
		return err
	})
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

package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// prepare checks m and fills its defaults for insertion at now.
func (r *Repository) prepare(m *Message, now time.Time) error {
	if m == nil {
		return argerr.Errorf("nil message")
	}
	if m.ID != 0 {
		return argerr.Errorf("message %q already has id %d", m.MessageID, m.ID)
	}
	if m.MessageID == "" {
		return argerr.Errorf("empty message id")
	}
	if m.Topic == "" {
		return argerr.Errorf("message %q: empty topic", m.MessageID)
	}
	if m.Status != "" && m.Status != StatusPending {
		return argerr.Errorf("message %q: a new message must be pending, got %q", m.MessageID, m.Status)
	}
	if m.MaxRetries < NoRetry {
		return argerr.Errorf("message %q: max retries %d < NoRetry", m.MessageID, m.MaxRetries)
	}
	if m.RetryCount != 0 || m.LockedBy != "" || m.LockedUntil != nil || m.PublishedAt != nil {
		return argerr.Errorf("message %q: a new message carries no processing state", m.MessageID)
	}
	for _, c := range []struct {
		name, v string
		max     int
	}{
		{"message id", m.MessageID, MaxMessageIDLen}, {"topic", m.Topic, MaxTopicLen},
		{"type", m.Type, MaxNameLen}, {"target broker", m.TargetBroker, MaxBrokerLen},
		{"partition key", m.PartitionKey, MaxNameLen}, {"correlation id", m.CorrelationID, MaxNameLen},
		{"causation id", m.CausationID, MaxNameLen},
	} {
		if err := checkLen(c.name, c.v, c.max); err != nil {
			return err
		}
	}
	m.Status = StatusPending
	switch m.MaxRetries {
	case 0:
		m.MaxRetries = r.policy.MaxRetries
	case NoRetry:
		m.MaxRetries = 0
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	} else {
		m.CreatedAt = m.CreatedAt.UTC()
	}
	if m.NextRetryAt != nil {
		t := m.NextRetryAt.UTC()
		m.NextRetryAt = &t
	}
	return nil
}

// Add writes msgs as pending messages. With a non-nil tx (an open GORM
// transaction) the rows are written inside it, so they commit or roll back
// together with the caller's business writes: this is the transactional
// outbox. With a nil tx they are written through the store directly.
//
// Add fills defaults into each message: status pending, CreatedAt now (UTC)
// when zero, MaxRetries from the retry policy when 0 (0 for [NoRetry]); and
// on success the assigned primary key into ID.
//
// Errors: [dao.ErrInvalidArgument] for a nil or malformed message (empty
// MessageID or Topic, a field over its size limit, processing state already
// set, an ID already set), or for a non-nil tx when the repository cannot
// bind its store to a transaction (see [WithTxStore]; that error also
// wraps errors.ErrUnsupported) or tx is not inside
// a transaction (a *gorm.DB of no Begin or Transaction: pass nil to write
// without one); nothing is written then. [dao.ErrDuplicate] when a message id already exists for the same
// target broker — on PostgreSQL that aborts the caller's transaction, which
// must then be rolled back. Other store errors are returned wrapped.
func (r *Repository) Add(ctx context.Context, tx *gorm.DB, msgs ...*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := r.clock()
	seen := make(map[[2]string]bool, len(msgs))
	for _, m := range msgs {
		if err := r.prepare(m, now); err != nil {
			return fmt.Errorf("outbox: add: %w", err)
		}
		k := [2]string{m.MessageID, m.TargetBroker}
		if seen[k] {
			return fmt.Errorf("outbox: add: %w: message id %q given twice for broker %q", dao.ErrDuplicate, m.MessageID, m.TargetBroker)
		}
		seen[k] = true
	}
	store := r.store
	if tx != nil {
		if r.txFunc == nil {
			return fmt.Errorf("outbox: add: %w", r.txErr)
		}
		store = r.txFunc(tx)
	}
	for chunk := range slices.Chunk(msgs, addChunk) {
		if err := store.Create(ctx, chunk...); err != nil {
			return fmt.Errorf("outbox: add: %w", err)
		}
	}
	return nil
}

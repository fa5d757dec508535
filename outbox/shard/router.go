package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// Shard is one database of a partitioned outbox.
type Shard struct {
	// DB is the shard's database. The business rows of the shard's
	// partition keys live in it, since a message commits in the same
	// transaction as the rows it announces; [Router.Transaction] opens its
	// transactions on it. It may be nil when only [Router.Add] is used.
	DB *gorm.DB
	// Outbox is the message repository over the outbox table in DB.
	Outbox *outbox.Repository
}

// Router sends each message to the shard its partition key maps to:
// shard Index(key, n) = Jump(KeyHash(key), n) of the n shards given to
// [NewRouter], in their order. A key always maps to the same shard while
// the list of shards stays the same; see the package documentation for
// what moves when a shard is added. A Router is immutable and safe for
// concurrent use.
type Router struct {
	shards []Shard
}

// NewRouter returns a router over shards, in that order: the position of
// a shard in the list is its index, and part of the routing. Errors wrap
// [dao.ErrInvalidArgument]: no shard, a shard without Outbox, or the same
// repository or database handle given for two shards.
func NewRouter(shards ...Shard) (*Router, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("shard: new router: %w: no shard", dao.ErrInvalidArgument)
	}
	repos := make(map[*outbox.Repository]int, len(shards))
	dbs := make(map[*gorm.DB]int, len(shards))
	for i, s := range shards {
		if s.Outbox == nil {
			return nil, fmt.Errorf("shard: new router: %w: shard %d has no outbox repository", dao.ErrInvalidArgument, i)
		}
		if j, ok := repos[s.Outbox]; ok {
			return nil, fmt.Errorf("shard: new router: %w: shards %d and %d share one repository", dao.ErrInvalidArgument, j, i)
		}
		repos[s.Outbox] = i
		if s.DB != nil {
			if j, ok := dbs[s.DB]; ok {
				return nil, fmt.Errorf("shard: new router: %w: shards %d and %d share one database handle", dao.ErrInvalidArgument, j, i)
			}
			dbs[s.DB] = i
		}
	}
	return &Router{shards: append([]Shard(nil), shards...)}, nil
}

// With returns a new router over the shards of r followed by s: the
// router after adding a shard. r is unchanged. Only the keys for which
// Index(key, r.Len()+1) is the new shard move, about 1/(r.Len()+1) of
// them; the package documentation gives the procedure that keeps their
// order while they move. Errors are those of [NewRouter].
func (r *Router) With(s Shard) (*Router, error) {
	return NewRouter(append(r.Shards(), s)...)
}

// Len returns the number of shards.
func (r *Router) Len() int { return len(r.shards) }

// Shards returns a copy of the shards, in index order.
func (r *Router) Shards() []Shard { return append([]Shard(nil), r.shards...) }

// At returns the shard of index i, 0 <= i < Len(); it panics for another
// i, like a slice index.
func (r *Router) At(i int) Shard { return r.shards[i] }

// Index returns the index of the shard of partition key: Index(key,
// r.Len()). Errors wrap [dao.ErrInvalidArgument] for an empty key.
func (r *Router) Index(key string) (int, error) { return Index(key, len(r.shards)) }

// Shard returns the index and the shard of partition key. A caller that
// writes business rows opens its transaction on the returned shard's
// database and adds the key's messages in it (or uses
// [Router.Transaction], which does both). Errors wrap
// [dao.ErrInvalidArgument] for an empty key.
func (r *Router) Shard(key string) (int, Shard, error) {
	i, err := r.Index(key)
	if err != nil {
		return 0, Shard{}, err
	}
	return i, r.shards[i], nil
}

// route returns the shard index shared by the partition keys of msgs.
func (r *Router) route(msgs []*outbox.Message) (int, error) {
	idx := -1
	for _, m := range msgs {
		if m == nil {
			return 0, fmt.Errorf("%w: nil message", dao.ErrInvalidArgument)
		}
		i, err := r.Index(m.PartitionKey)
		if err != nil {
			return 0, fmt.Errorf("message %q: %w", m.MessageID, err)
		}
		if idx >= 0 && i != idx {
			return 0, fmt.Errorf("%w: message %q (key %q) maps to shard %d, the others to shard %d: one call writes to one database",
				dao.ErrInvalidArgument, m.MessageID, m.PartitionKey, i, idx)
		}
		idx = i
	}
	return idx, nil
}

// Add writes msgs to the outbox of the shard their partition keys map to,
// with [outbox.Repository.Add] of that shard: inside tx when tx is not nil,
// so that they commit with the caller's business rows. tx must then be a
// transaction on that shard's database (see [Router.Shard]): a transaction
// on another database would commit the messages apart from the rows they
// announce, which Add cannot detect. [Router.Transaction] rules this
// mistake out.
//
// Every message needs a partition key, and all the keys of one call must
// map to the same shard. Errors wrap [dao.ErrInvalidArgument] for a nil
// message, an empty partition key, keys on different shards, and every
// invalid message [outbox.Repository.Add] rejects; nothing is written
// then. Other errors are those of [outbox.Repository.Add].
func (r *Router) Add(ctx context.Context, tx *gorm.DB, msgs ...*outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	i, err := r.route(msgs)
	if err != nil {
		return fmt.Errorf("shard: add: %w", err)
	}
	if err := r.shards[i].Outbox.Add(ctx, tx, msgs...); err != nil {
		return fmt.Errorf("shard: add to shard %d: %w", i, err)
	}
	return nil
}

// AddFunc adds messages inside the transaction [Router.Transaction] opened.
type AddFunc func(msgs ...*outbox.Message) error

// Transaction runs fn in a transaction on the database of the shard of
// partition key (GORM's DB.Transaction: committed when fn returns nil,
// rolled back when it returns an error or panics). fn writes its business
// rows with tx and its messages with add, which writes them to the same
// shard's outbox in tx. A message given to add with an empty PartitionKey
// takes key; one whose key maps to another shard is refused with
// [dao.ErrInvalidArgument] (fn should then return the error, rolling the
// transaction back).
//
// Errors: [dao.ErrInvalidArgument] for an empty key or a shard without
// DB, before anything is written; otherwise fn's error or the commit's,
// wrapped.
func (r *Router) Transaction(ctx context.Context, key string, fn func(tx *gorm.DB, add AddFunc) error) error {
	i, s, err := r.Shard(key)
	if err != nil {
		return fmt.Errorf("shard: transaction: %w", err)
	}
	if s.DB == nil {
		return fmt.Errorf("shard: transaction: %w: shard %d has no database handle", dao.ErrInvalidArgument, i)
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		add := func(msgs ...*outbox.Message) error {
			for _, m := range msgs {
				if m != nil && m.PartitionKey == "" {
					m.PartitionKey = key
				}
			}
			if len(msgs) == 0 {
				return nil
			}
			j, err := r.route(msgs)
			if err != nil {
				return fmt.Errorf("shard: add: %w", err)
			}
			if j != i {
				return fmt.Errorf("shard: add: %w: messages map to shard %d, the transaction runs on shard %d", dao.ErrInvalidArgument, j, i)
			}
			if err := s.Outbox.Add(ctx, tx, msgs...); err != nil {
				return fmt.Errorf("shard: add to shard %d: %w", i, err)
			}
			return nil
		}
		return fn(tx, add)
	})
	if err != nil {
		return fmt.Errorf("shard: transaction on shard %d: %w", i, err)
	}
	return nil
}

// Unfinished returns, per shard in index order, the number of messages not
// yet published nor abandoned: pending, processing and failed, over every
// target broker ([outbox.Repository.Counts]). Store errors are returned
// wrapped, with the counts read so far.
func (r *Router) Unfinished(ctx context.Context) ([]int64, error) {
	out := make([]int64, 0, len(r.shards))
	for i, s := range r.shards {
		c, err := s.Outbox.Counts(ctx)
		if err != nil {
			return out, fmt.Errorf("shard: counts of shard %d: %w", i, err)
		}
		out = append(out, c[outbox.StatusPending]+c[outbox.StatusProcessing]+c[outbox.StatusFailed])
	}
	return out, nil
}

// WaitDrained polls [Router.Unfinished] every poll until no shard holds an
// unfinished message: the step of a rebalance that waits for the old
// shards' relays to publish what was written before the writers switched
// routers. Errors: [dao.ErrInvalidArgument] for poll <= 0; ctx's error,
// wrapped with the counts last seen, when it ends first; store errors are
// retried until then.
func (r *Router) WaitDrained(ctx context.Context, poll time.Duration) error {
	if poll <= 0 {
		return fmt.Errorf("shard: wait drained: %w: poll interval %v", dao.ErrInvalidArgument, poll)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var last []int64
	var lastErr error
	for {
		counts, err := r.Unfinished(ctx)
		if err == nil {
			last, lastErr = counts, nil
			var sum int64
			for _, n := range counts {
				sum += n
			}
			if sum == 0 {
				return nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard: wait drained: unfinished per shard %v: %w", last, errors.Join(ctx.Err(), lastErr))
		case <-t.C:
		}
	}
}

package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// statusIn is the criteria status IN (ss).
func statusIn(ss ...Status) dao.Criteria {
	vs := make([]any, len(ss))
	for i, s := range ss {
		vs[i] = string(s)
	}
	return dao.In(ColStatus, vs...)
}

// StatusCriteria returns the criteria of the messages in any of ss:
// status IN (ss), and, when ss does not hold [StatusPublished], also
// published_at IS NULL, which every other status has. The second term
// changes no answer; it lets PostgreSQL read the partial claim index that
// [Migrate] creates (WHERE published_at IS NULL: the unpublished rows
// only) instead of the whole table, which on a table of mostly published
// messages is the difference between reading the backlog and reading
// everything (PostgreSQL manual, "Partial Indexes": the query's WHERE
// must imply the index's predicate). [Repository.List], its shorthands,
// [Repository.Counts] and [Repository.OldestUnpublished] use it.
func StatusCriteria(ss ...Status) dao.Criteria {
	if slices.Contains(ss, StatusPublished) {
		return statusIn(ss...)
	}
	return dao.And(statusIn(ss...), dao.IsNull(ColPublishedAt))
}

// Filter selects messages for [Repository.List].
type Filter struct {
	// Statuses selects messages in any of these states; empty means all.
	Statuses []Status
	// TargetBroker, when not nil, selects the messages of one broker.
	TargetBroker *string
	// Limit caps the number of messages returned; 0 means no cap.
	Limit int
}

func (f Filter) criteria() (dao.Criteria, error) {
	var cs []dao.Criteria
	if len(f.Statuses) > 0 {
		for _, s := range f.Statuses {
			if !s.Valid() {
				return dao.Criteria{}, argerr.Errorf("unknown status %q", s)
			}
		}
		cs = append(cs, StatusCriteria(f.Statuses...))
	}
	if f.TargetBroker != nil {
		cs = append(cs, dao.Eq(ColTargetBroker, *f.TargetBroker))
	}
	if f.Limit < 0 {
		return dao.Criteria{}, argerr.Errorf("negative limit %d", f.Limit)
	}
	return dao.And(cs...), nil
}

// List returns the messages f selects, oldest first; statuses other than
// published are read through the claim index (see [StatusCriteria]).
// Errors:
// [dao.ErrInvalidArgument] for an unknown status or a negative limit; store
// errors wrapped.
func (r *Repository) List(ctx context.Context, f Filter) ([]Message, error) {
	where, err := f.criteria()
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	rows, err := r.store.Find(ctx, dao.Query{Where: where, OrderBy: []dao.Order{dao.Asc(ColCreatedAt)}, Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	return rows, nil
}

// Unprocessed returns up to limit (0: all) messages still waiting to be
// published — pending or failed — oldest first.
func (r *Repository) Unprocessed(ctx context.Context, limit int) ([]Message, error) {
	return r.List(ctx, Filter{Statuses: []Status{StatusPending, StatusFailed}, Limit: limit})
}

// Processing returns up to limit (0: all) messages currently claimed,
// oldest first.
func (r *Repository) Processing(ctx context.Context, limit int) ([]Message, error) {
	return r.List(ctx, Filter{Statuses: []Status{StatusProcessing}, Limit: limit})
}

// Failed returns up to limit (0: all) failed messages awaiting a retry,
// oldest first.
func (r *Repository) Failed(ctx context.Context, limit int) ([]Message, error) {
	return r.List(ctx, Filter{Statuses: []Status{StatusFailed}, Limit: limit})
}

// Abandoned returns up to limit (0: all) abandoned messages, oldest first.
func (r *Repository) Abandoned(ctx context.Context, limit int) ([]Message, error) {
	return r.List(ctx, Filter{Statuses: []Status{StatusAbandoned}, Limit: limit})
}

// Published returns up to limit (0: all) published messages, oldest first.
func (r *Repository) Published(ctx context.Context, limit int) ([]Message, error) {
	return r.List(ctx, Filter{Statuses: []Status{StatusPublished}, Limit: limit})
}

// Counts returns the number of messages in each status (every status is a
// key, zero included), one Count per status; the counts of the statuses
// other than published read the claim index (see [StatusCriteria]).
// Store errors are returned wrapped.
func (r *Repository) Counts(ctx context.Context) (map[Status]int64, error) {
	out := make(map[Status]int64, len(Statuses))
	for _, s := range Statuses {
		n, err := r.store.Count(ctx, StatusCriteria(s))
		if err != nil {
			return out, fmt.Errorf("outbox: count %s: %w", s, err)
		}
		out[s] = n
	}
	return out, nil
}

// OldestUnpublished returns the creation time of the oldest message of
// targetBroker not yet published nor abandoned (pending, processing or
// failed), and false when there is none. Store errors are returned wrapped.
func (r *Repository) OldestUnpublished(ctx context.Context, targetBroker string) (time.Time, bool, error) {
	rows, err := r.store.Find(ctx, dao.Query{
		Where:   dao.And(dao.Eq(ColTargetBroker, targetBroker), StatusCriteria(StatusPending, StatusProcessing, StatusFailed)),
		OrderBy: []dao.Order{dao.Asc(ColCreatedAt)},
		Limit:   1,
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("outbox: oldest unpublished: %w", err)
	}
	if len(rows) == 0 {
		return time.Time{}, false, nil
	}
	return rows[0].CreatedAt, true, nil
}

package outbox

import (
	"context"
	"fmt"
	"slices"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

func checkWorker(w string) error {
	if w == "" {
		return argerr.Errorf("empty worker id")
	}
	return checkLen("worker id", w, MaxNameLen)
}

// HeldBy returns the fence of every mark: the row is still processing and
// locked by worker.
func HeldBy(worker string) dao.Criteria {
	return dao.And(dao.Eq(ColStatus, string(StatusProcessing)), dao.Eq(ColLockedBy, worker))
}

func idCriteria(ids []int64) dao.Criteria {
	vs := make([]any, len(ids))
	for i, id := range ids {
		vs[i] = id
	}
	return dao.In(ColID, vs...)
}

// dedupe returns ids without repeats, in first-seen order.
func dedupe(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// fencedUpdate applies set to the rows of ids that worker still holds (and
// that match extra), in statements of at most markChunk ids. When fewer
// rows change than were named it reads the rows back and returns those
// that are not in the state applied(row) describes.
func (r *Repository) fencedUpdate(ctx context.Context, worker string, ids []int64, extra dao.Criteria, set dao.Set, applied func(*Message) bool) (notApplied []int64, err error) {
	for chunk := range slices.Chunk(ids, markChunk) {
		n, err := r.store.Update(ctx, dao.And(idCriteria(chunk), HeldBy(worker), extra), set)
		if err != nil {
			return notApplied, err
		}
		if int(n) == len(chunk) {
			continue
		}
		rows, err := r.store.Find(ctx, dao.Query{Where: idCriteria(chunk)})
		if err != nil {
			return notApplied, fmt.Errorf("read back after fenced update: %w", err)
		}
		ok := make(map[int64]bool, len(rows))
		for i := range rows {
			if applied(&rows[i]) {
				ok[rows[i].ID] = true
			}
		}
		for _, id := range chunk {
			if !ok[id] {
				notApplied = append(notApplied, id)
			}
		}
	}
	return notApplied, nil
}

// PublishedSet returns what [Repository.MarkPublished] writes at now (a
// time.Time, or a driver.CurrentTime in a statement rendered by package
// dialects): status published, PublishedAt and LastProcessedAt now, lease
// cleared.
func PublishedSet(now any) dao.Set {
	return dao.Set{
		ColStatus:          string(StatusPublished),
		ColPublishedAt:     now,
		ColLockedUntil:     nil,
		ColLastProcessedAt: now,
	}
}

// MarkPublished records that the broker acknowledged the messages ids,
// claimed by workerID: status published, PublishedAt now, lease cleared.
// It is fenced: a row changes only while its status is processing and it
// is locked by workerID, so a worker whose lease expired and whose rows
// another worker claimed changes nothing. It sends one UPDATE … WHERE id IN
// (…) per 1000 ids, plus one read-back only when some row was refused.
//
// It returns the ids that were not changed together with a [*FenceError]
// (errors.Is(err, [ErrLeaseLost])), or (nil, nil) when all were.
// Errors: [dao.ErrInvalidArgument] for an empty workerID; store errors
// wrapped, with the refused ids found before the failure (among them that
// of a failed first read of the database's clock, before any write).
func (r *Repository) MarkPublished(ctx context.Context, workerID string, ids ...int64) ([]int64, error) {
	if err := checkWorker(workerID); err != nil {
		return nil, fmt.Errorf("outbox: mark published: %w", err)
	}
	ids = dedupe(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	now, err := r.time(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: mark published: %w", err)
	}
	notApplied, err := r.fencedUpdate(ctx, workerID, ids, dao.Criteria{}, PublishedSet(now), func(m *Message) bool {
		return m.Status == StatusPublished && m.LockedBy == workerID
	})
	if err != nil {
		return notApplied, fmt.Errorf("outbox: mark published: %w", err)
	}
	if len(notApplied) > 0 {
		return notApplied, &FenceError{Op: "mark published", Worker: workerID, IDs: notApplied}
	}
	return nil, nil
}

// Release gives the messages ids, claimed by workerID, back unchanged for
// any worker to claim at once: status pending, lease cleared, retry count
// untouched. A relay releases what it cannot finish when it shuts down. It
// is fenced like [Repository.MarkPublished] and returns the refused ids and
// a [*FenceError] in the same way.
func (r *Repository) Release(ctx context.Context, workerID string, ids ...int64) ([]int64, error) {
	if err := checkWorker(workerID); err != nil {
		return nil, fmt.Errorf("outbox: release: %w", err)
	}
	ids = dedupe(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	now, err := r.time(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: release: %w", err)
	}
	set := dao.Set{
		ColStatus:          string(StatusPending),
		ColLockedBy:        "",
		ColLockedUntil:     nil,
		ColLastProcessedAt: now,
	}
	notApplied, err := r.fencedUpdate(ctx, workerID, ids, dao.Criteria{}, set, func(m *Message) bool {
		return m.Status == StatusPending && m.LockedBy == ""
	})
	if err != nil {
		return notApplied, fmt.Errorf("outbox: release: %w", err)
	}
	if len(notApplied) > 0 {
		return notApplied, &FenceError{Op: "release", Worker: workerID, IDs: notApplied}
	}
	return nil, nil
}

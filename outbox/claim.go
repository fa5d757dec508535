package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// ClaimCriteria returns which messages of broker a claim at now may take:
// pending rows, failed rows whose retry time has come, and processing rows
// whose lease has expired. None of them has a PublishedAt ([Repository.Add]
// refuses one, and only the mark published sets it); the criteria say so,
// so that PostgreSQL may use the claim index [Migrate] creates, whose
// predicate is published_at IS NULL (a partial index serves a query only
// when the query's WHERE implies its predicate: PostgreSQL manual,
// section 11.8).
//
// now is a time.Time, or a driver.CurrentTime for a statement rendered by
// package dialects that reads the database's clock itself (the
// Watermill subscriber's fan-out); a [dao.Store] is given a time.Time.
func ClaimCriteria(broker string, now any) dao.Criteria {
	return dao.And(
		dao.Eq(ColTargetBroker, broker),
		dao.IsNull(ColPublishedAt),
		dao.Or(
			dao.Eq(ColStatus, string(StatusPending)),
			dao.And(dao.Eq(ColStatus, string(StatusFailed)), dao.Le(ColNextRetryAt, now)),
			dao.And(dao.Eq(ColStatus, string(StatusProcessing)), dao.Lt(ColLockedUntil, now)),
		),
	)
}

// ClaimOrder returns the order of a claim: higher priority first, then
// oldest (the primary key breaks ties).
func ClaimOrder() []dao.Order {
	return []dao.Order{dao.Desc(ColPriority), dao.Asc(ColCreatedAt), dao.Asc(ColID)}
}

// ClaimBatch claims up to limit messages of targetBroker for workerID with
// the repository's lease; see [Repository.ClaimBatchLease].
func (r *Repository) ClaimBatch(ctx context.Context, workerID string, limit int, targetBroker string) ([]Message, error) {
	return r.ClaimBatchLease(ctx, workerID, limit, targetBroker, r.lease)
}

// ClaimBatchLease claims, in one [dao.Store.Claim], up to limit messages of
// targetBroker for workerID, holding them for lease. Eligible are pending
// messages, failed messages whose NextRetryAt has come, and processing
// messages whose lease has expired (their worker died). They are taken in
// priority order (higher first), then oldest first, and returned in that
// order with status processing, LockedBy workerID and LockedUntil now +
// lease. No two concurrent callers receive the same message. "Now" is the
// repository's clock: the database's by default (see [WithClock]).
//
// Errors: [dao.ErrInvalidArgument] for an empty workerID (or one over
// [MaxNameLen] bytes), a negative limit or a non-positive lease; limit 0
// claims nothing. Store errors are returned wrapped, together with the
// messages claimed before the failure, which the caller owns; so is the
// error of the first read of the database's clock, with no message.
func (r *Repository) ClaimBatchLease(ctx context.Context, workerID string, limit int, targetBroker string, lease time.Duration) ([]Message, error) {
	if err := checkWorker(workerID); err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	if limit < 0 {
		return nil, fmt.Errorf("outbox: claim: %w", argerr.Errorf("negative limit %d", limit))
	}
	if lease <= 0 {
		return nil, fmt.Errorf("outbox: claim: %w", argerr.Errorf("lease must be > 0, got %v", lease))
	}
	if limit == 0 {
		return nil, nil
	}
	now, err := r.time(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	rows, err := r.store.Claim(ctx, dao.ClaimRequest{
		Where: ClaimCriteria(targetBroker, now),
		Set: dao.Set{
			ColStatus:          string(StatusProcessing),
			ColLockedBy:        workerID,
			ColLockedUntil:     now.Add(lease),
			ColLastProcessedAt: now,
		},
		Limit:   limit,
		OrderBy: ClaimOrder(),
	})
	if err != nil {
		return rows, fmt.Errorf("outbox: claim: %w", err)
	}
	return rows, nil
}

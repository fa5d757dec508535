package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/argerr"
)

// OutputKey is the key of a job's metadata under which [RecordOutput]
// keeps the job's output.
const OutputKey = "output"

// outputKey is the context key of the running job whose work may call
// RecordOutput.
type outputKey struct{}

// RecordOutput records v, encoded as JSON, as the output of the job
// whose work ctx is (the work function's context, or one derived from
// it): it is written with the job's outcome into the job's metadata
// under [OutputKey], where [Row.Output] reads it (a workflow's dependent
// job, the console, the command line). A later call replaces an earlier
// one. Errors wrap dao.ErrInvalidArgument: ctx is not a job's work
// context, v does not encode as JSON, or the job's metadata with it
// would exceed [MaxMetadataSize]; nothing is recorded then.
func RecordOutput(ctx context.Context, v any) error {
	row, ok := ctx.Value(outputKey{}).(*Row)
	if !ok {
		return fmt.Errorf("jobs: record output: %w", argerr.Errorf("the context is not a job's work context"))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jobs: record output: %w", argerr.Errorf("output does not encode as JSON: %v", err))
	}
	if _, err := mergeObject(row.Metadata, map[string]json.RawMessage{OutputKey: b}); err != nil {
		return fmt.Errorf("jobs: record output: %w", err)
	}
	row.info.output = b
	return nil
}

// Output returns the output the job's work recorded ([RecordOutput]),
// as JSON; nil when none was recorded.
func (r *Row) Output() json.RawMessage {
	if r.Metadata == "" {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(r.Metadata), &obj) != nil {
		return nil
	}
	return obj[OutputKey]
}

// withOutput adds to set, the outcome of row, the job's metadata with the
// output its work recorded, if any; it returns set, copied when it was
// shared.
func withOutput(row *Row, set dao.Set) dao.Set {
	if row.info.output == nil {
		return set
	}
	md, err := mergeObject(row.Metadata, map[string]json.RawMessage{OutputKey: row.info.output})
	if err != nil {
		return set // checked by RecordOutput
	}
	out := make(dao.Set, len(set)+1)
	for k, v := range set {
		out[k] = v
	}
	out[ColMetadata] = md
	return out
}

// CompleteTx completes job, a job running in this client (the Row of the
// *Job[A] its work function was handed), inside tx, the caller's open
// transaction: the job is completed if and only if tx commits, together
// with the work's own writes. The write is fenced by the job's lease (its
// id and lease owner): a job whose lease was lost is not changed. The
// work function then returns; its outcome is not written again (a nil
// error is expected; should tx roll back, the job runs again when its
// lease ends). It returns the job as written. Errors: an error wrapping
// dispatch.ErrLeaseLost when the lease was lost; dao.ErrInvalidArgument
// for a store that cannot bind tx, a *gorm.DB not in a transaction, or a
// job that is not running here (also wrapping errors.ErrUnsupported for a
// store that is not a dao.TxBinder); the store's errors, mapped.
func (c *Client) CompleteTx(ctx context.Context, tx any, job *Row) (*Row, error) {
	if job == nil || job.LeaseOwner == "" {
		return nil, fmt.Errorf("jobs: complete in a transaction: %w", argerr.Errorf("the job is not running"))
	}
	store, err := c.txStore(tx)
	if err != nil {
		return nil, err
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: complete %d in a transaction: %w", job.ID, err)
	}
	set := dao.Set{ColState: string(StateCompleted), ColFinalizedAt: now, ColLeaseOwner: "", ColLeaseUntil: now}
	if lostAttempts(job) > 0 {
		set[ColErrors] = appendErrors(job, now, nil)
	}
	keepUniqueIn(job, StateCompleted, set)
	set = withOutput(job, set)
	fence := dao.And(dao.Eq(ColID, job.ID), dao.Eq(ColLeaseOwner, job.LeaseOwner), dao.Eq(ColState, string(StateAvailable)))
	n, err := store.Update(ctx, fence, set)
	if err != nil {
		return nil, fmt.Errorf("jobs: complete %d in a transaction: %w", job.ID, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("jobs: complete %d in a transaction: %w", job.ID, dispatch.ErrLeaseLost)
	}
	job.info.settled = true
	out := *job
	out.args, out.info = decodedArgs{}, attemptInfo{}
	out.applyOutcome(set, now)
	return &out, nil
}

// settledSet is the outcome of a job its work completed with CompleteTx.
func (c *Client) settledSet(row *Row, now time.Time) dao.Set {
	c.stats.completed.Add(1)
	row.info.event = EventJobCompleted
	row.info.settledAt = now
	return dispatch.Settled
}

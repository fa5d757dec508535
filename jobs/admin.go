package jobs

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/retry"
)

// Get returns the job with id (its state running when a worker holds
// it). Errors: dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Get(ctx context.Context, id int64) (*Row, error) {
	r, err := c.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("jobs: get %d: %w", id, err)
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: get %d: %w", id, err)
	}
	r.present(now)
	return &r, nil
}

// ListParams selects jobs for [Client.List] and [Client.ListPage]. Zero
// fields select all; the fields that hold several values select the jobs
// matching any of them, and the fields together select the jobs matching
// all.
type ListParams struct {
	// States selects jobs in these states (running included).
	States []State
	// Queue and Kind select jobs of one queue or kind; Queues and Kinds
	// of several.
	Queue, Kind   string
	Queues, Kinds []string
	// Priorities selects jobs of these priorities.
	Priorities []int
	// IDs selects these jobs.
	IDs []int64
	// MinID and MaxID, when > 0, select jobs whose id is at least MinID
	// and at most MaxID.
	MinID, MaxID int64
	// SequenceKey selects the jobs of one sequence ([SequenceOpts].Key).
	SequenceKey string
	// BatchID selects the jobs of one batch and its callback job
	// ([BatchResult].ID).
	BatchID string
	// BeforeID, when > 0, selects jobs whose id is smaller: the next page
	// after a page of the id order whose last id it is (After does this
	// for every order).
	BeforeID int64
	// Tags selects jobs that carry every one of these tags; Metadata,
	// a JSON object, selects jobs whose metadata contains it (every key
	// of it with an equal value, objects compared the same way within,
	// arrays containing each element: PostgreSQL's jsonb @>). Both are
	// matched by the client over the jobs the other fields select, read
	// in pages in the listing's order: a call reads at most
	// [MaxListScan] jobs, and may return fewer than Limit jobs with a
	// Cursor to go on from.
	Tags     []string
	Metadata json.RawMessage
	// OrderBy is the order of the listing: [ListByID] (the default) or
	// [ListByScheduledAt], each newest (highest) first unless Ascending;
	// jobs with equal times are ordered by id.
	OrderBy   ListOrder
	Ascending bool
	// After, from a [ListResult], starts the listing after the jobs of
	// the page it came from (keyset pagination: jobs inserted or changed
	// meanwhile neither shift nor repeat the pages). The other fields
	// must be those of that page's call.
	After *ListCursor
	// Limit is the most jobs returned; default 100, at most
	// [MaxListLimit].
	Limit int
}

// ListOrder is the order of a job listing ([ListParams].OrderBy).
type ListOrder string

// The orders of a job listing.
const (
	ListByID          ListOrder = "id"
	ListByScheduledAt ListOrder = "scheduled_at"
)

// ListCursor is where a listing's next page starts: the position after
// the last job a [Client.ListPage] call read. Pass it as
// [ListParams].After.
type ListCursor struct {
	order ListOrder
	asc   bool
	id    int64
	at    time.Time
}

// LastID returns the id of the last job the page of the cursor read:
// in the id order, newest first, the next page holds the jobs whose id is
// smaller (ListParams.BeforeID).
func (k *ListCursor) LastID() int64 { return k.id }

// MarshalText encodes the cursor as text (for a URL or a command line):
// base64 (URL alphabet) of a JSON object.
func (k *ListCursor) MarshalText() ([]byte, error) {
	b, err := json.Marshal(cursorText{Order: k.order, Asc: k.asc, ID: k.id, At: k.at})
	if err != nil {
		return nil, err
	}
	return []byte(base64.RawURLEncoding.EncodeToString(b)), nil
}

// UnmarshalText decodes a cursor MarshalText encoded. Errors wrap
// dao.ErrInvalidArgument.
func (k *ListCursor) UnmarshalText(text []byte) error {
	b, err := base64.RawURLEncoding.DecodeString(string(text))
	var c cursorText
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID <= 0 || (c.Order != ListByID && c.Order != ListByScheduledAt) {
		return argerr.Errorf("list cursor %q", text)
	}
	*k = ListCursor{order: c.Order, asc: c.Asc, id: c.ID, at: c.At}
	return nil
}

// cursorText is the JSON form of a ListCursor.
type cursorText struct {
	Order ListOrder `json:"o"`
	Asc   bool      `json:"a,omitempty"`
	ID    int64     `json:"i"`
	At    time.Time `json:"t"`
}

// ListResult is one page of a job listing.
type ListResult struct {
	// Jobs are the jobs of the page, in the listing's order.
	Jobs []Row
	// Cursor starts the next page (ListParams.After); nil when the
	// listing has no more jobs.
	Cursor *ListCursor
}

// MaxListLimit is the largest ListParams.Limit.
const MaxListLimit = 10000

// MaxListScan is the most jobs one [Client.ListPage] call reads when it
// matches tags or metadata itself.
const MaxListScan = 10000

// List returns the jobs p selects: the Jobs of [Client.ListPage].
func (c *Client) List(ctx context.Context, p ListParams) ([]Row, error) {
	res, err := c.ListPage(ctx, p)
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// ListPage returns one page of the jobs p selects, in p's order (newest
// first by default), and the cursor of the next page. Errors:
// dao.ErrInvalidArgument for an unknown state or order, a limit out of
// range, metadata that is not a JSON object, or a cursor of another
// order; the store's errors, mapped.
func (c *Client) ListPage(ctx context.Context, p ListParams) (*ListResult, error) {
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return nil, fmt.Errorf("jobs: list: %w", argerr.Errorf("limit %d: use 0 to %d", p.Limit, MaxListLimit))
	}
	p.Limit = cmp.Or(p.Limit, 100)
	p.OrderBy = cmp.Or(p.OrderBy, ListByID)
	var timeCol string
	switch p.OrderBy {
	case ListByID:
	case ListByScheduledAt:
		timeCol = ColScheduledAt
	default:
		return nil, fmt.Errorf("jobs: list: %w", argerr.Errorf("order %q", p.OrderBy))
	}
	if p.After != nil && (p.After.order != p.OrderBy || p.After.asc != p.Ascending) {
		return nil, fmt.Errorf("jobs: list: %w", argerr.Errorf("cursor of order %s (ascending %v) for a listing by %s (ascending %v)", p.After.order, p.After.asc, p.OrderBy, p.Ascending))
	}
	var want any
	if p.Metadata != nil {
		if _, err := compactObject(p.Metadata); err != nil {
			return nil, fmt.Errorf("jobs: list: %w", err)
		}
		_ = json.Unmarshal(p.Metadata, &want)
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	where, err := p.criteria(now)
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	order := []dao.Order{{Field: ColID, Desc: !p.Ascending}}
	if timeCol != "" {
		order = []dao.Order{{Field: timeCol, Desc: !p.Ascending}, order[0]}
	}
	filtered := len(p.Tags) > 0 || want != nil
	page := p.Limit
	if filtered {
		page = max(p.Limit, 500)
	}
	res := &ListResult{}
	cursor, scanned := p.After, 0
	for {
		w := where
		if cursor != nil {
			w = dao.And(where, cursor.criteria(timeCol))
		}
		rows, err := c.store.Find(ctx, dao.Query{Where: w, OrderBy: order, Limit: page})
		if err != nil {
			return nil, fmt.Errorf("jobs: list: %w", err)
		}
		scanned += len(rows)
		for i := range rows {
			r := &rows[i]
			cursor = &ListCursor{order: p.OrderBy, asc: p.Ascending, id: r.ID, at: r.ScheduledAt}
			if !r.hasTags(p.Tags) || want != nil && !r.metadataContains(want) {
				continue
			}
			r.present(now)
			res.Jobs = append(res.Jobs, *r)
			if len(res.Jobs) == p.Limit {
				if i < len(rows)-1 || len(rows) == page {
					res.Cursor = cursor
				}
				return res, nil
			}
		}
		if len(rows) < page {
			return res, nil // the end
		}
		if !filtered || scanned >= MaxListScan {
			res.Cursor = cursor
			return res, nil
		}
	}
}

// criteria returns the keyset condition of the jobs after cursor k in
// its order (timeCol "" for the id order).
func (k *ListCursor) criteria(timeCol string) dao.Criteria {
	beyond := dao.Lt
	if k.asc {
		beyond = dao.Gt
	}
	if timeCol == "" {
		return beyond(ColID, k.id)
	}
	return dao.Or(beyond(timeCol, k.at), dao.And(dao.Eq(timeCol, k.at), beyond(ColID, k.id)))
}

// hasTags reports whether r carries every tag of tags.
func (r *Row) hasTags(tags []string) bool {
	have := r.TagList()
	for _, t := range tags {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// metadataContains reports whether r's metadata contains want (decoded
// JSON), as PostgreSQL's jsonb @> does.
func (r *Row) metadataContains(want any) bool {
	var have any
	if r.Metadata == "" || json.Unmarshal([]byte(r.Metadata), &have) != nil {
		return false
	}
	return jsonContains(have, want)
}

// jsonContains reports whether decoded JSON have contains want: an
// object every key of want with a contained value, an array each
// element of want in some element of it, a scalar equal.
func jsonContains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !jsonContains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			if !slices.ContainsFunc(h, func(hv any) bool { return jsonContains(hv, wv) }) {
				return false
			}
		}
		return true
	}
	return have == want
}

// criteria returns the criteria of p at now. Errors wrap
// dao.ErrInvalidArgument.
func (p ListParams) criteria(now time.Time) (dao.Criteria, error) {
	var and []dao.Criteria
	if len(p.States) > 0 {
		var or []dao.Criteria
		for _, s := range p.States {
			c, err := stateCriteria(s, now)
			if err != nil {
				return dao.Criteria{}, err
			}
			or = append(or, c)
		}
		and = append(and, dao.Or(or...))
	}
	in := func(col string, one string, many []string) {
		vals := make([]any, 0, len(many)+1)
		if one != "" {
			vals = append(vals, one)
		}
		for _, v := range many {
			vals = append(vals, v)
		}
		if len(vals) > 0 {
			and = append(and, dao.In(col, vals...))
		}
	}
	in(ColQueue, p.Queue, p.Queues)
	in(ColKind, p.Kind, p.Kinds)
	if len(p.Priorities) > 0 {
		vals := make([]any, len(p.Priorities))
		for i, v := range p.Priorities {
			vals[i] = v
		}
		and = append(and, dao.In(ColPriority, vals...))
	}
	if len(p.IDs) > 0 {
		vals := make([]any, len(p.IDs))
		for i, v := range p.IDs {
			vals[i] = v
		}
		and = append(and, dao.In(ColID, vals...))
	}
	if p.MinID > 0 {
		and = append(and, dao.Ge(ColID, p.MinID))
	}
	if p.MaxID > 0 {
		and = append(and, dao.Le(ColID, p.MaxID))
	}
	if p.BeforeID > 0 {
		and = append(and, dao.Lt(ColID, p.BeforeID))
	}
	if p.SequenceKey != "" {
		and = append(and, dao.Eq(ColSequenceKey, p.SequenceKey))
	}
	if p.BatchID != "" {
		and = append(and, dao.Or(dao.Eq(ColBatchID, p.BatchID), dao.Eq(ColBatchCallback, p.BatchID)))
	}
	return dao.And(and...), nil
}

// stateCriteria returns the criteria of the jobs in state s at now:
// running and available are told apart by the lease.
func stateCriteria(s State, now time.Time) (dao.Criteria, error) {
	switch s {
	case StateRunning:
		return dao.And(dao.Eq(ColState, string(StateAvailable)), dao.Gt(ColLeaseUntil, now)), nil
	case StateAvailable:
		return dao.And(dao.Eq(ColState, string(StateAvailable)), leaseFree(now)), nil
	}
	if !s.valid() {
		return dao.Criteria{}, argerr.Errorf("unknown state %q", s)
	}
	if s.Final() {
		// Always true of a final job; it lets PostgreSQL read the
		// partial final index (WHERE finalized_at IS NOT NULL).
		return dao.And(dao.Eq(ColState, string(s)), dao.NotNull(ColFinalizedAt)), nil
	}
	return dao.Eq(ColState, string(s)), nil
}

// leaseFree is the criteria of jobs no worker holds at now.
func leaseFree(now time.Time) dao.Criteria {
	return dao.Or(dao.IsNull(ColLeaseUntil), dao.Le(ColLeaseUntil, now))
}

// Count returns the number of jobs in each state, of queue (all queues
// when ""): one count per state. Errors: the store's, mapped.
func (c *Client) Count(ctx context.Context, queue string) (map[State]int64, error) {
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: count: %w", err)
	}
	out := map[State]int64{}
	for _, s := range States() {
		where, _ := stateCriteria(s, now)
		if queue != "" {
			where = dao.And(where, dao.Eq(ColQueue, queue))
		}
		n, err := c.store.Count(ctx, where)
		if err != nil {
			return nil, fmt.Errorf("jobs: count %s: %w", s, err)
		}
		out[s] = n
	}
	return out, nil
}

// maxChangeTries bounds the read-then-guarded-write loops of Cancel,
// Retry and Delete: each try fails only when the job changed between its
// read and its write.
const maxChangeTries = 10

// Cancel cancels job id and returns it: a job waiting to run (available,
// scheduled, retryable) becomes cancelled at once and never runs; a
// running job gets a cancel request, and the client running it cancels
// its context (cause [ErrCancelled]) within a tick and ends it
// cancelled, unless it completes first. A job whose work fails or
// snoozes on its own after the request also ends cancelled: its client
// finalizes it right after writing that outcome (the rescuer does,
// should the client stop first). A final job is returned as it is. Errors: dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Cancel(ctx context.Context, id int64) (*Row, error) {
	r, changed, err := c.change(ctx, "cancel", id, func(r *Row, now time.Time) (dao.Criteria, dao.Set, error) {
		switch {
		case r.State.Final():
			return dao.Criteria{}, nil, nil
		case r.running(now):
			if r.CancelRequestedAt != nil {
				return dao.Criteria{}, nil, nil
			}
			return dao.Eq(ColLeaseOwner, r.LeaseOwner), dao.Set{ColCancelRequestedAt: now}, nil
		}
		set := dao.Set{ColState: string(StateCancelled), ColFinalizedAt: now, ColCancelRequestedAt: now}
		keepUniqueIn(r, StateCancelled, set)
		return dao.And(dao.Eq(ColState, string(r.State)), leaseFree(now)), set, nil
	})
	if changed && r.State == StateCancelled && r.FinalizedAt != nil {
		c.emitJob(EventJobCancelled, r, *r.FinalizedAt)
		c.promoteNow(ctx, r)
	}
	return r, err
}

// Retry makes job id available to run at once and returns it: a
// scheduled or retryable job now, and a final one (completed, cancelled,
// discarded) again, with one more attempt allowed if it had used them
// all and its cancel request cleared. A running job is returned as it
// is. A final unique job that released its unique key runs without it.
// Errors: dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Retry(ctx context.Context, id int64) (*Row, error) {
	r, _, err := c.change(ctx, "retry", id, func(r *Row, now time.Time) (dao.Criteria, dao.Set, error) {
		if r.running(now) || r.State == StatePending {
			return dao.Criteria{}, nil, nil
		}
		set := dao.Set{ColState: string(StateAvailable), ColScheduledAt: now}
		if r.SequenceKey != nil && r.SequenceHead == nil {
			// It takes its sequence again: the unique index refuses
			// that (dao.ErrDuplicate) while another job holds it.
			set[ColSequenceHead] = *r.SequenceKey
		}
		if r.State.Final() {
			set[ColFinalizedAt] = nil
			set[ColCancelRequestedAt] = nil
			if r.Attempt >= r.MaxAttempts {
				set[ColMaxAttempts] = r.Attempt + 1
			}
		}
		return dao.And(dao.Eq(ColState, string(r.State)), leaseFree(now)), set, nil
	})
	return r, err
}

// Delete deletes job id, unless it is running, and returns it as it was.
// Errors: [ErrRunning] for a running job (cancel it first);
// dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Delete(ctx context.Context, id int64) (*Row, error) {
	for range maxChangeTries {
		r, now, err := c.read(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("jobs: delete %d: %w", id, err)
		}
		if r.running(now) {
			r.present(now)
			return r, fmt.Errorf("jobs: delete %d: %w", id, ErrRunning)
		}
		n, err := retry.Retryable(ctx, 0, func() (int64, error) {
			return c.store.Delete(ctx, dao.And(dao.Eq(ColID, id), dao.Eq(ColState, string(r.State)), leaseFree(now)), 1)
		})
		if err != nil {
			return nil, fmt.Errorf("jobs: delete %d: %w", id, err)
		}
		if n == 1 {
			return r, nil
		}
	}
	return nil, fmt.Errorf("jobs: delete %d: the job kept changing: %w", id, dao.ErrConflict)
}

// DeleteMany deletes the jobs p selects that are not running (p.Limit
// and p.After are ignored: it goes through every page) and returns how
// many it deleted. Each statement deletes at most [MaintenanceBatch]
// jobs, guarded so that a job that started meanwhile is kept. Errors as
// [Client.ListPage]; a failure part-way returns the count so far.
func (c *Client) DeleteMany(ctx context.Context, p ListParams) (int64, error) {
	p.Limit, p.After = MaintenanceBatch, nil
	var total int64
	for {
		page, err := c.ListPage(ctx, p)
		if err != nil {
			return total, fmt.Errorf("jobs: delete many: %w", err)
		}
		var ids []any
		for _, r := range page.Jobs {
			if r.State != StateRunning {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) > 0 {
			now, err := c.now(ctx)
			if err != nil {
				return total, fmt.Errorf("jobs: delete many: %w", err)
			}
			idle := dao.Or(dao.Ne(ColState, string(StateAvailable)), leaseFree(now))
			n, err := retry.Retryable(ctx, 0, func() (int64, error) {
				return c.store.Delete(ctx, dao.And(dao.In(ColID, ids...), idle), len(ids))
			})
			total += n
			if err != nil {
				return total, fmt.Errorf("jobs: delete many: %w", err)
			}
		}
		if page.Cursor == nil {
			return total, nil
		}
		p.After = page.Cursor
	}
}

// UpdateMetadata merges patch, a JSON object, into the metadata of job
// id and returns the job: each key of patch replaces the job's key of
// that name, and a key whose value is null removes it. It is safe
// against concurrent changes of the job (a job whose metadata changed
// since it was read is read again). Errors: dao.ErrInvalidArgument for a
// patch that is not a JSON object or a result over [MaxMetadataSize];
// dao.ErrNotFound; the store's errors, mapped.
func (c *Client) UpdateMetadata(ctx context.Context, id int64, patch json.RawMessage) (*Row, error) {
	var keys map[string]json.RawMessage
	compact, err := compactObject(patch)
	if err != nil {
		return nil, fmt.Errorf("jobs: update metadata %d: %w", id, err)
	}
	_ = json.Unmarshal([]byte(compact), &keys)
	r, _, err := c.change(ctx, "update metadata", id, func(r *Row, now time.Time) (dao.Criteria, dao.Set, error) {
		merged, err := mergeObject(r.Metadata, keys)
		if err != nil {
			return dao.Criteria{}, nil, err
		}
		if merged == r.Metadata {
			return dao.Criteria{}, nil, nil
		}
		return dao.Eq(ColMetadata, r.Metadata), dao.Set{ColMetadata: merged}, nil
	})
	return r, err
}

// MaxMetadataSize is the largest metadata of a job that
// [Client.UpdateMetadata] and [RecordOutput] write, in bytes of JSON.
const MaxMetadataSize = 1 << 20

// mergeObject returns metadata (a JSON object, "" for none) with keys
// merged in: a key replaced, or removed when its value is null; "" when
// nothing is left. Errors wrap dao.ErrInvalidArgument.
func mergeObject(metadata string, keys map[string]json.RawMessage) (string, error) {
	obj := map[string]json.RawMessage{}
	if metadata != "" {
		if err := json.Unmarshal([]byte(metadata), &obj); err != nil {
			return "", argerr.Errorf("the job's metadata is not a JSON object: %v", err)
		}
	}
	for k, v := range keys {
		if string(v) == "null" {
			delete(obj, k)
			continue
		}
		obj[k] = v
	}
	if len(obj) == 0 {
		return "", nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", argerr.Errorf("metadata: %v", err)
	}
	if len(b) > MaxMetadataSize {
		return "", argerr.Errorf("metadata of %d bytes, over %d", len(b), MaxMetadataSize)
	}
	return string(b), nil
}

// read returns job id and the current time.
func (c *Client) read(ctx context.Context, id int64) (*Row, time.Time, error) {
	now, err := c.now(ctx)
	if err != nil {
		return nil, now, err
	}
	r, err := c.store.Get(ctx, id)
	if err != nil {
		return nil, now, err
	}
	return &r, now, nil
}

// change reads job id and writes what decide returns for it, guarded by
// the job's id and decide's criteria, so that a job that changed since the
// read is read again. A nil Set leaves the job as it is. A write that
// fails with an error a retry can cure (a deadlock, a busy database) is
// retried until ctx ends. It returns the job as written, and whether it
// wrote it.
func (c *Client) change(ctx context.Context, op string, id int64, decide func(r *Row, now time.Time) (dao.Criteria, dao.Set, error)) (*Row, bool, error) {
	for range maxChangeTries {
		r, now, err := c.read(ctx, id)
		if err != nil {
			return nil, false, fmt.Errorf("jobs: %s %d: %w", op, id, err)
		}
		guard, set, err := decide(r, now)
		if err != nil {
			return nil, false, fmt.Errorf("jobs: %s %d: %w", op, id, err)
		}
		if set == nil {
			r.present(now)
			return r, false, nil
		}
		n, err := retry.Retryable(ctx, 0, func() (int64, error) {
			return c.store.Update(ctx, dao.And(dao.Eq(ColID, id), guard), set)
		})
		if err != nil {
			return nil, false, fmt.Errorf("jobs: %s %d: %w", op, id, err)
		}
		if n == 1 {
			if set[ColState] == string(StateAvailable) {
				c.wake(r.Queue)
			}
			r, err := c.Get(ctx, id)
			return r, err == nil, err
		}
	}
	return nil, false, fmt.Errorf("jobs: %s %d: the job kept changing: %w", op, id, dao.ErrConflict)
}

// keepUniqueIn clears the unique key in set when r's key is not held in
// state, and the sequence head when state releases r's sequence
// (keepSequenceIn).
func keepUniqueIn(r *Row, state State, set dao.Set) {
	if r.UniqueKey != nil && r.UniqueStates&state.bit() == 0 {
		set[ColUniqueKey] = nil
	}
	keepSequenceIn(r, state, set)
}

// QueueInfo is one queue as [Client.Queues] lists it.
type QueueInfo struct {
	// Name is the queue's name.
	Name string
	// Paused is true while the queue is paused.
	Paused bool
	// PausedAt is when it was paused.
	PausedAt *time.Time
	// Kinds are the kinds a client running the queue recorded a worker
	// for within [KindsTTL], sorted.
	Kinds []string
}

// Queues lists the queues of the queue table: those paused once and
// those a client ran (a client records its queues when it runs), by
// name. Errors: [ErrNoQueueStore]; the store's errors, mapped.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	if c.cfg.QueueStore == nil {
		return nil, fmt.Errorf("jobs: queues: %w", ErrNoQueueStore)
	}
	rows, err := c.cfg.QueueStore.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("name")}})
	if err != nil {
		return nil, fmt.Errorf("jobs: queues: %w", err)
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: queues: %w", err)
	}
	out := make([]QueueInfo, len(rows))
	for i, r := range rows {
		out[i] = QueueInfo{Name: r.Name, Paused: r.PausedAt != nil, PausedAt: r.PausedAt, Kinds: parseKinds(r.Kinds).known(now)}
	}
	return out, nil
}

// AllQueues, as the name given to [Client.PauseQueue] or
// [Client.ResumeQueue], is every queue of the queue table.
const AllQueues = "*"

// PauseQueue pauses queue name for every client: within a tick no client
// claims its jobs; running jobs go on. Pausing a paused queue changes
// nothing. name must have a row in the queue table (a client that ran
// the queue recorded it) or a job; [AllQueues] pauses every queue of the
// queue table. Errors: dao.ErrInvalidArgument for a bad name;
// dao.ErrNotFound for a queue with neither a row nor a job (nothing is
// written); [ErrNoQueueStore]; the store's errors, mapped.
func (c *Client) PauseQueue(ctx context.Context, name string) error {
	return c.setPaused(ctx, "pause", name, true)
}

// ResumeQueue resumes queue name ([AllQueues]: every queue of the queue
// table) for every client, within a tick. Errors as [Client.PauseQueue].
func (c *Client) ResumeQueue(ctx context.Context, name string) error {
	return c.setPaused(ctx, "resume", name, false)
}

// setPaused records the pause state of queue name, or of every queue.
func (c *Client) setPaused(ctx context.Context, op, name string, paused bool) error {
	if name != AllQueues {
		if err := CheckQueue(name); err != nil {
			return fmt.Errorf("jobs: %s queue: %w", op, err)
		}
	}
	if c.cfg.QueueStore == nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, ErrNoQueueStore)
	}
	now, err := c.now(ctx)
	if err != nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, err)
	}
	which := dao.Criteria{}
	if name != AllQueues {
		if err := c.knownQueue(ctx, name); err != nil {
			return fmt.Errorf("jobs: %s queue %s: %w", op, name, err)
		}
		which = dao.Eq("name", name)
	}
	set := dao.Set{"paused_at": nil}
	where := dao.And(which, dao.NotNull("paused_at"))
	if paused {
		set = dao.Set{"paused_at": now}
		where = dao.And(which, dao.IsNull("paused_at"))
	}
	n, err := c.cfg.QueueStore.Update(ctx, where, set)
	if err != nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, err)
	}
	queues := c.queueList()
	c.pausedMu.Lock()
	for _, q := range queues {
		q := q.name
		if name != AllQueues && q != name {
			continue
		}
		if paused {
			c.paused[q] = true
		} else {
			delete(c.paused, q)
		}
	}
	c.pausedMu.Unlock()
	if !paused {
		c.wake(strings.TrimPrefix(name, AllQueues))
	}
	if n > 0 {
		kind := EventQueueResumed
		if paused {
			kind = EventQueuePaused
		}
		c.emitQueue(kind, name)
	}
	return nil
}

// knownQueue makes sure queue name has a row in the queue table: it has
// one, or a job of the queue exists and the row is added. Errors:
// dao.ErrNotFound when the queue has neither; the stores' errors.
func (c *Client) knownQueue(ctx context.Context, name string) error {
	n, err := c.cfg.QueueStore.Count(ctx, dao.Eq("name", name))
	if err != nil || n > 0 {
		return err
	}
	jobs, err := c.store.Find(ctx, dao.Query{Where: dao.Eq(ColQueue, name), Limit: 1})
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		return fmt.Errorf("no queue row and no job: %w", dao.ErrNotFound)
	}
	return c.registerQueues(ctx, name)
}

// registerQueues adds rows for names to the queue table unless they
// exist.
func (c *Client) registerQueues(ctx context.Context, names ...string) error {
	qs, ok := c.cfg.QueueStore.(dao.IdempotentCreator[Queue])
	if !ok {
		return fmt.Errorf("queue store %T cannot add rows idempotently: %w", c.cfg.QueueStore, dao.ErrInvalidArgument)
	}
	items := make([]*Queue, len(names))
	for i, n := range names {
		items[i] = &Queue{Name: n}
	}
	_, err := qs.CreateIfAbsent(ctx, items...)
	return err
}

package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
)

// Column names of the message table, as the GORM schema of [Message] names
// them.
const (
	colID              = "id"
	colStatus          = "status"
	colTargetBroker    = "target_broker"
	colPriority        = "priority"
	colRetryCount      = "retry_count"
	colMaxRetries      = "max_retries"
	colNextRetryAt     = "next_retry_at"
	colLockedBy        = "locked_by"
	colLockedUntil     = "locked_until"
	colLastError       = "last_error"
	colCreatedAt       = "created_at"
	colPublishedAt     = "published_at"
	colLastProcessedAt = "last_processed_at"
)

// Batch limits. Writes that name rows by id send at most markChunk ids per
// statement (bound parameters stay far below every backend's limit); Add
// inserts at most addChunk rows per statement.
const (
	markChunk = 1000
	addChunk  = 500
)

// DefaultLease is the lease a claim takes unless told otherwise.
const DefaultLease = 30 * time.Second

// TxStoreFunc returns a store of messages bound to the caller's open GORM
// transaction tx, for [Repository.Add]. With sqlstore it is
// func(tx *gorm.DB) dao.Store[Message] { return table.WithTx(tx) }.
type TxStoreFunc func(tx *gorm.DB) dao.Store[Message]

// Repository reads and writes outbox messages through a [dao.Store] of
// [Message], so it runs on every backend claimstore supports. It is safe for
// concurrent use by many goroutines, processes and servers sharing one
// table.
type Repository struct {
	store  dao.Store[Message]
	txFunc TxStoreFunc
	policy RetryPolicy
	lease  time.Duration
	now    func() time.Time
	dbc    *dbClock // the database clock, nil when now is used
	random func() float64

	clockSet bool // WithClock was given
}

// Option configures a [Repository].
type Option func(*Repository) error

// WithRetryPolicy sets the retry policy (default [DefaultRetryPolicy]). An
// invalid policy makes [New] fail with [dao.ErrInvalidArgument].
func WithRetryPolicy(p RetryPolicy) Option {
	return func(r *Repository) error {
		if err := p.Validate(); err != nil {
			return err
		}
		r.policy = p
		return nil
	}
}

// WithLease sets the lease [Repository.ClaimBatch] takes (default
// [DefaultLease]); it must be > 0.
func WithLease(d time.Duration) Option {
	return func(r *Repository) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease must be > 0, got %v", dao.ErrInvalidArgument, d)
		}
		r.lease = d
		return nil
	}
}

// WithClock sets the clock of the repository's time arithmetic, replacing
// the database clock. Without it the repository reads the database's clock
// when the store can give it — a store with a method DB() *gorm.DB on
// PostgreSQL, MySQL, MariaDB, SQL Server or SQLite, as sqlstore's stores
// have — and the host's clock (time.Now) otherwise (memstore, where the
// database is this process; esstore). The database's time is read with one
// query at most every [DatabaseClockResync] and advanced in between with
// the host's monotonic clock.
//
// This clock, whichever it is, is read once per call and gives:
//   - the lease a claim writes: LockedUntil = now + lease;
//   - the eligibility of a claim: a lock has expired when LockedUntil < now,
//     a failed message is due when NextRetryAt <= now;
//   - the retry time a failure writes: NextRetryAt = now + the policy's
//     delay;
//   - the times kept for the record (CreatedAt when zero, PublishedAt,
//     LastProcessedAt), the cutoff of [Repository.Purge] and the age of the
//     oldest message in the relay's metrics. [Repository.Add] does no I/O
//     for the time: it uses the last estimate of the database clock, or the
//     host's clock before the first claim or mark.
//
// Times are stored in UTC. A relay's timeouts never read this clock: they
// are durations on the host's monotonic clock (see [RelayConfig]).
//
// "Now" is a value computed in this process and sent as a bound parameter:
// the store API cannot name the database's CURRENT_TIMESTAMP in criteria or
// in a claim's Set. On the database clock every repository over a table
// agrees on the time, whatever its host's clock says. With an injected
// clock, the repositories and relays sharing a table should read clocks
// that agree to well within the lease. A claimer whose clock is behind by
// more than the lease writes leases the others already see as expired; one
// that is ahead sees their leases as expired. Either way a batch may be
// claimed again while its first owner still publishes it: the broker's
// de-duplication by message id keeps one copy, the fences
// ([Repository.MarkPublished]) refuse the first owner's marks and keep the
// new owner's state, and no message is lost, failed or abandoned for it —
// the skew costs repeated work, not correctness. A claimer alone on a table
// is consistent with its own clock, however skewed.
//
// A nil clock is [dao.ErrInvalidArgument].
func WithClock(now func() time.Time) Option {
	return func(r *Repository) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", dao.ErrInvalidArgument)
		}
		r.now = now
		r.clockSet = true
		return nil
	}
}

// WithRandom sets the source of the jitter: a function returning uniform
// numbers in [0, 1) (default math/rand/v2.Float64).
func WithRandom(f func() float64) Option {
	return func(r *Repository) error {
		if f == nil {
			return fmt.Errorf("%w: nil random source", dao.ErrInvalidArgument)
		}
		r.random = f
		return nil
	}
}

// WithTxStore sets how [Repository.Add] binds the store to a caller's
// transaction. [New] sets it by itself for a *dao.Table over a SQL backend
// (dao.Table.WithTx); set it for a store of your own.
func WithTxStore(f TxStoreFunc) Option {
	return func(r *Repository) error {
		r.txFunc = f
		return nil
	}
}

// New returns a repository over store. It fails with an error wrapping
// [dao.ErrInvalidArgument] when store is nil or an option is invalid.
func New(store dao.Store[Message], opts ...Option) (*Repository, error) {
	if store == nil {
		return nil, fmt.Errorf("outbox: new repository: %w: nil store", dao.ErrInvalidArgument)
	}
	r := &Repository{
		store:  store,
		policy: DefaultRetryPolicy(),
		lease:  DefaultLease,
		now:    time.Now,
		random: rand.Float64,
		txFunc: txStoreOf(store),
	}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, fmt.Errorf("outbox: new repository: %w", err)
		}
	}
	if !r.clockSet {
		r.dbc = databaseClockOf(store)
	}
	return r, nil
}

// Store returns the underlying store.
func (r *Repository) Store() dao.Store[Message] { return r.store }

// RetryPolicy returns the repository's retry policy.
func (r *Repository) RetryPolicy() RetryPolicy { return r.policy }

// Lease returns the lease [Repository.ClaimBatch] takes.
func (r *Repository) Lease() time.Duration { return r.lease }

// clock returns the repository's time without I/O: the injected clock, or
// the last estimate of the database clock.
func (r *Repository) clock() time.Time {
	if r.dbc != nil {
		return r.dbc.peek().UTC()
	}
	return r.now().UTC()
}

// time returns the repository's time, reading the database's clock when
// its estimate is due for a new sample.
func (r *Repository) time(ctx context.Context) (time.Time, error) {
	if r.dbc == nil {
		return r.now().UTC(), nil
	}
	t, err := r.dbc.now(ctx)
	return t.UTC(), err
}

// DatabaseClock reports whether the repository reads the database's clock
// (see [WithClock]).
func (r *Repository) DatabaseClock() bool { return r.dbc != nil }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dao.ErrInvalidArgument}, args...)...)
}

func checkLen(field, v string, max int) error {
	if len(v) > max {
		return invalid("%s is %d bytes, the limit is %d", field, len(v), max)
	}
	return nil
}

// prepare checks m and fills its defaults for insertion at now.
func (r *Repository) prepare(m *Message, now time.Time) error {
	if m == nil {
		return invalid("nil message")
	}
	if m.ID != 0 {
		return invalid("message %q already has id %d", m.MessageID, m.ID)
	}
	if m.MessageID == "" {
		return invalid("empty message id")
	}
	if m.Topic == "" {
		return invalid("message %q: empty topic", m.MessageID)
	}
	if m.Status != "" && m.Status != StatusPending {
		return invalid("message %q: a new message must be pending, got %q", m.MessageID, m.Status)
	}
	if m.MaxRetries < NoRetry {
		return invalid("message %q: max retries %d < NoRetry", m.MessageID, m.MaxRetries)
	}
	if m.RetryCount != 0 || m.LockedBy != "" || m.LockedUntil != nil || m.PublishedAt != nil {
		return invalid("message %q: a new message carries no processing state", m.MessageID)
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
// bind its store to a transaction (see [WithTxStore]); nothing is written
// then. [dao.ErrDuplicate] when a message id already exists for the same
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
			return fmt.Errorf("outbox: add: %w: this store cannot join a transaction (see WithTxStore)", dao.ErrInvalidArgument)
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

// claimable returns the eligibility of a claim at now for broker: pending
// rows, failed rows whose retry time has come, and processing rows whose
// lease has expired.
func claimable(broker string, now time.Time) dao.Criteria {
	return dao.And(
		dao.Eq(colTargetBroker, broker),
		dao.Or(
			dao.Eq(colStatus, string(StatusPending)),
			dao.And(dao.Eq(colStatus, string(StatusFailed)), dao.Le(colNextRetryAt, now)),
			dao.And(dao.Eq(colStatus, string(StatusProcessing)), dao.Lt(colLockedUntil, now)),
		),
	)
}

// claimOrder is the order of a claim: higher priority first, then oldest.
var claimOrder = []dao.Order{dao.Desc(colPriority), dao.Asc(colCreatedAt), dao.Asc(colID)}

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
		return nil, fmt.Errorf("outbox: claim: %w", invalid("negative limit %d", limit))
	}
	if lease <= 0 {
		return nil, fmt.Errorf("outbox: claim: %w", invalid("lease must be > 0, got %v", lease))
	}
	if limit == 0 {
		return nil, nil
	}
	now, err := r.time(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	rows, err := r.store.Claim(ctx, dao.ClaimRequest{
		Where: claimable(targetBroker, now),
		Set: dao.Set{
			colStatus:          string(StatusProcessing),
			colLockedBy:        workerID,
			colLockedUntil:     now.Add(lease),
			colLastProcessedAt: now,
		},
		Limit:   limit,
		OrderBy: claimOrder,
	})
	if err != nil {
		return rows, fmt.Errorf("outbox: claim: %w", err)
	}
	return rows, nil
}

func checkWorker(w string) error {
	if w == "" {
		return invalid("empty worker id")
	}
	return checkLen("worker id", w, MaxNameLen)
}

// owned is the fence of every mark: the row is still processing and locked
// by worker.
func owned(worker string) dao.Criteria {
	return dao.And(dao.Eq(colStatus, string(StatusProcessing)), dao.Eq(colLockedBy, worker))
}

func idCriteria(ids []int64) dao.Criteria {
	vs := make([]any, len(ids))
	for i, id := range ids {
		vs[i] = id
	}
	return dao.In(colID, vs...)
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
		n, err := r.store.Update(ctx, dao.And(idCriteria(chunk), owned(worker), extra), set)
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
	set := dao.Set{
		colStatus:          string(StatusPublished),
		colPublishedAt:     now,
		colLockedUntil:     nil,
		colLastProcessedAt: now,
	}
	notApplied, err := r.fencedUpdate(ctx, workerID, ids, dao.Criteria{}, set, func(m *Message) bool {
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
		colStatus:          string(StatusPending),
		colLockedBy:        "",
		colLockedUntil:     nil,
		colLastProcessedAt: now,
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

// Failure is one failed publish attempt for [Repository.MarkFailed].
type Failure struct {
	// ID is the message's primary key.
	ID int64
	// RetryCount and MaxRetries are the message's values as claimed. The
	// next state is computed from them and the write is guarded on them,
	// so a wrong value changes nothing (the id is reported as not
	// applied).
	RetryCount int
	MaxRetries int
	// Err is the publish error; its text is kept in LastError (truncated
	// to [MaxErrorLen] bytes). An error wrapping [ErrPermanent] abandons
	// the message at once.
	Err error
}

// Failed returns the [Failure] of the claimed message m with err.
func Failed(m *Message, err error) Failure {
	return Failure{ID: m.ID, RetryCount: m.RetryCount, MaxRetries: m.MaxRetries, Err: err}
}

// FailResult says what [Repository.MarkFailed] did with each message.
type FailResult struct {
	// Retrying are the messages now failed, to be retried after their
	// NextRetryAt.
	Retrying []int64
	// Abandoned are the messages that ran out of retries (or failed
	// permanently) and are now abandoned with their last error kept.
	Abandoned []int64
	// NotApplied are the messages the fence refused (see
	// [Repository.MarkPublished]); they are unchanged.
	NotApplied []int64
}

// failGroup is a set of failures that share their next state, so one
// UPDATE writes them all.
type failGroup struct {
	retryCount, maxRetries int
	abandon                bool
	errText                string
}

// errorText returns the text kept in LastError for err.
func errorText(err error) string {
	s := "unknown error"
	if err != nil {
		s = err.Error()
	}
	if len(s) <= MaxErrorLen {
		return s
	}
	s = s[:MaxErrorLen]
	for !utf8.ValidString(s) { // do not cut a rune in two
		s = s[:len(s)-1]
	}
	return s
}

// MarkFailed records failed publish attempts of messages claimed by
// workerID. Each message's RetryCount grows by one; if it then exceeds
// MaxRetries, or the error wraps [ErrPermanent], the message is abandoned,
// else it is failed with NextRetryAt = now + the retry policy's delay for
// its retry count. LastError keeps the error text either way, and the lease
// is cleared.
//
// The writes stay batched: messages are grouped by their next state —
// (retry count, max retries, abandon or retry, error text) — and each group
// is one fenced, guarded UPDATE … WHERE id IN (…). The jitter is drawn once
// per group, so messages that failed together in one batch are retried
// together (they are claimed together anyway), while separate batches and
// separate workers draw separate delays and spread out. In the common case —
// a broker outage failing a whole batch with one error — that is one UPDATE
// per distinct retry count in the batch.
//
// It is fenced like [Repository.MarkPublished]: refused ids are listed in
// the result's NotApplied and reported with a [*FenceError]
// (errors.Is(err, [ErrLeaseLost])). Errors: [dao.ErrInvalidArgument] for an
// empty workerID or a repeated id; store errors wrapped, with the result so
// far (among them that of a failed first read of the database's clock,
// before any write).
func (r *Repository) MarkFailed(ctx context.Context, workerID string, failures ...Failure) (FailResult, error) {
	var res FailResult
	if err := checkWorker(workerID); err != nil {
		return res, fmt.Errorf("outbox: mark failed: %w", err)
	}
	if len(failures) == 0 {
		return res, nil
	}
	groups := map[failGroup][]int64{}
	var order []failGroup
	seen := make(map[int64]bool, len(failures))
	for _, f := range failures {
		if seen[f.ID] {
			return res, fmt.Errorf("outbox: mark failed: %w", invalid("id %d given twice", f.ID))
		}
		seen[f.ID] = true
		g := failGroup{
			retryCount: f.RetryCount,
			maxRetries: f.MaxRetries,
			abandon:    f.RetryCount+1 > f.MaxRetries || errors.Is(f.Err, ErrPermanent),
			errText:    errorText(f.Err),
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], f.ID)
	}
	now, err := r.time(ctx)
	if err != nil {
		return res, fmt.Errorf("outbox: mark failed: %w", err)
	}
	for _, g := range order {
		ids := groups[g]
		set := dao.Set{
			colRetryCount:      g.retryCount + 1,
			colLastError:       g.errText,
			colLockedUntil:     nil,
			colLastProcessedAt: now,
		}
		want := StatusFailed
		if g.abandon {
			want = StatusAbandoned
			set[colNextRetryAt] = nil
		} else {
			set[colNextRetryAt] = now.Add(r.policy.Delay(g.retryCount, r.random()))
		}
		set[colStatus] = string(want)
		guard := dao.And(dao.Eq(colRetryCount, g.retryCount), dao.Eq(colMaxRetries, g.maxRetries))
		refused, err := r.fencedUpdate(ctx, workerID, ids, guard, set, func(m *Message) bool {
			return m.Status == want && m.LockedBy == workerID && m.RetryCount == g.retryCount+1
		})
		res.NotApplied = append(res.NotApplied, refused...)
		if err != nil {
			return res, fmt.Errorf("outbox: mark failed: %w", err)
		}
		done := without(ids, refused)
		if g.abandon {
			res.Abandoned = append(res.Abandoned, done...)
		} else {
			res.Retrying = append(res.Retrying, done...)
		}
	}
	if len(res.NotApplied) > 0 {
		return res, &FenceError{Op: "mark failed", Worker: workerID, IDs: res.NotApplied}
	}
	return res, nil
}

// without returns ids minus drop, keeping order.
func without(ids, drop []int64) []int64 {
	if len(drop) == 0 {
		return ids
	}
	d := make(map[int64]bool, len(drop))
	for _, id := range drop {
		d[id] = true
	}
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !d[id] {
			out = append(out, id)
		}
	}
	return out
}

// statusIn is the criteria status IN (ss).
func statusIn(ss ...Status) dao.Criteria {
	vs := make([]any, len(ss))
	for i, s := range ss {
		vs[i] = string(s)
	}
	return dao.In(colStatus, vs...)
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
				return dao.Criteria{}, invalid("unknown status %q", s)
			}
		}
		cs = append(cs, statusIn(f.Statuses...))
	}
	if f.TargetBroker != nil {
		cs = append(cs, dao.Eq(colTargetBroker, *f.TargetBroker))
	}
	if f.Limit < 0 {
		return dao.Criteria{}, invalid("negative limit %d", f.Limit)
	}
	return dao.And(cs...), nil
}

// List returns the messages f selects, oldest first. Errors:
// [dao.ErrInvalidArgument] for an unknown status or a negative limit; store
// errors wrapped.
func (r *Repository) List(ctx context.Context, f Filter) ([]Message, error) {
	where, err := f.criteria()
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	rows, err := r.store.Find(ctx, dao.Query{Where: where, OrderBy: []dao.Order{dao.Asc(colCreatedAt)}, Limit: f.Limit})
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
// key, zero included), one Count per status. Store errors are returned
// wrapped.
func (r *Repository) Counts(ctx context.Context) (map[Status]int64, error) {
	out := make(map[Status]int64, len(Statuses))
	for _, s := range Statuses {
		n, err := r.store.Count(ctx, dao.Eq(colStatus, string(s)))
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
		Where:   dao.And(dao.Eq(colTargetBroker, targetBroker), statusIn(StatusPending, StatusProcessing, StatusFailed)),
		OrderBy: []dao.Order{dao.Asc(colCreatedAt)},
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

// Requeue moves messages back to pending so that relays publish them again:
// retry count reset to 0, retry time and lease cleared, LastError kept for
// the record. It touches only messages in one of statuses, which may hold
// [StatusFailed] and [StatusAbandoned] (empty means both); with ids it
// touches only those messages, without ids every such message. It returns
// the number of messages requeued, in one UPDATE per 1000 ids (one in all
// when no ids are given).
//
// Errors: [dao.ErrInvalidArgument] for another status; store errors wrapped.
func (r *Repository) Requeue(ctx context.Context, statuses []Status, ids ...int64) (int64, error) {
	if len(statuses) == 0 {
		statuses = []Status{StatusFailed, StatusAbandoned}
	}
	for _, s := range statuses {
		if s != StatusFailed && s != StatusAbandoned {
			return 0, fmt.Errorf("outbox: requeue: %w", invalid("only failed and abandoned messages can be requeued, not %q", s))
		}
	}
	set := dao.Set{
		colStatus:      string(StatusPending),
		colRetryCount:  0,
		colNextRetryAt: nil,
		colLockedBy:    "",
		colLockedUntil: nil,
	}
	if len(ids) == 0 {
		n, err := r.store.Update(ctx, statusIn(statuses...), set)
		if err != nil {
			return n, fmt.Errorf("outbox: requeue: %w", err)
		}
		return n, nil
	}
	var total int64
	for chunk := range slices.Chunk(dedupe(ids), markChunk) {
		n, err := r.store.Update(ctx, dao.And(idCriteria(chunk), statusIn(statuses...)), set)
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: requeue: %w", err)
		}
	}
	return total, nil
}

// PurgeRequest selects the messages a retention sweep deletes.
type PurgeRequest struct {
	// Status is [StatusPublished] (aged by PublishedAt) or
	// [StatusAbandoned] (aged by LastProcessedAt).
	Status Status
	// OlderThan deletes messages whose age is more than this; >= 0.
	OlderThan time.Duration
	// BatchSize is the most rows one DELETE removes; default 1000.
	BatchSize int
	// MaxBatches stops the sweep after this many batches; 0 means until no
	// matching row is left.
	MaxBatches int
}

// Purge deletes old published or abandoned messages in bounded batches
// ([dao.Store.Delete] with a limit), until none is left or MaxBatches is
// reached, and returns the number it deleted. Sweeps may run at the same
// time on many servers: a row is deleted once and counted by the sweep that
// deleted it, and a batch that fails with a retryable error
// ([dao.IsRetryable], such as a deadlock between two sweeps) is retried
// after a short pause, up to 5 times.
//
// Errors: [dao.ErrInvalidArgument] for another status, a negative age or
// batch size; store and context errors wrapped, with the count so far
// (among them that of a failed first read of the database's clock, before
// any delete).
func (r *Repository) Purge(ctx context.Context, req PurgeRequest) (int64, error) {
	var col string
	switch req.Status {
	case StatusPublished:
		col = colPublishedAt
	case StatusAbandoned:
		col = colLastProcessedAt
	default:
		return 0, fmt.Errorf("outbox: purge: %w", invalid("only published and abandoned messages can be purged, not %q", req.Status))
	}
	if req.OlderThan < 0 || req.BatchSize < 0 || req.MaxBatches < 0 {
		return 0, fmt.Errorf("outbox: purge: %w", invalid("negative age, batch size or batch count"))
	}
	if req.BatchSize == 0 {
		req.BatchSize = 1000
	}
	now, err := r.time(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: purge: %w", err)
	}
	where := dao.And(dao.Eq(colStatus, string(req.Status)), dao.Lt(col, now.Add(-req.OlderThan)))
	var total int64
	for batch := 0; req.MaxBatches == 0 || batch < req.MaxBatches; batch++ {
		var n int64
		var err error
		for attempt := 0; ; attempt++ {
			n, err = r.store.Delete(ctx, where, req.BatchSize)
			if err == nil || !dao.IsRetryable(err) || attempt == 4 {
				break
			}
			select {
			case <-ctx.Done():
				return total, fmt.Errorf("outbox: purge: %w", ctx.Err())
			case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
			}
		}
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: purge: %w", err)
		}
		if n < int64(req.BatchSize) {
			break
		}
	}
	return total, nil
}

// txStoreOf returns the transaction binder of a store that can join a
// caller's transaction (a *dao.Table whose backend binds a *gorm.DB), or
// nil.
func txStoreOf(store dao.Store[Message]) TxStoreFunc {
	t, ok := store.(*dao.Table[Message])
	if !ok || !t.Capabilities().Transactions {
		return nil
	}
	return func(tx *gorm.DB) dao.Store[Message] { return t.WithTx(tx) }
}

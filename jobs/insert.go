package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// MaxTagLen is the longest tag, in bytes.
const MaxTagLen = 255

// InsertOpts are the options of one insert. Zero fields take the args
// type's own options ([ArgsWithInsertOpts]), then the client's defaults.
type InsertOpts struct {
	// Queue is the queue the job runs in; default [DefaultQueue].
	Queue string
	// Priority orders the available jobs of a queue, 1 (first, the
	// default) to [MaxPriority].
	Priority int
	// ScheduledAt is when the job may run; zero is now. A job whose time
	// has come is available at once (a past time orders it among the
	// available jobs of its priority), a later one is scheduled.
	ScheduledAt time.Time
	// MaxAttempts is the number of attempts after which a failing job is
	// discarded; default the client's MaxAttempts ([DefaultMaxAttempts]).
	MaxAttempts int
	// Tags label the job for people and tools: each 1 to [MaxTagLen]
	// bytes of letters, digits, '_', '-', ':', '.'.
	Tags []string
	// Metadata is a JSON object kept with the job; nil for none.
	Metadata json.RawMessage
	// UniqueOpts, when set, makes the job unique: an insert while a job
	// with the same unique properties is in one of the unique states
	// inserts nothing and returns that job.
	UniqueOpts UniqueOpts
	// Sequence, when its Key is set, puts the job in a sequence: the
	// jobs of one key run one at a time, in insertion order (see
	// [SequenceOpts]). An args type gives its jobs a sequence by a field
	// with its own InsertOpts ([ArgsWithInsertOpts]).
	Sequence SequenceOpts

	// uniqueKey, when set, is the unique key as is (periodic jobs: one
	// per schedule and occurrence), held in every state.
	uniqueKey string
}

// UniqueOpts makes a job unique among the jobs of its kind: the database
// holds at most one job per unique key in the unique states, enforced by
// a unique index on the key under concurrent inserts on every backend.
// The key is built from the kind and the properties chosen here.
type UniqueOpts struct {
	// ByArgs includes the args (their JSON) in the key: all of them, or
	// only the fields tagged `jobs:"unique"` when the args type tags
	// some (top-level fields of the struct, named as their JSON keys).
	ByArgs bool
	// ByPeriod, when > 0, includes the scheduled time truncated to the
	// period (UTC) in the key: one job per period.
	ByPeriod time.Duration
	// ByQueue includes the queue in the key.
	ByQueue bool
	// ByState are the states in which a job holds its key; default every
	// state but cancelled and discarded. They must include available,
	// scheduled and running: a job leaves a unique state only by moving
	// forward (a job that leaves it does not hold it again).
	ByState []State
}

// isZero reports whether no option is set.
func (u UniqueOpts) isZero() bool {
	return !u.ByArgs && u.ByPeriod == 0 && !u.ByQueue && len(u.ByState) == 0
}

// DefaultUniqueStates are the states a unique job holds its key in when
// UniqueOpts.ByState is empty. A unique job holds its key while pending
// whatever its states.
func DefaultUniqueStates() []State {
	return []State{StatePending, StateAvailable, StateScheduled, StateRunning, StateRetryable, StateCompleted}
}

// InsertParams is one job of [Client.InsertMany].
type InsertParams struct {
	Args Args
	// Opts, optional, are the job's insert options.
	Opts *InsertOpts
}

// InsertResult is the outcome of one insert.
type InsertResult struct {
	// Job is the inserted job, or for a unique job that was a duplicate
	// the job that holds the key.
	Job *Row
	// UniqueSkippedAsDuplicate is true when nothing was inserted because
	// a job with the same unique key exists (Job is that job).
	UniqueSkippedAsDuplicate bool
}

// Insert inserts one job with args (opts may be nil) and returns it. A
// unique job whose key is held returns the job holding it with
// UniqueSkippedAsDuplicate. The job commits on its own; a queue this
// client runs is woken at once, as are those of the other running clients
// of this process on the same job table; on PostgreSQL every client is
// notified, elsewhere clients read the change signal
// (Config.SignalInterval). Errors: dao.ErrInvalidArgument for bad args or
// options (args over Config.MaxArgsSize or holding text that is not
// UTF-8, a kind without worker in the client's Workers, which also wraps
// [ErrUnknownKind]; nothing is inserted); the store's errors, mapped.
func (c *Client) Insert(ctx context.Context, args Args, opts *InsertOpts) (*InsertResult, error) {
	res, err := c.insertMany(ctx, c.store, []InsertParams{{Args: args, Opts: opts}}, false)
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// InsertTx is [Client.Insert] inside tx, the caller's open transaction
// (a *gorm.DB in a transaction for the SQL backends): the job commits or
// rolls back with the rest of the transaction, and workers see it once
// it commits: on PostgreSQL they are notified then, elsewhere the change
// signal finds it within a signal interval (Config.SignalInterval). A store
// that cannot bind tx, and a tx that is not inside a transaction (a
// *gorm.DB of no Begin or Transaction, whose insert would commit on its
// own), return an error wrapping dao.ErrInvalidArgument and insert
// nothing; for a store that is not a dao.TxBinder (a wrapper store that
// does not forward it) the error also wraps errors.ErrUnsupported.
//
// A unique insert in a transaction waits, on PostgreSQL and MySQL, for
// another open transaction that inserted the same key, and then returns
// its job as the duplicate (or inserts, if it rolled back).
func (c *Client) InsertTx(ctx context.Context, tx any, args Args, opts *InsertOpts) (*InsertResult, error) {
	store, err := c.txStore(tx)
	if err != nil {
		return nil, err
	}
	res, err := c.insertMany(ctx, store, []InsertParams{{Args: args, Opts: opts}}, true)
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// InsertMany inserts many jobs: those that are not unique in as few
// statements as the backend allows (on PostgreSQL one INSERT of arrays per
// 10,000 rows), the unique ones one by one. It returns the results in the
// order of params. The jobs that are not unique are inserted together or
// not at all; a failure after that leaves them inserted. Errors as
// [Client.Insert]; with bad input nothing is inserted.
func (c *Client) InsertMany(ctx context.Context, params []InsertParams) ([]InsertResult, error) {
	return c.insertMany(ctx, c.store, params, false)
}

// InsertManyTx is [Client.InsertMany] inside tx, the caller's open
// transaction (see [Client.InsertTx]).
func (c *Client) InsertManyTx(ctx context.Context, tx any, params []InsertParams) ([]InsertResult, error) {
	store, err := c.txStore(tx)
	if err != nil {
		return nil, err
	}
	return c.insertMany(ctx, store, params, true)
}

// txStore returns the job store bound to tx, or, for a store that is not
// a dao.TxBinder, an error wrapping dao.ErrInvalidArgument and
// errors.ErrUnsupported.
func (c *Client) txStore(tx any) (dao.Store[Row], error) {
	if c.txb == nil {
		return nil, fmt.Errorf("jobs: insert: %w: %w: store %T runs no caller transactions: it is not a dao.TxBinder", dao.ErrInvalidArgument, errors.ErrUnsupported, c.store)
	}
	return c.txb.WithTx(tx), nil
}

// insertMany builds the rows of params, inserts them through store and
// wakes the local queues that got available jobs (unless inTx: the
// caller's transaction has not committed yet; PostgreSQL's notification
// or the change signal wakes the queues once it has).
func (c *Client) insertMany(ctx context.Context, store dao.Store[Row], params []InsertParams, inTx bool) ([]InsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: insert: %w", err)
	}
	rows := make([]*Row, len(params))
	for i, p := range params {
		if rows[i], err = c.newRow(p.Args, p.Opts, now); err != nil {
			return nil, fmt.Errorf("jobs: insert: job %d: %w", i, err)
		}
	}
	return c.insertBuilt(ctx, store, rows, inTx, now)
}

// insertBuilt inserts rows, built at now, through store (the insert
// middleware around it), wakes the local queues that got available jobs
// and, unless inTx, promotes the sequences of the inserted jobs (see
// promoteInserted).
func (c *Client) insertBuilt(ctx context.Context, store dao.Store[Row], rows []*Row, inTx bool, now time.Time) ([]InsertResult, error) {
	out, err := c.insertChain(ctx, rows, func(ctx context.Context) ([]InsertResult, error) {
		return insertRows(ctx, store, rows, inTx)
	})
	if err != nil {
		return out, err
	}
	if len(out) != len(rows) {
		return out, fmt.Errorf("jobs: insert: the insert middleware returned %d results for %d jobs", len(out), len(rows))
	}
	woken := map[string]bool{}
	for i := range out {
		j := out[i].Job
		j.present(now)
		if !inTx && j.State == StateAvailable && !woken[j.Queue] {
			woken[j.Queue] = true
			c.wake(j.Queue)
		}
	}
	c.wakeLocal(woken)
	if !inTx {
		c.promoteInserted(ctx, out)
	}
	return out, nil
}

// insertRows inserts rows through store: those that are not unique in
// one Create, then the unique ones one by one (inTx: inside the caller's
// transaction). It returns the results in the order of rows.
func insertRows(ctx context.Context, store dao.Store[Row], rows []*Row, inTx bool) ([]InsertResult, error) {
	out := make([]InsertResult, len(rows))
	var plain []*Row
	for i, r := range rows {
		if r.UniqueKey == nil {
			plain = append(plain, r)
			out[i].Job = r
		}
	}
	if err := store.Create(ctx, plain...); err != nil {
		return nil, fmt.Errorf("jobs: insert: %w", err)
	}
	for i, r := range rows {
		if r.UniqueKey == nil {
			continue
		}
		var err error
		if out[i], err = insertUnique(ctx, store, r, inTx); err != nil {
			return out[:i], fmt.Errorf("jobs: insert: job %d: %w", i, err)
		}
	}
	return out, nil
}

// uniqueInsertTries bounds the tries of one unique insert: each insert
// that a conflict aborted, or that found the key released again before
// it could read the holder, is one try.
const uniqueInsertTries = 10

// insertUnique inserts r unless a job holds its unique key, and returns
// the job holding the key: r, or the other one. A holder that releases
// the key between the two statements makes it try again. Outside a
// transaction (inTx false) an insert aborted by a conflict
// (dao.ErrConflict) is tried again after a short pause: on a MariaDB
// Galera Cluster two inserts of one key through two nodes both succeed
// on their node and certification aborts the later one at commit with a
// deadlock (1213); tried again, it finds the key held once its node has
// applied the other insert. Inside the caller's transaction the conflict
// is returned: the database rolled the transaction back.
func insertUnique(ctx context.Context, store dao.Store[Row], r *Row, inTx bool) (InsertResult, error) {
	var conflict error
	for try := range uniqueInsertTries {
		n, err := creator(store).CreateIfAbsent(ctx, r)
		if err != nil {
			if inTx || !errors.Is(err, dao.ErrConflict) {
				return InsertResult{}, err
			}
			conflict = err
			if err := pause(ctx, uniqueConflictPause(try)); err != nil {
				return InsertResult{}, fmt.Errorf("unique key %s: %w (after %w)", *r.UniqueKey, err, conflict)
			}
			continue
		}
		got, err := store.Find(ctx, dao.Query{Where: dao.Eq(ColUniqueKey, *r.UniqueKey), Limit: 1})
		if err != nil {
			return InsertResult{}, err
		}
		if len(got) == 1 {
			return InsertResult{Job: &got[0], UniqueSkippedAsDuplicate: n == 0}, nil
		}
	}
	if conflict != nil {
		return InsertResult{}, fmt.Errorf("unique key %s: %d tries aborted by conflicts or finding the key released, the last conflict: %w", *r.UniqueKey, uniqueInsertTries, conflict)
	}
	return InsertResult{}, fmt.Errorf("unique key %s held and released repeatedly: %w", *r.UniqueKey, dao.ErrConflict)
}

// uniqueConflictPause is the pause before try+1 of a unique insert that
// a conflict aborted: 5 ms doubling to at most 200 ms, spread by up to
// half again at random so that the callers of one key do not meet again.
func uniqueConflictPause(try int) time.Duration {
	d := min(5*time.Millisecond<<min(try, 6), 200*time.Millisecond)
	return d + rand.N(d/2+1)
}

// pause waits for d, or returns ctx's error if it ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// creator returns store's CreateIfAbsent, or an emulation by Create that
// counts a duplicate as absent-skipped.
func creator(store dao.Store[Row]) dao.IdempotentCreator[Row] {
	if a, ok := store.(dao.IdempotentCreator[Row]); ok {
		return a
	}
	return createFunc(func(ctx context.Context, items ...*Row) (int64, error) {
		var n int64
		for _, it := range items {
			cp := *it
			err := store.Create(ctx, &cp)
			switch {
			case err == nil:
				n++
			case !errors.Is(err, dao.ErrDuplicate):
				return n, err
			}
		}
		return n, nil
	})
}

type createFunc func(ctx context.Context, items ...*Row) (int64, error)

func (f createFunc) CreateIfAbsent(ctx context.Context, items ...*Row) (int64, error) {
	return f(ctx, items...)
}

// merged returns the insert options of args with opts laid over them,
// field by field.
func merged(args Args, opts *InsertOpts) InsertOpts {
	var o InsertOpts
	if a, ok := args.(ArgsWithInsertOpts); ok {
		o = a.InsertOpts()
	}
	if opts == nil {
		return o
	}
	if opts.Queue != "" {
		o.Queue = opts.Queue
	}
	if opts.Priority != 0 {
		o.Priority = opts.Priority
	}
	if !opts.ScheduledAt.IsZero() {
		o.ScheduledAt = opts.ScheduledAt
	}
	if opts.MaxAttempts != 0 {
		o.MaxAttempts = opts.MaxAttempts
	}
	if opts.Tags != nil {
		o.Tags = opts.Tags
	}
	if opts.Metadata != nil {
		o.Metadata = opts.Metadata
	}
	if !opts.UniqueOpts.isZero() {
		o.UniqueOpts = opts.UniqueOpts
	}
	if opts.uniqueKey != "" {
		o.uniqueKey = opts.uniqueKey
	}
	if !opts.Sequence.isZero() {
		o.Sequence = opts.Sequence
	}
	return o
}

// newRow returns the row of a job with args and opts inserted at now.
// Errors wrap dao.ErrInvalidArgument.
func (c *Client) newRow(args Args, opts *InsertOpts, now time.Time) (*Row, error) {
	if args == nil {
		return nil, argerr.Errorf("nil args")
	}
	kind := args.Kind()
	if err := CheckKind(kind); err != nil {
		return nil, err
	}
	if c.cfg.Workers != nil && !c.cfg.SkipUnknownJobCheck && c.cfg.Workers.lookup(kind) == nil {
		return nil, fmt.Errorf("kind %q has no worker in the client's Workers (Config.SkipUnknownJobCheck inserts it for other clients): %w: %w",
			kind, ErrUnknownKind, dao.ErrInvalidArgument)
	}
	o := merged(args, opts)
	if o.Queue == "" {
		o.Queue = DefaultQueue
	}
	if err := CheckQueue(o.Queue); err != nil {
		return nil, err
	}
	if o.Priority == 0 {
		o.Priority = DefaultPriority
	}
	if o.Priority < 1 || o.Priority > MaxPriority {
		return nil, argerr.Errorf("priority %d: use 1 to %d", o.Priority, MaxPriority)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = c.cfg.MaxAttempts
	}
	if o.MaxAttempts < 1 {
		return nil, argerr.Errorf("max attempts %d: use 1 or more", o.MaxAttempts)
	}
	encoded, err := encodeArgs(kind, args, c.cfg.MaxArgsSize)
	if err != nil {
		return nil, err
	}
	r := &Row{
		Kind: kind, Queue: o.Queue, State: StateAvailable, Priority: o.Priority,
		EncodedArgs: encoded, MaxAttempts: o.MaxAttempts, ScheduledAt: now,
	}
	if !o.ScheduledAt.IsZero() {
		// A time in the past is kept: it orders the job among the
		// available ones.
		r.ScheduledAt = o.ScheduledAt.UTC()
		if r.ScheduledAt.After(now) {
			r.State = StateScheduled
		}
	}
	if len(o.Tags) > 0 {
		if err := checkTags(o.Tags); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(o.Tags)
		r.Tags = string(b)
	}
	if o.Metadata != nil {
		m, err := compactObject(o.Metadata)
		if err != nil {
			return nil, err
		}
		r.Metadata = m
	}
	switch {
	case o.uniqueKey != "":
		r.UniqueKey = &o.uniqueKey
		r.UniqueStates = stateMask(States())
	case !o.UniqueOpts.isZero():
		key, mask, err := uniqueKey(kind, args, r, o.UniqueOpts)
		if err != nil {
			return nil, err
		}
		r.UniqueKey, r.UniqueStates = &key, mask
	}
	if err := o.Sequence.apply(r); err != nil {
		return nil, err
	}
	return r, nil
}

// checkTags returns nil when every tag is valid. Errors wrap
// dao.ErrInvalidArgument.
func checkTags(tags []string) error {
	for _, t := range tags {
		if len(t) > MaxTagLen || !nameRE.MatchString(t) {
			return argerr.Errorf("tag %q: use 1-%d letters, digits, '_', '.', ':' or '-'", t, MaxTagLen)
		}
	}
	return nil
}

// compactObject returns metadata, a JSON object, compacted. Errors wrap
// dao.ErrInvalidArgument.
func compactObject(metadata []byte) (string, error) {
	m := bytes.TrimSpace(metadata)
	if !json.Valid(m) || len(m) == 0 || m[0] != '{' {
		return "", argerr.Errorf("metadata is not a JSON object")
	}
	if !utf8.Valid(m) {
		return "", argerr.Errorf("metadata holds text that is not UTF-8")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		return "", argerr.Errorf("metadata: %v", err)
	}
	return buf.String(), nil
}

// checkMutable checks again the columns of r that insert middleware may
// change (Metadata and Tags), compacting its metadata. Errors wrap
// dao.ErrInvalidArgument.
func checkMutable(r *Row) error {
	if r.Metadata != "" {
		m, err := compactObject([]byte(r.Metadata))
		if err != nil {
			return err
		}
		r.Metadata = m
	}
	if r.Tags != "" {
		var tags []string
		if err := json.Unmarshal([]byte(r.Tags), &tags); err != nil {
			return argerr.Errorf("tags are not a JSON array of strings: %v", err)
		}
		if err := checkTags(tags); err != nil {
			return err
		}
	}
	return nil
}

// stateMask returns the bit mask of states.
func stateMask(states []State) int {
	m := 0
	for _, s := range states {
		m |= s.bit()
	}
	return m
}

// uniqueKey returns the unique key of r (kind, and the properties u
// chooses) and the mask of its unique states.
func uniqueKey(kind string, args Args, r *Row, u UniqueOpts) (string, int, error) {
	states := u.ByState
	if len(states) == 0 {
		states = DefaultUniqueStates()
	}
	for _, s := range states {
		if !s.valid() {
			return "", 0, argerr.Errorf("unique state %q", s)
		}
	}
	for _, must := range []State{StateAvailable, StateScheduled, StateRunning} {
		if !slices.Contains(states, must) {
			return "", 0, argerr.Errorf("unique states must include %s", must)
		}
	}
	if u.ByPeriod < 0 {
		return "", 0, argerr.Errorf("negative unique period %v", u.ByPeriod)
	}
	var b strings.Builder
	b.WriteString("kind=" + kind)
	if u.ByArgs {
		uniqueArgs, err := uniqueArgsOf(args, r.EncodedArgs)
		if err != nil {
			return "", 0, err
		}
		b.WriteString("&args=" + uniqueArgs)
	}
	if u.ByPeriod > 0 {
		b.WriteString("&period=" + strconv.FormatInt(r.ScheduledAt.Truncate(u.ByPeriod).Unix(), 10))
	}
	if u.ByQueue {
		b.WriteString("&queue=" + r.Queue)
	}
	sum := sha256.Sum256([]byte(b.String()))
	// Pending comes before available: a job that holds its key when
	// available holds it while it waits to be.
	return hex.EncodeToString(sum[:]), stateMask(states) | StatePending.bit(), nil
}

// uniqueFields caches, per args type, the JSON names and field indexes of
// the fields tagged `jobs:"unique"` (none: the whole args).
var uniqueFields sync.Map // reflect.Type -> []uniqueField

// uniqueField is one field of an args type that a unique key includes.
type uniqueField struct {
	name  string // its JSON key
	index int
}

// uniqueArgsOf returns the part of args that a unique key by args holds:
// encoded, the whole args' JSON, when the type tags no field
// `jobs:"unique"`, else a JSON object of the tagged fields by their JSON
// names, keys sorted.
func uniqueArgsOf(args Args, encoded string) (string, error) {
	v := reflect.ValueOf(args)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return encoded, nil
	}
	fields := fieldsOf(v.Type())
	if len(fields) == 0 {
		return encoded, nil
	}
	obj := make(map[string]any, len(fields))
	for _, f := range fields {
		obj[f.name] = v.Field(f.index).Interface()
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", argerr.Errorf("unique args of kind %s do not encode as JSON: %v", args.Kind(), err)
	}
	return string(b), nil
}

// fieldsOf returns the fields of struct type t tagged `jobs:"unique"`.
func fieldsOf(t reflect.Type) []uniqueField {
	if f, ok := uniqueFields.Load(t); ok {
		return f.([]uniqueField)
	}
	var out []uniqueField
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() || !slices.Contains(strings.Split(sf.Tag.Get("jobs"), ","), "unique") {
			continue
		}
		name := sf.Name
		if tag, _, _ := strings.Cut(sf.Tag.Get("json"), ","); tag != "" && tag != "-" {
			name = tag
		}
		out = append(out, uniqueField{name: name, index: i})
	}
	uniqueFields.Store(t, out)
	return out
}

package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/claimstore/claimstore/internal/argerr"
)

// Args is the type of a job's arguments. Kind names the type in the job
// table and selects its worker; it must be constant for the type and
// return the same on a zero value. Args are stored as JSON
// (encoding/json), so their fields must marshal.
type Args interface {
	Kind() string
}

// ArgsWithInsertOpts is implemented by args types that carry their own
// default insert options (queue, priority, max attempts, unique...). The
// options given to an insert call take precedence field by field.
type ArgsWithInsertOpts interface {
	Args
	InsertOpts() InsertOpts
}

// Job is a running job handed to a work function: its row (the state is
// [StateRunning], Attempt counts this attempt) and its decoded args.
type Job[A Args] struct {
	*Row
	// Args are the job's args, decoded from the row's JSON.
	Args A
}

// Worker runs jobs whose args are of type A. Work returns nil for success
// (the job is completed); an error fails the attempt (the job is retried
// after its backoff, or discarded after its last attempt); [Cancel] and
// [Snooze] errors end or postpone the job. A panic fails the attempt with
// the panic's value and stack recorded. ctx ends when the job is
// cancelled (cause [ErrCancelled]), times out (cause [ErrTimeout]), loses
// its lease, or the client drains.
type Worker[A Args] interface {
	Work(ctx context.Context, job *Job[A]) error
}

// WorkFunc is a function that is a [Worker].
type WorkFunc[A Args] func(ctx context.Context, job *Job[A]) error

// Work calls f.
func (f WorkFunc[A]) Work(ctx context.Context, job *Job[A]) error { return f(ctx, job) }

// Backoff returns how long a job waits before its next attempt after
// attempt (from 1) failed.
type Backoff func(attempt int) time.Duration

// DefaultBackoff waits attempt⁴ seconds, spread by ±10 % so that jobs that
// failed together do not retry together: 1 s after the first failure,
// 16 s after the second, 81 s, 4 min 16 s, ..., about 4.5 days after the
// 25th. The wait is capped at 30 days.
func DefaultBackoff(attempt int) time.Duration {
	a := float64(max(attempt, 1))
	secs := math.Min(a*a*a*a, 30*24*3600)
	jitter := 0.9 + 0.2*rand.Float64()
	return time.Duration(secs * jitter * float64(time.Second))
}

// Job timeouts.
const (
	// DefaultTimeout is the longest a job's attempt runs before its
	// context ends with cause [ErrTimeout].
	DefaultTimeout = time.Minute
	// NoTimeout, as a timeout, lets attempts run until they return.
	NoTimeout time.Duration = -1
)

// WorkerOption configures the worker of one kind ([AddWorker]).
type WorkerOption func(*kindWorker)

// WithTimeout sets the kind's attempt timeout: d > 0, or [NoTimeout].
// Default [DefaultTimeout]. The work's context has the deadline of the
// attempt's start plus d (its Deadline method says it) and ends then,
// whatever d, with context.DeadlineExceeded and cause [ErrTimeout], as a
// context of context.WithTimeoutCause does.
func WithTimeout(d time.Duration) WorkerOption {
	return func(k *kindWorker) { k.timeout = d }
}

// WithBackoff sets the kind's retry backoff; default [DefaultBackoff].
func WithBackoff(b Backoff) WorkerOption {
	return func(k *kindWorker) { k.backoff = b }
}

// kindWorker is the registered worker of one kind.
type kindWorker struct {
	kind       string
	timeout    time.Duration
	backoff    Backoff
	middleware []WorkMiddleware // see WithMiddleware
	// decode decodes row's args into the Args of a new Job of the
	// kind's Args type and returns the *Job, its Row not set yet: the
	// one allocation of the job's work.
	decode func(row *Row) (any, error)
	// work sets row as the Row of args, a *Job decode returned, and
	// runs the worker with it.
	work func(ctx context.Context, row *Row, args any) error
}

// run decodes row's args, unless the client did already (row.args), and
// runs the worker.
func (k *kindWorker) run(ctx context.Context, row *Row) error {
	d := row.args
	if !d.ok {
		d.v, d.err = k.decode(row)
	}
	if d.err != nil {
		return d.err
	}
	return k.work(ctx, row, d.v)
}

// Workers is the registry of work functions by kind that a [Client] runs
// jobs with. Fill it with [AddWorker] before the client runs. It is safe
// for concurrent use.
type Workers struct {
	mu    sync.RWMutex
	kinds map[string]*kindWorker
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{kinds: map[string]*kindWorker{}} }

// AddWorker registers w as the worker of the kind of A. Errors wrap
// dao.ErrInvalidArgument: a nil registry or worker, a kind [CheckKind]
// refuses, a kind already registered, A not a struct type, a timeout
// that is neither positive nor [NoTimeout].
func AddWorker[A Args](ws *Workers, w Worker[A], opts ...WorkerOption) error {
	if ws == nil || w == nil {
		return fmt.Errorf("jobs: add worker: %w", argerr.Errorf("nil registry or worker"))
	}
	var zero A
	if t := reflect.TypeFor[A](); t.Kind() != reflect.Struct {
		return fmt.Errorf("jobs: add worker: %w", argerr.Errorf("args type %v is not a struct", t))
	}
	kind := zero.Kind()
	if err := CheckKind(kind); err != nil {
		return fmt.Errorf("jobs: add worker: %w", err)
	}
	k := &kindWorker{kind: kind, timeout: DefaultTimeout, backoff: DefaultBackoff}
	for _, o := range opts {
		o(k)
	}
	if k.timeout <= 0 && k.timeout != NoTimeout {
		return fmt.Errorf("jobs: add worker %s: %w", kind, argerr.Errorf("timeout %v: use > 0 or NoTimeout", k.timeout))
	}
	if k.backoff == nil {
		k.backoff = DefaultBackoff
	}
	k.decode = func(row *Row) (any, error) {
		j := new(Job[A])
		if err := json.Unmarshal([]byte(row.EncodedArgs), &j.Args); err != nil {
			return nil, fmt.Errorf("jobs: decode args of %s job %d: %w", kind, row.ID, err)
		}
		return j, nil
	}
	k.work = func(ctx context.Context, row *Row, args any) error {
		j := args.(*Job[A])
		j.Row = row
		return w.Work(ctx, j)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.kinds == nil {
		ws.kinds = map[string]*kindWorker{}
	}
	if _, dup := ws.kinds[kind]; dup {
		return fmt.Errorf("jobs: add worker: %w", argerr.Errorf("kind %q already has a worker", kind))
	}
	ws.kinds[kind] = k
	return nil
}

// lookup returns the worker of kind, or nil.
func (ws *Workers) lookup(kind string) *kindWorker {
	if ws == nil {
		return nil
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return ws.kinds[kind]
}

// Kinds returns the registered kinds, sorted; none for a nil registry.
func (ws *Workers) Kinds() []string {
	if ws == nil {
		return nil
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return slices.Sorted(maps.Keys(ws.kinds))
}

// Work runs the work registered for row's kind on row as a client runs a
// claimed job, without a store or a client: it decodes row's args, runs
// the kind's own middleware ([WithMiddleware]) and work function with the
// kind's timeout (the context ends with cause [ErrTimeout] once it has
// passed), and turns a panic into a [*PanicError]. It returns the work's
// error: nil, an error, a [*CancelError], a [*SnoozeError], a
// [*PanicError]; or an error wrapping [ErrUnknownKind] when no worker is
// registered for the kind, and the decoding error of args that do not
// decode. Nothing is written anywhere; package jobstest builds on it to
// test work functions.
func (ws *Workers) Work(ctx context.Context, row *Row) error {
	if row == nil {
		return fmt.Errorf("jobs: work: %w", argerr.Errorf("nil row"))
	}
	kw := ws.lookup(row.Kind)
	if kw == nil {
		return fmt.Errorf("jobs: work: %w %q", ErrUnknownKind, row.Kind)
	}
	if kw.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, kw.timeout, ErrTimeout)
		defer cancel()
	}
	return runWork(ctx, nil, kw, row)
}

package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// ErrTerminal reports an operation that needs a live schedule (pause) on
// one that is fired or failed.
var ErrTerminal = errors.New("dispatch: schedule is fired or failed")

// Spec defines a schedule for [Schedules.Add] and [Schedules.Upsert].
type Spec struct {
	// Key is the schedule's unique name: 1 to MaxKeyLen bytes.
	Key string
	// Cron, when set, makes a cron schedule (see [CheckCron]); empty makes
	// a once schedule.
	Cron string
	// TimeZone is the IANA zone of Cron; empty is UTC. Only for cron.
	TimeZone string
	// At is the fire time of a once schedule; zero is now. Ignored for
	// cron (the first fire is the next occurrence after now).
	At time.Time
	// Payload is handed to the handler.
	Payload []byte
	// MaxFailures is the number of consecutive failures at which a once
	// schedule fails and a cron schedule skips ahead; 0 takes
	// [SchedulesConfig].MaxFailures, negative is invalid.
	MaxFailures int
}

// SchedulesConfig configures [NewSchedules]; zero fields take defaults.
type SchedulesConfig struct {
	// MaxFailures is the default MaxFailures of new schedules; default 5.
	MaxFailures int
	// Now overrides the clock that computes next fire times (a fake
	// clock in tests); by default the database's clock when the store
	// reads one, else the host's, as for [Config].Now.
	Now func() time.Time
}

// Schedules adds, changes, reads and deletes schedules by key. It is safe
// for concurrent use.
type Schedules struct {
	store dao.Store[Schedule]
	cfg   SchedulesConfig
	clock *timeSource
	txb   dao.TxBinder[Schedule] // the store's, nil when it has none
	err   error                  // set by WithTx when the transaction cannot be bound
}

// NewSchedules returns the schedule API over store, a store of the
// [Schedule] table. Errors wrap [dao.ErrInvalidArgument] (nil store,
// negative MaxFailures); it does no I/O.
func NewSchedules(store dao.Store[Schedule], cfg SchedulesConfig) (*Schedules, error) {
	if store == nil {
		return nil, fmt.Errorf("dispatch: new schedules: %w", argerr.Errorf("nil store"))
	}
	if cfg.MaxFailures < 0 {
		return nil, fmt.Errorf("dispatch: new schedules: %w", argerr.Errorf("negative max failures %d", cfg.MaxFailures))
	}
	if cfg.MaxFailures == 0 {
		cfg.MaxFailures = DefaultMaxFailures
	}
	txb, _ := store.(dao.TxBinder[Schedule])
	return &Schedules{store: store, cfg: cfg, clock: newTimeSource(cfg.Now, store, store.Capabilities().DatabaseClock), txb: txb}, nil
}

// WithTx returns a Schedules whose calls run inside tx, the caller's open
// transaction (a *gorm.DB for the SQL backends; see dao.Table.WithTx), so
// a schedule commits or rolls back with the business change that made it.
// When the store cannot bind tx every call of the result fails with an
// error wrapping [dao.ErrInvalidArgument]; when the store is not a
// [dao.TxBinder] at all (a wrapper store that does not forward it) that
// error also wraps errors.ErrUnsupported.
//
// Inside a transaction, a concurrent Add of the same key in another
// transaction can make Add fail with [dao.ErrDuplicate] (on PostgreSQL the
// transaction is then aborted): retry the transaction, and Add finds the
// committed row.
func (s *Schedules) WithTx(tx any) *Schedules {
	c := *s
	if s.txb == nil {
		c.err = fmt.Errorf("with tx: %w: %w: store %T is not a dao.TxBinder", dao.ErrInvalidArgument, errors.ErrUnsupported, s.store)
		return &c
	}
	c.store = s.txb.WithTx(tx)
	return &c
}

func (s *Schedules) check(sp *Spec) error {
	if sp.Key == "" || len(sp.Key) > MaxKeyLen {
		return argerr.Errorf("key must be 1 to %d bytes, got %d", MaxKeyLen, len(sp.Key))
	}
	if sp.MaxFailures < 0 {
		return argerr.Errorf("negative max failures %d", sp.MaxFailures)
	}
	if sp.MaxFailures == 0 {
		sp.MaxFailures = s.cfg.MaxFailures
	}
	if sp.Cron == "" {
		if sp.TimeZone != "" {
			return argerr.Errorf("time zone %q without a cron expression", sp.TimeZone)
		}
		return nil
	}
	if len(sp.Cron) > MaxCronLen || len(sp.TimeZone) > MaxZoneLen {
		return argerr.Errorf("cron expression or time zone too long")
	}
	return CheckCron(sp.Cron, sp.TimeZone)
}

// row builds the new row of sp at now.
func (s *Schedules) row(sp Spec, now time.Time) (*Schedule, error) {
	r := &Schedule{Key: sp.Key, Kind: KindOnce, Status: StatusActive, MaxFailures: sp.MaxFailures, Payload: sp.Payload}
	if sp.Cron == "" {
		r.NextFireAt = now
		if !sp.At.IsZero() {
			r.NextFireAt = sp.At.UTC()
		}
		return r, nil
	}
	r.Kind, r.Cron, r.TimeZone = KindCron, sp.Cron, sp.TimeZone
	next, err := NextCron(sp.Cron, sp.TimeZone, now)
	if err != nil {
		return nil, err
	}
	r.NextFireAt = next
	return r, nil
}

// Add creates the schedule sp unless one with its key exists; it returns
// the stored schedule and whether Add created it. It is idempotent and
// race-safe: of concurrent Adds of one key one inserts, the others get the
// inserted row (the unique index on the key decides). An existing
// schedule is returned unchanged even when its definition differs from sp
// (see [Schedules.Upsert] to replace it). A cron expression with no
// future occurrence is [ErrNoNextOccurrence].
//
// Errors: [dao.ErrInvalidArgument] for a bad spec, store errors wrapped.
func (s *Schedules) Add(ctx context.Context, sp Spec) (Schedule, bool, error) {
	if err := s.check(&sp); err != nil {
		return Schedule{}, false, fmt.Errorf("dispatch: add %q: %w", sp.Key, err)
	}
	if got, err := s.Get(ctx, sp.Key); err == nil {
		return got, false, nil
	} else if !errors.Is(err, dao.ErrNotFound) {
		return Schedule{}, false, fmt.Errorf("dispatch: add %q: %w", sp.Key, err)
	}
	now, err := s.now(ctx)
	if err != nil {
		return Schedule{}, false, fmt.Errorf("dispatch: add %q: %w", sp.Key, err)
	}
	r, err := s.row(sp, now)
	if err != nil {
		return Schedule{}, false, fmt.Errorf("dispatch: add %q: %w", sp.Key, err)
	}
	err = s.store.Create(ctx, r)
	if err == nil {
		return *r, true, nil
	}
	if !errors.Is(err, dao.ErrDuplicate) {
		return Schedule{}, false, fmt.Errorf("dispatch: add %q: %w", sp.Key, err)
	}
	got, gerr := s.Get(ctx, sp.Key)
	if gerr != nil {
		return Schedule{}, false, fmt.Errorf("dispatch: add %q: %w (read after it: %w)", sp.Key, err, gerr)
	}
	return got, false, nil
}

// AddMany creates each schedule of specs whose key no stored schedule (nor
// an earlier spec) holds, and returns how many it created; existing
// schedules are left unchanged, as by [Schedules.Add]. Every spec is
// checked first: a bad one fails the call with [dao.ErrInvalidArgument]
// and nothing is written. The next fire times are computed from one read
// of the clock. Over a store with CreateIfAbsent (every store the
// backends return) the rows go in multi-row INSERTs that skip existing
// keys (ON CONFLICT DO NOTHING, INSERT IGNORE): each INSERT is atomic, the
// call as a whole is not (inside [Schedules.WithTx] the transaction
// decides). Otherwise it calls Add for each spec.
//
// Errors: [dao.ErrInvalidArgument] for a bad spec; store errors wrapped,
// with the number created before the error.
func (s *Schedules) AddMany(ctx context.Context, specs []Spec) (int, error) {
	if s.err != nil {
		return 0, fmt.Errorf("dispatch: add many: %w", s.err)
	}
	if len(specs) == 0 {
		return 0, nil
	}
	checked := make([]Spec, len(specs))
	for i, sp := range specs {
		if err := s.check(&sp); err != nil {
			return 0, fmt.Errorf("dispatch: add many: spec %d (%q): %w", i, sp.Key, err)
		}
		checked[i] = sp
	}
	ac, bulk := s.store.(dao.IdempotentCreator[Schedule])
	if !bulk {
		created := 0
		for _, sp := range checked {
			_, ok, err := s.Add(ctx, sp)
			if err != nil {
				return created, fmt.Errorf("dispatch: add many: %w", err)
			}
			if ok {
				created++
			}
		}
		return created, nil
	}
	now, err := s.now(ctx)
	if err != nil {
		return 0, fmt.Errorf("dispatch: add many: %w", err)
	}
	rows := make([]*Schedule, len(checked))
	for i, sp := range checked {
		if rows[i], err = s.row(sp, now); err != nil {
			return 0, fmt.Errorf("dispatch: add many: spec %d (%q): %w", i, sp.Key, err)
		}
	}
	n, err := ac.CreateIfAbsent(ctx, rows...)
	if err != nil {
		return int(n), fmt.Errorf("dispatch: add many: %w", err)
	}
	return int(n), nil
}

// Upsert creates the schedule sp, or replaces the definition of the
// schedule with its key and re-arms it: kind, cron expression, zone,
// payload and max failures from sp, status active, failure count 0, next
// fire time recomputed (once: At or now; cron: the next occurrence after
// now), lease cleared (an in-flight fire's outcome is then refused by the
// fence). When the stored definition already equals sp (and, for once,
// NextFireAt equals At), nothing is written. It returns the stored
// schedule. Concurrent Upserts of one key leave one of their definitions.
//
// Errors: as [Schedules.Add].
func (s *Schedules) Upsert(ctx context.Context, sp Spec) (Schedule, error) {
	got, created, err := s.Add(ctx, sp)
	if err != nil || created {
		return got, err
	}
	_ = s.check(&sp) // checked by Add; fills defaults
	if same(&got, &sp) {
		return got, nil
	}
	now, err := s.now(ctx)
	if err != nil {
		return Schedule{}, fmt.Errorf("dispatch: upsert %q: %w", sp.Key, err)
	}
	r, err := s.row(sp, now)
	if err != nil {
		return Schedule{}, fmt.Errorf("dispatch: upsert %q: %w", sp.Key, err)
	}
	set := dao.Set{
		ColKind: string(r.Kind), ColCron: r.Cron, ColTimeZone: r.TimeZone, ColPayload: r.Payload,
		ColMaxFailures: r.MaxFailures, ColStatus: string(StatusActive), ColFailureCount: 0,
		ColNextFireAt: r.NextFireAt, ColLeaseOwner: "", ColLeaseUntil: nil,
	}
	n, err := s.store.Update(ctx, dao.Eq(ColKey, sp.Key), set)
	if err != nil {
		return Schedule{}, fmt.Errorf("dispatch: upsert %q: %w", sp.Key, err)
	}
	if n == 0 { // deleted meanwhile: create it again
		return s.Upsert(ctx, sp)
	}
	return s.Get(ctx, sp.Key)
}

// same reports whether the stored schedule got has the definition sp.
func same(got *Schedule, sp *Spec) bool {
	kind := KindOnce
	if sp.Cron != "" {
		kind = KindCron
	}
	if got.Kind != kind || got.Cron != sp.Cron || got.TimeZone != sp.TimeZone || got.MaxFailures != sp.MaxFailures ||
		!bytes.Equal(got.Payload, sp.Payload) {
		return false
	}
	if kind == KindOnce && !sp.At.IsZero() {
		d := got.NextFireAt.Sub(sp.At)
		return d > -time.Millisecond && d < time.Millisecond // MySQL keeps milliseconds
	}
	return true
}

// Get returns the schedule with key. Errors: [dao.ErrNotFound] when no
// schedule has key; the store's errors, wrapped.
func (s *Schedules) Get(ctx context.Context, key string) (Schedule, error) {
	if s.err != nil {
		return Schedule{}, fmt.Errorf("dispatch: get %q: %w", key, s.err)
	}
	rows, err := s.store.Find(ctx, dao.Query{Where: dao.Eq(ColKey, key), Limit: 1})
	if err != nil {
		return Schedule{}, fmt.Errorf("dispatch: get %q: %w", key, err)
	}
	if len(rows) == 0 {
		return Schedule{}, fmt.Errorf("dispatch: get %q: %w", key, dao.ErrNotFound)
	}
	return rows[0], nil
}

// ListOptions selects schedules for [Schedules.List].
type ListOptions struct {
	// Status, when set, lists only schedules in that state.
	Status Status
	// AfterKey lists keys greater than it (paging: the last key of the
	// previous page).
	AfterKey string
	// Limit is the most schedules returned; default 100.
	Limit int
}

// List returns schedules in key order. Errors: [dao.ErrInvalidArgument]
// for a negative limit; store errors wrapped.
func (s *Schedules) List(ctx context.Context, o ListOptions) ([]Schedule, error) {
	if s.err != nil {
		return nil, fmt.Errorf("dispatch: list: %w", s.err)
	}
	if o.Limit < 0 {
		return nil, fmt.Errorf("dispatch: list: %w", argerr.Errorf("negative limit %d", o.Limit))
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	var where []dao.Criteria
	if o.Status != "" {
		where = append(where, dao.Eq(ColStatus, string(o.Status)))
	}
	if o.AfterKey != "" {
		where = append(where, dao.Gt(ColKey, o.AfterKey))
	}
	rows, err := s.store.Find(ctx, dao.Query{Where: dao.And(where...), OrderBy: []dao.Order{dao.Asc(ColKey)}, Limit: o.Limit})
	if err != nil {
		return nil, fmt.Errorf("dispatch: list: %w", err)
	}
	return rows, nil
}

// Pause stops the schedule with key from firing until [Schedules.Resume];
// pausing a paused schedule changes nothing. A fire already in flight
// finishes (a once schedule may still become fired). Errors:
// [dao.ErrNotFound]; [ErrTerminal] for a fired or failed schedule; the
// store's errors, wrapped.
func (s *Schedules) Pause(ctx context.Context, key string) error {
	return s.transition(ctx, "pause", key, []Status{StatusActive, StatusPaused}, dao.Set{ColStatus: string(StatusPaused)})
}

// Resume makes a paused schedule active again, or re-arms a failed one
// (status active, failure count 0, next fire time now; LastError kept).
// Resuming an active schedule changes nothing. A cron schedule resumed
// after missing occurrences follows the worker's misfire policy. Errors:
// [dao.ErrNotFound]; [ErrTerminal] for a fired schedule; the store's and
// the database clock's errors, wrapped.
func (s *Schedules) Resume(ctx context.Context, key string) error {
	if err := s.transition(ctx, "resume", key, []Status{StatusActive, StatusPaused}, dao.Set{ColStatus: string(StatusActive)}); !errors.Is(err, ErrTerminal) {
		return err
	}
	now, err := s.now(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: resume %q: %w", key, err)
	}
	return s.transition(ctx, "resume", key, []Status{StatusFailed},
		dao.Set{ColStatus: string(StatusActive), ColFailureCount: 0, ColNextFireAt: now})
}

// transition applies set to the schedule key when its status is one of
// from.
func (s *Schedules) transition(ctx context.Context, op, key string, from []Status, set dao.Set) error {
	if s.err != nil {
		return fmt.Errorf("dispatch: %s %q: %w", op, key, s.err)
	}
	st := make([]any, len(from))
	for i, f := range from {
		st[i] = string(f)
	}
	n, err := s.store.Update(ctx, dao.And(dao.Eq(ColKey, key), dao.In(ColStatus, st...)), set)
	if err != nil {
		return fmt.Errorf("dispatch: %s %q: %w", op, key, err)
	}
	if n > 0 {
		return nil
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("dispatch: %s: %w", op, err)
	}
	return fmt.Errorf("dispatch: %s %q: status %s: %w", op, key, got.Status, ErrTerminal)
}

// Delete removes the schedule with key. Errors: [dao.ErrNotFound] when no
// schedule has key; the store's errors, wrapped.
func (s *Schedules) Delete(ctx context.Context, key string) error {
	if s.err != nil {
		return fmt.Errorf("dispatch: delete %q: %w", key, s.err)
	}
	n, err := s.store.Delete(ctx, dao.Eq(ColKey, key), 1)
	if err != nil {
		return fmt.Errorf("dispatch: delete %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("dispatch: delete %q: %w", key, dao.ErrNotFound)
	}
	return nil
}

func (s *Schedules) now(ctx context.Context) (time.Time, error) {
	if s.err != nil {
		return time.Time{}, s.err
	}
	return s.clock.Now(ctx)
}

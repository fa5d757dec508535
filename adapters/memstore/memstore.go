package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"gorm.io/gorm/schema"
)

// Option configures [New].
type Option func(*options)

type options struct {
	namer    schema.Namer
	strategy dao.Strategy
	clock    func() time.Time
}

// WithNamer parses the model with namer instead of GORM's default naming
// strategy, so that column names (and the table name the store reports)
// match those of a SQL store whose *gorm.DB has the same NamingStrategy
// (TablePrefix, SingularTable, NameReplacer, NoLowerCase). A nil namer
// keeps the default.
func WithNamer(namer schema.Namer) Option { return func(o *options) { o.namer = namer } }

// WithStrategy sets the claim strategy (see [dao.WithStrategy]): by
// default one pass under the store's mutex; [dao.StrategyPortable] reads
// and writes under separate locks as the other backends do.
func WithStrategy(s dao.Strategy) Option { return func(o *options) { o.strategy = s } }

// WithClock sets the clock the store stamps automatic timestamps and soft
// deletions with (see [dao.WithClock]); default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// New returns an empty in-memory store of T, whose schema is parsed with
// GORM's default naming strategy unless [WithNamer] gives another: the
// portable [dao.Table] over the memory driver. Its claim is one pass
// under the store's mutex ([dao.StrategyFastPath],
// [dao.LostRaceImpossible]) unless [WithStrategy] chooses
// [dao.StrategyPortable]. It fails with [dao.ErrInvalidArgument] when T is
// not a model GORM can parse with exactly one primary key.
func New[T any](opts ...Option) (*dao.Table[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d, err := newDriver[T](o.namer)
	if err != nil {
		return nil, err
	}
	daoOpts := []dao.Option{dao.WithStrategy(o.strategy)}
	if o.clock != nil {
		daoOpts = append(daoOpts, dao.WithClock(o.clock))
	}
	return dao.New[T](d, daoOpts...)
}

// memDriver is the in-memory [driver.Driver] of T.
type memDriver[T any] struct {
	model      *driver.Model[T]
	uniqueKeys [][]string

	mu     sync.Mutex
	rows   map[any]*T // by plain primary-key value
	nextID int64

	locks Locker // the store's try-locks, apart from mu
}

func newDriver[T any](namer schema.Namer) (*memDriver[T], error) {
	m, err := driver.NewModel[T](namer)
	if err != nil {
		return nil, fmt.Errorf("claimstore: memstore: %w", err)
	}
	return &memDriver[T]{model: m, uniqueKeys: m.UniqueKeys(), rows: map[any]*T{}}, nil
}

// Model returns the parsed model of T.
func (s *memDriver[T]) Model() *driver.Model[T] { return s.model }

// Info states the memory backend: strings compare as Go compares them, and
// the portable claim's lost race is skipped silently (a guarded update
// whose row no longer matches affects nothing).
func (s *memDriver[T]) Info() driver.Info {
	return driver.Info{
		Backend:   "memory",
		Table:     s.model.Table(),
		LostRace:  driver.LostRaceSkip,
		Collation: driver.Collation{Name: "binary"},
	}
}

// ClaimerInfo states the claim under the store's mutex, chosen by default.
func (s *memDriver[T]) ClaimerInfo() driver.ClaimerInfo {
	return driver.ClaimerInfo{
		Available:  true,
		Default:    true,
		RoundTrips: driver.RoundTrips{Fixed: 1},
		LostRace:   driver.LostRaceImpossible,
	}
}

// Insert stores copies of items. A zero integer primary key is assigned the
// next sequence value and written back into the item. A primary key or
// unique key already present is [driver.ErrDuplicate], and then nothing is
// stored.
func (s *memDriver[T]) Insert(ctx context.Context, items []*T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk := s.model.PrimaryKey()
	fresh := make(map[any]*T, len(items))
	next := s.nextID
	for _, it := range items {
		id := s.model.ID(it)
		if isZeroInt(id) {
			next++
			if err := s.model.Apply(it, driver.Set{pk: next}); err != nil {
				return fmt.Errorf("assign id: %w", err)
			}
			id = s.model.ID(it)
		} else if n, ok := id.(int64); ok && n > next {
			next = n
		}
		if _, dup := s.rows[id]; dup {
			return fmt.Errorf("%w: primary key %v", driver.ErrDuplicate, id)
		}
		if _, dup := fresh[id]; dup {
			return fmt.Errorf("%w: primary key %v", driver.ErrDuplicate, id)
		}
		cp := *it
		fresh[id] = &cp
	}
	if err := s.checkUnique(fresh, nil); err != nil {
		return err
	}
	for id, r := range fresh {
		s.rows[id] = r
	}
	s.nextID = next
	return nil
}

func isZeroInt(v any) bool {
	switch x := v.(type) {
	case int64:
		return x == 0
	case uint64:
		return x == 0
	}
	return false
}

// checkUnique reports ErrDuplicate when the rows in changed, together with
// the stored rows they do not replace, collide on a unique key of the model. NULL never collides, as in SQL.
//
// Only keys that share a column with touched are checked; a nil touched
// checks every key (new rows).
func (s *memDriver[T]) checkUnique(changed map[any]*T, touched driver.Set) error {
	for _, key := range s.uniqueKeys {
		if touched != nil && !slices.ContainsFunc(key, func(c string) bool { _, ok := touched[c]; return ok }) {
			continue
		}
		seen := map[string]any{}
		add := func(id any, r *T) error {
			parts := make([]string, len(key))
			for i, c := range key {
				v, _ := s.model.Value(r, c)
				if v == nil {
					return nil
				}
				parts[i] = fmt.Sprintf("%T:%v", v, v)
			}
			k := strings.Join(parts, "\x00")
			if other, dup := seen[k]; dup && other != id {
				return fmt.Errorf("%w: unique key %v", driver.ErrDuplicate, key)
			}
			seen[k] = id
			return nil
		}
		for id, r := range s.rows {
			if _, replaced := changed[id]; replaced {
				continue
			}
			if err := add(id, r); err != nil {
				return err
			}
		}
		for id, r := range changed {
			if err := add(id, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Select returns copies of the rows matching q, in q's order.
func (s *memDriver[T]) Select(ctx context.Context, q driver.Query) ([]T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.find(q), nil
}

// find is Find under s.mu, with q checked.
func (s *memDriver[T]) find(q driver.Query) []T {
	var match []*T
	for _, r := range s.rows {
		if s.model.Match(r, q.Where) {
			match = append(match, r)
		}
	}
	sort.Slice(match, func(i, j int) bool { return s.model.Less(match[i], match[j], q.OrderBy) })
	if q.Limit > 0 && len(match) > q.Limit {
		match = match[:q.Limit]
	}
	out := make([]T, len(match))
	for i, r := range match {
		out[i] = *r
	}
	return out
}

// Count returns how many rows match where.
func (s *memDriver[T]) Count(ctx context.Context, where driver.Criteria) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.rows {
		if s.model.Match(r, where) {
			n++
		}
	}
	return n, nil
}

// Update applies set to every row matching where and returns how many it
// matched. A change that would break a unique key is [driver.ErrDuplicate]
// and changes nothing.
func (s *memDriver[T]) Update(ctx context.Context, where driver.Criteria, set driver.Set) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := s.update(where, set)
	return int64(len(keys)), err
}

// UpdateKeys applies set to every row matching where under the store's
// lock and returns the primary keys of those rows (driver.KeyUpdater).
func (s *memDriver[T]) UpdateKeys(ctx context.Context, where driver.Criteria, set driver.Set) ([]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.update(where, set)
}

// update is Update under s.mu with checked arguments; it returns the keys
// of the rows it changed.
func (s *memDriver[T]) update(where driver.Criteria, set driver.Set) ([]any, error) {
	changed := map[any]*T{}
	for id, r := range s.rows {
		if !s.model.Match(r, where) {
			continue
		}
		cp := *r
		if err := s.model.Apply(&cp, set); err != nil {
			return nil, err
		}
		changed[id] = &cp
	}
	if len(changed) == 0 {
		return nil, nil
	}
	if err := s.checkUnique(changed, set); err != nil {
		return nil, err
	}
	keys := make([]any, 0, len(changed))
	for id, r := range changed {
		s.rows[id] = r
		keys = append(keys, id)
	}
	return keys, nil
}

// Delete removes at most limit rows matching where, smallest primary keys
// first.
func (s *memDriver[T]) Delete(ctx context.Context, where driver.Criteria, limit int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	victims := s.find(driver.Query{Where: where, OrderBy: []driver.Order{{Field: s.model.PrimaryKey()}}, Limit: limit})
	for i := range victims {
		delete(s.rows, s.model.ID(&victims[i]))
	}
	return int64(len(victims)), nil
}

// ReadCandidates is Select: the memory store has no statement to bound.
func (s *memDriver[T]) ReadCandidates(ctx context.Context, q driver.Query) ([]driver.Candidate[T], error) {
	rows, err := s.Select(ctx, q)
	return driver.Candidates(rows), err
}

// ClaimBatch claims under the store's mutex: the read and the writes of
// one claim exclude every other call, so no lost race is possible. It
// calls the [dao.ClaimTrace] CandidatesRead hook of ctx after its read, as
// the portable claim does, and writes nothing once ctx is done. A claim
// that would break a unique key claims the rows before it and returns
// them with the error.
func (s *memDriver[T]) ClaimBatch(ctx context.Context, req driver.ClaimRequest) ([]T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cands := s.find(driver.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if tr := dao.ContextClaimTrace(ctx); tr != nil && tr.CandidatesRead != nil && len(cands) > 0 {
		ids := make([]any, len(cands))
		for i := range cands {
			ids[i] = s.model.ID(&cands[i])
		}
		tr.CandidatesRead(ctx, ids)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nothing written: %w", err)
	}
	out := make([]T, 0, len(cands))
	for i := range cands {
		if _, err := s.claimRow(&cands[i], req.Where, req.Set); err != nil {
			return out, err
		}
		if err := s.model.Apply(&cands[i], req.Set); err != nil {
			return out, err
		}
		out = append(out, cands[i])
	}
	return out, nil
}

// ClaimRow is the guarded update of one row of the portable claim.
func (s *memDriver[T]) ClaimRow(ctx context.Context, c *driver.Candidate[T], where driver.Criteria, set driver.Set) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimRow(&c.Row, where, set)
}

// It finds the row by its primary key rather than by a scan, and leaves
// row unchanged (the caller applies set). s.mu is held.
func (s *memDriver[T]) claimRow(row *T, where driver.Criteria, set driver.Set) (bool, error) {
	id := s.model.ID(row)
	cur, ok := s.rows[id]
	if !ok || !s.model.Match(cur, where) {
		return false, nil
	}
	cp := *cur
	if err := s.model.Apply(&cp, set); err != nil {
		return false, err
	}
	changed := map[any]*T{id: &cp}
	if err := s.checkUnique(changed, set); err != nil {
		return false, err
	}
	s.rows[id] = &cp
	return true, nil
}

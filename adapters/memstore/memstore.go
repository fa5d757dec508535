package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/claimstore/claimstore/dao"
)

// Store is an in-memory [dao.Store] of T. The zero value is not usable; call
// [New]. A Store is safe for concurrent use.
type Store[T any] struct {
	model      *dao.Model[T]
	uniqueKeys [][]string

	mu     sync.Mutex
	rows   map[any]*T // by plain primary-key value
	nextID int64
}

var _ dao.Store[struct{ ID int64 }] = (*Store[struct{ ID int64 }])(nil)

// New returns an empty store for T, whose schema is parsed with GORM's
// default naming strategy. It fails with [dao.ErrInvalidArgument] when T is
// not a model GORM can parse with exactly one primary key.
func New[T any]() (*Store[T], error) {
	m, err := dao.NewModel[T](nil)
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	return &Store[T]{model: m, uniqueKeys: m.UniqueKeys(), rows: map[any]*T{}}, nil
}

// Model returns the parsed model of T.
func (s *Store[T]) Model() *dao.Model[T] { return s.model }

// Capabilities reports the portable default under one mutex: one "round
// trip" for the read plus one per candidate, and no possible lost race.
func (s *Store[T]) Capabilities() dao.Capabilities {
	return dao.Capabilities{
		Backend:         "memory",
		ClaimRoundTrips: dao.RoundTrips{Fixed: 1, PerRow: 1},
		LostRace:        dao.LostRaceImpossible,
		Collation:       dao.Collation{Name: "binary"},
	}
}

// Create stores copies of items. A zero integer primary key is assigned the
// next sequence value and written back into the item. A primary key or
// unique key already present is [dao.ErrDuplicate], and then nothing is
// stored. A nil item, or a value [dao.Model.CheckRow] refuses (one no
// other backend stores faithfully), is [dao.ErrInvalidArgument].
func (s *Store[T]) Create(ctx context.Context, items ...*T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, it := range items {
		if err := s.model.CheckRow(it); err != nil {
			return fmt.Errorf("memstore: create: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pk := s.model.PrimaryKey()
	fresh := make(map[any]*T, len(items))
	next := s.nextID
	for _, it := range items {
		if it == nil {
			return fmt.Errorf("memstore: create: %w: nil item", dao.ErrInvalidArgument)
		}
		id := s.model.ID(it)
		if isZeroInt(id) {
			next++
			if err := s.model.Apply(it, dao.Set{pk: next}); err != nil {
				return fmt.Errorf("memstore: create: assign id: %w", err)
			}
			id = s.model.ID(it)
		} else if n, ok := id.(int64); ok && n > next {
			next = n
		}
		if _, dup := s.rows[id]; dup {
			return fmt.Errorf("memstore: create: %w: primary key %v", dao.ErrDuplicate, id)
		}
		if _, dup := fresh[id]; dup {
			return fmt.Errorf("memstore: create: %w: primary key %v", dao.ErrDuplicate, id)
		}
		cp := *it
		fresh[id] = &cp
	}
	if err := s.checkUnique(fresh, nil); err != nil {
		return fmt.Errorf("memstore: create: %w", err)
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
func (s *Store[T]) checkUnique(changed map[any]*T, touched dao.Set) error {
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
				return fmt.Errorf("%w: unique key %v", dao.ErrDuplicate, key)
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

// Get returns a copy of the row with primary key id, or [dao.ErrNotFound].
func (s *Store[T]) Get(ctx context.Context, id any) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	key, err := s.model.CheckID(id)
	if err != nil {
		return zero, fmt.Errorf("memstore: get: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[key]
	if !ok {
		return zero, fmt.Errorf("memstore: get %v: %w", id, dao.ErrNotFound)
	}
	return *r, nil
}

// Find returns copies of the rows matching q, in q's order.
func (s *Store[T]) Find(ctx context.Context, q dao.Query) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := s.model.CheckQuery(q)
	if err != nil {
		return nil, fmt.Errorf("memstore: find: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.find(q), nil
}

// find is Find under s.mu, with q checked.
func (s *Store[T]) find(q dao.Query) []T {
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
func (s *Store[T]) Count(ctx context.Context, where dao.Criteria) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	where, err := s.model.CheckCriteria(where)
	if err != nil {
		return 0, fmt.Errorf("memstore: count: %w", err)
	}
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
// changed. A change that would break a unique key is [dao.ErrDuplicate] and
// changes nothing.
func (s *Store[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	where, err := s.model.CheckCriteria(where)
	if err != nil {
		return 0, fmt.Errorf("memstore: update: %w", err)
	}
	set, err = s.model.CheckSet(set)
	if err != nil {
		return 0, fmt.Errorf("memstore: update: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.update(where, set)
	if err != nil {
		return 0, fmt.Errorf("memstore: update: %w", err)
	}
	return n, nil
}

// update is Update under s.mu with checked arguments.
func (s *Store[T]) update(where dao.Criteria, set dao.Set) (int64, error) {
	changed := map[any]*T{}
	for id, r := range s.rows {
		if !s.model.Match(r, where) {
			continue
		}
		cp := *r
		if err := s.model.Apply(&cp, set); err != nil {
			return 0, err
		}
		changed[id] = &cp
	}
	if len(changed) == 0 {
		return 0, nil
	}
	if err := s.checkUnique(changed, set); err != nil {
		return 0, err
	}
	for id, r := range changed {
		s.rows[id] = r
	}
	return int64(len(changed)), nil
}

// Delete removes at most limit rows matching where, smallest primary keys
// first. limit <= 0 is [dao.ErrInvalidArgument].
func (s *Store[T]) Delete(ctx context.Context, where dao.Criteria, limit int) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("memstore: delete: %w: limit must be > 0, got %d", dao.ErrInvalidArgument, limit)
	}
	where, err := s.model.CheckCriteria(where)
	if err != nil {
		return 0, fmt.Errorf("memstore: delete: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	victims := s.find(dao.Query{Where: where, OrderBy: []dao.Order{dao.Asc(s.model.PrimaryKey())}, Limit: limit})
	for i := range victims {
		delete(s.rows, s.model.ID(&victims[i]))
	}
	return int64(len(victims)), nil
}

// Claim runs the portable default while holding the store's mutex, so the
// read and the guarded writes of one claim exclude every other call.
func (s *Store[T]) Claim(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := dao.PortableClaim(ctx, s.model, lockedOps[T]{s}, req)
	if err != nil {
		return rows, fmt.Errorf("memstore: %w", err)
	}
	return rows, nil
}

// lockedOps implements dao.PortableOps for a caller that holds s.mu.
type lockedOps[T any] struct{ s *Store[T] }

func (o lockedOps[T]) ReadCandidates(ctx context.Context, q dao.Query) ([]T, error) {
	return o.s.find(q), nil
}

// ClaimRow is the guarded update of one row, found by its primary key
// rather than by a scan of the store.
func (o lockedOps[T]) ClaimRow(ctx context.Context, row *T, where dao.Criteria, set dao.Set) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s := o.s
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

// Len returns the number of stored rows.
func (s *Store[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

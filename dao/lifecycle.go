package dao

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// This file holds the model semantics the portable layer adds to every
// backend: soft delete and automatic timestamps, read from the model's
// GORM schema once by New (driver.Model.Lifecycle).

// Unscoped returns a store that sees soft-deleted rows too, as GORM's
// db.Unscoped() does: Get, Find, Count, Update and Claim no longer add
// the live-row condition, and Delete removes rows for good (bounded as
// ever: at most limit rows, smallest primary keys first). It shares t's
// driver, clock and transaction. For a model without a soft-delete field
// it behaves as t. It does no I/O.
func (t *Table[T]) Unscoped() *Table[T] {
	c := *t
	c.unscoped = true
	return &c
}

// scoped reports whether calls on t see live rows only.
func (t *Table[T]) scoped() bool { return t.lc.SoftDelete != nil && !t.unscoped }

// scope returns where (checked) restricted to live rows when t is
// scoped: the live-row condition (deleted_at IS NULL, or = 0 for the
// soft_delete plugin's integer forms) joined with AND, so that every
// driver, and every claim statement of every dialect, carries it.
func (t *Table[T]) scope(where Criteria) Criteria {
	if !t.scoped() {
		return where
	}
	live := t.lc.SoftDelete.Live()
	if where.IsAll() {
		return live
	}
	return driver.Logic(OpAnd, []Criteria{live, where})
}

// live reports whether row is live (always true for an unscoped store).
func (t *Table[T]) live(row *T) bool {
	return !t.scoped() || t.drv.Model().Match(row, t.lc.SoftDelete.Live())
}

// stampCreate sets the zero autoCreateTime and autoUpdateTime fields of
// items to the application clock's now, as GORM's Create does, so every
// backend stores the same values and the caller's items hold them.
func (t *Table[T]) stampCreate(items []*T) error {
	if len(t.lc.Created) == 0 && len(t.lc.Updated) == 0 {
		return nil
	}
	m := t.drv.Model()
	now := t.now()
	for _, it := range items {
		rv := reflect.ValueOf(it).Elem()
		for _, group := range [][]driver.Timestamp{t.lc.Created, t.lc.Updated} {
			for _, ts := range group {
				f, err := m.Field(ts.Column)
				if err != nil {
					return err
				}
				if _, zero := f.ValueOf(context.Background(), rv); !zero {
					continue
				}
				v, err := m.Normalize(f, ts.Value(now), false)
				if err != nil {
					return err
				}
				if err := m.Apply(it, Set{ts.Column: v}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stampSet returns set (checked) with every autoUpdateTime column it does
// not write set to now: the database's current time (driver.CurrentTime)
// when dbNow, else the application clock's. set is not modified.
func (t *Table[T]) stampSet(set Set, dbNow bool) (Set, error) {
	if len(t.lc.Updated) == 0 {
		return set, nil
	}
	out := make(Set, len(set)+len(t.lc.Updated))
	for k, v := range set {
		out[k] = v
	}
	now := t.now()
	for _, ts := range t.lc.Updated {
		if _, ok := set[ts.Column]; ok {
			continue
		}
		v, err := t.clockValue(ts.Column, ts.Form, ts.Value(now), dbNow)
		if err != nil {
			return nil, err
		}
		out[ts.Column] = v
	}
	return out, nil
}

// clockValue returns the Set value of an instant for column col of form
// f: driver.CurrentTime when dbNow, else v normalized for the column.
func (t *Table[T]) clockValue(col string, f driver.TimeForm, v any, dbNow bool) (any, error) {
	if dbNow {
		return driver.CurrentTime{Form: f}, nil
	}
	fld, err := t.drv.Model().Field(col)
	if err != nil {
		return nil, err
	}
	return t.drv.Model().Normalize(fld, v, false)
}

// softDelete marks at most limit live rows matching where (checked)
// deleted, smallest primary keys first: it reads their keys, then sets
// the soft-delete column of those still live and still matching where in
// one Update, and returns how many that Update matched. A row deleted by
// a concurrent call between the two steps is counted by that call only.
func (t *Table[T]) softDelete(ctx context.Context, where Criteria, limit int) (int64, error) {
	m := t.drv.Model()
	pk := m.PrimaryKey()
	where = t.scope(where)
	rows, err := t.drv.Select(ctx, Query{Where: where, OrderBy: []Order{Asc(pk)}, Limit: limit})
	if err != nil {
		return 0, fmt.Errorf("read rows to delete: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	keys := make([]any, len(rows))
	for i := range rows {
		keys[i] = m.ID(&rows[i])
	}
	sd := t.lc.SoftDelete
	var v any
	if sd.Flag {
		f, err := m.Field(sd.Column)
		if err != nil {
			return 0, err
		}
		if v, err = m.Normalize(f, sd.Deleted(time.Time{}), false); err != nil {
			return 0, err
		}
	} else if v, err = t.clockValue(sd.Column, sd.Form, sd.Deleted(t.now()), t.updateNow); err != nil {
		return 0, err
	}
	n, err := t.drv.Update(ctx, driver.Logic(OpAnd, []Criteria{where, driver.InList(pk, keys)}), Set{sd.Column: v})
	if err != nil {
		return n, fmt.Errorf("mark rows deleted: %w", err)
	}
	return n, nil
}

package dao

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"gorm.io/gorm/schema"

	"github.com/claimstore/claimstore/dao/driver"
)

// RowSet is one row's write in [Table.UpdateEach]: the values of the
// match columns that find the row (the primary key first), and the
// values written to it.
type RowSet struct {
	// Match holds the values of UpdateEach's match columns, in order.
	Match []any
	// Set holds the row's own values; every RowSet of one call names the
	// same columns, with plain values (no [Increment]).
	Set Set
}

// MaxEachRows is the most rows one [Table.UpdateEach] call takes.
const MaxEachRows = 10000

// UpdateEach writes different values to many rows: to each row whose
// match columns hold rows[i].Match and that also matches where, it writes
// rows[i].Set and common (values every row gets, possibly empty), and it
// returns the primary keys of the rows it wrote, as given in Match. The
// first match column must be the primary key; the others make a fence
// (a lease owner, say), so that a row another writer changed meanwhile is
// left out. Timestamps GORM stamps on update are stamped as [Table.Update]
// does.
//
// On PostgreSQL it is one UPDATE … FROM unnest(…) statement that binds an
// array per column (PostgreSQL manual, "UPDATE": from_item; "Array
// Functions and Operators": unnest), so a thousand rows cost one round
// trip; on MySQL, MariaDB, SQLite and SQL Server one guarded UPDATE per row
// inside one transaction; elsewhere one UpdateKeys per row. Rows are not
// written atomically across backends' statements: with an error, the keys
// returned are those written before it.
//
// Errors: [ErrInvalidArgument] for no match columns, a first match column
// that is not the primary key, an unknown column, a row whose Match or Set
// does not fit (a different number of match values, other Set columns
// than the first row's, an Increment, a value of the wrong type), more
// than [MaxEachRows] rows; the database's errors, mapped. No rows is a
// no-op.
func (t *Table[T]) UpdateEach(ctx context.Context, match []string, where Criteria, common Set, rows []RowSet) ([]any, error) {
	if err := t.begin(ctx); err != nil {
		return nil, fmt.Errorf("claimstore: update each: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	u, err := t.checkEach(match, where, common, rows)
	if err != nil {
		return nil, fmt.Errorf("claimstore: update each: %w", err)
	}
	var keys []any
	if eu, ok := t.drv.(driver.EachUpdater[T]); ok {
		keys, err = eu.UpdateEach(ctx, u)
	} else {
		keys, err = t.updateRows(ctx, u)
	}
	if err != nil {
		return keys, fmt.Errorf("claimstore: update each: %w", err)
	}
	return keys, nil
}

// checkEach checks UpdateEach's input and returns it as the driver takes
// it: plain values, the common Set stamped, where scoped.
func (t *Table[T]) checkEach(match []string, where Criteria, common Set, rows []RowSet) (driver.EachUpdate, error) {
	m := t.drv.Model()
	var u driver.EachUpdate
	if len(match) == 0 || match[0] != m.PrimaryKey() {
		return u, fmt.Errorf("%w: the first match column must be the primary key %q", ErrInvalidArgument, m.PrimaryKey())
	}
	if len(rows) > MaxEachRows {
		return u, fmt.Errorf("%w: %d rows, at most %d", ErrInvalidArgument, len(rows), MaxEachRows)
	}
	fields := make([]*schema.Field, len(match))
	for i, name := range match {
		f, err := m.Field(name)
		if err != nil {
			return u, err
		}
		fields[i] = f
	}
	w, err := t.check.criteria(where)
	if err != nil {
		return u, err
	}
	u.Where = t.scope(w)
	u.Match = match
	if len(common) > 0 {
		if u.Common, err = t.check.set(common); err != nil {
			return u, err
		}
	}
	for c, v := range u.Common {
		if _, inc := v.(Increment); inc {
			return u, fmt.Errorf("%w: common value of %q is an Increment", ErrInvalidArgument, c)
		}
	}
	if u.Common, err = t.stampSet(u.Common, t.updateNow); err != nil {
		return u, err
	}
	u.Columns = slices.Sorted(maps.Keys(rows[0].Set))
	u.Rows = make([][]any, len(rows))
	for i, r := range rows {
		if len(r.Match) != len(match) {
			return u, fmt.Errorf("%w: row %d has %d match values for %d match columns", ErrInvalidArgument, i, len(r.Match), len(match))
		}
		set, err := t.check.set(r.Set)
		if err != nil {
			return u, fmt.Errorf("row %d: %w", i, err)
		}
		if len(set) != len(u.Columns) {
			return u, fmt.Errorf("%w: row %d writes other columns than row 0", ErrInvalidArgument, i)
		}
		vals := make([]any, 0, len(match)+len(u.Columns))
		for j, f := range fields {
			v, err := m.Normalize(f, r.Match[j], false)
			if err != nil {
				return u, fmt.Errorf("row %d: match %q: %w", i, match[j], err)
			}
			vals = append(vals, v)
		}
		for _, c := range u.Columns {
			v, ok := set[c]
			if !ok {
				return u, fmt.Errorf("%w: row %d writes other columns than row 0", ErrInvalidArgument, i)
			}
			if _, inc := v.(Increment); inc {
				return u, fmt.Errorf("%w: row %d: an Increment of %q", ErrInvalidArgument, i, c)
			}
			if _, dup := u.Common[c]; dup {
				return u, fmt.Errorf("%w: column %q is both common and per row", ErrInvalidArgument, c)
			}
			vals = append(vals, v)
		}
		u.Rows[i] = vals
	}
	return u, nil
}

// updateRows is UpdateEach for a driver without EachUpdater: one
// UpdateKeys (or guarded Update) per row.
func (t *Table[T]) updateRows(ctx context.Context, u driver.EachUpdate) ([]any, error) {
	var keys []any
	for _, vals := range u.Rows {
		where, set := driver.EachRow(u, vals)
		var n int64
		var err error
		if ku, ok := t.drv.(driver.KeyUpdater[T]); ok {
			var ks []any
			ks, err = ku.UpdateKeys(ctx, where, set)
			n = int64(len(ks))
		} else {
			n, err = t.drv.Update(ctx, where, set)
		}
		if err != nil {
			return keys, err
		}
		if n > 0 {
			keys = append(keys, vals[0])
		}
	}
	return keys, nil
}

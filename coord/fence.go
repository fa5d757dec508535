// Fenced writes.
//
// A fenced write carries a term of an election and changes a row only
// while no newer term has written it. The row records the term of its
// last fenced write in an integer column of the model (NULL, or 0, before
// the first); the write adds "column IS NULL OR column <= term" to its
// criteria and "column = term" to its set. A term is written into the
// row in the same statement that tests it, so once a newer term has
// written a row, no write under an older term changes it again.

package coord

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// ErrFenced reports a fenced write that was refused because its term is
// no longer current: either the holder knew it before sending anything
// (a [Leader] whose leadership has ended locally: the error also matches
// [ErrNotLeader]), or the database refused it because a newer term has
// written the rows it would change. errors.Is(err, coord.ErrFenced) is
// the one check a caller needs.
var ErrFenced = errors.New("coord: fenced off by a newer term")

// Fence is a fencing token on its own: the name of an election and one of
// its terms. A leader hands it out with [Leader.Token]; it can be stored in a job or a message and fence
// a write made later by any process, with [FencedUpdate] or
// [FencedUpsert]: a write under an older term than the newest that has
// written a row changes nothing. Unlike a [Leader], a Fence cannot tell
// that its term has ended before the database refuses the write.
type Fence struct {
	// Name is the election name (1 to 191 bytes of UTF-8, no NUL). It
	// names the term in errors; the fence itself compares terms only.
	Name string `json:"name"`
	// Term is the term of that election, at least 1.
	Term int64 `json:"term"`
}

// NewFence returns the Fence of term of the election name, or an error
// wrapping [dao.ErrInvalidArgument] when name is empty, longer than 191
// bytes, not UTF-8 or holds a NUL, or term is less than 1.
func NewFence(name string, term int64) (Fence, error) {
	f := Fence{Name: name, Term: term}
	if err := f.check(); err != nil {
		return Fence{}, err
	}
	return f, nil
}

func (f Fence) check() error {
	if err := driver.CheckLeaseID("election name", f.Name); err != nil {
		return fmt.Errorf("coord: fence: %w", err)
	}
	if f.Term < 1 {
		return fmt.Errorf("coord: fence: %w: term %d is less than 1", dao.ErrInvalidArgument, f.Term)
	}
	return nil
}

// String returns "<name> term <term>".
func (f Fence) String() string { return fmt.Sprintf("%s term %d", f.Name, f.Term) }

// Criteria returns criteria that match a row only when column (the
// integer column that records the term of the row's last fenced write)
// holds no newer term than f's: column IS NULL OR column <= f.Term.
func (f Fence) Criteria(column string) dao.Criteria {
	return dao.Or(dao.IsNull(column), dao.Le(column, f.Term))
}

// fenceToken implements [Fencer]: it returns f, or an error wrapping
// [dao.ErrInvalidArgument] when f is not a valid fence (see [NewFence]).
func (f Fence) fenceToken() (Fence, error) { return f, f.check() }

// Fencer is what a fenced write is fenced with: a [Leader], which also
// refuses at once, with [ErrNotLeader], once its leadership has ended
// locally; or a [Fence], a name and a term that travelled from the
// leader that created it. The two are its only implementations.
type Fencer interface {
	// fenceToken returns the fence to write under, or the reason not to
	// write at all.
	fenceToken() (Fence, error)
}

// FencedUpdate runs s.Update with where narrowed by the fence's criteria
// on column (see [Fence.Criteria]) and set extended by column = the
// fence's term, so that the written rows record the term and no row a
// newer term has written is changed. f is a [Leader] or a [Fence].
//
// It returns the number of rows changed, and:
//   - an error matching [ErrFenced] when the write was refused: f is a
//     Leader whose leadership has ended locally (nothing was sent; the
//     error also matches [ErrNotLeader]), or no row changed and rows
//     matching where carry a newer term (one more statement, a Count, is
//     sent only when nothing changed);
//   - 0 and nil when no row matches where at all;
//   - an error wrapping [dao.ErrInvalidArgument] when set writes column
//     itself or f is nil or an invalid Fence; the store's errors wrapped.
//
// When where matches several rows and only some carry a newer term, the
// others are changed and their number is returned without an error.
func FencedUpdate[T any](ctx context.Context, s dao.Store[T], f Fencer, column string, where dao.Criteria, set dao.Set) (int64, error) {
	if err := checkFenced(s, f, column, set); err != nil {
		return 0, fmt.Errorf("coord: fenced update: %w", err)
	}
	tok, err := f.fenceToken()
	if err != nil {
		return 0, fmt.Errorf("coord: fenced update of term %d: %w", tok.Term, err)
	}
	n, err := fencedUpdate(ctx, s, tok, column, where, set)
	if err != nil {
		return n, fmt.Errorf("coord: fenced update of term %d: %w", tok.Term, err)
	}
	return n, nil
}

func checkFenced[T any](s dao.Store[T], f Fencer, column string, set dao.Set) error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: nil store", dao.ErrInvalidArgument)
	case f == nil || (reflect.ValueOf(f).Kind() == reflect.Pointer && reflect.ValueOf(f).IsNil()):
		return fmt.Errorf("%w: nil fencer", dao.ErrInvalidArgument)
	}
	if _, ok := set[column]; ok {
		return fmt.Errorf("%w: set writes the fence column %q", dao.ErrInvalidArgument, column)
	}
	return nil
}

// fencedUpdate sends the fenced Update of tok and, when it changed
// nothing, counts the rows of where that a newer term has written.
func fencedUpdate[T any](ctx context.Context, s dao.Store[T], tok Fence, column string, where dao.Criteria, set dao.Set) (int64, error) {
	fenced := make(dao.Set, len(set)+1)
	for k, v := range set {
		fenced[k] = v
	}
	fenced[column] = tok.Term
	n, err := s.Update(ctx, dao.And(where, tok.Criteria(column)), fenced)
	if err != nil || n > 0 {
		return n, err
	}
	newer, err := s.Count(ctx, dao.And(where, dao.Gt(column, tok.Term)))
	if err != nil {
		return 0, fmt.Errorf("nothing changed; count the rows of newer terms: %w", err)
	}
	if newer > 0 {
		return 0, fmt.Errorf("%w: %d matching rows carry a newer term", ErrFenced, newer)
	}
	return 0, nil
}

// upsertAttempts bounds the rounds of a fenced upsert whose row is
// created and deleted by others between its update and its insert.
const upsertAttempts = 3

// FencedUpsert writes row, identified by its primary key, under the fence
// f: when the row exists it runs the fenced update of set on it (as
// [FencedUpdate] with where = primary key = row's key); when it does not,
// it sets row's column to the fence's term and creates it. A register's
// first write needs no unfenced create, and a deposed leader cannot
// create the row over a newer term's either: once a newer term has
// created or written the row, the insert fails as a duplicate and the
// fenced update that follows is refused. (A row no term has written yet
// is created by whichever term comes first; a newer term's write then
// replaces it.) The insert skips a key another writer holds rather than
// failing (INSERT … ON CONFLICT DO NOTHING on PostgreSQL and SQLite,
// INSERT IGNORE on MySQL and MariaDB), so inside a caller's transaction
// ([dao.Table.WithTx]) an upsert that meets a row created at the same
// moment takes the fenced update path and the transaction goes on: on
// PostgreSQL a failed INSERT would abort it.
//
// It returns created (true when row was inserted; row then holds the
// store's generated values) and:
//   - an error matching [ErrFenced] when a newer term has written the row,
//     or f is a [Leader] whose leadership has ended locally (checked
//     before each statement);
//   - an error wrapping [dao.ErrInvalidArgument] when row is nil or has a
//     zero primary key (an upsert needs the key), set writes column, or
//     column is not a column of the model;
//   - the store's errors, wrapped. A soft-deleted row with the key is not
//     revived: an error wrapping [dao.ErrDuplicate] is returned after a
//     few rounds.
func FencedUpsert[T any](ctx context.Context, s dao.Store[T], f Fencer, column string, row *T, set dao.Set) (created bool, err error) {
	if err := checkFenced(s, f, column, set); err != nil {
		return false, fmt.Errorf("coord: fenced upsert: %w", err)
	}
	if row == nil {
		return false, fmt.Errorf("coord: fenced upsert: %w: nil row", dao.ErrInvalidArgument)
	}
	m, err := modelOf(s)
	if err != nil {
		return false, fmt.Errorf("coord: fenced upsert: %w", err)
	}
	if _, err := m.Field(column); err != nil {
		return false, fmt.Errorf("coord: fenced upsert: %w", err)
	}
	id := m.ID(row)
	if id == nil || reflect.ValueOf(id).IsZero() {
		return false, fmt.Errorf("coord: fenced upsert: %w: row has no primary key value (%s)", dao.ErrInvalidArgument, m.PrimaryKey())
	}
	where := dao.Eq(m.PrimaryKey(), id)
	for attempt := 1; ; attempt++ {
		tok, err := f.fenceToken()
		if err != nil {
			return false, fmt.Errorf("coord: fenced upsert of term %d: %w", tok.Term, err)
		}
		n, err := fencedUpdate(ctx, s, tok, column, where, set)
		if err != nil {
			return false, fmt.Errorf("coord: fenced upsert of term %d: %w", tok.Term, err)
		}
		if n > 0 {
			return false, nil
		}
		// No row has the key: create it with the term.
		if tok, err = f.fenceToken(); err != nil {
			return false, fmt.Errorf("coord: fenced upsert of term %d: %w", tok.Term, err)
		}
		if err := m.Apply(row, dao.Set{column: tok.Term}); err != nil {
			return false, fmt.Errorf("coord: fenced upsert of term %d: %w", tok.Term, err)
		}
		created, err := createIfAbsent(ctx, s, row, id)
		if created {
			if err != nil {
				return true, fmt.Errorf("coord: fenced upsert of term %d: %w", tok.Term, err)
			}
			return true, nil
		}
		if (err != nil && !errors.Is(err, dao.ErrDuplicate)) || attempt == upsertAttempts {
			if err == nil {
				err = fmt.Errorf("%w: the row was created by another writer and gone again %d times", dao.ErrDuplicate, attempt)
			}
			return false, fmt.Errorf("coord: fenced upsert of term %d: create: %w", tok.Term, err)
		}
		// Another writer created the row in between: update it, fenced.
	}
}

// createIfAbsent inserts row unless a row with its key exists, and
// reports whether it did. Over a store with CreateIfAbsent (every store
// the backends return) the insert skips an existing key instead of
// failing (INSERT … ON CONFLICT DO NOTHING on PostgreSQL and SQLite,
// INSERT IGNORE on MySQL and MariaDB), so a caller's transaction survives
// a writer that created the row first: on PostgreSQL a failed statement
// aborts the transaction it runs in (PostgreSQL manual, "Transactions";
// SQLSTATE 25P02 for every later statement). The created row is read back
// into row, which then holds the store's generated values. Other stores
// get a Create, whose duplicate error is returned.
func createIfAbsent[T any](ctx context.Context, s dao.Store[T], row *T, id any) (bool, error) {
	ac, ok := s.(dao.IdempotentCreator[T])
	if !ok {
		if err := s.Create(ctx, row); err != nil {
			return false, err
		}
		return true, nil
	}
	n, err := ac.CreateIfAbsent(ctx, row)
	if err != nil || n == 0 {
		return false, err
	}
	stored, err := s.Get(ctx, id)
	if err != nil {
		return true, fmt.Errorf("read the created row back: %w", err)
	}
	*row = stored
	return true, nil
}

// modelOf returns the model s parsed T with, or T parsed with GORM's
// default naming for a store that does not expose one.
func modelOf[T any](s dao.Store[T]) (*driver.Model[T], error) {
	if ms, ok := s.(dao.Modeler[T]); ok {
		if m := ms.Model(); m != nil {
			return m, nil
		}
	}
	return driver.NewModel[T](nil)
}

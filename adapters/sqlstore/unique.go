package sqlstore

import (
	"context"
	"fmt"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// UniqueWhile describes a unique index over the rows whose status column
// holds one value, such as "at most one queued row per key": a second row
// with the same key and that status fails to insert (or to update into
// that status) with [dao.ErrDuplicate], while rows of other statuses may
// share the key. It is the database's defense in depth behind a try-lock
// or a check in the program.
type UniqueWhile struct {
	// Key is the column that must be unique among those rows, a column of
	// the model. On MySQL and MariaDB its type must be one a unique index
	// takes whole (a sized string such as gorm:"size:191", a number), not
	// TEXT.
	Key string
	// Status is the string column whose value selects the rows, a column
	// of the model.
	Status string
	// Value is the status value, written into the index definition as a
	// literal (a partial index's predicate takes no bound parameter): 1 to
	// 64 ASCII letters, digits, '_', '.', ':' or '-' (dialects.CheckLiteral).
	Value string
	// Index is the index name; empty means uq_<table>_<key>_<value>. On
	// MySQL and MariaDB the generated column is named after it with the
	// suffix _key. Names longer than 63 bytes are refused.
	Index string
}

// maxIdentifier is the shortest identifier limit of the SQL dialects:
// PostgreSQL's 63 bytes (NAMEDATALEN - 1).
const maxIdentifier = 63

// CreateUniqueWhile creates on the table of s, a store of this package,
// the index u describes, unless an index of that name exists (see
// dialects.Renderer.UniqueWhere for each dialect's statements: a partial
// unique index on PostgreSQL and SQLite, a filtered one on SQL Server, a
// STORED generated column and a unique index on it on MySQL and MariaDB).
// Identifiers come from the model's schema and are quoted; the value is
// checked and written as a literal. MySQL and MariaDB commit DDL
// implicitly, so there a failure of the second statement leaves the
// generated column, which a second call then reuses.
//
// Errors: a store of another backend, a column the model lacks, a status
// column that is not a string, a value dialects.CheckLiteral refuses or a
// name past 63 bytes wraps [dao.ErrInvalidArgument], and nothing is sent;
// database errors are mapped like every other (rows that already break
// the rule make the creation fail with [dao.ErrDuplicate]).
func CreateUniqueWhile[T any](ctx context.Context, s *dao.Table[T], u UniqueWhile) error {
	if err := createUniqueWhile(ctx, s, u); err != nil {
		return fmt.Errorf("claimstore: create unique index: %w", err)
	}
	return nil
}

func createUniqueWhile[T any](ctx context.Context, s *dao.Table[T], u UniqueWhile) error {
	var db *gorm.DB
	var name dialects.Name
	var table dialects.Table
	if s == nil || !s.As(&db) || !s.As(&name) || !s.As(&table) {
		return fmt.Errorf("%w: not a store of the SQL backends", dao.ErrInvalidArgument)
	}
	m := s.Model()
	key, err := m.Field(u.Key)
	if err != nil {
		return err
	}
	status, err := m.Field(u.Status)
	if err != nil {
		return err
	}
	if driver.KindOf(status) != driver.KindString {
		return fmt.Errorf("%w: status column %q is not a string", dao.ErrInvalidArgument, u.Status)
	}
	if err := dialects.CheckLiteral(u.Value); err != nil {
		return err
	}
	w := dialects.UniqueWhere{Index: u.Index, Key: key.DBName, Status: status.DBName, Value: u.Value}
	if w.Index == "" {
		w.Index = "uq_" + table.Name + "_" + key.DBName + "_" + u.Value
	}
	w.Column = w.Index + "_key"
	if len(w.Index) > maxIdentifier || (isMySQL(name) && len(w.Column) > maxIdentifier) {
		return fmt.Errorf("%w: index name %q (or its generated column) is longer than %d bytes: set UniqueWhile.Index", dao.ErrInvalidArgument, w.Index, maxIdentifier)
	}
	tx := db.WithContext(ctx)
	if isMySQL(name) {
		w.ColumnType = tx.Dialector.DataTypeOf(key)
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		return err
	}
	sts, err := r.UniqueWhere(dialects.Table{Name: table.Name}, w)
	if err != nil {
		return err
	}
	mig := tx.Migrator()
	if mig.HasIndex(table.Name, w.Index) {
		return nil
	}
	for i, st := range sts {
		if isMySQL(name) && i == 0 && mig.HasColumn(table.Name, w.Column) {
			continue // left by an earlier call whose index creation failed
		}
		if err := tx.Exec(st.SQL, st.Args...).Error; err != nil {
			return fmt.Errorf("%s: %w", st.SQL, mapCtxError(ctx, err))
		}
	}
	return nil
}

func isMySQL(n dialects.Name) bool { return n == dialects.MySQL || n == dialects.MariaDB }

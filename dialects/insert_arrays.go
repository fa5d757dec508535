package dialects

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// ArrayColumn is one column of an [Renderer.InsertArrays]: its name and
// the server's name of its type, as PostgreSQL's format_type spells it
// ("character varying", "timestamp with time zone", public."Mood").
type ArrayColumn struct {
	Name, Type string
}

// InsertArrays renders a multi-row INSERT that binds one array per column
// instead of one value per row and column, on PostgreSQL:
//
//	INSERT INTO t (c1, …, ck) SELECT * FROM unnest($1::type1[], …, $k::typek[]) [RETURNING pk]
//
// unnest with several arrays yields one row per index, the i-th element of
// each array in column order (PostgreSQL manual, "Array Functions and
// Operators", unnest ( anyarray, anyarray [, ... ] ), and "Table
// Functions"), so n rows bind k parameters, whatever n: the statement is
// parsed and planned once per shape instead of once per row count, and no
// Bind message nears the protocol's 65,535 parameters. The caller binds
// the k arrays in column order, each of n elements (nil for NULL).
// returning, when not empty, lists the columns whose inserted values the
// statement returns, one row per inserted row.
//
// ok is false on every other dialect (nothing is rendered). An empty
// table name or column list, an empty column name, or a type name that
// is not a plain type (letters, digits, _, spaces, dots, parentheses,
// commas and double-quoted names) or names an array type is an error
// wrapping [dao.ErrInvalidArgument].
func (r Renderer) InsertArrays(t Table, cols []ArrayColumn, returning []string) (st Statement, ok bool, err error) {
	if r.Dialect() != Postgres {
		return Statement{}, false, nil
	}
	if t.Name == "" || len(cols) == 0 {
		return Statement{}, false, fmt.Errorf("dialects: %w: an array insert needs a table and columns", dao.ErrInvalidArgument)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(r.QuoteTable(t.Name))
	b.WriteString(" (")
	for i, c := range cols {
		if c.Name == "" {
			return Statement{}, false, fmt.Errorf("dialects: %w: an array insert column has no name", dao.ErrInvalidArgument)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.Quote(c.Name))
	}
	b.WriteString(") SELECT * FROM unnest(")
	for i, c := range cols {
		if err := checkTypeName(c.Type); err != nil {
			return Statement{}, false, fmt.Errorf("dialects: column %q: %w", c.Name, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.Placeholder(i + 1))
		b.WriteString("::")
		b.WriteString(c.Type)
		b.WriteString("[]")
	}
	b.WriteString(")")
	for i, c := range returning {
		if i == 0 {
			b.WriteString(" RETURNING ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(r.Quote(c))
	}
	return Statement{SQL: b.String()}, true, nil
}

// checkTypeName accepts a type name as PostgreSQL's format_type writes
// one for a column that is not an array: words of letters, digits and _,
// separated by spaces or dots, an optional modifier list in parentheses
// of digits and commas, and double-quoted names without a quote inside.
func checkTypeName(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: type name %s: %s", dao.ErrInvalidArgument, strconv.Quote(s), why)
	}
	if strings.TrimSpace(s) == "" {
		return bad("empty")
	}
	if strings.HasSuffix(s, "]") {
		return bad("an array type")
	}
	inQuote, inParens := false, false
	for _, c := range s {
		switch {
		case c == '"':
			inQuote = !inQuote
		case inQuote:
			// any character but a quote inside a quoted name
		case inParens && (c >= '0' && c <= '9' || c == ',' || c == ' '):
		case c == ')' && inParens:
			inParens = false
		case inParens:
			return bad("not a type modifier")
		case c == '(':
			inParens = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == ' ', c == '.':
		default:
			return bad("not a plain type name")
		}
	}
	if inQuote || inParens {
		return bad("unbalanced")
	}
	return nil
}

// eachRows names the row source of [Renderer.UpdateArrays], and
// eachColumn its columns, numbered from 1 (names no model column takes,
// so that the statement's criteria, which name the table's columns
// unqualified, never read the row source).
const (
	eachRows   = "claimstore_each_rows"
	eachColumn = "claimstore_each_"
)

// UpdateArrays renders the update of many rows with values of their own,
// on PostgreSQL, binding one array per column:
//
//	UPDATE t SET c1 = e.v1, …, <common> FROM unnest($a1::type1[], …) AS e(v1, …)
//	WHERE t.m1 = e.m1 AND … AND (<where>) RETURNING t.m1
//
// cols are the match columns (the first of them the primary key, whose
// values are returned) followed by the written ones; match is how many
// lead; arrays are the arrays bound for them, in the same order, each
// holding one element per row; common is written to every row (checked
// values, no Increment); where, possibly match-all, is checked criteria.
// unnest yields the i-th element of each array as one row (PostgreSQL
// manual, "Array Functions and Operators"), and UPDATE … FROM joins each
// to the table row it names ("UPDATE": from_item; a target row that
// joins to more than one source row is updated once, so the match columns
// must identify a row). ok is false on every other dialect. A column name
// or type it cannot write is an error wrapping [dao.ErrInvalidArgument].
func (r Renderer) UpdateArrays(t Table, cols []ArrayColumn, match int, arrays []any, common dao.Set, where dao.Criteria) (st Statement, ok bool, err error) {
	if r.Dialect() != Postgres {
		return Statement{}, false, nil
	}
	if match < 1 || match >= len(cols) || len(arrays) != len(cols) {
		return Statement{}, false, fmt.Errorf("dialects: %w: an array update needs match and written columns and an array for each", dao.ErrInvalidArgument)
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, false, err
	}
	alias := func(i int) string { return eachRows + "." + eachColumn + strconv.Itoa(i+1) }
	qualified := func(c string) {
		b.table()
		b.w(".")
		b.col(c)
	}
	b.w("UPDATE ")
	b.table()
	b.w(" SET ")
	for i := match; i < len(cols); i++ {
		if cols[i].Name == "" || cols[i].Name == t.PrimaryKey {
			return Statement{}, false, fmt.Errorf("dialects: %w: an array update writes column %q", dao.ErrInvalidArgument, cols[i].Name)
		}
		if i > match {
			b.w(", ")
		}
		b.col(cols[i].Name)
		b.w(" = ", alias(i))
	}
	if len(common) > 0 {
		b.w(", ")
		if err := b.set(common, ""); err != nil {
			return Statement{}, false, err
		}
	}
	b.w(" FROM unnest(")
	for i, c := range cols {
		if err := checkTypeName(c.Type); err != nil {
			return Statement{}, false, fmt.Errorf("dialects: column %q: %w", c.Name, err)
		}
		if i > 0 {
			b.w(", ")
		}
		b.param(arrays[i])
		b.w("::", c.Type, "[]")
	}
	b.w(") AS ", eachRows, "(")
	for i := range cols {
		if i > 0 {
			b.w(", ")
		}
		b.w(eachColumn + strconv.Itoa(i+1))
	}
	b.w(") WHERE ")
	for i := range match {
		if cols[i].Name == "" {
			return Statement{}, false, fmt.Errorf("dialects: %w: an array update matches an unnamed column", dao.ErrInvalidArgument)
		}
		if i > 0 {
			b.w(" AND ")
		}
		qualified(cols[i].Name)
		b.w(" = ", alias(i))
	}
	if err := b.andWhere(where); err != nil {
		return Statement{}, false, err
	}
	b.w(" RETURNING ")
	qualified(cols[0].Name)
	st, err = b.stmt()
	return st, err == nil, err
}

package dialects

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// Renderer turns checked criteria, orderings and sets (see dao.Table's
// Check methods) into SQL text for one dialect: identifiers quoted the
// dialect's way ("x" for PostgreSQL and SQLite, `x` for MySQL and MariaDB,
// [x] for SQL Server), values bound through native placeholders ($1 for
// PostgreSQL, ? for MySQL, MariaDB and SQLite, @p1 for SQL Server). It does
// no I/O and is safe for concurrent use. The zero Renderer renders no
// statement; get one from [NewRenderer].
type Renderer struct {
	d *dialect
}

// NewRenderer returns the renderer for dialect n, or an error wrapping
// [dao.ErrInvalidArgument] for an unknown dialect.
func NewRenderer(n Name) (Renderer, error) {
	if d := lookup(n); d != nil {
		return Renderer{d: d}, nil
	}
	return Renderer{}, fmt.Errorf("dialects: %w: unknown dialect %q", dao.ErrInvalidArgument, n)
}

// Dialect returns the renderer's dialect ("" for the zero Renderer).
func (r Renderer) Dialect() Name {
	if r.d == nil {
		return ""
	}
	return r.d.name
}

// ansi stands in for the zero Renderer's dialect in Quote, QuoteTable,
// Placeholder and MaxParams: double-quoted identifiers, ? placeholders.
var ansi = dialect{quoteOpen: `"`, quoteClose: `"`, param: "?", maxParams: 65535}

func (r Renderer) spec() *dialect {
	if r.d == nil {
		return &ansi
	}
	return r.d
}

// Quote returns ident as one quoted identifier, doubling any closing quote
// character inside it.
func (r Renderer) Quote(ident string) string { return r.spec().quote(ident) }

// QuoteTable quotes a possibly schema-qualified table name part by part.
func (r Renderer) QuoteTable(name string) string { return r.spec().quoteTable(name) }

// Placeholder returns the text of the i-th (1-based) bind parameter.
func (r Renderer) Placeholder(i int) string {
	d := r.spec()
	if d.numbered {
		return d.param + strconv.Itoa(i)
	}
	return d.param
}

// MaxParams returns the largest number of bound values one statement may
// carry on the renderer's dialect: 65535 on PostgreSQL (the Bind message
// counts parameters in an Int16, "Frontend/Backend Protocol: Message
// Formats"), 65535 on MySQL and MariaDB (the prepared-statement limit,
// error ER_PS_MANY_PARAM), 32766 on SQLite (SQLITE_MAX_VARIABLE_NUMBER's
// default since 3.32.0, "Limits In SQLite"), 2100 on SQL Server ("Maximum
// capacity specifications for SQL Server": parameters per user-defined
// function or procedure, which is how the driver sends a statement). A
// statement that would bind more is refused with an error wrapping
// [dao.ErrInvalidArgument] instead of failing in the driver.
func (r Renderer) MaxParams() int { return r.spec().maxParams }

func (d *dialect) quote(ident string) string {
	return d.quoteOpen + strings.ReplaceAll(ident, d.quoteClose, d.quoteClose+d.quoteClose) + d.quoteClose
}

func (d *dialect) quoteTable(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = d.quote(p)
	}
	return strings.Join(parts, ".")
}

// param binds v and writes its placeholder. On SQLite (utcTimes) a
// time.Time is bound in UTC: SQLite has no time type, the driver writes
// times as text with their zone offset, and comparisons of that text
// follow time order only when every value carries the same offset (SQLite
// manual, "Date And Time Functions": time values are strings).
func (b *builder) param(v any) {
	if t, ok := v.(time.Time); ok && b.d.utcTimes {
		v = t.UTC()
	}
	b.args = append(b.args, v)
	b.sb.WriteString(b.d.param)
	if b.d.numbered {
		b.sb.WriteString(strconv.Itoa(len(b.args)))
	}
}

// params binds vs and writes their placeholders separated by ", ".
func (b *builder) params(vs []any) {
	for i, v := range vs {
		if i > 0 {
			b.w(", ")
		}
		b.param(v)
	}
}

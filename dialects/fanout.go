package dialects

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// FanOut is the request of [Renderer.FanOut]: claim a batch of messages,
// mark them, and copy each into a delivery table once per consumer group
// of its topic, some of the copies already claimed by the caller, while
// writing the caller's acks of earlier copies. Every identifier comes from
// the caller's schema and is quoted; every value is bound.
type FanOut struct {
	// Messages is the table the messages are claimed from; Deliveries the
	// table their copies are inserted into, whose primary key (the acked
	// rows' key) has the same name.
	Messages, Deliveries Table
	// Groups is the table of consumer groups: GroupColumn names a group,
	// TopicColumn the topic it reads. TopicColumn is also the message
	// table's topic column.
	Groups                   string
	GroupColumn, TopicColumn string

	// Claim chooses the messages: Claim.Where (a criterion comparing with
	// a driver.CurrentTime compares with the database's clock),
	// Claim.OrderBy (the primary key appended as the final tie breaker)
	// and Claim.Limit (> 0). Every order column must also be a delivery
	// column copied from the message (FromMessage of the same name) or
	// the primary key, so the returned copies sort in claim order.
	Claim dao.Query
	// Mark is written to every claimed message.
	Mark dao.Set

	// Acked are primary keys of earlier deliveries; those AckWhere still
	// matches get AckSet. None is allowed (AckSet is then still checked).
	Acked    []int64
	AckWhere dao.Criteria
	AckSet   dao.Set

	// The copies of group OwnGroup on topic OwnTopic, the first OwnLimit
	// in claim order (0: none), are inserted with the Own values of the
	// columns that have one, and returned; the other copies get Value.
	OwnGroup, OwnTopic string
	OwnLimit           int
	// OwnMarker is a column with a bound (non-nil, non-time) Own value:
	// the copies that hold it are the ones returned.
	OwnMarker string

	// Columns are the delivery columns inserted, with their sources.
	Columns []FanOutColumn
	// DeliveryKey is how a FromDeliveryKey column is computed.
	DeliveryKey DeliveryKey
	// Conflict names the delivery table's unique columns: a copy that
	// exists already is skipped.
	Conflict []string
	// Returning are the delivery columns returned for the caller's own
	// copies.
	Returning []string
}

// FanOutSource says where a delivery column's value comes from.
type FanOutSource int

const (
	// FromMessage copies the claimed message's column Column (Name when
	// empty).
	FromMessage FanOutSource = iota
	// FromGroup is the consumer group's name.
	FromGroup
	// FromDeliveryKey is the delivery key of the group and the topic (see
	// [DeliveryKey]).
	FromDeliveryKey
	// FromValue is Value, or Own for the caller's own copies when Own is
	// not nil.
	FromValue
)

// FanOutColumn is one inserted delivery column.
type FanOutColumn struct {
	Name   string
	From   FanOutSource
	Column string // FromMessage: the message column copied; Name when empty
	// Value and Own (FromValue) are each a bound value, nil for NULL, a
	// driver.CurrentTime for the database's clock, or a [Later]. When
	// both are bound values, PostgreSQL types their CASE as text
	// (manual, "UNION, CASE, and Related Constructs", section 10.5): give
	// such a pair to text columns only.
	Value, Own any
}

// Later is a value of [FanOutColumn]: the database's clock plus After
// (whole microseconds).
type Later struct{ After time.Duration }

// DeliveryKey describes the key of a copy: Prefix followed by the first
// Digits lowercase hex digits of SHA-256 over the group's name, a zero
// byte and the topic, both UTF-8 (1 to 64 digits).
type DeliveryKey struct {
	Prefix string
	Digits int
}

// Names of the common table expressions and aliases of the fan-out; a
// table with one of these names is refused by [ReservedTableName].
const (
	cteFanAcked    = "fanout_acked"
	cteFanMessages = "fanout_messages"
	cteFanCopies   = "fanout_copies"
	cteFanInserted = "fanout_inserted"
	fanGroup       = "fanout_group"
	fanKey         = "fanout_key"
	fanOwn         = "fanout_own"
)

// fanOutSQL holds the fragments of a dialect's fan-out; nil where the
// dialect has none.
type fanOutSQL struct {
	// idsArray is "= ANY(<array>)" with {p} standing for the bound text of
	// an array of bigints.
	idsArray string
	// later is the database's clock plus {p} microseconds.
	later string
	// key is the delivery key of {group} and {topic}: {prefix} and
	// {digits} stand for their bound values.
	key string
	// rowNumber is the window function numbering a partition's rows.
	rowNumber string
}

// pgFanOut: PostgreSQL 11 or later (sha256(), "Binary String Functions
// and Operators").
var pgFanOut = &fanOutSQL{
	idsArray:  " = ANY(CAST({p} AS bigint[]))",
	later:     "statement_timestamp() + CAST({p} AS bigint) * INTERVAL '1 microsecond'",
	key:       "{prefix} || left(encode(sha256(convert_to({group}, 'UTF8') || decode('00', 'hex') || convert_to({topic}, 'UTF8')), 'hex'), {digits})",
	rowNumber: "row_number()",
}

// FanOut renders the fan-out of f as one statement, on PostgreSQL and
// YugabyteDB; other dialects (CockroachDB among them, whose functions
// differ) refuse it with an error wrapping [dao.ErrInvalidArgument], as
// they refuse a malformed request (missing tables or columns, a limit
// under 1, an empty Mark or AckSet, an unknown source, an order column
// that is not copied, a key of other than 1 to 64 digits).
//
// The statement is
//
//	WITH fanout_acked AS (
//	    UPDATE deliveries SET <AckSet> WHERE pk = ANY(<Acked>) AND <AckWhere>
//	    RETURNING pk),
//	  fanout_messages AS (
//	    UPDATE messages AS t SET <Mark> WHERE t.pk IN (
//	        SELECT pk FROM messages WHERE <Claim.Where> ORDER BY <order>
//	        LIMIT n FOR UPDATE SKIP LOCKED)
//	    RETURNING t.<the columns used below>),
//	  fanout_copies AS (
//	    SELECT m.*, g.<group>, <key>, <own: among the first OwnLimit of the
//	           own group and topic in claim order>
//	    FROM fanout_messages AS m JOIN groups AS g ON g.<topic> = m.<topic>),
//	  fanout_inserted AS (
//	    INSERT INTO deliveries (<Columns>) SELECT <sources> FROM fanout_copies
//	    ORDER BY <order> ON CONFLICT (<Conflict>) DO NOTHING
//	    RETURNING <Returning, order columns, OwnMarker>)
//	SELECT <claimed>, <acked>, i.<Returning>
//	FROM (<the counts of fanout_messages and fanout_acked>) AS n
//	LEFT JOIN fanout_inserted AS i ON i.<OwnMarker> = <its Own value>
//	ORDER BY <order over i>
//
// so the result has one row per own copy, or one row of NULLs when there
// is none, each starting with the number of messages claimed and of
// deliveries acked. Why each part (PostgreSQL manual): data-modifying
// statements in WITH run exactly once, all against one snapshot, and
// their effects commit together ("WITH Queries", section 7.8.4); FOR
// UPDATE SKIP LOCKED passes over messages another claimer holds ("SELECT",
// The Locking Clause); the groups are read in the statement's snapshot,
// the one its claim sees; ON CONFLICT ... DO NOTHING skips a copy another
// writer inserted first ("INSERT", ON CONFLICT Clause); the copies are
// inserted in claim order, so their keys ascend in it. Arguments bind in
// text order.
func (r Renderer) FanOut(f FanOut) (Statement, error) {
	if r.d == nil || r.d.fanOut == nil {
		return Statement{}, fmt.Errorf("dialects: %w: no fan-out statement for %s", dao.ErrInvalidArgument, r.Dialect())
	}
	if err := f.check(); err != nil {
		return Statement{}, fmt.Errorf("dialects: %w: fan-out: %v", dao.ErrInvalidArgument, err)
	}
	b, err := r.builder(f.Messages)
	if err != nil {
		return Statement{}, err
	}
	fb := fanOutBuilder{builder: b, f: f, sql: r.d.fanOut}
	if err := fb.render(); err != nil {
		return Statement{}, err
	}
	return b.stmt()
}

// check refuses a malformed request.
func (f FanOut) check() error {
	switch {
	case f.Deliveries.Name == "" || f.Deliveries.PrimaryKey != f.Messages.PrimaryKey:
		return fmt.Errorf("the delivery table needs a name and the message table's primary key column")
	case f.Groups == "" || f.GroupColumn == "" || f.TopicColumn == "":
		return fmt.Errorf("the groups table needs a name, a group column and a topic column")
	case f.Claim.Limit <= 0:
		return fmt.Errorf("claim limit must be > 0, got %d", f.Claim.Limit)
	case f.OwnLimit < 0:
		return fmt.Errorf("own limit must be >= 0, got %d", f.OwnLimit)
	case len(f.Columns) == 0 || len(f.Conflict) == 0 || len(f.Returning) == 0:
		return fmt.Errorf("columns, conflict columns and returned columns are required")
	case f.DeliveryKey.Digits < 1 || f.DeliveryKey.Digits > 64:
		return fmt.Errorf("delivery key digits must be 1 to 64, got %d", f.DeliveryKey.Digits)
	}
	copied := map[string]bool{f.Messages.PrimaryKey: true}
	marker := false
	for _, c := range f.Columns {
		if c.Name == "" {
			return fmt.Errorf("a delivery column without a name")
		}
		switch c.From {
		case FromMessage:
			if c.Column == "" || c.Column == c.Name {
				copied[c.Name] = true
			}
		case FromGroup, FromDeliveryKey:
		case FromValue:
			if c.Name == f.OwnMarker && c.Own != nil && bound(c.Own) {
				marker = true
			}
		default:
			return fmt.Errorf("column %q has an unknown source %d", c.Name, c.From)
		}
	}
	if !marker {
		return fmt.Errorf("own marker %q is not a column with a bound own value", f.OwnMarker)
	}
	for _, o := range f.Claim.OrderBy {
		if !copied[o.Field] {
			return fmt.Errorf("order column %q is not copied to the deliveries", o.Field)
		}
	}
	return nil
}

// bound reports whether v is a value bound as a parameter.
func bound(v any) bool {
	switch v.(type) {
	case nil, driver.CurrentTime, Later:
		return false
	}
	return true
}

// fanOutBuilder writes the fan-out statement.
type fanOutBuilder struct {
	*builder
	f   FanOut
	sql *fanOutSQL
}

func (b *fanOutBuilder) render() error {
	f := b.f
	d := b.d
	mpk, dpk := d.quote(f.Messages.PrimaryKey), d.quote(f.Deliveries.PrimaryKey)
	msgs, dlvs := d.quoteTable(f.Messages.Name), d.quoteTable(f.Deliveries.Name)
	order := withPK(f.Claim.OrderBy, f.Messages.PrimaryKey)

	// The acks.
	b.w("WITH ", cteFanAcked, " AS (UPDATE ", dlvs, " SET ")
	if err := b.set(f.AckSet, ""); err != nil {
		return err
	}
	b.w(" WHERE ", dpk)
	if err := b.fragment(b.sql.idsArray, map[string]func(){"p": func() { b.param(idsText(f.Acked)) }}); err != nil {
		return err
	}
	if err := b.andWhere(f.AckWhere); err != nil {
		return err
	}
	b.w(" RETURNING ", dpk, ")")

	// The claim and mark.
	b.w(", ", cteFanMessages, " AS (UPDATE ", msgs, " AS t SET ")
	if err := b.set(f.Mark, ""); err != nil {
		return err
	}
	b.w(" WHERE t.", mpk, " IN (SELECT ", mpk, " FROM ", msgs)
	if err := b.where(f.Claim.Where); err != nil {
		return err
	}
	b.w(" ORDER BY ")
	b.orderOver("", order)
	b.w(" LIMIT ")
	b.param(int64(f.Claim.Limit))
	b.w(" FOR UPDATE SKIP LOCKED) RETURNING ")
	b.colList("t.", b.messageColumns(order))
	b.w(")")

	// The copies, one per group of the topic.
	topic := d.quote(f.TopicColumn)
	b.w(", ", cteFanCopies, " AS (SELECT m.*, g.", d.quote(f.GroupColumn), " AS ", fanGroup, ", ")
	err := b.fragment(b.sql.key, map[string]func(){
		"prefix": func() { b.param(f.DeliveryKey.Prefix) },
		"group":  func() { b.w("g.", d.quote(f.GroupColumn)) },
		"topic":  func() { b.w("m.", topic) },
		"digits": func() { b.param(int64(f.DeliveryKey.Digits)) },
	})
	if err != nil {
		return err
	}
	b.w(" AS ", fanKey, ", ")
	own := func() {
		b.w("g.", d.quote(f.GroupColumn), " = ")
		b.param(f.OwnGroup)
		b.w(" AND m.", topic, " = ")
		b.param(f.OwnTopic)
	}
	b.w("CASE WHEN ")
	own()
	b.w(" THEN ", b.sql.rowNumber, " OVER (PARTITION BY ")
	own()
	b.w(" ORDER BY ")
	b.orderOver("m.", order)
	b.w(") <= ")
	b.param(int64(f.OwnLimit))
	b.w(" ELSE false END AS ", fanOwn, " FROM ", cteFanMessages, " AS m JOIN ", d.quoteTable(f.Groups), " AS g ON g.", topic, " = m.", topic, ")")

	// The inserted copies.
	names := make([]string, len(f.Columns))
	for i, c := range f.Columns {
		names[i] = c.Name
	}
	b.w(", ", cteFanInserted, " AS (INSERT INTO ", dlvs, " (")
	b.colList("", names)
	b.w(") SELECT ")
	for i, c := range f.Columns {
		if i > 0 {
			b.w(", ")
		}
		if err := b.source(c); err != nil {
			return err
		}
	}
	b.w(" FROM ", cteFanCopies, " ORDER BY ")
	b.orderOver("", order)
	b.w(" ON CONFLICT (")
	b.colList("", f.Conflict)
	b.w(") DO NOTHING RETURNING ")
	returned := slices.Clone(f.Returning)
	for _, o := range order {
		returned = appendNew(returned, o.Field)
	}
	b.colList("", appendNew(returned, f.OwnMarker))
	b.w(")")

	// The result.
	b.w(" SELECT n.claimed, n.acked, ")
	b.colList("i.", f.Returning)
	b.w(" FROM (SELECT (SELECT count(*) FROM ", cteFanMessages, ") AS claimed, (SELECT count(*) FROM ", cteFanAcked, ") AS acked) AS n LEFT JOIN ",
		cteFanInserted, " AS i ON i.", d.quote(f.OwnMarker), " = ")
	for _, c := range f.Columns {
		if c.Name == f.OwnMarker {
			b.param(c.Own)
			break
		}
	}
	b.w(" ORDER BY ")
	b.orderOver("i.", order)
	return nil
}

// messageColumns returns the message columns the copies read: the
// primary key, the topic, the order columns and the copied columns, each
// once.
func (b *fanOutBuilder) messageColumns(order []dao.Order) []string {
	cols := []string{b.f.Messages.PrimaryKey, b.f.TopicColumn}
	for _, o := range order {
		cols = appendNew(cols, o.Field)
	}
	for _, c := range b.f.Columns {
		if c.From == FromMessage {
			cols = appendNew(cols, cmp.Or(c.Column, c.Name))
		}
	}
	return cols
}

// source writes the value of delivery column c for a row of the copies.
func (b *fanOutBuilder) source(c FanOutColumn) error {
	switch c.From {
	case FromMessage:
		b.col(cmp.Or(c.Column, c.Name))
	case FromGroup:
		b.w(fanGroup)
	case FromDeliveryKey:
		b.w(fanKey)
	case FromValue:
		if c.Own == nil {
			return b.value(c.Value)
		}
		b.w("CASE WHEN ", fanOwn, " THEN ")
		if err := b.value(c.Own); err != nil {
			return err
		}
		b.w(" ELSE ")
		if err := b.value(c.Value); err != nil {
			return err
		}
		b.w(" END")
	}
	return nil
}

// colList writes names, quoted and qualified by qual ("" or "x."),
// separated by ", ".
func (b *fanOutBuilder) colList(qual string, names []string) {
	for i, n := range names {
		if i > 0 {
			b.w(", ")
		}
		b.w(qual, b.d.quote(n))
	}
}

// value writes v: NULL, the database's clock, a Later, or a bound value.
func (b *fanOutBuilder) value(v any) error {
	switch v := v.(type) {
	case nil:
		b.w("NULL")
	case driver.CurrentTime:
		return b.now(v, "")
	case Later:
		return b.fragment(b.sql.later, map[string]func(){"p": func() { b.param(v.After.Microseconds()) }})
	default:
		b.param(v)
	}
	return nil
}

// orderOver writes the ORDER BY terms of order over columns qualified by
// qual ("" or "x.").
func (b *fanOutBuilder) orderOver(qual string, order []dao.Order) {
	for i, o := range order {
		if i > 0 {
			b.w(", ")
		}
		b.orderTerm(qual+b.d.quote(o.Field), o.Field, o.Desc)
	}
}

// fragment writes src, a fan-out fragment of the dialect table, filling
// each {name} from fill.
func (b *fanOutBuilder) fragment(src string, fill map[string]func()) error {
	err := walkHoles(src, func(s string) { b.w(s) }, func(name string) bool {
		f, ok := fill[name]
		if ok {
			f()
		}
		return ok
	})
	if err != nil {
		return fmt.Errorf("dialects: %v in fan-out fragment %q", err, src)
	}
	return nil
}

// idsText is the text of a PostgreSQL bigint array of ids ('{}' for none).
func idsText(ids []int64) string {
	var s strings.Builder
	s.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(strconv.FormatInt(id, 10))
	}
	s.WriteByte('}')
	return s.String()
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
	"gorm.io/gorm/schema"

	"github.com/claimstore/claimstore/dao"
)

// WorkerTable describes a table of rows that workers claim (the table of a
// dispatch.Worker, or any table claimed through dao.Store.Claim) for the
// console's overview and row detail. Field names are column names, as in
// dao criteria.
type WorkerTable[T any] struct {
	// Name is the table's name on the page; default the store's table
	// name when it has one.
	Name string
	// Store reads the table.
	Store dao.Store[T]
	// StatusField is the status column; required.
	StatusField string
	// Statuses are the values of StatusField counted on the overview, in
	// the order shown; required.
	Statuses []string
	// FailedStatuses are the statuses counted as failures (a subset of
	// Statuses); may be empty.
	FailedStatuses []string
	// Due selects the rows due at now (as dispatch.Config.Due); nil shows
	// no backlog.
	Due func(now time.Time) dao.Criteria
	// DueField orders the due rows, oldest first, for the age of the
	// oldest due row (a time column); empty shows no age.
	DueField string
	// OwnerField and UntilField are the lease columns (lease owner, a
	// string, and lease end, a time); empty shows no rows in flight.
	OwnerField, UntilField string
	// ErrorField is the column holding the last error; may be empty.
	ErrorField string
}

// Source is a table the console shows, made by [Worker], [Schedules],
// [Outbox], [Jobs] or [Leases]. Its methods are internal to the console.
type Source interface {
	sourceName() string
	sourceKind() string
}

// tableSource is a Source with rows: a worker's table, a schedule table
// or an outbox table.
type tableSource interface {
	Source
	overview(ctx context.Context, now time.Time, bound int64) (TableOverview, error)
	detail(ctx context.Context, id string) (RowDetail, error)
	clock(ctx context.Context) (time.Time, error)
}

// Count is the number of rows in one status, or a lower bound or an
// estimate of it.
type Count struct {
	// Status is the status counted ("" for a count that is not by
	// status).
	Status string `json:"status"`
	// N is the count.
	N int64 `json:"n"`
	// Estimate is true when N comes from the database's planner
	// statistics rather than a count.
	Estimate bool `json:"estimate,omitempty"`
	// AtLeast is true when counting stopped at the bound: there are N or
	// more.
	AtLeast bool `json:"atLeast,omitempty"`
}

// String renders the count with its label: "12", "≈ 1,200,000 (estimate)"
// or "1000 or more".
func (c Count) String() string {
	s := group(c.N)
	switch {
	case c.Estimate:
		return "≈ " + s + " (estimate)"
	case c.AtLeast:
		return s + " or more"
	}
	return s
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// Lease is a row in flight: who holds it and until when.
type Lease struct {
	// ID is the row's primary key, as text.
	ID string `json:"id"`
	// Owner is the lease owner (a worker's claim token).
	Owner string `json:"owner"`
	// Until is the end of the lease (UTC).
	Until time.Time `json:"until"`
}

// TableOverview is what the overview shows of one table.
type TableOverview struct {
	// Name and Kind ("worker", "schedules", "outbox", "jobs") identify
	// the table.
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Counts are the counts by status.
	Counts []Count `json:"counts"`
	// Total is the sum of Counts (an estimate when any of them is).
	Total Count `json:"total"`
	// Due is the number of rows due now, counted up to the bound.
	Due Count `json:"due"`
	// OldestDue is the age of the oldest due row, in seconds; 0 when none,
	// and on an outbox table when the due rows are more than the exact
	// bound (no index orders them by age: finding the oldest would read
	// them all), and on a job table (the job client lists jobs by id).
	OldestDue float64 `json:"oldestDueSeconds"`
	// InFlight are up to 10 rows under a lease.
	InFlight []Lease `json:"inFlight"`
	// Failures is the number of rows in a failed status.
	Failures Count `json:"failures"`
	// Done counts finished rows (published messages, fired schedules,
	// completed jobs) for the throughput chart.
	Done Count `json:"done"`
	// Error is set when the table could not be read.
	Error string `json:"error,omitempty"`
	// Elapsed is how long the overview of this table took, in
	// milliseconds.
	Elapsed float64 `json:"elapsedMs"`
}

// RowDetail is one row: its fields by column name, its lease and its last
// error.
type RowDetail struct {
	Table     string
	ID        string
	Fields    map[string]any
	JSON      string
	Lease     *Lease
	LastError string
}

// Worker returns the [Source] of a worker's table. Errors wrap
// [dao.ErrInvalidArgument] for a nil store, no status field or statuses,
// or a model GORM cannot parse.
func Worker[T any](t WorkerTable[T]) (Source, error) {
	return newBacklog(t, "worker", "")
}

// backlog is the tableSource over any dao.Store.
type backlog[T any] struct {
	t     WorkerTable[T]
	kind  string
	done  string // the status counted as Done
	sch   *schema.Schema
	est   *estimator
	count func(status string) dao.Criteria
	// dueStatuses, when set, makes the due count the sum of these
	// statuses' counts instead of a bounded read of the due rows.
	dueStatuses []string
	// inFlightStatus, when set, is the status of every row in flight: the
	// rows in flight are read only when its count is not zero.
	inFlightStatus string
	// inFlight selects the rows under a lease at now.
	inFlight func(now time.Time) dao.Criteria
}

var schemaCache sync.Map

func newBacklog[T any](t WorkerTable[T], kind, done string) (*backlog[T], error) {
	if t.Store == nil {
		return nil, fmt.Errorf("ui: %s table: %w: nil store", kind, dao.ErrInvalidArgument)
	}
	if t.StatusField == "" || len(t.Statuses) == 0 {
		return nil, fmt.Errorf("ui: %s table: %w: a status field and its statuses are required", kind, dao.ErrInvalidArgument)
	}
	sch, err := schema.Parse(new(T), &schemaCache, schema.NamingStrategy{})
	if err != nil {
		return nil, fmt.Errorf("ui: %s table: %w: %v", kind, dao.ErrInvalidArgument, err)
	}
	if sch.PrioritizedPrimaryField == nil {
		return nil, fmt.Errorf("ui: %s table: %w: the model has no primary key", kind, dao.ErrInvalidArgument)
	}
	if t.Name == "" {
		if n, ok := t.Store.(dao.TableNamer); ok {
			t.Name = n.TableName()
		} else {
			t.Name = sch.Table
		}
	}
	b := &backlog[T]{t: t, kind: kind, done: done, sch: sch, est: newEstimator(t.Store, t.StatusField)}
	b.count = func(s string) dao.Criteria { return dao.Eq(t.StatusField, s) }
	if t.OwnerField != "" && t.UntilField != "" {
		b.inFlight = func(now time.Time) dao.Criteria { return dao.Gt(t.UntilField, now) }
	}
	return b, nil
}

func (b *backlog[T]) sourceName() string { return b.t.Name }
func (b *backlog[T]) sourceKind() string { return b.kind }

// clock returns the database's time when the store reads one, else the
// host's.
func (b *backlog[T]) clock(ctx context.Context) (time.Time, error) {
	if c, ok := b.t.Store.(dao.Clock); ok && b.t.Store.Capabilities().DatabaseClock {
		return c.Now(ctx)
	}
	return time.Now().UTC(), nil
}

// boundedCount counts the rows where matches, up to bound: a Find of at
// most bound+1 rows in the order of order (an index on the criteria and
// that order stops the read at bound+1 rows, where another order would
// sort every match), so a large match costs no more than bound rows. It
// also returns the first row, if any.
func (b *backlog[T]) boundedCount(ctx context.Context, where dao.Criteria, order []dao.Order, bound int64) (Count, *T, error) {
	rows, err := b.t.Store.Find(ctx, dao.Query{Where: where, OrderBy: order, Limit: int(bound) + 1})
	if err != nil || len(rows) == 0 {
		return Count{}, nil, err
	}
	if int64(len(rows)) > bound {
		return Count{N: bound, AtLeast: true}, &rows[0], nil
	}
	return Count{N: int64(len(rows))}, &rows[0], nil
}

// statusCounts counts each status: an exact Count (through the status
// index) unless the planner's statistics put it above bound, in which case
// the estimate is shown, labelled as such.
func (b *backlog[T]) statusCounts(ctx context.Context, bound int64) ([]Count, error) {
	var est map[string]int64
	if b.est != nil {
		est = b.est.estimate(ctx) // nil when the statistics are missing
	}
	out := make([]Count, len(b.t.Statuses))
	for i, s := range b.t.Statuses {
		if n, ok := est[s]; ok && n > bound {
			out[i] = Count{Status: s, N: n, Estimate: true}
			continue
		}
		n, err := b.t.Store.Count(ctx, b.count(s))
		if err != nil {
			return out, fmt.Errorf("count %s: %w", s, err)
		}
		out[i] = Count{Status: s, N: n}
	}
	return out, nil
}

func (b *backlog[T]) overview(ctx context.Context, now time.Time, bound int64) (TableOverview, error) {
	start := time.Now()
	o := TableOverview{Name: b.t.Name, Kind: b.kind, InFlight: []Lease{}}
	// The counts run next to the reads of the due rows and of the rows in
	// flight: two connections at most, which database/sql's default pool
	// keeps idle between two refreshes.
	var g errgroup.Group
	g.SetLimit(2)
	g.Go(func() error {
		counts, err := b.statusCounts(ctx, bound)
		o.Counts = counts
		return err
	})
	if b.t.Due != nil && b.dueStatuses == nil {
		// The due count is bounded by a smaller bound: it is a Find, in
		// the due order, whose first row is the oldest due.
		g.Go(func() error {
			var order []dao.Order
			if b.t.DueField != "" {
				order = []dao.Order{dao.Asc(b.t.DueField)}
			}
			due, first, err := b.boundedCount(ctx, b.t.Due(now), order, min(bound, 1000))
			if err != nil {
				return fmt.Errorf("count due: %w", err)
			}
			o.Due = due
			if first != nil && b.t.DueField != "" {
				o.OldestDue = b.age(first, now)
			}
			return nil
		})
	}
	// oldest reads the oldest due row of an outbox, whose due count
	// comes from the status counts.
	oldest := func() error {
		rows, err := b.t.Store.Find(ctx, dao.Query{Where: b.t.Due(now), OrderBy: []dao.Order{dao.Asc(b.t.DueField)}, Limit: 1})
		if err != nil {
			return fmt.Errorf("oldest due: %w", err)
		}
		if len(rows) == 1 {
			o.OldestDue = b.age(&rows[0], now)
		}
		return nil
	}
	inFlight := func() error {
		rows, err := b.t.Store.Find(ctx, dao.Query{Where: b.inFlight(now), OrderBy: []dao.Order{dao.Asc(b.t.UntilField)}, Limit: 10})
		if err != nil {
			return fmt.Errorf("in flight: %w", err)
		}
		for i := range rows {
			o.InFlight = append(o.InFlight, b.lease(&rows[i]))
		}
		return nil
	}
	if b.inFlight != nil && b.inFlightStatus == "" {
		g.Go(inFlight)
	}
	if err := g.Wait(); err != nil {
		return o, err
	}
	for _, c := range o.Counts {
		o.Total = sum(o.Total, c)
		if slices.Contains(b.t.FailedStatuses, c.Status) {
			o.Failures = sum(o.Failures, c)
		}
		if slices.Contains(b.dueStatuses, c.Status) {
			o.Due = sum(o.Due, c)
		}
		if c.Status == b.done {
			o.Done = c
		}
	}
	if b.inFlight != nil && b.inFlightStatus != "" {
		// Rows in flight are in one status: read them only when it has
		// rows.
		if i := slices.Index(b.t.Statuses, b.inFlightStatus); i >= 0 && o.Counts[i].N > 0 {
			if err := inFlight(); err != nil {
				return o, err
			}
		}
	}
	if b.t.Due != nil && b.t.DueField != "" && b.dueStatuses != nil && !o.Due.Estimate {
		// No index orders the due rows: the read sorts them, so it runs
		// only when they are few enough to be counted exactly.
		if err := oldest(); err != nil {
			return o, err
		}
	}
	o.Elapsed = float64(time.Since(start).Microseconds()) / 1000
	return o, nil
}

// age returns how long before now row's due time was, in seconds; 0 when
// it is not in the past.
func (b *backlog[T]) age(row *T, now time.Time) float64 {
	if at, ok := b.field(row, b.t.DueField).(time.Time); ok && at.Before(now) {
		return now.Sub(at).Seconds()
	}
	return 0
}

// sum adds c to total, keeping its labels.
func sum(total, c Count) Count {
	total.N += c.N
	total.Estimate = total.Estimate || c.Estimate
	total.AtLeast = total.AtLeast || c.AtLeast
	return total
}

// lease returns row's lease fields.
func (b *backlog[T]) lease(row *T) Lease {
	l := Lease{ID: fmt.Sprint(b.field(row, b.sch.PrioritizedPrimaryField.DBName))}
	l.Owner, _ = b.field(row, b.t.OwnerField).(string)
	l.Until, _ = b.field(row, b.t.UntilField).(time.Time)
	return l
}

// field returns the value of row's column col, with pointers dereferenced
// (nil for a nil pointer or an unknown column).
func (b *backlog[T]) field(row *T, col string) any {
	f := b.sch.LookUpField(col)
	if f == nil {
		return nil
	}
	v, _ := f.ValueOf(context.Background(), reflect.ValueOf(row).Elem())
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		return rv.Elem().Interface()
	}
	return v
}

// parseID turns id, as text, into a value of the primary key's type.
func (b *backlog[T]) parseID(id string) (any, error) {
	switch b.sch.PrioritizedPrimaryField.FieldType.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: id %q is not an integer", dao.ErrInvalidArgument, id)
		}
		return reflect.ValueOf(n).Convert(b.sch.PrioritizedPrimaryField.FieldType).Interface(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: id %q is not an unsigned integer", dao.ErrInvalidArgument, id)
		}
		return reflect.ValueOf(n).Convert(b.sch.PrioritizedPrimaryField.FieldType).Interface(), nil
	case reflect.String:
		return id, nil
	}
	return nil, fmt.Errorf("%w: primary key of type %s", dao.ErrInvalidArgument, b.sch.PrioritizedPrimaryField.FieldType)
}

func (b *backlog[T]) detail(ctx context.Context, id string) (RowDetail, error) {
	key, err := b.parseID(id)
	if err != nil {
		return RowDetail{}, err
	}
	row, err := b.t.Store.Get(ctx, key)
	if err != nil {
		return RowDetail{}, err
	}
	return b.rowDetail(&row), nil
}

// rowDetail builds the detail of row: every column, []byte shown as text
// when it is valid UTF-8.
func (b *backlog[T]) rowDetail(row *T) RowDetail {
	d := RowDetail{Table: b.t.Name, Fields: map[string]any{}}
	for _, f := range b.sch.Fields {
		if f.DBName == "" {
			continue
		}
		v := b.field(row, f.DBName)
		if bs, ok := v.([]byte); ok && utf8.Valid(bs) {
			v = string(bs)
		}
		d.Fields[f.DBName] = v
	}
	d.ID = fmt.Sprint(d.Fields[b.sch.PrioritizedPrimaryField.DBName])
	if js, err := textJSON(d.Fields); err == nil {
		d.JSON = js
	} else {
		d.JSON = err.Error()
	}
	if b.t.OwnerField != "" && b.t.UntilField != "" {
		if l := b.lease(row); l.Owner != "" || !l.Until.IsZero() {
			d.Lease = &l
		}
	}
	if b.t.ErrorField != "" {
		d.LastError, _ = b.field(row, b.t.ErrorField).(string)
	}
	return d
}

// textJSON returns v as indented JSON for a page. It keeps <, > and & as
// they are: the page's template escapes the text as HTML, and escaping
// them here too would show a payload's markup as \u003c… instead of its
// text.
func textJSON(v any) (string, error) {
	var js strings.Builder
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(js.String(), "\n"), nil
}

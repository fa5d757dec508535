package driver

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"gorm.io/gorm/schema"
)

// TimeForm is how a timestamp or soft-delete column stores an instant, as
// GORM's autoCreateTime, autoUpdateTime and soft-delete tags state it.
type TimeForm int

// The time forms.
const (
	// TimeValue: a time column (time.Time, *time.Time, sql.NullTime,
	// gorm.DeletedAt).
	TimeValue TimeForm = iota
	// UnixSeconds: an integer column holding seconds since the Unix epoch
	// (GORM's default for integer timestamps).
	UnixSeconds
	// UnixMillis: an integer column holding milliseconds since the Unix
	// epoch (tag value "milli").
	UnixMillis
	// UnixNanos: an integer column holding nanoseconds since the Unix
	// epoch (tag value "nano").
	UnixNanos
)

// String returns the form's name: "time", "unix seconds", "unix
// milliseconds" or "unix nanoseconds".
func (f TimeForm) String() string {
	switch f {
	case TimeValue:
		return "time"
	case UnixSeconds:
		return "unix seconds"
	case UnixMillis:
		return "unix milliseconds"
	case UnixNanos:
		return "unix nanoseconds"
	}
	return fmt.Sprintf("TimeForm(%d)", int(f))
}

// CurrentTime is a [Set] value that asks the driver to write the
// database's current time, in form Form, in the same statement: the
// dialect's clock expression instead of a bound value. The portable layer
// sends it only to a driver whose [Info].CurrentTime (Update) or
// [ClaimerInfo].CurrentTime (ClaimBatch) is true; a driver that has no such
// expression never receives it.
type CurrentTime struct{ Form TimeForm }

// DefaultTimePrecision is the precision of the application-clock times the
// portable layer writes into time columns without a precision tag: one
// millisecond, the finest that MySQL's and MariaDB's DATETIME(3) (GORM's
// default there) and Elasticsearch's date store, so the value a call
// returns is the value a later read returns.
const DefaultTimePrecision = time.Millisecond

// Timestamp is a column GORM sets automatically: autoCreateTime or
// autoUpdateTime, by tag or by the field names CreatedAt and UpdatedAt
// (GORM's "Conventions: CreatedAt / UpdatedAt").
type Timestamp struct {
	// Column is the column name.
	Column string
	// Form is how the column stores the instant.
	Form TimeForm
	// Precision is what application-clock time values are truncated to:
	// the field's precision tag (digits after the second), else
	// [DefaultTimePrecision]. Unused for the unix forms.
	Precision time.Duration
}

// Value returns now in the column's form: a time in UTC truncated to
// Precision, or an int64 count of seconds, milliseconds or nanoseconds
// since the Unix epoch (truncated, as GORM computes it).
func (ts Timestamp) Value(now time.Time) any { return timeValue(ts.Form, ts.Precision, now) }

func timeValue(f TimeForm, precision time.Duration, now time.Time) any {
	switch f {
	case UnixSeconds:
		return now.Unix()
	case UnixMillis:
		return now.UnixMilli()
	case UnixNanos:
		return now.UnixNano()
	}
	return now.UTC().Truncate(precision)
}

// SoftDelete is the soft-delete column of a model, recognized as GORM
// recognizes it: a field whose type supplies GORM's delete clauses
// (implements schema.DeleteClausesInterface). A time column
// (gorm.DeletedAt) is live while NULL and deleted by writing the current
// time. An integer column is the shape of the gorm.io/plugin/soft_delete
// plugin's DeletedAt: live while 0, deleted by writing 1 (tag
// softDelete:flag) or the current unix time in seconds (the default),
// milliseconds (softDelete:milli) or nanoseconds (softDelete:nano).
type SoftDelete struct {
	// Column is the column name.
	Column string
	// Flag is true for the 0/1 form.
	Flag bool
	// Form is how a deletion time is stored when Flag is false.
	Form TimeForm
	// Precision is what application-clock time values are truncated to
	// (see [Timestamp].Precision).
	Precision time.Duration

	live any // plain zero of an integer column; nil for a time column
}

// Live returns the condition that selects live rows: column IS NULL for a
// time column, column = 0 for an integer one, in checked form.
func (sd SoftDelete) Live() Criteria {
	if sd.live == nil {
		return Null(OpIsNull, sd.Column)
	}
	return Compare(OpEq, sd.Column, sd.live)
}

// Deleted returns the value that marks a row deleted at now: 1 for the
// flag form, else now in the column's form (see [Timestamp.Value]). The
// caller normalizes it with [Model.Normalize].
func (sd SoftDelete) Deleted(now time.Time) any {
	if sd.Flag {
		return int64(1)
	}
	return timeValue(sd.Form, sd.Precision, now)
}

// Lifecycle is what a model's GORM schema says about the columns the
// portable layer maintains itself: soft delete and automatic timestamps.
type Lifecycle struct {
	// SoftDelete is the soft-delete column, or nil when the model has none
	// (then Delete removes rows).
	SoftDelete *SoftDelete
	// Created are the autoCreateTime columns, set by Create when zero.
	Created []Timestamp
	// Updated are the autoUpdateTime columns, set by Create when zero and
	// by every Update and Claim unless the Set writes them.
	Updated []Timestamp
}

var (
	deleteClausesType = reflect.TypeFor[schema.DeleteClausesInterface]()
)

// Lifecycle returns the model's soft-delete and timestamp columns. It
// returns an error wrapping [ErrInvalidArgument] for a model with more
// than one soft-delete field, or whose soft-delete field is neither a
// time nor an integer column.
func (m *Model[T]) Lifecycle() (Lifecycle, error) {
	var lc Lifecycle
	for _, name := range m.columns {
		f := m.byName[name]
		form, isTime := timeForm(f)
		if f.AutoCreateTime > 0 && isTime {
			lc.Created = append(lc.Created, Timestamp{Column: name, Form: form(f.AutoCreateTime), Precision: precision(f)})
		}
		if f.AutoUpdateTime > 0 && isTime {
			lc.Updated = append(lc.Updated, Timestamp{Column: name, Form: form(f.AutoUpdateTime), Precision: precision(f)})
		}
		if !reflect.PointerTo(f.IndirectFieldType).Implements(deleteClausesType) {
			continue
		}
		if lc.SoftDelete != nil {
			return lc, fmt.Errorf("%w: model %s has two soft-delete fields, %q and %q", ErrInvalidArgument, m.schema.Name, lc.SoftDelete.Column, name)
		}
		sd := &SoftDelete{Column: name, Precision: precision(f)}
		switch KindOf(f) {
		case KindTime:
		case KindInt, KindUint:
			live, err := m.Normalize(f, int64(0), false)
			if err != nil {
				return lc, err
			}
			sd.live = live
			switch mode := strings.ToUpper(f.TagSettings["SOFTDELETE"]); mode {
			case "FLAG":
				sd.Flag = true
			case "MILLI":
				sd.Form = UnixMillis
			case "NANO":
				sd.Form = UnixNanos
			default:
				sd.Form = UnixSeconds
			}
		default:
			return lc, fmt.Errorf("%w: soft-delete field %q of %s is of type %s, neither a time nor an integer",
				ErrInvalidArgument, name, m.schema.Name, f.FieldType)
		}
		lc.SoftDelete = sd
	}
	return lc, nil
}

// timeForm returns how f's GORM time type maps to a TimeForm, and whether
// f is a column the portable layer can stamp (a time or integer column).
func timeForm(f *schema.Field) (func(schema.TimeType) TimeForm, bool) {
	switch KindOf(f) {
	case KindTime:
		return func(schema.TimeType) TimeForm { return TimeValue }, true
	case KindInt, KindUint:
		return func(tt schema.TimeType) TimeForm {
			switch tt {
			case schema.UnixMillisecond:
				return UnixMillis
			case schema.UnixNanosecond:
				return UnixNanos
			}
			return UnixSeconds
		}, true
	}
	return nil, false
}

// precision returns the truncation of application-clock times for f: its
// precision tag (digits after the second, 0 to 9), else
// DefaultTimePrecision.
func precision(f *schema.Field) time.Duration {
	if _, ok := f.TagSettings["PRECISION"]; !ok || f.Precision < 0 {
		return DefaultTimePrecision
	}
	d := time.Second
	for i := 0; i < f.Precision && d > time.Nanosecond; i++ {
		d /= 10
	}
	return d
}

package dispatch

import (
	"errors"
	"fmt"
	"time"

	"github.com/adhocore/gronx"

	"github.com/claimstore/claimstore/dao"
)

// ErrNoNextOccurrence reports a cron expression with no occurrence after
// the given time (a year field in the past, or a date that never comes,
// such as 30 February). A cron schedule that reaches it is marked fired.
var ErrNoNextOccurrence = errors.New("dispatch: cron expression has no future occurrence")

// CheckCron checks a cron expression and a time zone name. The expression
// has 5 fields (minute hour day-of-month month day-of-week), or 6 with a
// leading seconds field, or 7 with a trailing year, in the syntax of
// github.com/adhocore/gronx (also the tags @hourly, @daily, …). The zone is
// an IANA name for time.LoadLocation ("Europe/Berlin"); "" is UTC. Errors
// wrap [dao.ErrInvalidArgument].
func CheckCron(expr, zone string) error {
	if expr == "" || !gronx.IsValid(expr) {
		return fmt.Errorf("%w: cron expression %q", dao.ErrInvalidArgument, expr)
	}
	if _, err := loadZone(zone); err != nil {
		return err
	}
	return nil
}

func loadZone(zone string) (*time.Location, error) {
	if zone == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %v", dao.ErrInvalidArgument, zone, err)
	}
	return loc, nil
}

// NextCron returns the first occurrence of the cron expression expr
// strictly after after, in the time zone zone (see [CheckCron]), in UTC.
//
// The expression is matched against the wall-clock time of the zone, and
// every matching wall-clock time fires once:
//
//   - A wall-clock time skipped by a spring-forward change (02:30 on the
//     day Europe/Berlin moves from 02:00 to 03:00) fires at the same
//     distance past the change (03:30 summer time), once.
//   - A wall-clock time repeated by a fall-back change (02:30 on the day
//     Europe/Berlin moves from 03:00 back to 02:00) fires at its first
//     occurrence (02:30 summer time) only.
//
// Errors: [dao.ErrInvalidArgument] for a bad expression or zone;
// [ErrNoNextOccurrence] when the expression has no occurrence after after.
func NextCron(expr, zone string, after time.Time) (time.Time, error) {
	if err := CheckCron(expr, zone); err != nil {
		return time.Time{}, err
	}
	loc, _ := loadZone(zone)
	after = after.In(loc)
	// Wall-clock times are searched as UTC times with the same fields, so
	// the search itself never meets a zone change.
	wall := asUTC(after)
	for range 1000 {
		next, err := gronx.NextTickAfter(expr, wall, false)
		if err != nil || !next.After(wall) {
			return time.Time{}, fmt.Errorf("%w: %q after %s", ErrNoNextOccurrence, expr, after.Format(time.RFC3339))
		}
		t := fromWall(next, loc)
		if t.After(after) {
			return t.UTC(), nil
		}
		// The first instant of this wall-clock time is not after after (a
		// repeated hour already passed once): look further.
		wall = next
	}
	return time.Time{}, fmt.Errorf("%w: %q after %s: search limit", ErrNoNextOccurrence, expr, after.Format(time.RFC3339))
}

// asUTC returns the UTC time with t's wall-clock fields.
func asUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// fromWall returns the first instant whose wall-clock time in loc is that
// of w (a UTC time carrying the wall-clock fields); for a wall-clock time
// skipped by a zone change, the instant as far past the change as the
// time is past its start (the offset before the change applied).
func fromWall(w time.Time, loc *time.Location) time.Time {
	// The zone's offsets a day either side of w; zone changes are further
	// apart than that.
	_, before := w.Add(-24 * time.Hour).In(loc).Zone()
	_, after := w.Add(24 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		t := w.Add(-time.Duration(off) * time.Second).In(loc)
		if asUTC(t).Equal(w) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	return w.Add(-time.Duration(before) * time.Second).In(loc)
}

package dispatch

import (
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// SpecText is a schedule as an operator writes it, in text: the flags of
// `claimstore schedule add` and the console's add form both fill one and
// read it with [ParseSpec], so that both accept and refuse the same
// schedules.
type SpecText struct {
	// Key is the schedule's unique name: 1 to MaxKeyLen bytes.
	Key string
	// Cron, when set, makes a cron schedule (see [CheckCron]).
	Cron string
	// TimeZone is an IANA zone name ("Europe/Berlin"; empty is UTC): the
	// zone of Cron, or, for a once schedule, the zone of an At written
	// without an offset. With a once schedule it needs such an At.
	TimeZone string
	// At is the fire time of a once schedule: RFC 3339 with an offset
	// ("2030-01-02T03:04:05Z"), or a local time without one
	// ("2030-01-02T03:04", seconds optional) read in TimeZone.
	At string
	// In fires a once schedule this long after now; >= 0. With neither At
	// nor In a once schedule fires now.
	In time.Duration
	// Payload is handed to the handler.
	Payload string
	// MaxFailures is the number of consecutive failures at which a once
	// schedule fails and a cron schedule skips ahead; 0 takes the
	// [SchedulesConfig] default, negative is invalid.
	MaxFailures int
}

// localLayouts are the layouts of an At without an offset.
var localLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05"}

// ParseSpec checks t and returns its [Spec], with the fire time of a once
// schedule resolved against now (for In). Errors wrap
// [dao.ErrInvalidArgument] and name the field: a key of 0 or more than
// MaxKeyLen bytes; a negative MaxFailures or In; Cron with At or In; At
// with In; a bad cron expression or time zone; an At that is neither RFC
// 3339 nor a local time; an At with an offset and a TimeZone, or a
// TimeZone on a once schedule without an At (a zone that would be
// ignored).
func ParseSpec(t SpecText, now time.Time) (Spec, error) {
	if t.Key == "" || len(t.Key) > MaxKeyLen {
		return Spec{}, fmt.Errorf("%w: schedule key must be 1 to %d bytes, got %d", dao.ErrInvalidArgument, MaxKeyLen, len(t.Key))
	}
	if t.MaxFailures < 0 {
		return Spec{}, fmt.Errorf("%w: max failures %d is negative", dao.ErrInvalidArgument, t.MaxFailures)
	}
	if t.In < 0 {
		return Spec{}, fmt.Errorf("%w: in %v is negative", dao.ErrInvalidArgument, t.In)
	}
	sp := Spec{Key: t.Key, Payload: []byte(t.Payload), MaxFailures: t.MaxFailures}
	switch {
	case t.Cron != "" && (t.At != "" || t.In != 0):
		return Spec{}, fmt.Errorf("%w: a cron expression with a fire time: a schedule is either once or cron", dao.ErrInvalidArgument)
	case t.At != "" && t.In != 0:
		return Spec{}, fmt.Errorf("%w: a fire time and a delay: give one", dao.ErrInvalidArgument)
	case t.Cron != "":
		if err := CheckCron(t.Cron, t.TimeZone); err != nil {
			return Spec{}, err
		}
		sp.Cron, sp.TimeZone = t.Cron, t.TimeZone
	case t.At != "":
		if at, err := time.Parse(time.RFC3339Nano, t.At); err == nil {
			if t.TimeZone != "" {
				return Spec{}, fmt.Errorf("%w: time zone %q with a fire time that has an offset (%q): give one", dao.ErrInvalidArgument, t.TimeZone, t.At)
			}
			sp.At = at
			break
		}
		loc, err := loadZone(t.TimeZone)
		if err != nil {
			return Spec{}, err
		}
		for _, layout := range localLayouts {
			if at, err := time.ParseInLocation(layout, t.At, loc); err == nil {
				sp.At = at.UTC()
				break
			}
		}
		if sp.At.IsZero() {
			return Spec{}, fmt.Errorf("%w: fire time %q: want RFC 3339 (2030-01-02T03:04:05Z) or a local time (2030-01-02T03:04)", dao.ErrInvalidArgument, t.At)
		}
	case t.TimeZone != "":
		return Spec{}, fmt.Errorf("%w: time zone %q on a once schedule without a local fire time: it would be ignored", dao.ErrInvalidArgument, t.TimeZone)
	case t.In > 0:
		sp.At = now.Add(t.In)
	}
	return sp, nil
}

package dispatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// series returns the n next occurrences of expr in zone after start (a
// wall-clock time in zone, "2006-01-02 15:04").
func series(t *testing.T, expr, zone, start string, n int) []string {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.ParseInLocation("2006-01-02 15:04", start, loc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range n {
		next, err := dispatch.NextCron(expr, zone, at)
		if err != nil {
			t.Fatalf("NextCron(%q, %q, %v): %v", expr, zone, at, err)
		}
		if next.Location() != time.UTC {
			t.Errorf("NextCron returned %v, want UTC", next.Location())
		}
		out = append(out, next.In(loc).Format("01-02 15:04 MST"))
		at = next
	}
	return out
}

func sameSeries(t *testing.T, name string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", name, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: occurrence %d: got %s, want %s (all: %v)", name, i, got[i], want[i], got)
		}
	}
}

func TestNextCronDST(t *testing.T) {
	cases := []struct {
		name, expr, zone, start string
		want                    []string
	}{
		// Europe/Berlin springs forward on 2025-03-30 at 02:00 CET to 03:00 CEST.
		{"berlin spring daily 02:30 fires after the gap", "30 2 * * *", "Europe/Berlin", "2025-03-29 12:00",
			[]string{"03-30 03:30 CEST", "03-31 02:30 CEST", "04-01 02:30 CEST"}},
		{"berlin spring half-hourly", "*/30 * * * *", "Europe/Berlin", "2025-03-30 01:00",
			[]string{"03-30 01:30 CET", "03-30 03:00 CEST", "03-30 03:30 CEST", "03-30 04:00 CEST"}},
		// Europe/Berlin falls back on 2025-10-26 at 03:00 CEST to 02:00 CET.
		{"berlin fall daily 02:30 fires once, first pass", "30 2 * * *", "Europe/Berlin", "2025-10-25 12:00",
			[]string{"10-26 02:30 CEST", "10-27 02:30 CET", "10-28 02:30 CET"}},
		{"berlin fall half-hourly", "*/30 * * * *", "Europe/Berlin", "2025-10-26 01:00",
			[]string{"10-26 01:30 CEST", "10-26 02:00 CEST", "10-26 02:30 CEST", "10-26 03:00 CET", "10-26 03:30 CET"}},
		// America/New_York springs forward on 2025-03-09 at 02:00 EST to 03:00 EDT.
		{"new york spring daily 02:30", "30 2 * * *", "America/New_York", "2025-03-08 12:00",
			[]string{"03-09 03:30 EDT", "03-10 02:30 EDT"}},
		// America/New_York falls back on 2025-11-02 at 02:00 EDT to 01:00 EST.
		{"new york fall hourly", "0 * * * *", "America/New_York", "2025-11-02 00:00",
			[]string{"11-02 01:00 EDT", "11-02 02:00 EST", "11-02 03:00 EST"}},
		{"new york fall daily 01:30 once", "30 1 * * *", "America/New_York", "2025-11-01 12:00",
			[]string{"11-02 01:30 EDT", "11-03 01:30 EST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sameSeries(t, c.name, series(t, c.expr, c.zone, c.start, len(c.want)), c.want)
		})
	}
}

func TestNextCronSeconds(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 500_000_000, time.UTC)
	var got []time.Time
	for range 3 {
		next, err := dispatch.NextCron("*/10 * * * * *", "", at)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, next)
		at = next
	}
	for i, want := range []int{10, 20, 30} {
		if !got[i].Equal(time.Date(2025, 1, 1, 0, 0, want, 0, time.UTC)) {
			t.Errorf("occurrence %d: got %v, want second %d", i, got[i], want)
		}
	}
}

func TestNextCronNoFutureOccurrence(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, expr := range []string{"0 0 1 1 * 2020", "0 0 30 2 *"} {
		_, err := dispatch.NextCron(expr, "UTC", now)
		if !errors.Is(err, dispatch.ErrNoNextOccurrence) {
			t.Errorf("NextCron(%q): err %v, want ErrNoNextOccurrence", expr, err)
		}
	}
	// A year still ahead has one.
	next, err := dispatch.NextCron("0 0 1 1 * 2030", "UTC", now)
	if err != nil || !next.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("NextCron(2030) = %v, %v", next, err)
	}
}

func TestNextCronInvalid(t *testing.T) {
	now := time.Now()
	for _, c := range []struct{ expr, zone string }{{"", ""}, {"61 * * * *", ""}, {"not cron", ""}, {"* * * * *", "Mars/Olympus"}} {
		if _, err := dispatch.NextCron(c.expr, c.zone, now); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("NextCron(%q, %q): err %v, want ErrInvalidArgument", c.expr, c.zone, err)
		}
	}
}

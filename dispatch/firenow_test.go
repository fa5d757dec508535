package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// TestFireNow: an active schedule becomes due at the clock's now; a
// paused, fired or missing one is refused with its typed error and
// nothing changes.
func TestFireNow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		c := newClock()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{Now: c.Now})
		ctx := context.Background()
		for _, sp := range []dispatch.Spec{
			{Key: "cron", Cron: "0 3 * * *"},
			{Key: "later", At: c.Now().Add(72 * time.Hour)},
			{Key: "paused", At: c.Now().Add(time.Hour)},
		} {
			if _, _, err := sc.Add(ctx, sp); err != nil {
				t.Fatal(err)
			}
		}
		if err := sc.Pause(ctx, "paused"); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute)
		for _, key := range []string{"cron", "later"} {
			if err := sc.FireNow(ctx, key); err != nil {
				t.Fatalf("fire now %s: %v", key, err)
			}
			if got := get(t, sc, key); !got.NextFireAt.Equal(c.Now()) || got.Status != dispatch.StatusActive {
				t.Fatalf("%s after fire now: next %v status %s, want %v active", key, got.NextFireAt, got.Status, c.Now())
			}
		}
		before := get(t, sc, "paused")
		err := sc.FireNow(ctx, "paused")
		if !errors.Is(err, dispatch.ErrPaused) || errors.Is(err, dispatch.ErrTerminal) || !strings.Contains(err.Error(), "resume it first") {
			t.Fatalf("fire now of a paused schedule: %v, want ErrPaused", err)
		}
		if after := get(t, sc, "paused"); !after.NextFireAt.Equal(before.NextFireAt) || after.Status != dispatch.StatusPaused {
			t.Fatalf("paused schedule changed: %+v", after)
		}
		if _, err := store.Update(ctx, dao.Eq(dispatch.ColKey, "later"), dao.Set{dispatch.ColStatus: string(dispatch.StatusFired)}); err != nil {
			t.Fatal(err)
		}
		if err := sc.FireNow(ctx, "later"); !errors.Is(err, dispatch.ErrTerminal) {
			t.Fatalf("fire now of a fired schedule: %v, want ErrTerminal", err)
		}
		if err := sc.FireNow(ctx, "none"); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("fire now of a missing schedule: %v, want dao.ErrNotFound", err)
		}
	})
}

// TestParseSpec: the one reading of a schedule written as text, shared by
// the CLI and the console.
func TestParseSpec(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	ok := []struct {
		name string
		in   dispatch.SpecText
		want dispatch.Spec
	}{
		{"cron in a zone", dispatch.SpecText{Key: "k", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Payload: "p", MaxFailures: 3},
			dispatch.Spec{Key: "k", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Payload: []byte("p"), MaxFailures: 3}},
		{"once now", dispatch.SpecText{Key: "k"}, dispatch.Spec{Key: "k", Payload: []byte{}}},
		{"once in", dispatch.SpecText{Key: "k", In: time.Hour}, dispatch.Spec{Key: "k", At: now.Add(time.Hour), Payload: []byte{}}},
		{"once at RFC 3339", dispatch.SpecText{Key: "k", At: "2031-05-06T07:08:09+02:00"},
			dispatch.Spec{Key: "k", At: time.Date(2031, 5, 6, 5, 8, 9, 0, time.UTC), Payload: []byte{}}},
		{"once at a local time, UTC", dispatch.SpecText{Key: "k", At: "2031-05-06T07:08"},
			dispatch.Spec{Key: "k", At: time.Date(2031, 5, 6, 7, 8, 0, 0, time.UTC), Payload: []byte{}}},
		{"once at a local time in a zone", dispatch.SpecText{Key: "k", At: "2031-05-06T07:08:09", TimeZone: "Europe/Berlin"},
			dispatch.Spec{Key: "k", At: time.Date(2031, 5, 6, 7, 8, 9, 0, berlin).UTC(), Payload: []byte{}}},
	}
	for _, c := range ok {
		got, err := dispatch.ParseSpec(c.in, now)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.Key != c.want.Key || got.Cron != c.want.Cron || got.TimeZone != c.want.TimeZone || !got.At.Equal(c.want.At) ||
			string(got.Payload) != string(c.want.Payload) || got.MaxFailures != c.want.MaxFailures {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	bad := []struct {
		name string
		in   dispatch.SpecText
	}{
		{"no key", dispatch.SpecText{}},
		{"long key", dispatch.SpecText{Key: strings.Repeat("k", dispatch.MaxKeyLen+1)}},
		{"negative max failures", dispatch.SpecText{Key: "k", MaxFailures: -1}},
		{"negative in", dispatch.SpecText{Key: "k", In: -time.Second}},
		{"cron and at", dispatch.SpecText{Key: "k", Cron: "0 3 * * *", At: "2031-05-06T07:08"}},
		{"cron and in", dispatch.SpecText{Key: "k", Cron: "0 3 * * *", In: time.Hour}},
		{"at and in", dispatch.SpecText{Key: "k", At: "2031-05-06T07:08", In: time.Hour}},
		{"bad cron", dispatch.SpecText{Key: "k", Cron: "every day"}},
		{"bad zone of cron", dispatch.SpecText{Key: "k", Cron: "0 3 * * *", TimeZone: "Mars/Olympus"}},
		{"bad zone of at", dispatch.SpecText{Key: "k", At: "2031-05-06T07:08", TimeZone: "Mars/Olympus"}},
		{"bad at", dispatch.SpecText{Key: "k", At: "tomorrow"}},
		{"zone with an offset", dispatch.SpecText{Key: "k", At: "2031-05-06T07:08:09Z", TimeZone: "Europe/Berlin"}},
		{"zone on once now", dispatch.SpecText{Key: "k", TimeZone: "Europe/Berlin"}},
		{"zone on once in", dispatch.SpecText{Key: "k", In: time.Hour, TimeZone: "Europe/Berlin"}},
	}
	for _, c := range bad {
		if sp, err := dispatch.ParseSpec(c.in, now); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: got %+v, %v; want dao.ErrInvalidArgument", c.name, sp, err)
		}
	}
}

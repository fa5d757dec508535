package dispatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dispatch"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// apply writes an outcome into s as the worker's Update would.
func apply(s *dispatch.Schedule, o dispatch.Outcome) {
	for k, v := range o.Set {
		switch k {
		case dispatch.ColStatus:
			s.Status = dispatch.Status(v.(string))
		case dispatch.ColFailureCount:
			s.FailureCount = v.(int)
		case dispatch.ColNextFireAt:
			s.NextFireAt = v.(time.Time)
		case dispatch.ColLastError:
			s.LastError = v.(string)
		case dispatch.ColLastFiredAt:
			at := v.(time.Time)
			s.LastFiredAt = &at
		}
	}
}

func TestLadderOnce(t *testing.T) {
	p := dispatch.Policy{}
	s := &dispatch.Schedule{Kind: dispatch.KindOnce, Status: dispatch.StatusActive, NextFireAt: t0, MaxFailures: 5}
	now := t0
	boom := errors.New("boom")
	for i, wait := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute} {
		o := p.Decide(s, now, boom)
		apply(s, o)
		if o.Step != "retry" || s.Status != dispatch.StatusActive || s.FailureCount != i+1 || !s.NextFireAt.Equal(now.Add(wait)) || s.LastError != "boom" {
			t.Fatalf("failure %d: step %s, status %s, failures %d, next %v (want now+%v), last error %q", i+1, o.Step, s.Status, s.FailureCount, s.NextFireAt.Sub(now), wait, s.LastError)
		}
		now = s.NextFireAt.Add(3 * time.Second) // claimed a little late
	}
	o := p.Decide(s, now, boom)
	apply(s, o)
	if o.Step != "failed" || s.Status != dispatch.StatusFailed || s.FailureCount != 5 || s.LastError != "boom" {
		t.Fatalf("5th failure: step %s, status %s, failures %d, last error %q; want failed, 5", o.Step, s.Status, s.FailureCount, s.LastError)
	}
}

func TestLadderOnceSuccessAfterFailure(t *testing.T) {
	s := &dispatch.Schedule{Kind: dispatch.KindOnce, Status: dispatch.StatusActive, NextFireAt: t0, MaxFailures: 5}
	apply(s, dispatch.Policy{}.Decide(s, t0, errors.New("first try")))
	now := t0.Add(31 * time.Second)
	o := dispatch.Policy{}.Decide(s, now, nil)
	apply(s, o)
	if s.Status != dispatch.StatusFired || s.FailureCount != 0 || s.LastFiredAt == nil || !s.LastFiredAt.Equal(now) || s.LastError != "first try" {
		t.Fatalf("after success: %+v", s)
	}
}

func TestLadderCronSkipAndAdvance(t *testing.T) {
	// Every hour at minute 0; three failures allowed.
	s := &dispatch.Schedule{Kind: dispatch.KindCron, Cron: "0 * * * *", Status: dispatch.StatusActive, NextFireAt: t0.Truncate(time.Hour), MaxFailures: 3}
	now := t0
	p := dispatch.Policy{Backoff: dispatch.Doubling(10*time.Second, time.Hour, 0)}
	for i := 1; i <= 2; i++ {
		apply(s, p.Decide(s, now, errors.New("down")))
		if s.FailureCount != i || !s.NextFireAt.Equal(now.Add(10*time.Second*time.Duration(1<<(i-1)))) {
			t.Fatalf("failure %d: %+v", i, s)
		}
		now = s.NextFireAt
	}
	o := p.Decide(s, now, errors.New("still down"))
	apply(s, o)
	wantNext := now.Truncate(time.Hour).Add(time.Hour)
	if o.Step != "skipped" || s.Status != dispatch.StatusActive || s.FailureCount != 0 || !s.NextFireAt.Equal(wantNext) || s.LastError != "still down" {
		t.Fatalf("3rd failure: step %s, %+v; want skipped to %v with failures 0 and last error kept", o.Step, s, wantNext)
	}
	// Success advances to the next occurrence after now and keeps the last error.
	now = wantNext.Add(2 * time.Second)
	apply(s, p.Decide(s, now, nil))
	if !s.NextFireAt.Equal(wantNext.Add(time.Hour)) || s.LastError != "still down" || s.LastFiredAt == nil {
		t.Fatalf("success: %+v", s)
	}
}

func TestCronWithoutFutureOccurrenceFires(t *testing.T) {
	s := &dispatch.Schedule{Kind: dispatch.KindCron, Cron: "0 0 1 1 * 2030", Status: dispatch.StatusActive, NextFireAt: t0.Add(-time.Hour), MaxFailures: 3}
	o := dispatch.Policy{}.Decide(s, t0, nil)
	if o.Status != dispatch.StatusFired {
		t.Fatalf("last occurrence fired: %+v, want status fired", o)
	}
}

func TestDoubling(t *testing.T) {
	b := dispatch.Doubling(30*time.Second, 15*time.Minute, 0)
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute}
	for i, w := range want {
		if got := b(i + 1); got != w {
			t.Errorf("failure %d: %v, want %v", i+1, got, w)
		}
	}
	if got := b(1000); got != 15*time.Minute {
		t.Errorf("failure 1000: %v", got)
	}
	j := dispatch.Doubling(time.Second, time.Minute, 0.5)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := j(3) // 4 s, jittered to [2 s, 4 s]
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("jittered wait %v outside [2s, 4s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("jitter produced %d distinct waits in 200 draws", len(seen))
	}
}

func TestMisfire(t *testing.T) {
	s := &dispatch.Schedule{Kind: dispatch.KindCron, Cron: "*/5 * * * *", Status: dispatch.StatusActive, NextFireAt: t0.Add(-3 * time.Hour)}
	p := dispatch.Policy{Misfire: dispatch.MisfireSkip}
	if !p.Misfired(s, t0) {
		t.Fatal("a fire three hours late is not a misfire")
	}
	if p.Misfired(s, s.NextFireAt.Add(30*time.Second)) {
		t.Fatal("a fire 30 s late (grace 1 min) is a misfire")
	}
	o := p.Skip(s, t0)
	apply(s, o)
	if !s.NextFireAt.Equal(time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)) || s.LastError == "" || s.LastFiredAt != nil {
		t.Fatalf("after skip: %+v", s)
	}
	once := &dispatch.Schedule{Kind: dispatch.KindOnce, NextFireAt: t0.Add(-3 * time.Hour)}
	if p.Misfired(once, t0) {
		t.Fatal("a late once schedule counts as misfired")
	}
}

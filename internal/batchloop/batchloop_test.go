package batchloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
)

// records decodes the JSON log lines of buf, failing t on one that is not.
func records(t *testing.T, buf *syncbuf.Buffer) []map[string]any {
	t.Helper()
	out, err := buf.Records()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An episode of failures is one WARN, then one record of its end with
// the count; a lone failure ends at INFO; a success outside an episode
// logs nothing.
func TestFailuresOncePerEpisode(t *testing.T) {
	var buf syncbuf.Buffer
	f := Failures{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Msg: "claim failed"}
	err := fmt.Errorf("claim: %w", context.DeadlineExceeded)
	f.OK()
	for range 5 {
		f.Fail(err)
	}
	f.OK()
	f.OK()
	f.Fail(err)
	f.Stop()
	f.Stop()
	var got []string
	for _, r := range records(t, &buf) {
		got = append(got, fmt.Sprintf("%s %s %v %v", r["level"], r["msg"], r["failures"], r["ended"]))
	}
	want := []string{
		"WARN claim failed <nil> <nil>",
		"WARN claim failed: episode ended 5 succeeded",
		"WARN claim failed <nil> <nil>",
		"INFO claim failed: episode ended 1 stopped",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Run ends with a claim's ErrInvalidArgument and goes on after another
// error; Wait gets what Claim said.
func TestLoopRun(t *testing.T) {
	var buf syncbuf.Buffer
	var nexts []Next
	turn := 0
	l := Loop{
		Log: slog.New(slog.NewJSONHandler(&buf, nil)),
		Claim: func(context.Context) (Next, error) {
			turn++
			switch turn {
			case 1:
				return Again, nil
			case 2:
				return Idle, dao.ErrBusy
			case 3:
				return Short, nil
			default:
				return Idle, fmt.Errorf("bad field: %w", dao.ErrInvalidArgument)
			}
		},
		Wait: func(_ context.Context, n Next) bool { nexts = append(nexts, n); return true },
	}
	err := l.Run(context.Background())
	if !errors.Is(err, dao.ErrInvalidArgument) || turn != 4 || fmt.Sprint(nexts) != fmt.Sprint([]Next{Again, Idle, Short}) {
		t.Fatalf("Run = %v after %d turns, waits %v", err, turn, nexts)
	}
}

// Backoff: Again and Short reset the idle wait, which doubles up to Max.
func TestBackoff(t *testing.T) {
	b := Backoff{PollInterval: time.Millisecond, Max: 4 * time.Millisecond}
	ctx := context.Background()
	var idles []time.Duration
	for _, n := range []Next{Idle, Idle, Idle, Idle, Short, Idle, Again, Idle} {
		b.Wait(ctx, n)
		idles = append(idles, b.idle)
	}
	want := []time.Duration{1, 2, 4, 4, 0, 1, 0, 1}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(idles) != fmt.Sprint(want) {
		t.Fatalf("idle waits %v, want %v", idles, want)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if b.Wait(cctx, Idle) || b.Wait(cctx, Again) {
		t.Fatal("Wait reported a live context after it ended")
	}
}

// Write retries a retryable error within its timeout, detached from the
// caller's cancellation.
func TestWrite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	v, err := Write(ctx, time.Second, func(wctx context.Context) (int, error) {
		calls++
		if wctx.Err() != nil {
			return 0, wctx.Err()
		}
		if calls < 3 {
			return 0, dao.ErrBusy
		}
		return 7, nil
	})
	if v != 7 || err != nil || calls != 3 {
		t.Fatalf("Write = %d, %v after %d calls", v, err, calls)
	}
}

func TestStartWindow(t *testing.T) {
	if got := StartWindow(time.Second, 300*time.Millisecond); got != 400*time.Millisecond {
		t.Fatalf("StartWindow = %v", got)
	}
}

package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// testJobEvents subscribes to a client's events and runs jobs to each
// outcome: every job event arrives once its outcome is written (a Get at
// receipt reads the state the event reports), in the order of the job's
// outcomes, with the job's durations for work the client ran; a queue's
// pause and resume by another client arrive as queue events.
func testJobEvents(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	ctx := context.Background()
	if _, _, err := c.Subscribe("no_such_event"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("subscribe to an unknown event kind: %v, want dao.ErrInvalidArgument", err)
	}
	if _, _, err := c.SubscribeConfig(jobs.SubscribeConfig{ChanSize: -1}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("subscribe with a negative channel size: %v, want dao.ErrInvalidArgument", err)
	}
	events, unsubscribe, err := c.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	onlyCompleted, unsubscribeCompleted, err := c.Subscribe(jobs.EventJobCompleted)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribeCompleted()

	ok := insert(t, c.Client, NoteArgs{N: 1}, nil)
	flaky := insert(t, c.Client, NoteArgs{N: 2, Fail: 1}, &jobs.InsertOpts{MaxAttempts: 3})
	doomed := insert(t, c.Client, NoteArgs{N: 3, Fail: 100}, &jobs.InsertOpts{MaxAttempts: 1})
	self := insert(t, c.Client, NoteArgs{N: 4, Mode: "cancel"}, nil)
	snoozy := insert(t, c.Client, NoteArgs{N: 5, Mode: "snooze"}, nil)
	later := insert(t, c.Client, NoteArgs{N: 6}, &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	if _, err := c.Cancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]jobs.EventKind{
		ok.ID:     {jobs.EventJobCompleted},
		flaky.ID:  {jobs.EventJobFailed, jobs.EventJobCompleted},
		doomed.ID: {jobs.EventJobDiscarded},
		self.ID:   {jobs.EventJobCancelled},
		snoozy.ID: {jobs.EventJobSnoozed, jobs.EventJobCompleted},
		later.ID:  {jobs.EventJobCancelled},
	}
	finalState := map[jobs.EventKind]jobs.State{
		jobs.EventJobCompleted: jobs.StateCompleted, jobs.EventJobDiscarded: jobs.StateDiscarded, jobs.EventJobCancelled: jobs.StateCancelled,
	}
	got := map[int64][]jobs.EventKind{}
	remaining := 0
	for _, ks := range want {
		remaining += len(ks)
	}
	deadline := time.After(60 * time.Second)
	for remaining > 0 {
		var ev *jobs.Event
		select {
		case ev = <-events:
		case <-deadline:
			t.Fatalf("events after a minute: %v, want %v", got, want)
		}
		if ev.Job == nil {
			t.Errorf("job event %s without its job", ev.Kind)
			continue
		}
		id := ev.Job.ID
		got[id] = append(got[id], ev.Kind)
		remaining--
		if s, final := finalState[ev.Kind]; final {
			if ev.Job.State != s || ev.Job.FinalizedAt == nil {
				t.Errorf("%s event of job %d carries state %s, finalized at %v", ev.Kind, id, ev.Job.State, ev.Job.FinalizedAt)
			}
			// The event comes after the write: the database reads the
			// same state now.
			r, err := c.Get(ctx, id)
			if err != nil || r.State != s {
				t.Errorf("job %d read at its %s event: %+v, %v; want state %s", id, ev.Kind, r, err, s)
			}
		}
		if ev.Queue != ev.Job.Queue || ev.At.IsZero() {
			t.Errorf("%s event of job %d: queue %q at %v", ev.Kind, id, ev.Queue, ev.At)
		}
		switch {
		case id == later.ID:
			if ev.Stats != nil {
				t.Errorf("event of a job cancelled before it ran has stats %+v", *ev.Stats)
			}
		case ev.Stats == nil:
			t.Errorf("%s event of job %d has no stats", ev.Kind, id)
		case ev.Stats.Run < 0 || ev.Stats.QueueWait < 0 || ev.Stats.Complete < 0:
			t.Errorf("%s event of job %d: negative durations %+v", ev.Kind, id, *ev.Stats)
		}
		if ev.Kind == jobs.EventJobFailed {
			if errs, _ := ev.Job.AttemptErrors(); len(errs) != 1 || ev.Job.State.Final() {
				t.Errorf("failed event of job %d: state %s, errors %+v", id, ev.Job.State, errs)
			}
		}
	}
	for id, ks := range want {
		if !slices.Equal(got[id], ks) {
			t.Errorf("job %d: events %v, want %v", id, got[id], ks)
		}
	}
	// The completed-only subscription got the three completions and
	// nothing else.
	var completed []int64
	for len(completed) < 3 {
		select {
		case ev := <-onlyCompleted:
			if ev.Kind != jobs.EventJobCompleted {
				t.Errorf("a subscription to completions received %s", ev.Kind)
			}
			completed = append(completed, ev.Job.ID)
		case <-time.After(10 * time.Second):
			t.Fatalf("completions received: %v, want jobs %d, %d and %d", completed, ok.ID, flaky.ID, snoozy.ID)
		}
	}
	slices.Sort(completed)
	wantIDs := []int64{ok.ID, flaky.ID, snoozy.ID}
	slices.Sort(wantIDs)
	if !slices.Equal(completed, wantIDs) {
		t.Errorf("completions of jobs %v, want %v", completed, wantIDs)
	}

	// Queue events: another client pauses and resumes the queue; this
	// client sees both within a few ticks.
	admin := newJobClient(t, st)
	if err := admin.PauseQueue(ctx, jobs.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, jobs.EventQueuePaused, jobs.DefaultQueue)
	if err := admin.ResumeQueue(ctx, jobs.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, jobs.EventQueueResumed, jobs.DefaultQueue)
	if s := c.Stats(); s.EventsDropped != 0 {
		t.Errorf("%d events dropped with prompt readers", s.EventsDropped)
	}

	// Unsubscribing closes the channel.
	unsubscribeCompleted()
	if _, open := <-onlyCompleted; open {
		t.Error("the channel of an ended subscription is open")
	}
}

// waitEvent waits for an event of kind for queue, skipping others.
func waitEvent(t *testing.T, events <-chan *jobs.Event, kind jobs.EventKind, queue string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == kind && ev.Queue == queue {
				if ev.Job != nil {
					t.Errorf("%s event carries a job", kind)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no %s event of queue %s within 30 s", kind, queue)
		}
	}
}

// handledError is one call of the recording error handler.
type handledError struct {
	id    int64
	err   error
	panic any
	trace string
}

// recordingHandler is an ErrorHandler that records its calls and cancels
// the jobs whose text is "cancel-me".
type recordingHandler struct {
	mu    sync.Mutex
	calls []handledError
}

func (h *recordingHandler) HandleError(_ context.Context, job *jobs.Row, err error) *jobs.ErrorHandlerResult {
	h.mu.Lock()
	h.calls = append(h.calls, handledError{id: job.ID, err: err})
	h.mu.Unlock()
	if strings.Contains(job.EncodedArgs, "cancel-me") {
		return &jobs.ErrorHandlerResult{SetCancelled: true}
	}
	return nil
}

func (h *recordingHandler) HandlePanic(_ context.Context, job *jobs.Row, value any, trace string) *jobs.ErrorHandlerResult {
	h.mu.Lock()
	h.calls = append(h.calls, handledError{id: job.ID, panic: value, trace: trace})
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) of(id int64) []handledError {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []handledError
	for _, c := range h.calls {
		if c.id == id {
			out = append(out, c)
		}
	}
	return out
}

// testJobErrorHandler checks that the error handler is told of each
// failed attempt (errors, panics, timeouts) and not of successes,
// cancels and snoozes, and that its SetCancelled ends the job cancelled.
func testJobErrorHandler(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	eh := &recordingHandler{}
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.ErrorHandler = eh
		timed := jobs.WorkFunc[timeoutArgs](func(ctx context.Context, j *jobs.Job[timeoutArgs]) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if err := jobs.AddWorker(ws, timed, jobs.WithTimeout(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	})
	cancelMe := insert(t, c.Client, NoteArgs{N: 1, Fail: 100, Text: "cancel-me"}, &jobs.InsertOpts{MaxAttempts: 5})
	flaky := insert(t, c.Client, NoteArgs{N: 2, Fail: 1}, nil)
	panicky := insert(t, c.Client, NoteArgs{N: 3, Mode: "panic"}, &jobs.InsertOpts{MaxAttempts: 1})
	fine := insert(t, c.Client, NoteArgs{N: 4}, nil)
	slow := insert(t, c.Client, timeoutArgs{}, &jobs.InsertOpts{MaxAttempts: 1})

	got := waitJob(t, c.Client, cancelMe.ID, 30*time.Second, "cancelled", inState(jobs.StateCancelled))
	if errs := attemptErrors(t, got); got.Attempt != 1 || len(errs) != 1 || !strings.Contains(errs[0].Error, "attempt 1 fails") {
		t.Errorf("job the handler cancelled: attempt %d, errors %+v; want its first attempt's error kept", got.Attempt, errs)
	}
	waitJob(t, c.Client, flaky.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	waitJob(t, c.Client, panicky.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))
	waitJob(t, c.Client, fine.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	waitJob(t, c.Client, slow.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))

	if calls := eh.of(cancelMe.ID); len(calls) != 1 || calls[0].err == nil {
		t.Errorf("handler calls for the job it cancelled: %+v, want one error", calls)
	}
	if calls := eh.of(flaky.ID); len(calls) != 1 || calls[0].err == nil || !strings.Contains(calls[0].err.Error(), "attempt 1 fails") {
		t.Errorf("handler calls for a job failing once: %+v", calls)
	}
	if calls := eh.of(panicky.ID); len(calls) != 1 || fmt.Sprint(calls[0].panic) != "note 3 panics" || !strings.Contains(calls[0].trace, "goroutine") {
		t.Errorf("handler calls for a panicking job: %+v, want one panic with its value and stack", calls)
	}
	if calls := eh.of(slow.ID); len(calls) != 1 || !errors.Is(calls[0].err, jobs.ErrTimeout) {
		t.Errorf("handler calls for a job past its timeout: %+v, want one error wrapping jobs.ErrTimeout", calls)
	}
	if calls := eh.of(fine.ID); len(calls) != 0 {
		t.Errorf("handler called for a job that succeeded: %+v", calls)
	}
	if s := c.Stats(); s.Cancelled != 1 {
		t.Errorf("stats count %d cancelled jobs, want the 1 the handler cancelled", s.Cancelled)
	}
}

// testJobMiddleware checks the client's insert and work middleware and a
// kind's own: the insert middleware's metadata is stored, an invalid
// change fails the insert with nothing inserted; work middleware runs
// outermost first, sees a panic as a *jobs.PanicError, and its returned
// error decides the outcome.
func testJobMiddleware(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	ctx := context.Background()
	var mu sync.Mutex
	var trail []string
	var sawPanic bool
	note := func(s string) {
		mu.Lock()
		trail = append(trail, s)
		mu.Unlock()
	}
	stamp := jobs.InsertMiddlewareFunc(func(ctx context.Context, rows []*jobs.Row, next func(context.Context) ([]jobs.InsertResult, error)) ([]jobs.InsertResult, error) {
		for _, r := range rows {
			switch {
			case strings.Contains(r.EncodedArgs, "spoil"):
				r.Metadata = "[not an object]"
			case r.Metadata == "":
				r.Metadata = `{"stamped":true}`
			}
		}
		return next(ctx)
	})
	outer := jobs.WorkMiddlewareFunc(func(ctx context.Context, job *jobs.Row, next func(context.Context) error) error {
		note(fmt.Sprintf("outer>%d", job.ID))
		err := next(ctx)
		if p := (*jobs.PanicError)(nil); errors.As(err, &p) {
			mu.Lock()
			sawPanic = true
			mu.Unlock()
		}
		note(fmt.Sprintf("outer<%d", job.ID))
		if strings.Contains(job.EncodedArgs, "swallow") {
			return nil
		}
		return err
	})
	inner := jobs.WorkMiddlewareFunc(func(ctx context.Context, job *jobs.Row, next func(context.Context) error) error {
		note(fmt.Sprintf("inner>%d", job.ID))
		defer note(fmt.Sprintf("inner<%d", job.ID))
		return next(ctx)
	})
	if _, err := jobs.NewClient(jobs.Config{Store: st.Jobs, Middleware: []jobs.Middleware{struct{}{}}}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("new client with a middleware of neither kind: %v, want dao.ErrInvalidArgument", err)
	}
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.Middleware = []jobs.Middleware{stamp, outer}
		kinded := jobs.WorkFunc[timeoutArgs](func(context.Context, *jobs.Job[timeoutArgs]) error { return nil })
		if err := jobs.AddWorker(ws, kinded, jobs.WithMiddleware(inner)); err != nil {
			t.Fatal(err)
		}
	})
	plain := insert(t, c.Client, NoteArgs{N: 1}, nil)
	kinded := insert(t, c.Client, timeoutArgs{}, nil)
	swallowed := insert(t, c.Client, NoteArgs{N: 2, Fail: 100, Text: "swallow"}, &jobs.InsertOpts{MaxAttempts: 1})
	panicky := insert(t, c.Client, NoteArgs{N: 3, Mode: "panic"}, &jobs.InsertOpts{MaxAttempts: 1})
	if _, err := c.Insert(ctx, NoteArgs{N: 4, Text: "spoil"}, nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("insert whose middleware spoils the metadata: %v, want dao.ErrInvalidArgument", err)
	}
	if n, err := st.Jobs.Count(ctx, dao.Criteria{}); err != nil || n != 4 {
		t.Errorf("%d jobs stored (%v), want the 4 inserted whole", n, err)
	}
	for _, id := range []int64{plain.ID, kinded.ID, swallowed.ID} {
		got := waitJob(t, c.Client, id, 30*time.Second, "completed", inState(jobs.StateCompleted))
		if got.Metadata != `{"stamped":true}` {
			t.Errorf("job %d's metadata %q, want the insert middleware's", id, got.Metadata)
		}
	}
	waitJob(t, c.Client, panicky.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))
	mu.Lock()
	defer mu.Unlock()
	k := kinded.ID
	want := []string{fmt.Sprintf("outer>%d", k), fmt.Sprintf("inner>%d", k), fmt.Sprintf("inner<%d", k), fmt.Sprintf("outer<%d", k)}
	var kindTrail []string
	for _, s := range trail {
		if slices.Contains(want, s) {
			kindTrail = append(kindTrail, s)
		}
	}
	if !slices.Equal(kindTrail, want) {
		t.Errorf("middleware order for the kind with its own middleware: %v, want %v", kindTrail, want)
	}
	if slices.Contains(trail, fmt.Sprintf("inner>%d", plain.ID)) {
		t.Error("a kind's own middleware ran for another kind")
	}
	if !sawPanic {
		t.Error("the work middleware did not see the panic as a *jobs.PanicError")
	}
}

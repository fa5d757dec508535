package jobstest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/jobs"
)

// WorkOpts set the job that [Work] runs; zero fields take the defaults
// of a job inserted without options, on its first attempt.
type WorkOpts struct {
	// ID is the job's id; default 1.
	ID int64
	// Queue is the job's queue; default jobs.DefaultQueue.
	Queue string
	// Attempt is the attempt the work runs as, from 1; default 1.
	Attempt int
	// MaxAttempts is the job's max attempts; default
	// jobs.DefaultMaxAttempts.
	MaxAttempts int
	// Metadata is the job's metadata, a JSON object; nil for none.
	Metadata json.RawMessage
	// Tags are the job's tags.
	Tags []string
}

// WorkResult is the outcome of a job's work run by [Work].
type WorkResult struct {
	// Job is the job as the work saw it (state running).
	Job *jobs.Row
	// Err is the work's error: nil, an error, a *jobs.CancelError, a
	// *jobs.SnoozeError, or a *jobs.PanicError.
	Err error
	// State is the state a client would leave the job in after this
	// attempt: completed; retryable (attempts left) or discarded (the
	// last attempt) after an error, a panic or a timeout; cancelled;
	// scheduled after a snooze.
	State jobs.State
	// Snooze is the wait a snooze asked for.
	Snooze time.Duration
}

// Work runs the work that ws registers for args' kind on a job with
// args, as a client would run it, without a database: args encoded and
// decoded as JSON, the kind's timeout and its own middleware applied, a
// panic turned into an error (see jobs.Workers.Work). It fails tb
// (Fatalf) when the kind has no worker or args do not encode, and returns
// the outcome. The client's own middleware and error handler are not
// run.
//
//	res := jobstest.Work(ctx, t, workers, WelcomeArgs{To: "ada@example.com"}, nil)
//	if res.State != jobs.StateCompleted {
//		t.Fatalf("welcome job: %v", res.Err)
//	}
func Work[A jobs.Args](ctx context.Context, tb testing.TB, ws *jobs.Workers, args A, opts *WorkOpts) *WorkResult {
	tb.Helper()
	if opts == nil {
		opts = &WorkOpts{}
	}
	encoded, err := json.Marshal(args)
	if err != nil {
		tb.Fatalf("jobstest: encode args of kind %s: %v", args.Kind(), err)
	}
	now := time.Now().UTC()
	row := &jobs.Row{
		ID: max(opts.ID, 1), Kind: args.Kind(), Queue: cmp.Or(opts.Queue, jobs.DefaultQueue), State: jobs.StateRunning,
		Priority: jobs.DefaultPriority, EncodedArgs: string(encoded), Attempt: max(opts.Attempt, 1),
		MaxAttempts: cmp.Or(opts.MaxAttempts, jobs.DefaultMaxAttempts), ScheduledAt: now, AttemptedAt: &now, CreatedAt: now,
	}
	if opts.Metadata != nil {
		row.Metadata = string(opts.Metadata)
	}
	if len(opts.Tags) > 0 {
		b, _ := json.Marshal(opts.Tags)
		row.Tags = string(b)
	}
	err = ws.Work(ctx, row)
	if errors.Is(err, jobs.ErrUnknownKind) {
		tb.Fatalf("jobstest: %v", err)
	}
	res := &WorkResult{Job: row, Err: err}
	var (
		snooze *jobs.SnoozeError
		cancel *jobs.CancelError
	)
	switch {
	case err == nil:
		res.State = jobs.StateCompleted
	case errors.As(err, &snooze):
		res.State, res.Snooze = jobs.StateScheduled, snooze.Duration
	case errors.As(err, &cancel):
		res.State = jobs.StateCancelled
	case row.Attempt >= row.MaxAttempts:
		res.State = jobs.StateDiscarded
	default:
		res.State = jobs.StateRetryable
	}
	return res
}

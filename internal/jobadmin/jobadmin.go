// Package jobadmin holds what the operator's console (package ui) and the
// command line (`claimstore jobs`, `claimstore queues`) share to show and
// change jobs through a [jobs.Client]: the JSON view of a job, the
// retry, cancel and delete of many jobs with the outcome of each, a
// workflow's tasks drawn as a tree, and the view of a limited queue.
package jobadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// Job is a job as the console's JSON and `claimstore jobs --json` show it.
type Job struct {
	ID       int64      `json:"id"`
	Kind     string     `json:"kind"`
	Queue    string     `json:"queue"`
	State    jobs.State `json:"state"`
	Priority int        `json:"priority"`
	// Args and Metadata are the stored JSON, or a JSON string holding
	// the stored text when it is not JSON. Metadata is absent when none.
	Args     json.RawMessage `json:"args"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Output is the output the job's work recorded (jobs.RecordOutput),
	// absent when none.
	Output json.RawMessage `json:"output,omitempty"`
	Tags   []string        `json:"tags"`
	// Attempt is the number of attempts started; MaxAttempts the number
	// after which a failing job is discarded.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"maxAttempts"`
	// Errors are the errors of the failed attempts, oldest first.
	Errors []jobs.AttemptError `json:"errors"`
	// ErrorsText is the stored errors column when it does not parse
	// (Errors is then empty).
	ErrorsText        string     `json:"errorsText,omitempty"`
	ScheduledAt       time.Time  `json:"scheduledAt"`
	AttemptedAt       *time.Time `json:"attemptedAt,omitempty"`
	FinalizedAt       *time.Time `json:"finalizedAt,omitempty"`
	CancelRequestedAt *time.Time `json:"cancelRequestedAt,omitempty"`
	LeaseOwner        string     `json:"leaseOwner,omitempty"`
	LeaseUntil        *time.Time `json:"leaseUntil,omitempty"`
	UniqueKey         string     `json:"uniqueKey,omitempty"`
	CreatedAt         time.Time  `json:"createdAt"`
	// SequenceKey is the key of the job's sequence; SequenceHead is true
	// while the job holds it.
	SequenceKey  string `json:"sequenceKey,omitempty"`
	SequenceHead bool   `json:"sequenceHead,omitempty"`
	// BatchID is the batch the job belongs to; BatchCallback the batch
	// whose callback it is.
	BatchID       string `json:"batchId,omitempty"`
	BatchCallback string `json:"batchCallback,omitempty"`
	// WorkflowID is the workflow the job is a task of; WorkflowTask the
	// task's name.
	WorkflowID   string `json:"workflowId,omitempty"`
	WorkflowTask string `json:"workflowTask,omitempty"`
}

// View returns the view of r.
func View(r *jobs.Row) Job {
	j := Job{
		ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: r.State, Priority: r.Priority,
		Args: rawJSON(r.EncodedArgs), Tags: r.TagList(), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		ScheduledAt: r.ScheduledAt, AttemptedAt: r.AttemptedAt, FinalizedAt: r.FinalizedAt,
		CancelRequestedAt: r.CancelRequestedAt, LeaseOwner: r.LeaseOwner, LeaseUntil: r.LeaseUntil, CreatedAt: r.CreatedAt,
	}
	if r.Metadata != "" {
		j.Metadata = rawJSON(r.Metadata)
	}
	j.Output = r.Output()
	if r.UniqueKey != nil {
		j.UniqueKey = *r.UniqueKey
	}
	if r.SequenceKey != nil {
		j.SequenceKey, j.SequenceHead = *r.SequenceKey, r.SequenceHead != nil
	}
	if r.BatchID != nil {
		j.BatchID = *r.BatchID
	}
	if r.BatchCallback != nil {
		j.BatchCallback = *r.BatchCallback
	}
	if r.WorkflowID != nil {
		j.WorkflowID = *r.WorkflowID
	}
	if r.WorkflowTask != nil {
		j.WorkflowTask = *r.WorkflowTask
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	errs, err := r.AttemptErrors()
	if err != nil {
		j.ErrorsText = r.Errors
	}
	j.Errors = errs
	if j.Errors == nil {
		j.Errors = []jobs.AttemptError{}
	}
	return j
}

// rawJSON returns s when it is JSON, else s as a JSON string.
func rawJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// Indent returns the JSON text s indented for people, or s as it is when
// it is not JSON. The escapes \u003c, \u003e and \u0026 that Go's JSON
// encoder writes for <, > and & are turned back into those characters, so
// that markup reads as the text it is: the caller escapes for its output
// (html/template on a page).
func Indent(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s
	}
	return unescapeHTML(b.String())
}

// unescapeHTML replaces the escapes \u003c, \u003e and \u0026 (any case)
// in the JSON text s by <, > and &, leaving every other escape, an
// escaped backslash included, as it is.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(s[i : i+2]) // any other escape, kept whole
		i++
	}
	return b.String()
}

// LastError returns the error of the job's last failed attempt, "" when
// none.
func (j Job) LastError() string {
	if len(j.Errors) == 0 {
		return ""
	}
	return j.Errors[len(j.Errors)-1].Error
}

// Running reports whether a worker holds the job.
func (j Job) Running() bool { return j.State == jobs.StateRunning }

// Final reports whether the job is completed, cancelled or discarded.
func (j Job) Final() bool { return j.State.Final() }

// Op is an operation on jobs.
type Op string

// The operations on jobs.
const (
	// Retry makes a job available to run at once ([jobs.Client.Retry]).
	Retry Op = "retry"
	// Cancel cancels a job, or asks the client running it to stop it
	// ([jobs.Client.Cancel]).
	Cancel Op = "cancel"
	// Delete deletes a job that is not running ([jobs.Client.Delete]).
	Delete Op = "delete"
)

// ParseOp returns the Op named s. Errors wrap dao.ErrInvalidArgument.
func ParseOp(s string) (Op, error) {
	switch Op(s) {
	case Retry, Cancel, Delete:
		return Op(s), nil
	}
	return "", fmt.Errorf("%w: unknown operation %q: want retry, cancel or delete", dao.ErrInvalidArgument, s)
}

// MaxIDs is the most jobs one [Apply] changes.
const MaxIDs = 1000

// ParseIDs returns the job ids in ss, each a positive integer, in order
// and without repeats: 1 to [MaxIDs] of them. Errors wrap
// dao.ErrInvalidArgument.
func ParseIDs(ss []string) ([]int64, error) {
	if len(ss) == 0 {
		return nil, fmt.Errorf("%w: no job selected", dao.ErrInvalidArgument)
	}
	seen := map[int64]bool{}
	var ids []int64
	for _, s := range ss {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%w: job id %q is not a positive integer", dao.ErrInvalidArgument, s)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) > MaxIDs {
		return nil, fmt.Errorf("%w: %d jobs: at most %d at once", dao.ErrInvalidArgument, len(ids), MaxIDs)
	}
	return ids, nil
}

// Outcome is what an operation did to one job.
type Outcome struct {
	ID int64 `json:"id"`
	Op Op    `json:"op"`
	// Changed is true when the operation took effect: the job is
	// available again (retry), cancelled or asked to stop (cancel),
	// deleted (delete).
	Changed bool `json:"changed"`
	// State is the job's state after the operation (for a delete, the
	// state it had; running for the refused delete of a running job); ""
	// when the operation failed otherwise.
	State jobs.State `json:"state,omitempty"`
	// Text says what happened, for people: "retried, now available",
	// "running, left as it is", "cancel requested: ...".
	Text string `json:"text"`
	// Err is the operation's error (jobs.ErrRunning for the delete of a
	// running job); Error its text.
	Err   error  `json:"-"`
	Error string `json:"error,omitempty"`
}

// String returns "job ID: " and the outcome's text.
func (o Outcome) String() string { return fmt.Sprintf("job %d: %s", o.ID, o.Text) }

// Apply runs op on each of ids in turn, each through its own guarded
// write (a job that changed meanwhile is read again), and returns the
// outcome of each, in the order of ids. It stops early only when ctx
// ends; the jobs not reached then have ctx's error.
func Apply(ctx context.Context, c *jobs.Client, op Op, ids []int64) []Outcome {
	out := make([]Outcome, len(ids))
	for i, id := range ids {
		o := Outcome{ID: id, Op: op}
		if err := ctx.Err(); err != nil {
			o.Err = err
		} else {
			applyOne(ctx, c, &o)
		}
		if o.Err != nil {
			o.Error = o.Err.Error()
			if o.Text == "" {
				o.Text = "error: " + o.Error
			}
		}
		out[i] = o
	}
	return out
}

// applyOne runs o.Op on job o.ID and records the outcome in o.
func applyOne(ctx context.Context, c *jobs.Client, o *Outcome) {
	var (
		r   *jobs.Row
		err error
	)
	switch o.Op {
	case Retry:
		r, err = c.Retry(ctx, o.ID)
	case Cancel:
		r, err = c.Cancel(ctx, o.ID)
	case Delete:
		r, err = c.Delete(ctx, o.ID)
		if errors.Is(err, jobs.ErrRunning) {
			o.State, o.Text, o.Err = jobs.StateRunning, "running, not deleted: cancel it first", err
			return
		}
	default:
		err = fmt.Errorf("%w: unknown operation %q", dao.ErrInvalidArgument, o.Op)
	}
	if err != nil {
		o.Err = err
		return
	}
	o.State = r.State
	switch {
	case o.Op == Delete:
		o.Changed, o.Text = true, fmt.Sprintf("deleted (was %s)", r.State)
	case o.Op == Retry && r.State == jobs.StateAvailable:
		o.Changed, o.Text = true, "retried, now available"
	case o.Op == Cancel && r.State == jobs.StateCancelled:
		o.Changed, o.Text = true, "cancelled"
	case o.Op == Cancel && r.State == jobs.StateRunning && r.CancelRequestedAt != nil:
		o.Changed, o.Text = true, "cancel requested: the client running it stops it within a tick"
	default:
		o.Text = fmt.Sprintf("%s, left as it is", r.State)
	}
}

// Summary returns one line about outcomes of op: how many jobs changed,
// and each job that did not (the first five, then how many more).
func Summary(op Op, outcomes []Outcome) string {
	done := map[Op]string{Retry: "now available", Cancel: "cancelled or asked to stop", Delete: "deleted"}[op]
	if len(outcomes) == 1 {
		return "Job " + strings.TrimPrefix(outcomes[0].String(), "job ") + "."
	}
	changed := 0
	var others []string
	for _, o := range outcomes {
		if o.Changed {
			changed++
			continue
		}
		if len(others) < 5 {
			others = append(others, o.String())
		}
	}
	s := fmt.Sprintf("%s: %d of %d jobs %s.", strings.ToUpper(string(op[:1]))+string(op[1:]), changed, len(outcomes), done)
	if n := len(outcomes) - changed; n > 0 {
		s += " " + strings.Join(others, "; ")
		if n > len(others) {
			s += fmt.Sprintf("; and %d more", n-len(others))
		}
		s += "."
	}
	return s
}

// Err returns the errors of outcomes joined, nil when none failed.
func Err(outcomes []Outcome) error {
	var errs []error
	for _, o := range outcomes {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", o.ID, o.Err))
		}
	}
	return errors.Join(errs...)
}

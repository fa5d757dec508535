package jobs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/claimstore/claimstore/internal/argerr"
)

// State is the state of a job. A job is pending while it waits for
// other jobs (its sequence's job before it, its batch, its workflow
// dependencies), available when
// it may run (scheduled time reached), scheduled or retryable while it
// waits for a later time, running while a worker holds its lease, and
// completed, cancelled or discarded once it is final (its FinalizedAt is
// set).
type State string

// The states of a job.
const (
	// StatePending: waiting for other jobs, not claimable: a job of a
	// sequence until the sequence's job before it is final (see
	// [SequenceOpts]), a batch's callback until every job of the batch
	// is final (see [Client.InsertBatch]), a workflow's task until its
	// dependencies completed (see [Client.InsertWorkflow]). A promotion makes it
	// available (scheduled when its ScheduledAt is still ahead).
	StatePending State = "pending"
	// StateAvailable: ready to run; a worker claims it in queue order
	// (priority, then scheduled time, then id).
	StateAvailable State = "available"
	// StateScheduled: inserted, or snoozed, to run at ScheduledAt; it is
	// made available when that time comes, by the scheduler or, for a
	// snooze of at most [ScheduleAhead], by the client that wrote it.
	StateScheduled State = "scheduled"
	// StateRunning: a worker holds the job's lease and runs it. It is not
	// a stored state: a running job is stored as available with a lease
	// end in the future (see [Row]), so that a claim writes no column an
	// index holds. Reads through [Client] report it as running.
	StateRunning State = "running"
	// StateRetryable: an attempt failed and attempts are left; it runs
	// again at ScheduledAt, after the backoff, made available as a
	// scheduled job is. It reads retryable until then, whatever the
	// backoff's length.
	StateRetryable State = "retryable"
	// StateCompleted: an attempt succeeded. Final.
	StateCompleted State = "completed"
	// StateCancelled: cancelled by [Client.Cancel] or by its work
	// function ([Cancel]). Final.
	StateCancelled State = "cancelled"
	// StateDiscarded: its last attempt failed or was lost. Final.
	StateDiscarded State = "discarded"
)

// States lists every state, in lifecycle order.
func States() []State {
	return []State{StatePending, StateAvailable, StateScheduled, StateRunning, StateRetryable, StateCompleted, StateCancelled, StateDiscarded}
}

// stateBits lists the states in the order of their bits in a stored
// unique-states mask: pending, added later, takes the next bit, so that
// the masks stored before it keep their meaning.
var stateBits = []State{StateAvailable, StateScheduled, StateRunning, StateRetryable, StateCompleted, StateCancelled, StateDiscarded, StatePending}

// Final reports whether s is completed, cancelled or discarded.
func (s State) Final() bool {
	return s == StateCompleted || s == StateCancelled || s == StateDiscarded
}

// valid reports whether s is one of the states.
func (s State) valid() bool {
	for _, v := range States() {
		if s == v {
			return true
		}
	}
	return false
}

// bit returns the state's bit in a unique-states mask.
func (s State) bit() int {
	for i, v := range stateBits {
		if s == v {
			return 1 << i
		}
	}
	return 0
}

// Column names of the job table.
const (
	ColID                = "id"
	ColKind              = "kind"
	ColQueue             = "queue"
	ColState             = "state"
	ColPriority          = "priority"
	ColArgs              = "args"
	ColMetadata          = "metadata"
	ColTags              = "tags"
	ColAttempt           = "attempt"
	ColMaxAttempts       = "max_attempts"
	ColErrors            = "errors"
	ColScheduledAt       = "scheduled_at"
	ColAttemptedAt       = "attempted_at"
	ColFinalizedAt       = "finalized_at"
	ColCancelRequestedAt = "cancel_requested_at"
	ColUniqueKey         = "unique_key"
	ColUniqueStates      = "unique_states"
	ColLeaseOwner        = "lease_owner"
	ColLeaseUntil        = "lease_until"
	ColCreatedAt         = "created_at"
	ColSequenceKey       = "sequence_key"
	ColSequenceHead      = "sequence_head"
	ColSequenceRelease   = "sequence_release"
	ColBatchID           = "batch_id"
	ColBatchCallback     = "batch_callback"
	ColWorkflowID        = "workflow_id"
	ColWorkflowTask      = "workflow_task"
	ColWorkflowDeps      = "workflow_deps"
	ColWorkflowIgnore    = "workflow_ignore"
	ColWorkflowInputs    = "workflow_inputs"
)

// Size limits of the job table's columns, in bytes.
const (
	MaxKindLen  = 191
	MaxQueueLen = 128
)

// DefaultTable is the job table's name when no other is given.
const DefaultTable = "claimstore_jobs"

// Row is one row of the job table: a job, its arguments as JSON, its
// attempts and their errors, and its lease. It is a GORM model whose
// table the library owns: create it with [Migrate], which also creates
// the indexes each backend needs.
//
// The stored state of a running job is available, with a lease (LeaseOwner
// and LeaseUntil) that ends in the future: a claim writes only the lease
// and attempt columns, which no index holds, so that on PostgreSQL it is a
// HOT update (PostgreSQL manual, "Heap-Only Tuples"). The rows [Client]
// returns carry [StateRunning] for such a job; a row read through a store
// directly carries the stored state.
type Row struct {
	// ID is the job's id, assigned on insert.
	ID int64 `gorm:"primaryKey;autoIncrement"`
	// Kind names the job's args type ([Args].Kind) and so its worker.
	Kind string `gorm:"size:191;not null"`
	// Queue is the queue the job runs in.
	Queue string `gorm:"size:128;not null"`
	// State is the job's state (see [State]).
	State State `gorm:"size:16;not null"`
	// Priority orders available jobs of a queue: smaller runs first, 1
	// (the default) to [MaxPriority].
	Priority int `gorm:"size:16;not null"`
	// EncodedArgs is the job's args as JSON.
	EncodedArgs string `gorm:"column:args;not null"`
	// Metadata is a JSON object the inserter attached, "" for none.
	Metadata string `gorm:"not null"`
	// Tags is a JSON array of strings, "" for none.
	Tags string `gorm:"not null"`
	// Attempt is the number of attempts started, the current one
	// included.
	Attempt int `gorm:"size:32;not null"`
	// MaxAttempts is the number of attempts after which a failing job is
	// discarded.
	MaxAttempts int `gorm:"size:32;not null"`
	// Errors is a JSON array of the errors of failed attempts
	// ([AttemptError]), oldest first; "" for none. Read it with
	// [Row.AttemptErrors].
	Errors string `gorm:"not null"`
	// ScheduledAt is when the job may run (UTC): its insert time, the
	// time asked for, or the retry or snooze time.
	ScheduledAt time.Time `gorm:"not null"`
	// AttemptedAt is when the current or last attempt started.
	AttemptedAt *time.Time
	// FinalizedAt is when the job reached a final state.
	FinalizedAt *time.Time
	// CancelRequestedAt is when [Client.Cancel] asked a running job to
	// stop; its worker cancels the work's context within a tick.
	CancelRequestedAt *time.Time
	// UniqueKey is the hex SHA-256 of the job's unique properties
	// ([UniqueOpts]) while the job is in one of its unique states, else
	// NULL. A unique index on it makes the database refuse a second job
	// with the same key.
	UniqueKey *string `gorm:"size:64;uniqueIndex:,where:unique_key IS NOT NULL"`
	// UniqueStates is the bit mask of the states in which the unique key
	// is held (0 for a job that is not unique).
	UniqueStates int `gorm:"size:16;not null"`
	// LeaseOwner is the lease owner token of the worker claim that holds
	// the job, "" when none.
	LeaseOwner string `gorm:"size:191;not null"`
	// LeaseUntil is the end of the current (or last) lease.
	LeaseUntil *time.Time
	// CreatedAt is when the job was inserted.
	CreatedAt time.Time `gorm:"not null"`
	// SequenceKey is the key of the job's sequence ([SequenceOpts]),
	// NULL for a job in none.
	SequenceKey *string `gorm:"size:191"`
	// SequenceHead is the sequence key while the job holds its sequence
	// (from its promotion until it is final, and after a cancel or
	// discard that does not release it), else NULL. A unique index on it
	// makes the database refuse a second holder: at most one job of a
	// sequence runs or waits to run at a time.
	SequenceHead *string `gorm:"size:191;uniqueIndex:,where:sequence_head IS NOT NULL"`
	// SequenceRelease is the mask of the final states in which the job
	// releases its sequence (completed always; cancelled and discarded
	// as [SequenceOpts] says); 0 outside a sequence.
	SequenceRelease int `gorm:"size:16;not null;default:0"`
	// BatchID is the id of the batch the job belongs to
	// ([Client.InsertBatch]), NULL for none.
	BatchID *string `gorm:"size:64"`
	// BatchCallback is, on a batch's callback job, the id of the batch
	// it waits for, else NULL.
	BatchCallback *string `gorm:"size:64"`
	// WorkflowID is the id of the workflow the job is a task of
	// ([Client.InsertWorkflow]), NULL for none.
	WorkflowID *string `gorm:"size:64"`
	// WorkflowTask is the job's task name in its workflow, NULL outside
	// one.
	WorkflowTask *string `gorm:"size:128"`
	// WorkflowDeps is a JSON array of the names of the tasks of its
	// workflow the job depends on, NULL for none. Read it with
	// [Row.Dependencies].
	WorkflowDeps *string
	// WorkflowIgnore is the mask of the final states of a dependency
	// that do not cancel the job (cancelled, discarded, as
	// [WorkflowTask] and [Workflow] say); 0 for none.
	WorkflowIgnore int `gorm:"size:16;not null;default:0"`
	// WorkflowInputs is a JSON object of the outputs its completed
	// dependencies recorded ([RecordOutput]), by task name, written when
	// the job is promoted; NULL for none. Read it with
	// [Row.DependencyOutput].
	WorkflowInputs *string

	// args is the decoded Args of a claimed job, set by the client
	// before its work runs (see Client.prepare); not a column.
	args decodedArgs
	// info is what the client keeps of a claimed job's attempt for its
	// event (see Client.written); not a column.
	info attemptInfo
}

// decodedArgs is the result of decoding a row's args for its kind's
// worker.
type decodedArgs struct {
	ok  bool // decoded (v or err set)
	v   any  // a pointer to the kind's Args value
	err error
}

// TableName returns [DefaultTable].
func (Row) TableName() string { return DefaultTable }

// LibraryTable returns true: the job table and its indexes are created by
// [Migrate] for the claim this package runs, so the row implements
// dao.LibraryTable and a job store claims on its backend's fast path by
// default. On MySQL 8.0.1+ and MariaDB 10.6+ that is one READ COMMITTED
// transaction of SELECT … FOR UPDATE SKIP LOCKED over the fetch index and
// one UPDATE by primary key, where a user's table keeps the portable
// default (docs/jobs.md, "Backends"). A store built with
// sqlstore.WithStrategy(dao.StrategyPortable) still claims with the
// portable default.
func (Row) LibraryTable() bool { return true }

// AttemptError is the error of one failed attempt, as kept in
// [Row].Errors.
type AttemptError struct {
	// Attempt is the attempt's number, from 1.
	Attempt int `json:"attempt"`
	// At is when the attempt ended (UTC).
	At time.Time `json:"at"`
	// Error is the error's text.
	Error string `json:"error"`
	// Trace is the stack of a panic, "" otherwise.
	Trace string `json:"trace,omitempty"`
}

// AttemptErrors returns the errors of the job's failed attempts, oldest
// first. A malformed Errors column is an error.
func (r *Row) AttemptErrors() ([]AttemptError, error) {
	if r.Errors == "" {
		return nil, nil
	}
	var out []AttemptError
	if err := json.Unmarshal([]byte(r.Errors), &out); err != nil {
		return nil, fmt.Errorf("jobs: job %d: errors column: %w", r.ID, err)
	}
	return out, nil
}

// TagList returns the job's tags.
func (r *Row) TagList() []string {
	if r.Tags == "" {
		return nil
	}
	var out []string
	if json.Unmarshal([]byte(r.Tags), &out) != nil {
		return nil
	}
	return out
}

// running reports whether the stored row is a running job at now: stored
// available with a lease that ends after now.
func (r *Row) running(now time.Time) bool {
	return r.State == StateAvailable && r.LeaseOwner != "" && r.LeaseUntil != nil && r.LeaseUntil.After(now)
}

// present sets State to running for a job that runs at now.
func (r *Row) present(now time.Time) {
	if r.running(now) {
		r.State = StateRunning
	}
}

// Queue is one queue row of the queue table: the pause state of a named queue,
// stored so that every process obeys it, and the kinds the clients that
// run it know. A queue without a row is active.
type Queue struct {
	// Name is the queue's name.
	Name string `gorm:"primaryKey;size:128"`
	// PausedAt is when the queue was paused; nil while it is active.
	PausedAt *time.Time
	// Kinds is a JSON object of the kinds the clients running the queue
	// have workers for, each with when a client last recorded it (every
	// [KindsRefresh]); nil before any client recorded one.
	Kinds *string
	// UpdatedAt is when the row last changed.
	UpdatedAt time.Time `gorm:"not null"`
}

// DefaultQueueTable is the queue table's name when no other is given.
const DefaultQueueTable = "claimstore_job_queues"

// TableName returns [DefaultQueueTable].
func (Queue) TableName() string { return DefaultQueueTable }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// CheckQueue returns nil when name is a valid queue name: 1 to
// [MaxQueueLen] bytes of ASCII letters, digits, '_', '.', ':' and '-'.
// Other names wrap dao.ErrInvalidArgument.
func CheckQueue(name string) error {
	if len(name) > MaxQueueLen || !nameRE.MatchString(name) {
		return argerr.Errorf("queue name %q: use 1-%d letters, digits, '_', '.', ':' or '-'", name, MaxQueueLen)
	}
	return nil
}

// CheckKind returns nil when kind is a valid job kind: 1 to [MaxKindLen]
// bytes of ASCII letters, digits, '_', '.', ':' and '-'. Other kinds wrap
// dao.ErrInvalidArgument.
func CheckKind(kind string) error {
	if len(kind) > MaxKindLen || !nameRE.MatchString(kind) {
		return argerr.Errorf("kind %q: use 1-%d letters, digits, '_', '.', ':' or '-'", kind, MaxKindLen)
	}
	return nil
}

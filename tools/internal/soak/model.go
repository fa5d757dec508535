//go:build linux

package soak

import (
	"hash/crc32"
	"strings"
	"time"
)

// Order is the business row a producer writes, with its message and its
// job, in one transaction.
type Order struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	Number    string `gorm:"size:64;not null;uniqueIndex"`
	Amount    int64  `gorm:"not null"`
	CreatedAt time.Time
}

// Job statuses.
const (
	JobQueued = "queued"
	JobDone   = "done"
)

// Job is one row of the jobs table a dispatch.Worker runs: queued until a
// handler's outcome, written fenced by its lease owner, marks it done and
// records that owner in DoneBy.
type Job struct {
	ID         int64      `gorm:"primaryKey;autoIncrement;index:,composite:due,priority:2"`
	Key        string     `gorm:"column:job_key;size:64;not null;uniqueIndex"`
	Status     string     `gorm:"size:16;not null;index:,composite:due,priority:1"`
	LeaseOwner string     `gorm:"size:191;not null"`
	LeaseUntil *time.Time `gorm:"precision:6"`
	DoneBy     string     `gorm:"size:191;not null"`
	DoneAt     *time.Time `gorm:"precision:6"`
}

// Fence is the one row the leader writes with coord.FencedUpdate: Term is
// the term of the last write that landed.
type Fence struct {
	ID     int64  `gorm:"primaryKey"`
	Term   *int64 `gorm:"column:term"`
	Writer string `gorm:"size:191;not null"`
}

// FenceLog records each fenced write that landed, in the transaction of
// the write: the write holds the fence row's lock until it commits, so the
// log's ids follow the order in which the writes landed.
type FenceLog struct {
	ID     int64  `gorm:"primaryKey;autoIncrement"`
	Term   int64  `gorm:"not null"`
	Writer string `gorm:"size:191;not null"`
}

// Tables are the names of a run's tables, all prefixed soak_<tag>_.
type Tables struct {
	Orders, Jobs, Outbox, Schedules, Leaders, Fence, FenceLog string
	// QJobs is the job table of package jobs (its schema-version table
	// and, on PostgreSQL, its notify function are named after it;
	// jobs.Drop removes them).
	QJobs string
	// WM is the Watermill message table (with its deliveries and groups
	// tables, named after it by the watermill module); empty in a run
	// without subscribers.
	WM string
}

func (t Tables) prefix() string { return strings.TrimSuffix(t.Orders, "orders") }

// WMDeliveries is the delivery table of the Watermill message table (one
// row per message and consumer group).
func (t Tables) WMDeliveries() string { return t.WM + "_deliveries" }

// NewTables returns the table names of the run tagged tag.
func NewTables(tag string) Tables {
	p := "soak_" + tag + "_"
	return Tables{Orders: p + "orders", Jobs: p + "jobs", Outbox: p + "outbox", Schedules: p + "schedules",
		Leaders: p + "leaders", Fence: p + "fence", FenceLog: p + "fence_log", QJobs: p + "qjobs"}
}

// OrderJob is the args of the queue job (package jobs) a producer inserts
// for every order, in the order's transaction.
type OrderJob struct {
	Order string `json:"order"`
}

// Kind implements jobs.Args.
func (OrderJob) Kind() string { return "soak.order" }

// LimitedQueue is the queue of package jobs whose jobs run under a global
// limit of LimitedMax at once across every worker process.
const (
	LimitedQueue = "limited"
	LimitedMax   = 3
)

// LimitedJob is the args of the job of the limited queue a producer
// inserts, in the order's transaction, for one order in 10
// ([limitedFor]).
type LimitedJob struct {
	Order string `json:"order"`
}

// Kind implements jobs.Args.
func (LimitedJob) Kind() string { return "soak.limited" }

// limitedFor reports whether order has a job in the limited queue: one
// order in 10, by a digest of its number (another than plannedFailure's).
func limitedFor(order string) bool { return crc32.ChecksumIEEE([]byte("limited:"+order))%10 == 0 }

// TaskJob is the args of a workflow task's job: WF is the workflow's label
// in the run ("wf3"), Task the task's name in it.
type TaskJob struct {
	WF   string `json:"wf"`
	Task string `json:"task"`
}

// Kind implements jobs.Args.
func (TaskJob) Kind() string { return "soak.task" }

// Key is the task's key in the histories and the report: "wf3/t07".
func (a TaskJob) Key() string { return a.WF + "/" + a.Task }

// plannedFailure reports whether the first attempt of the queue job of
// order fails on purpose (one order in 20, by a digest of its number), so
// that the run has retries to check.
func plannedFailure(order string) bool { return crc32.ChecksumIEEE([]byte(order))%20 == 0 }

// errPlanned is the error of a first attempt that fails on purpose.
const errPlanned = "planned failure of the first attempt"

// All returns every table name.
func (t Tables) All() []string {
	all := []string{t.Orders, t.Jobs, t.Outbox, t.Schedules, t.Leaders, t.Fence, t.FenceLog}
	if t.WM != "" {
		all = append(all, t.WM, t.WMDeliveries(), t.WM+"_groups")
	}
	return all
}

package conformance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// Job is the suite's model: a work item with the columns a claim queue
// needs. A harness creates its table (for SQL stores, with the store's
// migration) and hands the suite a [dao.Store] of Job.
//
// Column names, as the criteria use them: id, status, priority, payload,
// locked_by, locked_until, attempts, max_attempts, created_at, note,
// weight. LockedBy, LockedUntil and Note are nullable; Note exists for the
// NULL tests and is never written by a claim; Weight is the float column of
// the bad-value tests. The index on (status, priority)
// serves the claims of the concurrency tests; GORM names it after the
// table (idx_<table>_claim).
type Job struct {
	ID          int64   `gorm:"primaryKey"`
	Status      string  `gorm:"size:32;not null;index:,composite:claim,priority:1"`
	Priority    int     `gorm:"not null;index:,composite:claim,priority:2"`
	Payload     string  `gorm:"size:255;not null"`
	LockedBy    *string `gorm:"size:64"`
	LockedUntil *time.Time
	Attempts    int       `gorm:"not null"`
	MaxAttempts int       `gorm:"not null"`
	CreatedAt   time.Time `gorm:"not null"`
	Note        *string   `gorm:"size:64"`
	Weight      float64   `gorm:"not null"`
}

// TableName returns the default table name of [Job], conformance_jobs. A
// harness normally stores each test's rows under a fresh table name of its
// own instead.
func (Job) TableName() string { return "conformance_jobs" }

// Status values the suite writes.
const (
	statusReady   = "ready"
	statusClaimed = "claimed"
)

func ptr[V any](v V) *V { return &v }

// baseTime returns a whole-second UTC time, so that every backend (MySQL
// DATETIME included) stores it exactly.
func baseTime() time.Time { return time.Now().UTC().Truncate(time.Second) }

// createBatch is the number of rows one Create call of the suite inserts
// when it seeds a table. Small statements bind fastest on the pure-Go
// SQLite driver, whose cost per statement grows faster than its number of
// bound values.
const createBatch = 100

// seed inserts n ready jobs, lets fill adjust job i, and returns the stored
// rows with their assigned ids.
func seed(t testing.TB, s dao.Store[Job], n int, fill func(i int, j *Job)) []Job {
	t.Helper()
	base := baseTime()
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = Job{
			Status:      statusReady,
			Priority:    0,
			Payload:     fmt.Sprintf("job-%d", i),
			MaxAttempts: 3,
			CreatedAt:   base.Add(time.Duration(i) * time.Second),
		}
		if fill != nil {
			fill(i, &jobs[i])
		}
	}
	ctx := context.Background()
	for lo := 0; lo < n; lo += createBatch {
		hi := min(lo+createBatch, n)
		ptrs := make([]*Job, 0, hi-lo)
		for i := lo; i < hi; i++ {
			ptrs = append(ptrs, &jobs[i])
		}
		if err := s.Create(ctx, ptrs...); err != nil {
			t.Fatalf("seed: Create rows %d..%d: %v", lo, hi-1, err)
		}
	}
	seen := map[int64]bool{}
	for _, j := range jobs {
		if j.ID == 0 || seen[j.ID] {
			t.Fatalf("seed: Create assigned ids that are zero or repeated: %v", ids(jobs))
		}
		seen[j.ID] = true
	}
	return jobs
}

// snapshot returns every row of s, by id.
func snapshot(t testing.TB, s dao.Store[Job]) map[int64]Job {
	t.Helper()
	rows, err := s.Find(context.Background(), dao.Query{})
	if err != nil {
		t.Fatalf("Find all: %v", err)
	}
	out := make(map[int64]Job, len(rows))
	for _, r := range rows {
		if _, dup := out[r.ID]; dup {
			t.Fatalf("Find all returned id %d twice", r.ID)
		}
		out[r.ID] = r
	}
	return out
}

// assertUnchanged fails t when the rows of s differ from before.
func assertUnchanged(t testing.TB, s dao.Store[Job], before map[int64]Job, what string) {
	t.Helper()
	after := snapshot(t, s)
	if len(after) != len(before) {
		t.Errorf("%s: table changed: %d rows before, %d after", what, len(before), len(after))
	}
	for id, b := range before {
		a, ok := after[id]
		if !ok {
			t.Errorf("%s: row %d disappeared", what, id)
			continue
		}
		if d := diffJob(b, a); d != "" {
			t.Errorf("%s: row %d changed: %s", what, id, d)
		}
	}
}

// timeTolerance is how far apart two times may be and still count as equal:
// MySQL DATETIME without fractional precision rounds to the second.
const timeTolerance = time.Second

func sameTime(a, b time.Time) bool {
	d := a.Sub(b)
	return d < timeTolerance && d > -timeTolerance
}

func sameTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameTime(*a, *b)
}

func samePtr[V comparable](a, b *V) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func fmtPtr[V any](p *V) string {
	if p == nil {
		return "NULL"
	}
	return fmt.Sprint(*p)
}

// diffJob describes how got differs from want ("" when they are equal),
// comparing times with [timeTolerance].
func diffJob(want, got Job) string {
	var d []string
	add := func(col string, w, g any) { d = append(d, fmt.Sprintf("%s: want %v, got %v", col, w, g)) }
	if want.ID != got.ID {
		add("id", want.ID, got.ID)
	}
	if want.Status != got.Status {
		add("status", want.Status, got.Status)
	}
	if want.Priority != got.Priority {
		add("priority", want.Priority, got.Priority)
	}
	if want.Payload != got.Payload {
		add("payload", want.Payload, got.Payload)
	}
	if !samePtr(want.LockedBy, got.LockedBy) {
		add("locked_by", fmtPtr(want.LockedBy), fmtPtr(got.LockedBy))
	}
	if !sameTimePtr(want.LockedUntil, got.LockedUntil) {
		add("locked_until", fmtPtr(want.LockedUntil), fmtPtr(got.LockedUntil))
	}
	if want.Attempts != got.Attempts {
		add("attempts", want.Attempts, got.Attempts)
	}
	if want.MaxAttempts != got.MaxAttempts {
		add("max_attempts", want.MaxAttempts, got.MaxAttempts)
	}
	if !sameTime(want.CreatedAt, got.CreatedAt) {
		add("created_at", want.CreatedAt, got.CreatedAt)
	}
	if !samePtr(want.Note, got.Note) {
		add("note", fmtPtr(want.Note), fmtPtr(got.Note))
	}
	if want.Weight != got.Weight {
		add("weight", want.Weight, got.Weight)
	}
	return strings.Join(d, "; ")
}

func ids(rows []Job) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func sortedIDs(rows []Job) []int64 {
	out := ids(rows)
	slices.Sort(out)
	return out
}

// filterIDs returns the sorted ids of the rows pred accepts.
func filterIDs(rows []Job, pred func(j *Job) bool) []int64 {
	var out []int64
	for i := range rows {
		if pred(&rows[i]) {
			out = append(out, rows[i].ID)
		}
	}
	slices.Sort(out)
	return out
}

// sortJobs sorts rows in place by less, then by id.
func sortJobs(rows []Job, less func(a, b *Job) int) {
	sort.SliceStable(rows, func(i, j int) bool {
		if c := less(&rows[i], &rows[j]); c != 0 {
			return c < 0
		}
		return rows[i].ID < rows[j].ID
	})
}

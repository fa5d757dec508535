package bench

import (
	"strconv"

	"github.com/claimstore/claimstore/dao"
)

// Job is the row the benchmark loads and claims: a queue entry reduced to
// the columns a claim reads and writes. The index that serves the
// eligibility query "status = 'pending' ORDER BY id" depends on the
// backend and is created with the table (see [EligibilityIndex]).
type Job struct {
	ID       int64  `gorm:"primaryKey;autoIncrement:false"`
	Status   string `gorm:"size:16;not null"`
	LockedBy string `gorm:"size:64;not null;default:''"`
	Attempts int64  `gorm:"not null;default:0"`
	Payload  string `gorm:"size:255;not null"`
}

// Status values of a [Job].
const (
	StatusPending = "pending"
	StatusClaimed = "claimed"
)

// payload is the fixed 64-byte payload of every loaded row.
const payload = "claimstore-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz..."

// WorkerName returns the locked_by value written by worker number w.
func WorkerName(w int) string { return "worker-" + strconv.Itoa(w) }

// ClaimRequest returns the claim the benchmark issues for worker w: up to
// limit pending rows, smallest id first, set to claimed, locked by w, with
// attempts incremented by one.
func ClaimRequest(w, limit int) dao.ClaimRequest {
	return dao.ClaimRequest{
		Where:   dao.Eq("status", StatusPending),
		Set:     dao.Set{"status": StatusClaimed, "locked_by": WorkerName(w), "attempts": dao.Incr(1)},
		Limit:   limit,
		OrderBy: []dao.Order{dao.Asc("id")},
	}
}

// PendingCriteria selects the rows that are still claimable.
func PendingCriteria() dao.Criteria { return dao.Eq("status", StatusPending) }

// NewJobs returns the jobs with ids first .. first+n-1, all pending.
func NewJobs(first int64, n int) []Job {
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = Job{ID: first + int64(i), Status: StatusPending, Payload: payload}
	}
	return jobs
}

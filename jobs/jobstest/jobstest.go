// Package jobstest helps a program's tests check the jobs its code
// inserts, in the manner of net/http/httptest: [RequireInserted] asserts
// that a job of a kind with given args was inserted, through the store
// or inside the transaction under test, and returns it decoded.
//
//	func TestSignUpQueuesTheWelcomeMail(t *testing.T) {
//		tx := db.Begin()
//		defer tx.Rollback()
//		if err := signUp(ctx, tx, "ada@example.com"); err != nil {
//			t.Fatal(err)
//		}
//		job := jobstest.RequireInsertedTx(ctx, t, store, tx, WelcomeArgs{To: "ada@example.com"}, nil)
//		_ = job.ID
//	}
package jobstest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// Opts are further properties a job found by [RequireInserted] must have;
// zero fields are not checked.
type Opts struct {
	// Queue, Priority, MaxAttempts and State are compared as is (State
	// with the stored state: a running job is stored available).
	Queue       string
	Priority    int
	MaxAttempts int
	State       jobs.State
	// ScheduledAt is compared to within a second.
	ScheduledAt time.Time
	// Tags must all be among the job's tags.
	Tags []string
	// AnyArgs matches a job of the kind whatever its args.
	AnyArgs bool
}

// RequireInserted fails tb (Fatalf) unless store holds a job of want's
// kind whose args equal want (as decoded from the job's JSON, compared
// with reflect.DeepEqual) and that has the properties of opts (nil: none),
// and returns the most recent such job, decoded. On failure it lists the
// jobs of the kind it found.
func RequireInserted[A jobs.Args](ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], want A, opts *Opts) *jobs.Job[A] {
	tb.Helper()
	return find(ctx, tb, store, want, opts)
}

// RequireInsertedTx is [RequireInserted] inside tx, the caller's open
// transaction (a *gorm.DB for the SQL backends), so that a job the
// transaction inserted and has not committed is found.
func RequireInsertedTx[A jobs.Args](ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], tx any, want A, opts *Opts) *jobs.Job[A] {
	tb.Helper()
	t, ok := store.(dao.TxBinder[jobs.Row])
	if !ok {
		tb.Fatalf("jobstest: store %T runs no caller transactions", store)
	}
	return find(ctx, tb, t.WithTx(tx), want, opts)
}

// RequireNotInserted fails tb (Fatalf) when store holds a job of kind.
func RequireNotInserted(ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], kind string) {
	tb.Helper()
	rows, err := store.Find(ctx, dao.Query{Where: dao.Eq(jobs.ColKind, kind), Limit: 10})
	if err != nil {
		tb.Fatalf("jobstest: read jobs of kind %s: %v", kind, err)
	}
	if len(rows) > 0 {
		tb.Fatalf("jobstest: want no job of kind %s, found %d: %s", kind, len(rows), describe(rows))
	}
}

// find returns the newest job of want's kind matching want and opts.
func find[A jobs.Args](ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], want A, opts *Opts) *jobs.Job[A] {
	tb.Helper()
	if opts == nil {
		opts = &Opts{}
	}
	kind := want.Kind()
	rows, err := store.Find(ctx, dao.Query{Where: dao.Eq(jobs.ColKind, kind), OrderBy: []dao.Order{dao.Desc(jobs.ColID)}, Limit: 1000})
	if err != nil {
		tb.Fatalf("jobstest: read jobs of kind %s: %v", kind, err)
	}
	for i := range rows {
		r := &rows[i]
		var got A
		if err := json.Unmarshal([]byte(r.EncodedArgs), &got); err != nil {
			tb.Fatalf("jobstest: job %d: decode args %s: %v", r.ID, r.EncodedArgs, err)
		}
		if (opts.AnyArgs || reflect.DeepEqual(got, want)) && matches(r, opts) {
			return &jobs.Job[A]{Row: r, Args: got}
		}
	}
	wantJSON, _ := json.Marshal(want)
	tb.Fatalf("jobstest: no job of kind %s with args %s and %+v; found %d of the kind: %s", kind, wantJSON, *opts, len(rows), describe(rows))
	return nil
}

// matches reports whether r has the properties of o.
func matches(r *jobs.Row, o *Opts) bool {
	switch {
	case o.Queue != "" && r.Queue != o.Queue,
		o.Priority != 0 && r.Priority != o.Priority,
		o.MaxAttempts != 0 && r.MaxAttempts != o.MaxAttempts,
		o.State != "" && r.State != o.State:
		return false
	case !o.ScheduledAt.IsZero():
		if d := r.ScheduledAt.Sub(o.ScheduledAt); d < -time.Second || d > time.Second {
			return false
		}
	}
	tags := r.TagList()
	for _, t := range o.Tags {
		if !slices.Contains(tags, t) {
			return false
		}
	}
	return true
}

// describe lists rows for a failure message: id, queue, state and args
// of the first ten.
func describe(rows []jobs.Row) string {
	var b strings.Builder
	for i, r := range rows {
		if i == 10 {
			fmt.Fprintf(&b, " … and %d more", len(rows)-10)
			break
		}
		fmt.Fprintf(&b, "\n  job %d: queue %s, state %s, priority %d, args %s", r.ID, r.Queue, r.State, r.Priority, r.EncodedArgs)
	}
	return b.String()
}

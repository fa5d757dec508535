// Package jobstest helps a program's tests check the jobs its code
// inserts and the work functions it registers, in the manner of
// net/http/httptest: [RequireInserted] asserts that a job of a kind with
// given args was inserted, through the store or inside the transaction
// under test, and returns it decoded; [RequireManyInserted] asserts the
// whole sequence of jobs of some kinds; [Work] runs a work function on a
// job without a database and says what the job's state would become;
// [Gate] holds the work of running jobs until the test lets them finish.
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

// ExpectedJob is one job [RequireManyInserted] expects: a job of Args'
// kind whose args equal Args (unless Opts.AnyArgs) and that has the
// properties of Opts (nil: none).
type ExpectedJob struct {
	Args jobs.Args
	Opts *Opts
}

// RequireManyInserted fails tb (Fatalf) unless the jobs that store holds
// of the kinds in expected are exactly the expected ones, in the order
// they were inserted (by id), each with its args (decoded into the type
// of the expected args and compared with reflect.DeepEqual) and the
// properties of its Opts; jobs of other kinds are not looked at. It
// returns the jobs found, in order. On failure it lists the jobs of those
// kinds.
func RequireManyInserted(ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], expected []ExpectedJob) []*jobs.Row {
	tb.Helper()
	return findMany(ctx, tb, store, expected)
}

// RequireManyInsertedTx is [RequireManyInserted] inside tx, the
// caller's open transaction (a *gorm.DB for the SQL backends).
func RequireManyInsertedTx(ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], tx any, expected []ExpectedJob) []*jobs.Row {
	tb.Helper()
	t, ok := store.(dao.TxBinder[jobs.Row])
	if !ok {
		tb.Fatalf("jobstest: store %T runs no caller transactions", store)
	}
	return findMany(ctx, tb, t.WithTx(tx), expected)
}

// findMany checks that the jobs of expected's kinds are expected, in
// order.
func findMany(ctx context.Context, tb testing.TB, store dao.Store[jobs.Row], expected []ExpectedJob) []*jobs.Row {
	tb.Helper()
	if len(expected) == 0 {
		tb.Fatalf("jobstest: RequireManyInserted without expected jobs")
	}
	var kinds []any
	for _, e := range expected {
		if e.Args == nil {
			tb.Fatalf("jobstest: an expected job without args")
		}
		if k := e.Args.Kind(); !slices.Contains(kinds, any(k)) {
			kinds = append(kinds, k)
		}
	}
	rows, err := store.Find(ctx, dao.Query{Where: dao.In(jobs.ColKind, kinds...), OrderBy: []dao.Order{dao.Asc(jobs.ColID)}, Limit: len(expected) + 10})
	if err != nil {
		tb.Fatalf("jobstest: read jobs of kinds %v: %v", kinds, err)
	}
	if len(rows) != len(expected) {
		tb.Fatalf("jobstest: want %d jobs of kinds %v, found %d: %s", len(expected), kinds, len(rows), describe(rows))
	}
	out := make([]*jobs.Row, len(rows))
	for i := range rows {
		r, e := &rows[i], expected[i]
		opts := e.Opts
		if opts == nil {
			opts = &Opts{}
		}
		if r.Kind != e.Args.Kind() {
			tb.Fatalf("jobstest: job %d of the expected is of kind %s, want %s: %s", i, r.Kind, e.Args.Kind(), describe(rows))
		}
		got := reflect.New(reflect.TypeOf(e.Args))
		if err := json.Unmarshal([]byte(r.EncodedArgs), got.Interface()); err != nil {
			tb.Fatalf("jobstest: job %d: decode args %s: %v", r.ID, r.EncodedArgs, err)
		}
		if !opts.AnyArgs && !reflect.DeepEqual(got.Elem().Interface(), e.Args) {
			want, _ := json.Marshal(e.Args)
			tb.Fatalf("jobstest: job %d of the expected (id %d) has args %s, want %s", i, r.ID, r.EncodedArgs, want)
		}
		if !matches(r, opts) {
			tb.Fatalf("jobstest: job %d of the expected (id %d) lacks %+v: %s", i, r.ID, *opts, describe(rows[i:i+1]))
		}
		out[i] = r
	}
	return out
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

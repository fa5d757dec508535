package dao

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// sliceOps is a driver over a slice, with scripted outcomes per id, to
// test the portable claim's bookkeeping in isolation.
type sliceOps struct {
	m       *driver.Model[row]
	rows    []row
	lose    map[int64]bool   // guarded update affects no row
	fail    map[int64]error  // guarded update fails
	during  map[int64]func() // runs while the guarded update of an id is under way
	reads   int
	limits  []int // the Limit of each candidate read
	updates []int64
}

func (o *sliceOps) Model() *driver.Model[row] { return o.m }
func (o *sliceOps) Info() driver.Info {
	return driver.Info{Backend: "slice", LostRace: driver.LostRaceSkip}
}
func (o *sliceOps) Insert(context.Context, []*row) error {
	return errors.New("not used")
}
func (o *sliceOps) Count(context.Context, Criteria) (int64, error) { return 0, errors.New("not used") }
func (o *sliceOps) Update(context.Context, Criteria, Set) (int64, error) {
	return 0, errors.New("not used")
}
func (o *sliceOps) Delete(context.Context, Criteria, int) (int64, error) {
	return 0, errors.New("not used")
}

func (o *sliceOps) Select(context.Context, Query) ([]row, error) { return nil, errors.New("not used") }

func (o *sliceOps) ReadCandidates(ctx context.Context, q Query) ([]driver.Candidate[row], error) {
	o.reads++
	o.limits = append(o.limits, q.Limit)
	var out []driver.Candidate[row]
	for _, r := range o.rows {
		if o.m.Match(&r, q.Where) && (q.Limit == 0 || len(out) < q.Limit) {
			out = append(out, driver.Candidate[row]{Row: r})
		}
	}
	return out, nil
}

func (o *sliceOps) ClaimRow(ctx context.Context, c *driver.Candidate[row], where Criteria, set Set) (bool, error) {
	r := &c.Row
	o.updates = append(o.updates, r.ID)
	if f := o.during[r.ID]; f != nil {
		f()
	}
	if err := o.fail[r.ID]; err != nil {
		return false, err
	}
	return !o.lose[r.ID], nil
}

func newOps(t *testing.T, n int) *sliceOps {
	o := &sliceOps{m: model(t).Model, lose: map[int64]bool{}, fail: map[int64]error{}, during: map[int64]func(){}}
	for i := 1; i <= n; i++ {
		o.rows = append(o.rows, row{ID: int64(i), Status: "pending"})
	}
	return o
}

// portable returns the portable store over o.
func portable(t *testing.T, o *sliceOps) *Table[row] {
	t.Helper()
	tb, err := New[row](o)
	if err != nil {
		t.Fatal(err)
	}
	if c := tb.Capabilities(); c.Strategy != StrategyPortable || c.ClaimRoundTrips != (RoundTrips{Fixed: 1, PerRow: 1}) {
		t.Fatalf("capabilities %+v, want the portable claim", c)
	}
	return tb
}

var claimReq = ClaimRequest{Where: Eq("status", "pending"), Set: Set{"status": "taken"}, Limit: 3}

func TestClaimPortableSkipsLostRows(t *testing.T) {
	o := newOps(t, 5)
	o.lose[2] = true
	got, err := portable(t, o).Claim(context.Background(), claimReq)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 3 || got[0].Status != "taken" {
		t.Fatalf("claimed %+v, want rows 1 and 3 in post-claim state", got)
	}
	if o.reads != 1 || len(o.updates) != 3 {
		t.Fatalf("round trips: %d reads, %d updates; want 1 + 3", o.reads, len(o.updates))
	}
}

func TestClaimPortableReturnsRowsClaimedBeforeAnError(t *testing.T) {
	o := newOps(t, 5)
	boom := errors.New("boom")
	o.fail[3] = boom
	got, err := portable(t, o).Claim(context.Background(), claimReq)
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want the update's error", err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("claimed %+v, want rows 1 and 2 returned with the error", got)
	}
}

func TestClaimPortableValidatesBeforeIO(t *testing.T) {
	o := newOps(t, 5)
	bad := claimReq
	bad.Set = Set{"ghost": 1}
	if _, err := portable(t, o).Claim(context.Background(), bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("error = %v, want ErrInvalidArgument", err)
	}
	zero := claimReq
	zero.Limit = 0
	if got, err := portable(t, o).Claim(context.Background(), zero); err != nil || got != nil {
		t.Fatalf("Limit 0: %v, %v", got, err)
	}
	if o.reads != 0 || len(o.updates) != 0 {
		t.Fatalf("I/O happened: %d reads, %d updates", o.reads, len(o.updates))
	}
}

func TestClaimPortableCallsTrace(t *testing.T) {
	o := newOps(t, 5)
	var seen []any
	ctx := WithClaimTrace(context.Background(), &ClaimTrace{
		CandidatesRead: func(ctx context.Context, ids []any) {
			seen = ids
			if len(o.updates) != 0 {
				t.Error("trace called after a guarded update")
			}
		},
	})
	if _, err := portable(t, o).Claim(ctx, claimReq); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || seen[0] != int64(1) {
		t.Fatalf("trace saw %v", seen)
	}
}

func TestClaimPortableSendsNothingOnADoneContext(t *testing.T) {
	o := newOps(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := portable(t, o).Claim(ctx, claimReq)
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("PortableClaim on a canceled context = %v, %v; want nothing and context.Canceled", got, err)
	}
	if o.reads != 0 || len(o.updates) != 0 {
		t.Fatalf("I/O happened: %d reads, %d updates", o.reads, len(o.updates))
	}
}

// A context canceled while a guarded update is under way: that update's
// outcome is kept (the row is returned), and no further update is sent.
func TestClaimPortableStopsAfterCancellation(t *testing.T) {
	o := newOps(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.during[2] = cancel
	got, err := portable(t, o).Claim(ctx, claimReq)
	if !errors.Is(err, context.Canceled) || IsRetryable(err) {
		t.Fatalf("error = %v, want context.Canceled, not retryable", err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 || got[1].Status != "taken" {
		t.Fatalf("claimed %+v, want rows 1 and 2, whose updates committed", got)
	}
	if len(o.updates) != 2 {
		t.Fatalf("updates sent: %v; want none after the cancellation", o.updates)
	}
}

// An update that fails after the context ended: the error wraps both.
func TestClaimPortableErrorAfterCancellationWrapsContext(t *testing.T) {
	o := newOps(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	busy := fmt.Errorf("lock wait: %w", ErrBusy)
	o.during[2] = cancel
	o.fail[2] = busy
	got, err := portable(t, o).Claim(ctx, claimReq)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrBusy) || IsRetryable(err) {
		t.Fatalf("error = %v, want context.Canceled and ErrBusy, not retryable", err)
	}
	if len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("claimed %+v, want row 1", got)
	}
	// Without a cancellation the same failure is retryable.
	o = newOps(t, 5)
	o.fail[2] = busy
	if _, err := portable(t, o).Claim(context.Background(), claimReq); !IsRetryable(err) || errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want a retryable ErrBusy", err)
	}
}

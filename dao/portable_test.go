package dao_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// sliceOps is a PortableOps over a slice, with scripted outcomes per id, to
// test the algorithm's bookkeeping in isolation.
type sliceOps struct {
	m       *dao.Model[row]
	rows    []row
	lose    map[int64]bool  // guarded update affects no row
	fail    map[int64]error // guarded update fails
	reads   int
	updates []int64
}

func (o *sliceOps) ReadCandidates(ctx context.Context, q dao.Query) ([]row, error) {
	o.reads++
	var out []row
	for _, r := range o.rows {
		if o.m.Match(&r, q.Where) && (q.Limit == 0 || len(out) < q.Limit) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (o *sliceOps) ClaimRow(ctx context.Context, r *row, where dao.Criteria, set dao.Set) (bool, error) {
	o.updates = append(o.updates, r.ID)
	if err := o.fail[r.ID]; err != nil {
		return false, err
	}
	return !o.lose[r.ID], nil
}

func newOps(t *testing.T, n int) *sliceOps {
	o := &sliceOps{m: model(t), lose: map[int64]bool{}, fail: map[int64]error{}}
	for i := 1; i <= n; i++ {
		o.rows = append(o.rows, row{ID: int64(i), Status: "pending"})
	}
	return o
}

var claimReq = dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "taken"}, Limit: 3}

func TestPortableClaimSkipsLostRows(t *testing.T) {
	o := newOps(t, 5)
	o.lose[2] = true
	got, err := dao.PortableClaim(context.Background(), o.m, o, claimReq)
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

func TestPortableClaimReturnsRowsClaimedBeforeAnError(t *testing.T) {
	o := newOps(t, 5)
	boom := errors.New("boom")
	o.fail[3] = boom
	got, err := dao.PortableClaim(context.Background(), o.m, o, claimReq)
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want the update's error", err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("claimed %+v, want rows 1 and 2 returned with the error", got)
	}
}

func TestPortableClaimValidatesBeforeIO(t *testing.T) {
	o := newOps(t, 5)
	bad := claimReq
	bad.Set = dao.Set{"ghost": 1}
	if _, err := dao.PortableClaim(context.Background(), o.m, o, bad); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("error = %v, want ErrInvalidArgument", err)
	}
	zero := claimReq
	zero.Limit = 0
	if got, err := dao.PortableClaim(context.Background(), o.m, o, zero); err != nil || got != nil {
		t.Fatalf("Limit 0: %v, %v", got, err)
	}
	if o.reads != 0 || len(o.updates) != 0 {
		t.Fatalf("I/O happened: %d reads, %d updates", o.reads, len(o.updates))
	}
}

func TestPortableClaimCallsTrace(t *testing.T) {
	o := newOps(t, 5)
	var seen []any
	ctx := dao.WithClaimTrace(context.Background(), &dao.ClaimTrace{
		CandidatesRead: func(ctx context.Context, ids []any) {
			seen = ids
			if len(o.updates) != 0 {
				t.Error("trace called after a guarded update")
			}
		},
	})
	if _, err := dao.PortableClaim(ctx, o.m, o, claimReq); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || seen[0] != int64(1) {
		t.Fatalf("trace saw %v", seen)
	}
}

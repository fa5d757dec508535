package esstore

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/claimstore/claimstore/adapters/esstore/internal/fakees"
	"github.com/claimstore/claimstore/dao"
)

type guardRow struct {
	ID     int64 `gorm:"primaryKey"`
	Status string
	N      int
	At     time.Time
	Doc    guardDoc `gorm:"serializer:json"`
	Extra  guardJSON
}

type guardDoc struct {
	Owner string `json:"owner"`
}

// guardJSON is a JSON column type: a disabled object in the index.
type guardJSON map[string]any

func (guardJSON) GormDataType() string { return "json" }

// guardStore returns an in-process fake, a client of it and a migrated
// store of guardRow on index "guard"; the fake closes when t ends.
func guardStore(t *testing.T) (*fakees.Server, *elasticsearch.Client, *dao.Table[guardRow]) {
	t.Helper()
	srv := fakees.New(fakees.Scripts{FieldCompare: FieldCompareScript, Write: WriteScript})
	t.Cleanup(srv.Close)
	client, err := elasticsearch.NewClient(elasticsearch.Config{Addresses: []string{srv.URL()}, DisableRetry: true, Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New[guardRow](client, WithIndex("guard"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv, client, s
}

// TestClaimWriteIsGuardedBySeqNoAlone exercises ClaimRow directly. The
// write carries the _seq_no and _primary_term of the candidate read and no
// criteria: with the version read it claims the row whatever criteria it
// is given (they matched that version); with a stale version it is a
// version conflict; a candidate deleted since the read is skipped. The
// document written is the one read with the Set applied: increments add
// to the value read, a JSON column is replaced whole (not merged), other
// fields keep what was stored, and a Set that changes no value still
// makes a new version, so an older read cannot claim the row again.
func TestClaimWriteIsGuardedBySeqNoAlone(t *testing.T) {
	ctx := context.Background()
	srv, client, s := guardStore(t)
	at := time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)
	rows := []*guardRow{
		{Status: "ready", N: 1, At: at, Doc: guardDoc{"a"}, Extra: guardJSON{"x": 1.0, "y": 2.0}},
		{Status: "ready", N: 5, At: at},
		{Status: "ready", At: at},
	}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	ops, err := newDriver[guardRow](client, WithIndex("guard"))
	if err != nil {
		t.Fatal(err)
	}
	// The Set and the criteria reach ClaimRow as the portable layer
	// checked them.
	checkSet := func(set dao.Set) dao.Set {
		t.Helper()
		req, err := s.CheckClaim(dao.ClaimRequest{Set: set, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return req.Set
	}
	gone, err := s.CheckCriteria(dao.Eq("status", "gone"))
	if err != nil {
		t.Fatal(err)
	}

	cands, err := ops.ReadCandidates(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("id")}, Limit: 10})
	if err != nil || len(cands) != len(rows) {
		t.Fatalf("ReadCandidates = %v, %v", cands, err)
	}
	set := checkSet(dao.Set{"status": "claimed", "n": dao.Incr(10), "extra": guardJSON{"z": 3.0}})
	if ok, err := ops.ClaimRow(ctx, &cands[0], gone, set); !ok || err != nil {
		t.Fatalf("ClaimRow with the version read = %v, %v; want claimed (the criteria are not re-checked)", ok, err)
	}
	got, err := s.Get(ctx, rows[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "claimed" || got.N != 11 || !got.At.Equal(at) || got.At.Nanosecond() != 123456789 ||
		got.Doc.Owner != "a" || len(got.Extra) != 1 || got.Extra["z"] != 3.0 {
		t.Errorf("claimed document = %+v; want status claimed, n 1+10, at and doc unchanged, extra replaced by {z: 3}", got)
	}

	// The same read again: the version it carries is gone.
	_, err = ops.ClaimRow(ctx, &cands[0], dao.Criteria{}, set)
	var esErr *Error
	if !errors.Is(err, dao.ErrConflict) || !errors.As(err, &esErr) || esErr.Status != 409 {
		t.Errorf("ClaimRow with a stale version = %v; want ErrConflict with the 409", err)
	}

	// A Set that leaves every value as it is still makes a new version.
	same := checkSet(dao.Set{"status": "ready"})
	if ok, err := ops.ClaimRow(ctx, &cands[1], dao.Criteria{}, same); !ok || err != nil {
		t.Fatalf("ClaimRow with an unchanging Set = %v, %v; want claimed", ok, err)
	}
	if ok, err := ops.ClaimRow(ctx, &cands[1], dao.Criteria{}, same); ok || !errors.Is(err, dao.ErrConflict) {
		t.Errorf("second ClaimRow from the same read = %v, %v; want ErrConflict: the first one made a new version", ok, err)
	}

	if _, err := s.Delete(ctx, dao.Eq("id", cands[2].Row.ID), 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := ops.ClaimRow(ctx, &cands[2], dao.Criteria{}, set); ok || err != nil {
		t.Errorf("ClaimRow of a deleted candidate = %v, %v; want skipped", ok, err)
	}
	if _, err := s.Get(ctx, cands[2].Row.ID); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("the skipped write brought the deleted document back: Get = %v", err)
	}

	for _, r := range srv.Requests() {
		if strings.Contains(r, "/_update") {
			t.Errorf("a claim write went through the update API: %s", r)
		}
	}
}

// TestClaimRefusesUnwritableSet: a Set value the portable layer accepts
// but the index cannot hold (a JSON column value with no JSON form) is
// dao.ErrInvalidArgument from ClaimRow before any write is sent, and the
// document stays as it was.
func TestClaimRefusesUnwritableSet(t *testing.T) {
	ctx := context.Background()
	srv, _, s := guardStore(t)
	row := guardRow{Status: "ready", Extra: guardJSON{"x": 1.0}}
	if err := s.Create(ctx, &row); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	req := dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "claimed", "extra": guardJSON{"c": make(chan int)}}, Limit: 1}
	if _, err := s.CheckClaim(req); err != nil {
		t.Fatalf("the portable layer refuses the request itself (%v); the test needs one only the driver refuses", err)
	}
	got, err := s.Claim(ctx, req)
	if len(got) != 0 || !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Claim with a Set value without a JSON form = %v, %v; want no row and ErrInvalidArgument", got, err)
	}
	for _, r := range srv.Requests() {
		if !strings.HasPrefix(r, "POST /guard/_search") {
			t.Errorf("the refused claim sent %s; want the candidate search only", r)
		}
	}
	after, err := s.Get(ctx, row.ID)
	if err != nil || after.Status != "ready" || after.Extra["x"] != 1.0 {
		t.Errorf("after the refused claim, Get = %+v, %v; want the document unchanged", after, err)
	}
}

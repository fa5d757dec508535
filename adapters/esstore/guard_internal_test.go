package esstore

import (
	"context"
	"net/http"
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
	Max    int
	At     time.Time
}

// TestGuardedWriteRechecksCriteria exercises ClaimRow directly: with the
// candidate's current _seq_no, a write whose criteria no longer hold is a
// noop (the row is lost, not claimed, and nothing changes); a write whose
// criteria hold claims the row; a candidate deleted since the search is
// skipped. Through Claim the noop cannot be reached, because any change to
// a candidate also changes its _seq_no.
func TestGuardedWriteRechecksCriteria(t *testing.T) {
	ctx := context.Background()
	srv := fakees.New(fakees.Scripts{FieldCompare: FieldCompareScript, Write: WriteScript})
	defer srv.Close()
	client, err := elasticsearch.NewClient(elasticsearch.Config{Addresses: []string{srv.URL()}, DisableRetry: true, Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New[guardRow](client, WithIndex("guard"))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := newDriver[guardRow](client, WithIndex("guard"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 500_000, time.UTC) // .0005s
	rows := []*guardRow{{Status: "ready", N: 1, Max: 3, At: at}, {Status: "ready", N: 5, Max: 3, At: at}, {Status: "ready", At: at}}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	cands, err := ops.ReadCandidates(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("id")}, Limit: 10})
	if err != nil || len(cands) != 3 {
		t.Fatalf("ReadCandidates = %v, %v", cands, err)
	}
	set := dao.Set{"status": "claimed", "n": dao.Incr(1)} // plain values already
	check := func(c dao.Criteria) dao.Criteria {
		c, err := s.CheckCriteria(c)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		name  string
		row   int
		where dao.Criteria
		want  bool
	}{
		{"criteria no longer hold", 0, check(dao.Eq("status", "gone")), false},
		{"field-to-field fails", 1, check(dao.And(dao.Eq("status", "ready"), dao.LtField("n", "max"))), false},
		{"Or with a NULL-safe branch", 1, check(dao.Or(dao.IsNull("status"), dao.In("n", 4, 5))), true},
		{"time equal at the millisecond", 0, check(dao.Eq("at", at.Add(400*time.Microsecond))), true},
	}
	for _, c := range cases {
		ok, err := ops.ClaimRow(ctx, &cands[c.row], c.where, set)
		if err != nil || ok != c.want {
			t.Errorf("%s: ClaimRow = %v, %v; want %v", c.name, ok, err, c.want)
		}
	}
	first, err := s.Get(ctx, cands[0].Row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != "claimed" || first.N != 2 {
		t.Errorf("row 0 after one noop and one claim: %+v; want claimed once, n = 2", first)
	}
	// The noop left the _seq_no alone, so the later guarded write succeeded;
	// now the candidate's _seq_no is stale and a further write conflicts.
	if _, err := ops.ClaimRow(ctx, &cands[0], dao.Criteria{}, set); err == nil {
		t.Error("a write with a stale _seq_no succeeded")
	}
	if _, err := s.Delete(ctx, check(dao.Eq("id", cands[2].Row.ID)), 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := ops.ClaimRow(ctx, &cands[2], dao.Criteria{}, set); ok || err != nil {
		t.Errorf("ClaimRow of a deleted candidate = %v, %v; want skipped", ok, err)
	}
}

package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
)

func final(states map[int64]string, attempts map[int64]int) map[int64]Job {
	out := map[int64]Job{}
	for id, w := range states {
		j := Job{ID: id, Status: statusReady, Attempts: attempts[id]}
		if w != "" {
			j.Status, j.LockedBy = statusClaimed, ptr(w)
		}
		out[id] = j
	}
	return out
}

func TestCheckNoDoubleClaimOnData(t *testing.T) {
	all := []int64{1, 2, 3, 4}
	clean := []workerResult{{Worker: "a", IDs: []int64{1, 3}}, {Worker: "b", IDs: []int64{4, 2}}}
	cleanFinal := final(map[int64]string{1: "a", 2: "b", 3: "a", 4: "b"}, map[int64]int{1: 1, 2: 1, 3: 1, 4: 1})
	if p := checkNoDoubleClaim(all, clean, cleanFinal); p != nil {
		t.Fatalf("a clean run was reported: %v", p)
	}
	cases := []struct {
		name    string
		results []workerResult
		final   map[int64]Job
		want    string
	}{
		{"same row to two workers",
			[]workerResult{{Worker: "a", IDs: []int64{1, 3}}, {Worker: "b", IDs: []int64{4, 2, 3}}},
			cleanFinal, "DOUBLE CLAIM: row 3 was received 2 times, by [a b]"},
		{"same row twice to one worker",
			[]workerResult{{Worker: "a", IDs: []int64{1, 3, 1}}, {Worker: "b", IDs: []int64{4, 2}}},
			cleanFinal, "DOUBLE CLAIM: row 1 was received 2 times, by [a a]"},
		{"row never received",
			[]workerResult{{Worker: "a", IDs: []int64{1, 3}}, {Worker: "b", IDs: []int64{4}}},
			final(map[int64]string{1: "a", 2: "", 3: "a", 4: "b"}, map[int64]int{1: 1, 3: 1, 4: 1}), "row 2 was never received"},
		{"row claimed in the table but returned to nobody",
			[]workerResult{{Worker: "a", IDs: []int64{1, 3}}, {Worker: "b", IDs: []int64{4}}},
			cleanFinal, "row 2 is claimed by b in the table but no worker received it"},
		{"unknown row",
			[]workerResult{{Worker: "a", IDs: []int64{1, 3, 9}}, {Worker: "b", IDs: []int64{4, 2}}},
			cleanFinal, "row 9 was received by [a] but is not one of the rows"},
		{"final owner differs",
			clean, final(map[int64]string{1: "a", 2: "a", 3: "a", 4: "b"}, map[int64]int{1: 1, 2: 1, 3: 1, 4: 1}),
			"row 2 was received by [b] but the table says status=claimed locked_by=a"},
		{"written twice",
			clean, final(map[int64]string{1: "a", 2: "b", 3: "a", 4: "b"}, map[int64]int{1: 1, 2: 2, 3: 1, 4: 1}),
			"row 2 was written by 2 claims"},
		{"row deleted",
			clean, final(map[int64]string{1: "a", 2: "b", 3: "a"}, map[int64]int{1: 1, 2: 1, 3: 1}),
			"row 4 is missing from the table"},
	}
	for _, c := range cases {
		p := checkNoDoubleClaim(all, c.results, c.final)
		if !strings.Contains(strings.Join(p, "\n"), c.want) {
			t.Errorf("%s: problems %q do not report %q", c.name, p, c.want)
		}
	}
}

// unguardedStore claims without the guard: it reads candidates, and then
// writes each by primary key alone, so a row another claimer took between
// the read and the write is taken again. The first claims of its callers
// meet at a barrier after the read, which makes them read the same rows.
type unguardedStore struct {
	dao.Store[Job]
	barrier *barrier
}

type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	release chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, release: make(chan struct{})} }

// wait blocks until n callers have called it; later calls return at once.
func (b *barrier) wait() {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.release)
	}
	b.mu.Unlock()
	<-b.release
}

func (s unguardedStore) Claim(ctx context.Context, req dao.ClaimRequest) ([]Job, error) {
	cands, err := s.Find(ctx, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil || req.Limit <= 0 {
		return nil, err
	}
	s.barrier.wait()
	var out []Job
	for _, c := range cands {
		if _, err := s.Update(ctx, dao.Eq("id", c.ID), req.Set); err != nil {
			return out, err
		}
		r, err := s.Get(ctx, c.ID)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// TestCheckerCatchesUnguardedClaim runs the suite's claimers against a
// store that claims without the guard and checks that the suite's checker
// reports the double claims.
func TestCheckerCatchesUnguardedClaim(t *testing.T) {
	m, err := memstore.New[Job]()
	if err != nil {
		t.Fatal(err)
	}
	const workers = 2
	s := unguardedStore{Store: m, barrier: newBarrier(workers)}
	rows := seed(t, s, 40, nil)
	results := make([]workerResult, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[w] = claimUntilEmpty(context.Background(), s, fmt.Sprintf("w%d", w), func(int) int { return 5 })
		}()
	}
	wg.Wait()
	for _, r := range results {
		if len(r.Problems) == 0 {
			continue
		}
		// A row claimed twice comes back with attempts 2 to its second
		// receiver; the claimer notes it.
		t.Logf("claimer %s noted: %v", r.Worker, r.Problems)
	}
	p := checkNoDoubleClaim(ids(rows), results, snapshot(t, s))
	joined := strings.Join(p, "\n")
	for _, want := range []string{"DOUBLE CLAIM: row 1 was received 2 times", "written by 2 claims", "double="} {
		if !strings.Contains(joined, want) {
			t.Errorf("checker output does not contain %q:\n%s", want, joined)
		}
	}
}

// TestCheckerPassesGuardedClaim is the control: the same claimers against
// the reference store report nothing.
func TestCheckerPassesGuardedClaim(t *testing.T) {
	s, err := memstore.New[Job]()
	if err != nil {
		t.Fatal(err)
	}
	rows := seed(t, s, 40, nil)
	results := make([]workerResult, 2)
	var wg sync.WaitGroup
	for w := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[w] = claimUntilEmpty(context.Background(), s, fmt.Sprintf("w%d", w), func(int) int { return 5 })
		}()
	}
	wg.Wait()
	for _, r := range results {
		if len(r.Problems) > 0 {
			t.Errorf("claimer %s: %v", r.Worker, r.Problems)
		}
	}
	if p := checkNoDoubleClaim(ids(rows), results, snapshot(t, s)); p != nil {
		t.Errorf("checker reported a correct store: %v", p)
	}
}

func TestRunPattern(t *testing.T) {
	for name, want := range map[string]string{
		"TestStress":              "^TestStress$",
		"TestStress/postgres":     "^TestStress$/^postgres$",
		"TestX/a.b(c)/with_space": `^TestX$/^a\.b\(c\)$/^with_space$`,
	} {
		if got := runPattern(name); got != want {
			t.Errorf("runPattern(%q) = %q, want %q", name, got, want)
		}
	}
}

// overLimitStore claims one row more than asked.
type overLimitStore struct{ dao.Store[Job] }

func (s overLimitStore) Claim(ctx context.Context, req dao.ClaimRequest) ([]Job, error) {
	if req.Limit > 0 {
		req.Limit++
	}
	return s.Store.Claim(ctx, req)
}

// TestClaimerCatchesOverLimit checks that the claimers of the concurrency
// tests report a call that returned more rows than its limit.
func TestClaimerCatchesOverLimit(t *testing.T) {
	m, err := memstore.New[Job]()
	if err != nil {
		t.Fatal(err)
	}
	s := overLimitStore{m}
	seed(t, s, 10, nil)
	r := claimUntilEmpty(context.Background(), s, "w", func(int) int { return 3 })
	if want := "w: Claim(limit 3) returned 4 rows"; len(r.Problems) == 0 || r.Problems[0] != want {
		t.Errorf("problems = %q, want first %q", r.Problems, want)
	}
}

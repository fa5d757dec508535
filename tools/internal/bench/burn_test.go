package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
)

// loadedMemStore returns a memory store holding rows pending jobs.
func loadedMemStore(t *testing.T, rows int64) *dao.Table[Job] {
	t.Helper()
	s, err := memstore.New[Job]()
	if err != nil {
		t.Fatal(err)
	}
	if err := Load(context.Background(), rows, 64, StoreInserter(s)); err != nil {
		t.Fatal(err)
	}
	return s
}

func storeConfig(s dao.Store[Job], rows int64, claim ClaimFunc) BurnConfig {
	if claim == nil {
		claim = StoreClaimFunc(s)
	}
	return BurnConfig{
		Label: "test", Rows: rows, Workers: 4, Batch: 7, Claim: claim,
		Pending: StorePending(s),
		Stall:   5 * time.Second,
	}
}

func TestBurnMemStore(t *testing.T) {
	const rows = 1000
	s := loadedMemStore(t, rows)
	var progress bytes.Buffer
	cfg := storeConfig(s, rows, nil)
	var rt int64
	var mu sync.Mutex
	inner := cfg.Claim
	cfg.Claim = func(ctx context.Context, w, limit int) ([]Job, error) {
		mu.Lock()
		rt++
		mu.Unlock()
		time.Sleep(time.Millisecond) // long enough for progress lines
		return inner(ctx, w, limit)
	}
	cfg.RoundTrips = func() int64 { mu.Lock(); defer mu.Unlock(); return rt }
	cfg.Progress, cfg.ProgressEvery = &progress, 5*time.Millisecond
	res, err := Burn(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.RowsClaimed != rows || res.Tally.Claimed != rows || res.Tally.Duplicates != 0 || res.Tally.Lost != 0 {
		t.Fatalf("result %+v", res)
	}
	// ceil(1000/7) = 143 calls return rows; every worker ends with an empty one.
	if res.Calls-res.EmptyCalls != 143 || res.EmptyCalls < 4 {
		t.Fatalf("calls %d, empty %d", res.Calls, res.EmptyCalls)
	}
	if !res.Counted || res.RoundTrips != res.Calls || res.RoundTripsPerCall() != 1 {
		t.Fatalf("round trips %d for %d calls", res.RoundTrips, res.Calls)
	}
	if res.Latency.N != int(res.Calls) || res.Latency.P99 < res.Latency.P50 {
		t.Fatalf("latency %+v", res.Latency)
	}
	if n, _ := s.Count(context.Background(), PendingCriteria()); n != 0 {
		t.Fatalf("%d rows left pending", n)
	}
	if !strings.Contains(progress.String(), "test: ") || !strings.Contains(progress.String(), "rows claimed") {
		t.Fatalf("no progress line in %q", progress.String())
	}
}

func TestBurnDetectsDuplicate(t *testing.T) {
	s := loadedMemStore(t, 100)
	var once sync.Once
	inner := StoreClaimFunc(s)
	claim := func(ctx context.Context, w, limit int) ([]Job, error) {
		rows, err := inner(ctx, w, limit)
		if len(rows) > 0 {
			// A broken claimer hands the first row it ever claimed
			// out a second time.
			once.Do(func() { rows = append(rows, rows[0]) })
		}
		return rows, err
	}
	res, err := Burn(context.Background(), storeConfig(s, 100, claim))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tally.Duplicates != 1 || res.Tally.Lost != 0 || res.Err() == nil {
		t.Fatalf("duplicate not detected: %+v", res.Tally)
	}
}

func TestBurnDetectsLost(t *testing.T) {
	s := loadedMemStore(t, 100)
	inner := StoreClaimFunc(s)
	claim := func(ctx context.Context, w, limit int) ([]Job, error) {
		rows, err := inner(ctx, w, limit)
		// A broken claimer claims row 42 in the store but never returns it.
		for i := range rows {
			if rows[i].ID == 42 {
				rows = append(rows[:i], rows[i+1:]...)
				break
			}
		}
		return rows, err
	}
	res, err := Burn(context.Background(), storeConfig(s, 100, claim))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tally.Lost != 1 || res.Tally.SampleLost[0] != 42 || res.Tally.Duplicates != 0 || res.Err() == nil {
		t.Fatalf("lost id not detected: %+v", res.Tally)
	}
}

func TestBurnDetectsWrongState(t *testing.T) {
	s := loadedMemStore(t, 50)
	inner := StoreClaimFunc(s)
	claim := func(ctx context.Context, w, limit int) ([]Job, error) {
		rows, err := inner(ctx, w, limit)
		for i := range rows {
			if rows[i].ID == 3 {
				rows[i].Status = StatusPending // returned in its pre-claim state
			}
		}
		return rows, err
	}
	res, err := Burn(context.Background(), storeConfig(s, 50, claim))
	if err != nil {
		t.Fatal(err)
	}
	if res.WrongState != 1 || res.Err() == nil || !strings.Contains(res.Err().Error(), "post-claim") {
		t.Fatalf("wrong state not detected: %d, %v", res.WrongState, res.Err())
	}
}

func TestBurnRetriesRetryableAndStopsOnOtherErrors(t *testing.T) {
	s := loadedMemStore(t, 100)
	inner := StoreClaimFunc(s)
	var mu sync.Mutex
	calls := 0
	claim := func(ctx context.Context, w, limit int) ([]Job, error) {
		mu.Lock()
		calls++
		c := calls
		mu.Unlock()
		if c%3 == 0 {
			return nil, fmt.Errorf("locked: %w", dao.ErrBusy)
		}
		return inner(ctx, w, limit)
	}
	res, err := Burn(context.Background(), storeConfig(s, 100, claim))
	if err != nil || res.Err() != nil || res.Retries == 0 {
		t.Fatalf("err %v, accounting %v, retries %d", err, res.Err(), res.Retries)
	}

	s = loadedMemStore(t, 100)
	boom := errors.New("boom")
	claim = func(ctx context.Context, w, limit int) ([]Job, error) { return nil, boom }
	if _, err := Burn(context.Background(), storeConfig(s, 100, claim)); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
}

func TestBurnStalls(t *testing.T) {
	s := loadedMemStore(t, 10)
	cfg := storeConfig(s, 10, func(ctx context.Context, w, limit int) ([]Job, error) { return nil, nil })
	cfg.Stall = 50 * time.Millisecond
	if _, err := Burn(context.Background(), cfg); !errors.Is(err, ErrStalled) {
		t.Fatalf("got %v, want ErrStalled", err)
	}
}

func TestBurnRejectsBadConfig(t *testing.T) {
	s := loadedMemStore(t, 1)
	cfg := storeConfig(s, 1, nil)
	cfg.Workers = 0
	if _, err := Burn(context.Background(), cfg); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
}

// slowClaim returns s's claim function slowed by d per call, so a burn of
// a few hundred rows outlasts a budget of a few milliseconds.
func slowClaim(s dao.Store[Job], d time.Duration) ClaimFunc {
	inner := StoreClaimFunc(s)
	return func(ctx context.Context, w, limit int) ([]Job, error) {
		time.Sleep(d)
		return inner(ctx, w, limit)
	}
}

func storeRemaining(s dao.Store[Job]) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) { return s.Count(ctx, PendingCriteria()) }
}

func TestBurnBudgetStopsPartial(t *testing.T) {
	const rows = 1000
	s := loadedMemStore(t, rows)
	cfg := storeConfig(s, rows, slowClaim(s, 2*time.Millisecond))
	cfg.Budget, cfg.Remaining = 20*time.Millisecond, storeRemaining(s)
	res, err := Burn(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partial || res.Budget != cfg.Budget || res.RowsClaimed == 0 || res.RowsClaimed >= rows {
		t.Fatalf("partial %v, budget %v, %d rows claimed of %d", res.Partial, res.Budget, res.RowsClaimed, rows)
	}
	left, err := s.Count(context.Background(), PendingCriteria())
	if err != nil {
		t.Fatal(err)
	}
	if res.Left != left || res.Tally.Claimed+res.Left != rows || res.Tally.Lost != 0 || res.Tally.Duplicates != 0 || res.Err() != nil {
		t.Fatalf("left %d (store %d), accounting %+v, err %v", res.Left, left, res.Tally, res.Err())
	}
	if res.RowsPerSec() <= 0 || res.Wall < cfg.Budget {
		t.Fatalf("rows/s %.0f over %v", res.RowsPerSec(), res.Wall)
	}
}

func TestBurnBudgetDetectsLost(t *testing.T) {
	s := loadedMemStore(t, 1000)
	inner := slowClaim(s, 2*time.Millisecond)
	claim := func(ctx context.Context, w, limit int) ([]Job, error) {
		rows, err := inner(ctx, w, limit)
		// A broken claimer claims row 1 in the store but never returns it.
		for i := range rows {
			if rows[i].ID == 1 {
				rows = append(rows[:i], rows[i+1:]...)
				break
			}
		}
		return rows, err
	}
	cfg := storeConfig(s, 1000, claim)
	cfg.Budget, cfg.Remaining = 20*time.Millisecond, storeRemaining(s)
	res, err := Burn(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partial || res.Tally.Lost != 1 || res.Err() == nil {
		t.Fatalf("partial %v, lost id not detected: %+v", res.Partial, res.Tally)
	}
}

func TestBurnBudgetNotReachedIsComplete(t *testing.T) {
	s := loadedMemStore(t, 200)
	cfg := storeConfig(s, 200, nil)
	cfg.Budget, cfg.Remaining = time.Minute, storeRemaining(s)
	res, err := Burn(context.Background(), cfg)
	if err != nil || res.Partial || res.Tally.Claimed != 200 || res.Err() != nil {
		t.Fatalf("err %v, partial %v, accounting %+v", err, res.Partial, res.Tally)
	}
}

func TestBurnBudgetNeedsRemaining(t *testing.T) {
	s := loadedMemStore(t, 1)
	cfg := storeConfig(s, 1, nil)
	cfg.Budget = time.Second
	if _, err := Burn(context.Background(), cfg); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
}

func TestBurnBudgetLetsEveryWorkerClaimOnce(t *testing.T) {
	s := loadedMemStore(t, 1000)
	cfg := storeConfig(s, 1000, slowClaim(s, 5*time.Millisecond))
	cfg.Budget, cfg.Remaining = time.Nanosecond, storeRemaining(s)
	res, err := Burn(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Each of the 4 workers made its first call of 7 rows, and no more.
	if !res.Partial || res.Calls != 4 || res.RowsClaimed != 28 || res.Left != 1000-28 || res.Err() != nil {
		t.Fatalf("partial %v, %d calls, %d rows, %d left, %v", res.Partial, res.Calls, res.RowsClaimed, res.Left, res.Err())
	}
}

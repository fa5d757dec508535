package bench

import (
	"slices"
	"sync"
	"testing"
)

func TestTallyExactlyOnce(t *testing.T) {
	for _, n := range []int64{0, 1, 31, 32, 33, 64, 1000} {
		ta := NewTally(n)
		for id := int64(1); id <= n; id++ {
			if !ta.Mark(id) {
				t.Fatalf("n=%d: first mark of %d reported as repeat", n, id)
			}
		}
		r := ta.Result()
		if !r.OK() || r.Err() != nil || r.Claimed != n || r.Lost != 0 || r.Marks != n {
			t.Fatalf("n=%d: %+v", n, r)
		}
	}
}

func TestTallyDetectsDuplicate(t *testing.T) {
	ta := NewTally(100)
	for id := int64(1); id <= 100; id++ {
		ta.Mark(id)
	}
	if ta.Mark(42) {
		t.Fatal("second mark of 42 reported as first")
	}
	ta.Mark(42)
	ta.Mark(7)
	r := ta.Result()
	if r.Duplicates != 2 || r.DuplicateClaims != 3 || r.Lost != 0 || r.Claimed != 100 || r.Marks != 103 {
		t.Fatalf("got %+v", r)
	}
	if !slices.Equal(r.SampleDuplicates, []int64{42, 7}) {
		t.Fatalf("sample duplicates %v", r.SampleDuplicates)
	}
	if r.OK() || r.Err() == nil {
		t.Fatal("duplicate not reported as failure")
	}
}

func TestTallyDetectsLost(t *testing.T) {
	// The edges of the bitmap words are where an off-by-one would hide.
	n := int64(96)
	missing := []int64{1, 31, 32, 63, 64, 96}
	ta := NewTally(n)
	for id := int64(1); id <= n; id++ {
		if !slices.Contains(missing, id) {
			ta.Mark(id)
		}
	}
	r := ta.Result()
	if r.Lost != int64(len(missing)) || r.Duplicates != 0 || r.Claimed != n-int64(len(missing)) {
		t.Fatalf("got %+v", r)
	}
	if !slices.Equal(r.SampleLost, missing) {
		t.Fatalf("sample lost %v, want %v", r.SampleLost, missing)
	}
	if r.OK() || r.Err() == nil {
		t.Fatal("lost ids not reported as failure")
	}
}

func TestTallyUnknownIDs(t *testing.T) {
	ta := NewTally(10)
	for id := int64(1); id <= 10; id++ {
		ta.Mark(id)
	}
	for _, id := range []int64{0, -1, 11, 1 << 40} {
		if ta.Mark(id) {
			t.Fatalf("out-of-range id %d reported as first claim", id)
		}
	}
	r := ta.Result()
	if r.Unknown != 4 || r.Lost != 0 || r.Duplicates != 0 || r.Claimed != 10 || r.OK() {
		t.Fatalf("got %+v", r)
	}
	if ta.Claimed() != 10 {
		t.Fatalf("Claimed() = %d", ta.Claimed())
	}
}

func TestTallyConcurrentMarks(t *testing.T) {
	// Every id is marked by two goroutines: each id must come out as
	// exactly one duplicate, and exactly one of the two marks sees a first.
	const n = 10000
	ta := NewTally(n)
	var firsts [2]int
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := int64(1); id <= n; id++ {
				if ta.Mark(id) {
					firsts[g]++
				}
			}
		}()
	}
	wg.Wait()
	r := ta.Result()
	if firsts[0]+firsts[1] != n || r.Duplicates != n || r.DuplicateClaims != n || r.Lost != 0 || r.Claimed != n {
		t.Fatalf("firsts %v, result %+v", firsts, r)
	}
}

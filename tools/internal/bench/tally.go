package bench

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// sampleCap bounds the example ids a [TallyResult] keeps of each kind.
const sampleCap = 10

// Tally accounts for the claimed primary keys of a table whose ids are
// 1..n. Two bitmaps updated with atomic OR record whether each id has been
// claimed once and more than once, so Mark is lock-free and a Tally of n ids
// takes n/4 bytes. A Tally is safe for concurrent use.
type Tally struct {
	n       int64
	seen    []uint32
	twice   []uint32
	marks   atomic.Int64 // every Mark call
	extra   atomic.Int64 // marks of an id already seen
	dupIDs  atomic.Int64 // distinct ids marked more than once
	unknown atomic.Int64 // ids outside 1..n

	mu        sync.Mutex
	dupSample []int64
	unkSample []int64
}

// NewTally returns a tally for the ids 1..n; n must be >= 0.
func NewTally(n int64) *Tally {
	if n < 0 {
		n = 0
	}
	words := (n + 32) / 32 // bit i is id i; bit 0 unused
	return &Tally{n: n, seen: make([]uint32, words), twice: make([]uint32, words)}
}

// N returns the number of ids the tally expects.
func (t *Tally) N() int64 { return t.n }

// Mark records that id was claimed once more. It reports whether this was
// the id's first claim; an id outside 1..n is counted as unknown and
// reported false.
func (t *Tally) Mark(id int64) bool {
	t.marks.Add(1)
	if id < 1 || id > t.n {
		t.unknown.Add(1)
		t.sample(&t.unkSample, id)
		return false
	}
	w, bit := id/32, uint32(1)<<(id%32)
	if atomic.OrUint32(&t.seen[w], bit)&bit == 0 {
		return true
	}
	t.extra.Add(1)
	if atomic.OrUint32(&t.twice[w], bit)&bit == 0 {
		t.dupIDs.Add(1)
		t.sample(&t.dupSample, id)
	}
	return false
}

func (t *Tally) sample(s *[]int64, id int64) {
	t.mu.Lock()
	if len(*s) < sampleCap {
		*s = append(*s, id)
	}
	t.mu.Unlock()
}

// Claimed returns the number of distinct ids marked so far.
func (t *Tally) Claimed() int64 { return t.marks.Load() - t.extra.Load() - t.unknown.Load() }

// TallyResult is the outcome of the accounting.
type TallyResult struct {
	// Expected is n, the number of ids loaded.
	Expected int64
	// Marks is the number of ids returned by all claims together.
	Marks int64
	// Claimed is the number of distinct ids in 1..n claimed at least once.
	Claimed int64
	// Duplicates is the number of distinct ids claimed more than once;
	// DuplicateClaims the number of claims beyond the first of those ids.
	Duplicates, DuplicateClaims int64
	// Lost is the number of ids in 1..n never claimed.
	Lost int64
	// Unknown is the number of claimed ids outside 1..n.
	Unknown int64
	// SampleDuplicates, SampleLost and SampleUnknown hold up to ten
	// example ids of each kind.
	SampleDuplicates, SampleLost, SampleUnknown []int64
}

// OK reports whether every id was claimed exactly once and nothing else.
func (r TallyResult) OK() bool { return r.Duplicates == 0 && r.Lost == 0 && r.Unknown == 0 }

// Err returns nil when r is OK and otherwise an error naming the counts and
// example ids.
func (r TallyResult) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("bench: claim accounting failed: duplicates=%d %v lost=%d %v unknown=%d %v",
		r.Duplicates, r.SampleDuplicates, r.Lost, r.SampleLost, r.Unknown, r.SampleUnknown)
}

// Result returns the accounting so far. Call it after every Mark has
// returned to get final figures.
func (t *Tally) Result() TallyResult {
	r := TallyResult{
		Expected:        t.n,
		Marks:           t.marks.Load(),
		DuplicateClaims: t.extra.Load(),
		Duplicates:      t.dupIDs.Load(),
		Unknown:         t.unknown.Load(),
	}
	var seen int64
	for w := range t.seen {
		word := atomic.LoadUint32(&t.seen[w])
		if w == 0 {
			word &^= 1 // bit 0 is id 0, never a valid id
		}
		if last := t.n / 32; int64(w) == last {
			word &= uint32(1)<<(t.n%32+1) - 1 // ids above n cannot be set
		}
		seen += int64(bits.OnesCount32(word))
	}
	r.Claimed = seen
	r.Lost = t.n - seen
	if r.Lost > 0 {
		for id := int64(1); id <= t.n && len(r.SampleLost) < sampleCap; id++ {
			if atomic.LoadUint32(&t.seen[id/32])&(uint32(1)<<(id%32)) == 0 {
				r.SampleLost = append(r.SampleLost, id)
			}
		}
	}
	t.mu.Lock()
	r.SampleDuplicates = append([]int64(nil), t.dupSample...)
	r.SampleUnknown = append([]int64(nil), t.unkSample...)
	t.mu.Unlock()
	return r
}

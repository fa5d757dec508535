package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
)

// CheckTryLock names the whole try-lock part of the coordination
// section, for a backend without a try-lock: a store whose TryLock
// returns errors.ErrUnsupported fails it unless [Harness.Skip] names it.
const CheckTryLock = "Coordination/TryLock"

// CheckLockHolderKilled names the try-lock check that needs
// [Harness.KillLockHolder]: a holder whose connection the server ends
// frees the lock once the server notices.
const CheckLockHolderKilled = "Coordination/TryLock/HolderKilled"

// lockerOf returns the try-lock of the harness over s.
func (h Harness) lockerOf(t *testing.T, s dao.Store[Job]) coord.Locker {
	t.Helper()
	if h.Locker != nil {
		return h.Locker(t, s)
	}
	l, ok := s.(coord.Locker)
	if !ok {
		t.Fatalf("the store is a %T, which has no TryLock, and Harness.Locker is nil", s)
	}
	return l
}

// lockKey returns a key of its own for the running test.
func lockKey(t *testing.T) string {
	return fmt.Sprintf("conformance/%s/%d", t.Name(), time.Now().UnixNano())
}

func testTryLock(t *testing.T, h Harness) {
	if slices.Contains(h.Skip, CheckTryLock) {
		t.Skipf("Harness.Skip names %q: the backend's try-lock is not tested", CheckTryLock)
	}
	if slices.Contains(h.Unsupported, CheckTryLock) {
		t.Run("Refused", func(t *testing.T) { testLockRefused(t, h) })
		return
	}
	t.Run("InvalidKey", func(t *testing.T) { testLockInvalidKey(t, h) })
	t.Run("MutualExclusion", func(t *testing.T) { testLockMutualExclusion(t, h) })
	t.Run("NoWait", func(t *testing.T) { testLockNoWait(t, h) })
	t.Run("Rollback", func(t *testing.T) { testLockRollback(t, h) })
	t.Run("PanicReleases", func(t *testing.T) { testLockPanic(t, h) })
	t.Run("HolderKilled", func(t *testing.T) { testLockHolderKilled(t, h) })
}

func testLockInvalidKey(t *testing.T, h Harness) {
	l := h.lockerOf(t, h.NewStore(t))
	for _, key := range []string{"", "nul\x00byte", "bad\xffutf8", strings.Repeat("k", 256)} {
		ran, err := coord.WithLock(context.Background(), l, key, func(context.Context, any) error {
			t.Errorf("fn ran for the invalid key %q", key)
			return nil
		})
		if ran || !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("WithLock(key %q) = %v, %v; want false and ErrInvalidArgument", key, ran, err)
		}
	}
}

// exclusionLog records the critical sections of concurrent holders: an
// enter and an exit each, and an overlap whenever one enters while
// another is inside.
type exclusionLog struct {
	inside   atomic.Int32
	overlaps atomic.Int32
	mu       sync.Mutex
	events   []string
}

func (e *exclusionLog) enter(who string) {
	if n := e.inside.Add(1); n != 1 {
		e.overlaps.Add(1)
	}
	e.mu.Lock()
	e.events = append(e.events, "enter "+who)
	e.mu.Unlock()
}

func (e *exclusionLog) exit(who string) {
	e.mu.Lock()
	e.events = append(e.events, "exit "+who)
	e.mu.Unlock()
	e.inside.Add(-1)
}

// checkAlternation returns the problems of a log of "enter X" and "exit
// X" lines: each enter must be followed by the exit of the same holder
// before the next enter.
func checkAlternation(events []string) []string {
	var problems []string
	open := ""
	for i, ev := range events {
		kind, who, _ := strings.Cut(ev, " ")
		switch {
		case kind == "enter" && open != "":
			problems = append(problems, fmt.Sprintf("event %d: %s entered while %s was inside", i, who, open))
		case kind == "enter":
			open = who
		case kind == "exit" && open != who:
			problems = append(problems, fmt.Sprintf("event %d: %s exited while %q was recorded inside", i, who, open))
			open = ""
		default:
			open = ""
		}
	}
	if open != "" {
		problems = append(problems, open+" never exited")
	}
	return problems
}

// lockers returns the try-lock of the harness over s and over a store of
// s's table through each of h.Nodes.
func (h Harness) lockers(t *testing.T, s dao.Store[Job]) []coord.Locker {
	t.Helper()
	var ls []coord.Locker
	for _, n := range h.stores(t, s) {
		ls = append(ls, h.lockerOf(t, n))
	}
	return ls
}

// testLockRefused checks a try-lock the backend documents as unsupported
// (Harness.Unsupported): through every node, concurrent tries of one key
// and of invalid keys all return an error wrapping errors.ErrUnsupported
// and run nothing.
func testLockRefused(t *testing.T, h Harness) {
	ls := h.lockers(t, h.NewStore(t))
	key := lockKey(t)
	var ran, refused, other atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for i, l := range ls {
		for w := range 2 {
			wg.Go(func() {
				for _, k := range []string{key, fmt.Sprintf("%s/%d.%d", key, i, w)} {
					did, err := coord.WithLock(context.Background(), l, k, func(context.Context, any) error {
						ran.Add(1)
						return nil
					})
					switch {
					case errors.Is(err, errors.ErrUnsupported) && !did:
						refused.Add(1)
					default:
						other.Add(1)
						first.CompareAndSwap(nil, fmt.Sprintf("node %d: WithLock(%q) = %v, %v", i, k, did, err))
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("try-lock documented as unsupported: %d tries through %d node(s): %d refused with errors.ErrUnsupported, %d ran, %d otherwise",
		refused.Load()+other.Load(), len(ls), refused.Load(), ran.Load(), other.Load())
	if ran.Load() != 0 || other.Load() != 0 {
		t.Errorf("%d units of work ran and %d tries were not refused with errors.ErrUnsupported (first: %v)", ran.Load(), other.Load(), first.Load())
	}
}

func testLockMutualExclusion(t *testing.T, h Harness) {
	ls := h.lockers(t, h.NewStore(t))
	key := lockKey(t)
	const workers, attempts = 16, 25
	var log exclusionLog
	var acquired, skipped atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attempts {
				who := fmt.Sprintf("w%d.%d", w, i)
				ran, err := coord.WithLock(context.Background(), ls[w%len(ls)], key, func(context.Context, any) error {
					log.enter(who)
					time.Sleep(time.Millisecond)
					log.exit(who)
					return nil
				})
				switch {
				case err != nil:
					t.Errorf("%s: WithLock: %v", who, err)
				case ran:
					acquired.Add(1)
				default:
					skipped.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d goroutines x %d attempts in %v: %d acquired, %d skipped", workers, attempts, time.Since(began).Round(time.Millisecond), acquired.Load(), skipped.Load())
	if n := log.overlaps.Load(); n != 0 {
		t.Errorf("%d holders entered the critical section while another was inside", n)
	}
	for _, p := range checkAlternation(log.events) {
		t.Error(p)
	}
	if acquired.Load() == 0 {
		t.Error("no attempt acquired the lock")
	}
	if got := int64(len(log.events)); got != 2*acquired.Load() {
		t.Errorf("%d events for %d acquisitions", got, acquired.Load())
	}
}

// holdLock takes key on l in a goroutine and keeps it until the returned
// release is called; tx is what the unit of work received. done yields
// WithLock's result once released.
func holdLock(t *testing.T, l coord.Locker, key string) (tx any, release func(), done <-chan error) {
	t.Helper()
	held := make(chan any, 1)
	rel := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		ran, err := coord.WithLock(context.Background(), l, key, func(_ context.Context, tx any) error {
			held <- tx
			<-rel
			return nil
		})
		if err == nil && !ran {
			err = errors.New("the holder did not acquire the lock")
		}
		result <- err
	}()
	select {
	case tx = <-held:
	case err := <-result:
		t.Fatalf("holder: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("holder: no lock after 30 s")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release)
	return tx, release, result
}

func testLockNoWait(t *testing.T, h Harness) {
	s := h.NewStore(t)
	l := h.lockerOf(t, s)
	key := lockKey(t)
	_, release, done := holdLock(t, l, key)
	const tries = 20
	var total, worst time.Duration
	for range tries {
		began := time.Now()
		ran, err := coord.WithLock(context.Background(), l, key, func(context.Context, any) error {
			t.Error("a second holder ran while the first held the lock")
			return nil
		})
		d := time.Since(began)
		total, worst = total+d, max(worst, d)
		if ran || err != nil {
			t.Errorf("attempt on a held lock = %v, %v; want false, nil at once", ran, err)
		}
	}
	// Reported, not asserted: a loaded machine stretches any bound.
	t.Logf("attempt on a held lock: mean %v, worst %v over %d attempts", total/tries, worst, tries)
	if s.Capabilities().LostRace != dao.LostRaceBusy {
		ran, err := coord.WithLock(context.Background(), l, key+"/other", func(context.Context, any) error { return nil })
		if !ran || err != nil {
			t.Errorf("attempt on another key while the first is held = %v, %v; want true, nil", ran, err)
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("holder: %v", err)
	}
	ran, err := coord.WithLock(context.Background(), l, key, func(context.Context, any) error { return nil })
	if !ran || err != nil {
		t.Errorf("attempt after the holder committed = %v, %v; want true, nil", ran, err)
	}
}

func testLockRollback(t *testing.T, h Harness) {
	s := h.NewStore(t)
	if !s.Capabilities().Transactions {
		t.Skipf("%s runs no caller transactions: a try-lock's unit of work has no transaction to roll back", s.Capabilities().Backend)
	}
	b, ok := s.(dao.TxBinder[Job])
	if !ok {
		t.Fatalf("the store (%T) states Transactions but has no WithTx", s)
	}
	l := h.lockerOf(t, s)
	ctx := context.Background()
	boom := errors.New("unit of work failed")
	write := func(payload string, fail error) (bool, error) {
		return coord.WithLock(ctx, l, lockKey(t), func(ctx context.Context, tx any) error {
			j := &Job{Status: statusReady, Payload: payload, MaxAttempts: 1, CreatedAt: baseTime()}
			if err := b.WithTx(tx).Create(ctx, j); err != nil {
				return err
			}
			return fail
		})
	}
	if ran, err := write("rolled back", boom); !ran || !errors.Is(err, boom) {
		t.Errorf("failing unit of work: WithLock = %v, %v; want true and its error", ran, err)
	}
	if ran, err := write("committed", nil); !ran || err != nil {
		t.Errorf("unit of work: WithLock = %v, %v; want true, nil", ran, err)
	}
	rows, err := s.Find(ctx, dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Payload != "committed" {
		t.Errorf("rows after a failed and a committed unit of work: %+v; want the committed one alone", rows)
	}
}

func testLockPanic(t *testing.T, h Harness) {
	l := h.lockerOf(t, h.NewStore(t))
	key := lockKey(t)
	func() {
		defer func() {
			if r := recover(); r != "unit of work panicked" {
				t.Errorf("recovered %v, want the unit of work's panic re-raised", r)
			}
		}()
		coord.WithLock(context.Background(), l, key, func(context.Context, any) error { panic("unit of work panicked") })
		t.Error("WithLock returned instead of re-raising the panic")
	}()
	ran, err := coord.WithLock(context.Background(), l, key, func(context.Context, any) error { return nil })
	if !ran || err != nil {
		t.Errorf("attempt after a panic = %v, %v; want the lock free", ran, err)
	}
}

func testLockHolderKilled(t *testing.T, h Harness) {
	if h.KillLockHolder == nil {
		h.lacks(t, CheckLockHolderKilled, "KillLockHolder", "the release of a lock whose holder's connection dies")
	}
	l := h.lockerOf(t, h.NewStore(t))
	key := lockKey(t)
	tx, release, done := holdLock(t, l, key)
	killed := time.Now()
	h.KillLockHolder(t, tx)
	var freed time.Duration
	for {
		ran, err := coord.WithLock(context.Background(), l, key, func(context.Context, any) error { return nil })
		if err != nil {
			t.Fatalf("attempt after the kill: %v", err)
		}
		if ran {
			freed = time.Since(killed)
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatal("the lock of a killed holder is still held after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("lock free %v after the holder's connection was killed", freed.Round(time.Millisecond))
	release()
	if err := <-done; err == nil {
		t.Error("the killed holder's WithLock returned nil: its commit cannot have succeeded")
	} else {
		t.Logf("killed holder: %v", err)
	}
}

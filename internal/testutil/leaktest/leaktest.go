// Package leaktest finds the goroutines still alive in a test binary
// whose stacks run a given function: a test calls [Remaining] right after
// a Run, Close or Stop returned to check that nothing it started is left
// working.
package leaktest

import (
	"runtime"
	"strings"
	"time"
)

// Live returns the stacks of the goroutines other than the caller's whose
// stack holds any of funcs (substrings of function names as runtime.Stack
// prints them, e.g. "claimstore/dispatch.("), in no order; nil when there
// is none.
func Live(funcs ...string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	// The first stack is the caller's own.
	stacks := strings.Split(string(buf), "\n\n")
	for _, s := range stacks[1:] {
		for _, f := range funcs {
			if strings.Contains(s, f) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// Settle is the wait [Remaining] gives goroutines that are returning.
const Settle = time.Second

// Remaining returns the goroutines [Live] finds that are still there
// after Settle: a goroutine that had done its last step (a WaitGroup's
// Done, a channel's close) when the call it belongs to returned ends
// within microseconds, while one left working stays.
func Remaining(funcs ...string) []string {
	deadline := time.Now().Add(Settle)
	for {
		live := Live(funcs...)
		if len(live) == 0 || time.Now().After(deadline) {
			return live
		}
		time.Sleep(10 * time.Millisecond)
	}
}

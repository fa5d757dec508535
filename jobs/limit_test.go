package jobs

import (
	"strings"
	"testing"
	"time"
)

// TestLimitPartition checks the partition keys: the whole queue without
// ByKind and ByArgs; else the JSON array of the kind and the named args
// fields' compacted values, null for a missing field, and a digest for a
// key longer than maxPartLen.
func TestLimitPartition(t *testing.T) {
	row := func(kind, args string) *Row { return &Row{Kind: kind, EncodedArgs: args} }
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		lim  Limit
		row  *Row
		want string
	}{
		{Limit{Max: 1}, row("email", `{"customer_id":7}`), ""},
		{Limit{Max: 1, ByKind: true}, row("email", `{"customer_id":7}`), `["email"]`},
		{Limit{Max: 1, ByArgs: []string{"customer_id"}}, row("email", `{"customer_id": 7, "x": 1}`), `[7]`},
		{Limit{Max: 1, ByKind: true, ByArgs: []string{"customer_id", "region"}}, row("sms", `{"region":{"a": "eu"}}`), `["sms",null,{"a":"eu"}]`},
		{Limit{Max: 1, ByArgs: []string{"customer_id"}}, row("email", `[1,2]`), `[null]`},
	} {
		if got := tc.lim.partition(tc.row); got != tc.want {
			t.Errorf("limit %+v, args %s: partition %q, want %q", tc.lim, tc.row.EncodedArgs, got, tc.want)
		}
	}
	lim := Limit{Max: 1, ByArgs: []string{"s"}}
	a, b := lim.partition(row("k", `{"s":"`+long+`"}`)), lim.partition(row("k", `{"s":"`+long+`y"}`))
	if !strings.HasPrefix(a, "sha256:") || len(a) > maxPartLen || a == b {
		t.Errorf("long keys: %q and %q; want distinct sha256 digests within %d bytes", a, b, maxPartLen)
	}
}

// TestRefillAtStoredPrecision checks that a token bucket saved after each
// refill in a column of millisecond precision (refilled_at on MySQL and
// MariaDB is DATETIME(3)) gains the tokens of the time elapsed, not more:
// refills 0.9 ms apart, each bucket stored with its time truncated to the
// millisecond, at 1,000 tokens a second from empty.
func TestRefillAtStoredPrecision(t *testing.T) {
	l := &limiter{queue: "q", lim: Limit{Rate: 1000, Period: time.Second, Burst: 1000}}
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	b := limitRow{Queue: "q", RefilledAt: t0}
	const n = 1000
	step := 900 * time.Microsecond
	for i := 1; i <= n; i++ {
		b = l.refill(b, "", t0.Add(time.Duration(i)*step))
		b.RefilledAt = b.RefilledAt.Truncate(time.Millisecond) // as stored
	}
	elapsed := time.Duration(n) * step
	if most := float64(elapsed) * 1000 / float64(time.Second); b.Tokens > most {
		t.Fatalf("after %v of refills: %.1f tokens, at most %.1f allowed", elapsed, b.Tokens, most)
	}
}

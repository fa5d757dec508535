package shard_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox/shard"
)

// golden pins keys to their hash and their shard among 1, 2, 3, 5 and 10
// shards. A change here moves keys between the databases of every
// deployment: it must never happen by accident. The hashes are FNV-1a 64
// ("a" is the published test vector 0xaf63dc4c8601ec8c); the shards were
// checked against an independent transcription of the jump hash's
// reference code.
var golden = []struct {
	key    string
	hash   uint64
	shards [5]int // for 1, 2, 3, 5, 10 shards
}{
	{"a", 0xaf63dc4c8601ec8c, [5]int{0, 1, 2, 2, 2}},
	{"b", 0xaf63df4c8601f1a5, [5]int{0, 0, 0, 3, 3}},
	{"customer-1", 0x66030aab83c70157, [5]int{0, 0, 0, 0, 0}},
	{"customer-2", 0x66030bab83c7030a, [5]int{0, 0, 0, 3, 3}},
	{"customer-3", 0x66030cab83c704bd, [5]int{0, 0, 2, 2, 8}},
	{"order-0", 0xdee47f9f34bee6ba, [5]int{0, 1, 1, 1, 6}},
	{"order-1", 0xdee4809f34bee86d, [5]int{0, 1, 1, 1, 6}},
	{"order-2", 0xdee47d9f34bee354, [5]int{0, 0, 0, 4, 4}},
	{"order-3", 0xdee47e9f34bee507, [5]int{0, 0, 2, 2, 2}},
	{"order-4", 0xdee47b9f34bedfee, [5]int{0, 1, 1, 1, 1}},
	{"order-5", 0xdee47c9f34bee1a1, [5]int{0, 0, 0, 0, 0}},
	{"order-6", 0xdee4799f34bedc88, [5]int{0, 0, 2, 3, 5}},
	{"order-7", 0xdee47a9f34bede3b, [5]int{0, 1, 2, 2, 6}},
	{"order-8", 0xdee4779f34bed922, [5]int{0, 0, 0, 0, 0}},
	{"order-9", 0xdee4789f34bedad5, [5]int{0, 0, 0, 4, 7}},
	{"tenant/eu/42", 0xb456df81a7a7d20f, [5]int{0, 0, 2, 2, 2}},
	{"tenant/us/7", 0x5f36ef51c0450294, [5]int{0, 0, 0, 0, 0}},
	{"ключ", 0x296130de6f5b7a81, [5]int{0, 0, 0, 4, 4}},
	{"🙂", 0xff026b387504e24b, [5]int{0, 1, 1, 4, 4}},
	{"0123456789abcdef0123456789abcdef", 0x01527c9731f0ff55, [5]int{0, 0, 0, 0, 0}},
}

func TestGoldenRouting(t *testing.T) {
	for _, g := range golden {
		if h := shard.KeyHash(g.key); h != g.hash {
			t.Errorf("KeyHash(%q) = %#016x, want %#016x", g.key, h, g.hash)
		}
		for i, n := range [5]int{1, 2, 3, 5, 10} {
			got, err := shard.Index(g.key, n)
			if err != nil || got != g.shards[i] {
				t.Errorf("Index(%q, %d) = %d, %v; want %d", g.key, n, got, err, g.shards[i])
			}
		}
	}
	// Values of the reference algorithm on raw keys.
	for _, c := range []struct {
		key  uint64
		n, b int
	}{{0, 1000, 0}, {1, 1000, 549}, {^uint64(0), 1000, 313}} {
		if got := shard.Jump(c.key, c.n); got != c.b {
			t.Errorf("Jump(%#x, %d) = %d, want %d", c.key, c.n, got, c.b)
		}
	}
}

// Going from n to n+1 shards moves a key only to the new shard, and about
// 1/(n+1) of the keys; the keys spread evenly.
func TestAddingAShardMovesOnlyItsShare(t *testing.T) {
	const keys = 20000
	for n := 1; n <= 9; n++ {
		moved := 0
		per := make([]int, n+1)
		for k := range keys {
			key := fmt.Sprintf("customer-%d", k)
			before, _ := shard.Index(key, n)
			after, _ := shard.Index(key, n+1)
			per[after]++
			if before == after {
				continue
			}
			if after != n {
				t.Fatalf("%d -> %d shards: key %q moved from %d to %d, not to the new shard", n, n+1, key, before, after)
			}
			moved++
		}
		want := float64(keys) / float64(n+1)
		t.Logf("%d -> %d shards: %d of %d keys moved (%.1f %%, rule 1/%d = %.1f %%)", n, n+1, moved, keys, 100*float64(moved)/keys, n+1, 100/float64(n+1))
		if f := float64(moved); f < 0.9*want || f > 1.1*want {
			t.Errorf("%d -> %d shards: %d keys of %d moved, want about %.0f", n, n+1, moved, keys, want)
		}
		for i, c := range per {
			if f := float64(c); f < 0.9*want || f > 1.1*want {
				t.Errorf("%d shards: shard %d holds %d keys, want about %.0f", n+1, i, c, want)
			}
		}
	}
}

func TestIndexInvalid(t *testing.T) {
	for _, c := range []struct {
		key string
		n   int
	}{{"", 2}, {"k", 0}, {"k", -1}} {
		if _, err := shard.Index(c.key, c.n); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Index(%q, %d) = %v, want ErrInvalidArgument", c.key, c.n, err)
		}
	}
	if got := shard.Jump(42, 0); got != 0 {
		t.Errorf("Jump(42, 0) = %d, want 0", got)
	}
}

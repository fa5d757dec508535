package shard

import (
	"fmt"
	"hash/fnv"

	"github.com/claimstore/claimstore/dao"
)

// KeyHash returns the 64-bit FNV-1a hash of key's bytes (hash/fnv's
// New64a): the number [Jump] turns into a shard index. It is part of the
// routing contract: changing it would move keys between shards.
func KeyHash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // never fails
	return h.Sum64()
}

// Jump returns the bucket in [0, buckets) of key by the jump consistent
// hash of Lamping and Veach ("A Fast, Minimal Memory, Consistent Hash
// Algorithm", 2014). Going from n to n+1 buckets, a key either keeps its
// bucket or moves to the new bucket n, and about 1/(n+1) of all keys
// move; no key moves between the old buckets. buckets must be >= 1; Jump
// returns 0 for less.
func Jump(key uint64, buckets int) int {
	if buckets < 1 {
		return 0
	}
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// Index returns the shard of partition key among n shards:
// Jump(KeyHash(key), n). It is what a [Router] of n shards computes, and
// lets a rebalance be planned without one: a key moves when Index(key, n)
// differs from Index(key, n+1). Errors wrap [dao.ErrInvalidArgument]: an
// empty key, or n < 1.
func Index(key string, n int) (int, error) {
	if key == "" {
		return 0, fmt.Errorf("shard: %w: empty partition key", dao.ErrInvalidArgument)
	}
	if n < 1 {
		return 0, fmt.Errorf("shard: %w: %d shards", dao.ErrInvalidArgument, n)
	}
	return Jump(KeyHash(key), n), nil
}

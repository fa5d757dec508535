package shard_test

import (
	"fmt"

	"github.com/claimstore/claimstore/outbox/shard"
)

// Where keys go among two shards, and which of them a third shard takes:
// a key moves only to the new shard.
func ExampleIndex() {
	for _, key := range []string{"order-0", "order-2", "order-3", "order-6", "order-7"} {
		two, _ := shard.Index(key, 2)
		three, _ := shard.Index(key, 3)
		fmt.Printf("%s: shard %d of 2, shard %d of 3\n", key, two, three)
	}
	// Output:
	// order-0: shard 1 of 2, shard 1 of 3
	// order-2: shard 0 of 2, shard 0 of 3
	// order-3: shard 0 of 2, shard 2 of 3
	// order-6: shard 0 of 2, shard 2 of 3
	// order-7: shard 1 of 2, shard 2 of 3
}

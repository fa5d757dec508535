// Package shard partitions a transactional outbox across several
// databases by partition key: each message goes to the outbox table of one
// shard (a separate database), and each shard has its own relays.
//
// # Routing
//
// A [Router] over n shards sends partition key k to shard
// Jump(KeyHash(k), n): the 64-bit FNV-1a hash of the key's bytes
// ([KeyHash], Go's hash/fnv), mapped to a shard by the jump consistent hash
// of Lamping and Veach ([Jump]). Both are fixed: a key maps to the same
// shard in every process and release while the list of shards is the
// same, and the package's tests pin a table of keys to their shards so
// that a change is caught. Every message needs a partition key.
//
// The outbox is transactional: a message commits with the business rows
// it announces, so those rows must live in the same database as the
// message. A writer asks the router for the key's shard first —
// [Router.Shard] — and runs its transaction on that shard's database, or
// lets [Router.Transaction] do both. The business data is partitioned by
// the same key as the messages.
//
// # Order
//
// The outbox promises a claim order, not a delivery order: a claim takes
// the highest Priority first, then the oldest CreatedAt, then the lowest
// id. A relay of Loops 1 and Window 1 (the defaults) publishes a
// batch in that order, waits for the acks, marks it, and only then claims
// the next batch, so with a publisher that keeps the order of its
// publishes (natspub on one NATS connection to one stream) messages enter
// the stream in claim order.
// Per partition key, then, the stream holds a key's messages in the order
// they were written when all of the following hold on its shard:
//
//   - one relay, of Loops 1 and Window 1, per shard and target broker
//     ([NewRelays] with perShard 1); more relays or loops, or a Window
//     above 1, publish batches in parallel;
//   - the key's messages are written one after another (each transaction
//     committed before the next begins) by one writer, with equal
//     Priority; CreatedAt comes from the writer's repository clock, whose
//     estimate of the database clock may step back by up to half a round
//     trip when it is sampled again (once a minute), so two messages of a
//     key written less than that apart may swap;
//   - none of the key's messages fails a publish or is released: a failed
//     message is retried after its backoff while later messages of its key
//     go ahead, and a relay that restarts within the lease of its crashed
//     batch publishes newer messages before that batch.
//
// The broker's de-duplication keeps only the first copy of a message
// published twice, so repeats do not reorder what a consumer reads.
// Messages of different keys, and of different shards, have no order
// between them.
//
// # Adding a shard
//
// With the jump hash, going from n to n+1 shards moves a key only when
// Index(key, n+1) == n: it moves to the new shard, never between the old
// ones, and about 1/(n+1) of the keys move. Shards can only be added at the
// end and removed from the end (removing the last shard moves exactly its
// keys, spread over the others); the order of the list must never change.
//
// A moving key must not have messages waiting on its old shard while its
// new shard publishes, or the two relays would publish its messages out of
// order. The procedure:
//
//  1. Create the new database with its outbox table ([outbox.Migrate])
//     and the business tables.
//  2. Stop the writers of the moving keys (simplest: pause every writer),
//     and copy those keys' business rows to the new database.
//  3. Wait until the old shards hold no unfinished message
//     ([Router.WaitDrained]): every message written before the pause is
//     published.
//  4. Stop the relay group ([Relays.Stop] drains it), start one over the
//     router with the new shard ([Router.With], [NewRelays]), switch the
//     writers to that router and resume them; then delete the moved rows
//     from the old shards.
//
// Keys that do not move may keep being written during steps 2 and 3 when
// the writers can tell them apart (Index(key, n+1) < n); WaitDrained then
// waits for those too, which only lengthens step 3.
//
// # Relaying
//
// [Relays] runs a relay group per shard, each against its own database,
// with one configuration and one publisher, and stops them together: each
// relay stops claiming, lets its in-flight batches publish, marks what
// the broker acknowledged and releases the rest. A shard whose database
// is down stalls only its own keys; the other shards relay on.
package shard

// Package outboxbench measures the transactional outbox end to end for
// `claimstore-dev bench outbox`: writers add messages in transactions while
// relays claim them, publish them to NATS JetStream with ack and mark
// them; the clock runs from the first write to the last mark. Two
// variants run in one process, each on a fresh table and stream: the relay
// as shipped (one UPDATE per batch of marks, [VariantBatched]) and the
// same relay over a store that sends one UPDATE per message marked
// ([VariantPerMessage]). After each variant the stream is read back:
// every message must be in it exactly once.
//
// [Run] takes its options as an [Options] value, writes progress to the
// writer given there and returns a [Report]; it holds no state between
// runs.
package outboxbench

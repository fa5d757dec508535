// Package demo runs the transactional outbox end to end for `claimstore
// demo`: writers add business rows, each in one transaction with its
// outbox message, while relays claim, publish to NATS JetStream with ack
// and mark the messages; then the stream is read back and the verdict
// printed: every message in the stream exactly once, or the run fails.
//
// [Run] takes its options as an [Options] value and writes to the writers
// it is given; it holds no state between runs.
package demo

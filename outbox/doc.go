// Package outbox is a transactional outbox on top of claimstore's
// [dao.Store]: messages are written in the same database transaction as the
// business change they announce, and a relay moves them to a broker.
//
// # Writing
//
// [Migrate] creates the message table ([Message]; default name
// outbox_messages) and the indexes that serve the claim; on PostgreSQL the
// table's layout lets claims be HOT updates (see [Migrate] and
// docs/operations.md for tables made by earlier versions). [Repository.Add]
// inserts messages inside the caller's GORM transaction, so the business
// rows and their messages commit or roll back together. Each message has a
// MessageID, its idempotency key, unique per target broker.
//
// A store that wraps another (metrics, tracing, fault injection) must
// forward the optional interfaces of package dao that the repository
// uses: dao.TxBinder, without which [Repository.Add] with a tx fails with
// an error wrapping errors.ErrUnsupported (unless [WithTxStore] binds the
// transaction), and dao.Clock, without which the repository runs on the
// host's clock instead of the database's ([New] checks both once).
//
// # Relaying
//
// A [Relay] runs a poll loop: [Repository.ClaimBatch] claims a batch with
// one atomic [dao.Store.Claim] (pending messages, failed messages whose
// retry time has come, and processing messages whose lease expired — the
// batch of a relay that died), the [Publisher] publishes it and waits for
// the broker's acks, and the outcome is written back with batched, fenced
// marks: [Repository.MarkPublished], [Repository.MarkFailed]. A mark
// changes a row only while it is still processing and locked by the same
// worker, so a relay whose lease ran out cannot overwrite the state written
// by the relay that took the rows over; refused rows are reported with
// [ErrLeaseLost]. Failures back off exponentially with jitter, capped
// ([RetryPolicy]); past its retries a message is abandoned with its last
// error kept. Nothing is dropped silently.
//
// With RelayConfig.Window above 1 a loop does not wait for a batch's acks
// before it claims the next: up to Window batches per loop are published
// at once, and the acknowledged messages of the batches whose publish has
// ended are marked together. The relay promises no order across batches
// (nor across retries), with or without a window.
//
// Delivery is at least once: a message can be published again when a
// relay dies after publishing and before marking, or when an ack is lost.
// Publishers that hand the MessageID to the broker's de-duplication
// (package outbox/natspub sets Nats-Msg-Id on NATS JetStream) make the
// stream effectively-once.
//
// On shutdown (its context cancelled) a relay stops claiming, lets
// in-flight batches publish for up to RelayConfig.DrainTimeout, marks
// what was acknowledged and releases the rest back to pending. It logs with
// log/slog and reports OpenTelemetry metrics (see [MetricPublished] and the
// other Metric names) to the meter provider it is given.
//
// # Clocks
//
// A relay bounds its own I/O (claim, publish, marks, shutdown) with
// durations on the host's monotonic clock, so a relay whose wall clock is
// hours off still publishes. The lease arithmetic — LockedUntil, NextRetryAt
// and which rows a claim may take — uses one clock per repository: by
// default the database's, read at most once a minute and advanced with the
// monotonic clock in between, so relays on hosts whose clocks disagree
// still agree on every lease; or the clock given with [WithClock]. The
// time is computed in the process and bound as a value: the store API has
// no way to name the database's CURRENT_TIMESTAMP in criteria. When
// injected clocks disagree by more than the lease, a batch may be published
// twice (the broker keeps one copy) while the fences keep every row's final
// state right.
//
// # Operating
//
// [Repository.Counts], [Repository.List] and its shorthands inspect the
// table; [Repository.Requeue] sends failed or abandoned messages again;
// [Repository.Purge] deletes old published or abandoned messages in
// bounded batches and may run on many servers at once. The claimstore
// command wraps them as "claimstore outbox status | requeue | purge", runs
// relays with "claimstore relay", and shows the whole path end to end with
// "claimstore-dev demo".
//
// # Several databases
//
// Package outbox/shard partitions the outbox by partition key across
// several databases, each with its own relays, keeping each key on one
// database; docs/operations.md describes the deployment.
package outbox

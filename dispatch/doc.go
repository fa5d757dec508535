// Package dispatch runs due rows: a generic worker loop over any
// [dao.Store] that claims due rows with a lease, runs a handler per row
// with bounded concurrency, renews the leases of long handlers and writes
// fenced outcomes; and, on top of it, once and cron schedules with a retry
// ladder, a misfire policy, graceful drain and readiness.
//
// # The worker loop
//
// A [Worker] claims with one [dao.Store.Claim]: the rows its Config.Due
// criteria select whose lease is free (lease end NULL or not after now),
// stamping each with a lease owner token (the worker id, "#", a sequence
// number of the claim) and a lease end (now + Lease). The database decides
// what is due; the tick (default 1 s) is only a heartbeat. A claim that
// returns a full batch is followed by the next as soon as a handler slot is
// free. Every later write to a row — lease renewal, outcome, release — is
// an Update conditioned on the row's key and its owner token, so a worker
// that lost the lease (it expired and another worker claimed the row)
// changes nothing: the Update matches no row, the worker logs
// [ErrLeaseLost] and counts it in [Stats].LeaseLost.
//
// Delivery is at least once: a handler whose worker dies (or loses the
// lease) after the handler's side effect and before the outcome write runs
// again when the lease ends. Handlers that must not repeat a side effect
// make it idempotent, e.g. keyed by the row's key and due time.
//
// Lease renewal: once per tick, one Update extends the leases of all the
// worker's running handlers that have held theirs for half a lease. A row
// the renewal finds taken over, or whose lease would end before a failing
// renewal can be retried, has its handler's context cancelled with cause
// [ErrLeaseLost].
//
// # Clocks
//
// The due-time comparison, the lease ends and the times written use one
// clock: the database's by default when the store reads it
// (dao.Capabilities.DatabaseClock: the SQL backends), read once a minute
// and advanced with the host's monotonic clock in between, so that servers
// with skewed clocks agree on what is due; else the host's clock (memory,
// Elasticsearch). [Config].Now and [SchedulesConfig].Now replace it, e.g.
// with a fake clock in tests. Durations the worker puts on its own waits
// (tick, drain timeout, write timeouts) are measured on the host's
// monotonic clock.
//
// # Schedules
//
// [Schedule] is the model of the claimstore_schedules table, or of the
// table a store names ([MigrateScheduleStore] creates it); [Schedules]
// adds (idempotently, by unique key, also inside the caller's
// transaction with [Schedules.WithTx]), upserts,
// pauses, resumes, deletes, gets and lists schedules. A [ScheduleWorker]
// fires the due active ones with a [FireFunc] and writes the outcome of
// [Policy.Decide]:
//
//   - success: once → fired (kept for audit); cron → the next occurrence
//     after now in the schedule's time zone ([NextCron], wall-clock
//     semantics across daylight-saving changes), or fired when none exists.
//   - failure: failure_count + 1, last_error recorded, next_fire_at = now +
//     backoff (default 30 s doubling to 15 min, [Doubling]); at
//     max_failures (default 5) once → failed (terminal), cron → skipped to
//     the next occurrence after now with the failure count reset and
//     last_error kept.
//   - misfire (a cron fire claimed more than MisfireGrace late, after
//     downtime): fired once for all missed occurrences by default
//     ([MisfireFireOnce]), or skipped with the skip recorded in last_error
//     ([MisfireSkip]). Nothing is dropped silently.
//
// # Drain and readiness
//
// When the context of [Worker.Run] ends (on SIGTERM with
// [ShutdownContext]), the readiness handler ([Worker.Ready]) answers 503 at
// once, claiming stops, in-flight handlers get DrainTimeout to finish, and
// the rest are cancelled (cause [ErrDrained]): a handler that then returns
// a nil outcome has its lease released (owner cleared, lease end now) so
// another worker takes the row at once, one that returns an outcome (its
// work completed as the drain began) has it written, and the leases of
// handlers still running WriteTimeout later are released. The
// liveness handler ([Worker.Live]) answers 200 until the process exits.
// Close the store after Run returns.
//
// # Metrics
//
// With a MeterProvider ([Config], [RescueConfig], [RetentionConfig]) the
// package records OpenTelemetry metrics through the metric API: fires,
// failures by step, retries, skips by reason, the fire lag histogram,
// handlers in flight, lease renewals and losses, drains and the leases
// they released, rescued and swept rows ([MetricFires] and the constants
// after it). Without one nothing is recorded.
//
// # Wrapped stores
//
// A worker writes its outcomes in batches through two optional interfaces
// of package dao: dao.KeyUpdater (identical outcomes in one fenced
// statement) and dao.EachUpdater (outcomes that differ row by row but
// write the same columns, in few statements). A store that wraps another
// (metrics, tracing, fault injection) must forward them to keep that; [New]
// checks once and logs at Warn when the store lacks them, and the worker
// then writes each outcome with one Update; likewise when the store's
// Capabilities report the database's clock but it is not a dao.Clock, on
// which the worker runs on the host's clock. [Schedules.WithTx] needs
// dao.TxBinder (without it its calls fail with an error wrapping
// errors.ErrUnsupported), [Schedules.AddMany] inserts in bulk through
// dao.IdempotentCreator, and [MigrateScheduleStore] finds the table
// through dao.Aser and dao.TableNamer (or dao.Migrator).
//
// # Maintenance
//
// [Maintenance] runs periodic tasks beside a worker, gated by a Leader
// function that a leader election supplies ([ElectorGate] over a
// coord.Elector). The tasks at hand: the [Rescuer], which frees rows whose
// lease expired long ago while still naming an owner (a panicked handler,
// a lost worker) and logs and counts them; the [Retention] sweep of fired
// and failed schedules; and [OutboxRetention], the outbox's purge of old
// published messages. Deletes run in bounded batches.
package dispatch

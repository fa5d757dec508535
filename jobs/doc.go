// Package jobs is a job queue on the claimstore backends that enforce
// its unique index (PostgreSQL, MySQL and MariaDB, SQLite, SQL Server,
// memory; not Elasticsearch, which has neither a unique index nor
// transactions, see docs/jobs.md, "Backends"): jobs with a kind and
// typed args, named queues with their own concurrency that
// every process pauses and resumes together, retries with backoff and the
// error of every attempt kept, unique jobs enforced by the database,
// cancel (also of a running job), snooze, a timeout per kind, periodic
// jobs on cron schedules, a rescuer and retention under leader election,
// and a wake-up on insert. It is built on package dispatch's worker loop:
// claims with a lease, batched fenced outcomes, renewals, drain.
//
// # The job table
//
// The library owns the table: [Migrate] creates it (claimstore_jobs, or the
// name the store carries) with the indexes each backend needs, and records
// its schema version. On PostgreSQL the fetch index is partial, over the
// available jobs in claim order, and the table has a fillfactor that
// leaves room for HOT updates: a claim writes only columns no index holds,
// because a running job stays stored as available with a live lease (see
// [Row] and [StateRunning]). A statement-level trigger notifies the
// channel named like the table on every insert, and the clients listening
// wake their queues at once.
//
// # Kinds and workers
//
// An args type names its kind ([Args]); [AddWorker] registers the typed
// work function of a kind in a [Workers] registry:
//
//	type EmailArgs struct {
//		To string `json:"to"`
//	}
//
//	func (EmailArgs) Kind() string { return "email" }
//
//	ws := jobs.NewWorkers()
//	err := jobs.AddWorker(ws, jobs.WorkFunc[EmailArgs](func(ctx context.Context, j *jobs.Job[EmailArgs]) error {
//		return send(ctx, j.Args.To)
//	}))
//	if err != nil {
//		return err // dao.ErrInvalidArgument: a kind registered twice, say
//	}
//
// A [Client] runs the queues over the job table [Migrate] created (store
// is a dao.Store[jobs.Row] on it) until its context ends, then drains:
//
//	client, err := jobs.NewClient(jobs.Config{
//		Store:   store,
//		Workers: ws,
//		Queues:  map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 100}},
//	})
//	if err != nil {
//		return err
//	}
//	go func() { runErr <- client.Run(ctx) }()
//	_, err = client.Insert(ctx, EmailArgs{To: "ada@example.com"}, nil)
//
// A client's queues claim only the kinds its Workers registry has workers
// for, and an insert refuses another kind ([ErrUnknownKind]) unless
// Config.SkipUnknownJobCheck says the job is for other clients: during a
// rolling deploy, a job of a new kind waits for a client that knows it,
// never discarded by one that lacks it. [Client.UnknownKinds] lists the
// kinds that wait with no client that knows them.
//
// # Outcomes
//
// A nil error completes the job. Another error fails the attempt: the job
// is retryable after its kind's [Backoff] ([DefaultBackoff]: attempt⁴ s
// with jitter) and discarded after MaxAttempts, each attempt's error (and
// a panic's stack) appended to the job's Errors. [Cancel] ends the job
// cancelled; [Snooze] runs it again later without spending an attempt. A
// kind's timeout ([WithTimeout], default [DefaultTimeout]) ends the work's
// context at the timeout with context.DeadlineExceeded, cause
// [ErrTimeout]. The outcome is written fenced by the
// job's lease, in one statement for the jobs that ended alike.
//
// Delivery is at least once: a worker that dies after the work's side
// effect and before its outcome write leaves the job to run again when
// its lease ends (the lost attempt is recorded); make work idempotent.
//
// # Inserting
//
// [Client.Insert] inserts on its own, [Client.InsertTx] inside the
// caller's transaction (a *gorm.DB in a transaction: the job commits or
// rolls back with the business rows), [Client.InsertMany] many at once
// (on PostgreSQL one INSERT of arrays). [InsertOpts] set the queue,
// priority, scheduled time, max attempts, tags, metadata and
// [UniqueOpts].
//
// # Sequences, batches and workflows
//
// Jobs inserted with the same InsertOpts.Sequence key ([SequenceOpts])
// run one at a time in insertion order; a failed job holds its sequence
// until it completes, or is cancelled or discarded (the sequence then
// stops unless ContinueOnCancelled or ContinueOnDiscarded). [Client.InsertBatch]
// inserts jobs as a batch with a callback job that runs once, with the
// counts by final state ([Row.BatchCounts]), when every job of the batch
// is final. [Client.InsertWorkflow] inserts tasks that depend on one
// another (a [Workflow]): a task runs once its dependencies completed,
// reading their outputs ([Row.DependencyOutput]), and is cancelled when
// one of them is cancelled or discarded, unless it ignores that. All wait
// in [StatePending], which no claim takes, and are
// promoted by conditional writes the database enforces (a unique index on
// the sequence's holder, a guard on the pending state) right after the
// outcome writes and by the maintenance every [PromoteInterval] ([Client.Promote]).
//
// # Running
//
// [Client.Run] runs the client's queues until its context ends, then
// drains. Queues wake on inserts — across processes by PostgreSQL
// LISTEN/NOTIFY, elsewhere by the job table's change signal read every
// Config.SignalInterval ([DefaultSignalInterval], 25 ms); in-process on
// every backend — and poll at each poll interval (Config.PollInterval).
// Once per poll interval each client reads the queue pauses ([Client.PauseQueue])
// and the cancel requests of the jobs it runs ([Client.Cancel]). The
// maintenance — the scheduler that makes scheduled and retryable jobs
// available ([Client.Schedule]), the [Client.Rescue] of jobs whose worker
// died on their last attempt, the retention [Client.Sweep] of final jobs —
// runs on the elected leader when Config.Leases or Config.Leader is set,
// else on every client.
//
// # Global limits and rate limits
//
// A queue's [QueueConfig].Limit ([Limit]) holds across every client that
// runs it: at most Limit.Max jobs running at once and at most Limit.Rate
// started per Limit.Period (a token bucket), for the whole queue or per
// kind and args fields (ByKind, ByArgs). It is enforced in the claim:
// the claims of a limited queue take a row lock in the limit table
// ([LimitTable]) and claim no more than the room left, counting the jobs
// whose leases have not ended, so a dead client's slots come back when
// its leases end. Jobs over the limit stay available. Each client
// records its Limit in the limit table, and [Client.Limits] reads every
// limited queue's Limit, its running jobs by partition and its rate
// tokens.
//
// # Observing
//
// [Client.Subscribe] delivers the client's events: each job's outcome once
// its write committed ([Event]), and queue pauses and resumes.
// Config.ErrorHandler ([ErrorHandler]) is told of every failed attempt
// and may cancel the job. Config.Middleware wraps every insert
// ([InsertMiddleware]) and every job's work ([WorkMiddleware]);
// [WithMiddleware] wraps one kind's. Package jobsotel is such a
// middleware: OpenTelemetry spans and metrics.
//
// # Wrapped stores
//
// A store that wraps the job store (metrics, tracing, fault injection)
// keeps the client's behaviour only if it forwards the optional
// interfaces of package dao that the store it wraps has (see
// dao/optional.go): dao.TxBinder (without it [Client.InsertTx],
// [Client.InsertManyTx] and [Client.CompleteTx] fail with an error
// wrapping errors.ErrUnsupported), dao.KeyUpdater and dao.EachUpdater
// (without them outcomes are written one statement per row),
// dao.IdempotentCreator (unique jobs inserted one statement per row),
// dao.TableNamer (the table name), dao.Aser and dao.Listener (wake-ups
// on inserts by other processes). [NewClient] logs at Warn, once, the
// interfaces the store lacks; each queue's dispatch worker logs the
// outcome writes it cannot batch.
//
// docs/jobs.md has the full guide, the table of states, and the mapping
// of River's API to this one.
package jobs

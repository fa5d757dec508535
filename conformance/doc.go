// Package conformance is the executable contract of [dao.Store]: a test
// suite that every claimstore adapter runs, and that users run against
// their own database to check that the guarantees hold there (their server
// version, their isolation settings, their proxies and poolers).
//
// # What it checks
//
// [Run] runs, as subtests and only through the public [dao.Store] API
// (and package coord's, for the coordination section):
//
//   - Capabilities: the store names its backend and collation, and its
//     lost race, strategy and round trips per claim are documented values.
//   - CRUD: Create fills generated ids, Get reads rows back and reports
//     [dao.ErrNotFound], a duplicate primary key is [dao.ErrDuplicate] and
//     changes nothing, and a batch of 8,000 rows or an In list of 70,000
//     values (beyond SQLite's and PostgreSQL's bind-parameter limits) works
//     or is refused as [dao.ErrInvalidArgument], never a raw driver error.
//   - Criteria: every operator (Eq, Ne, Lt, Le, Gt, Ge, In, IsNull, NotNull,
//     the field-to-field comparisons, And and Or nested three deep) on
//     strings, integers, times and nullable columns, under SQL's
//     three-valued logic (Ne does not match NULL; an empty string is not
//     NULL). Each expression must select the same rows in Find, Count,
//     Update and Claim, which backends render separately. Times compare as
//     instants whatever zone they are given in. Strings that differ in
//     case, accents or trailing spaces compare as the store's
//     Capabilities().Collation declares ([dao.Collation]).
//   - Time zones: times written in a non-UTC zone read back as the same
//     instants and compare as instants.
//   - Ordering: ascending and descending, several keys, the primary key as
//     the final tie breaker, with limits; strings in the declared
//     collation's order.
//   - Update (Incr, setting and clearing NULL, the count of matched rows),
//     UpdateKeys and UpdateEach (each row its own values, only where its
//     fence and the criteria match, exactly the keys written reported),
//     and bounded Delete (never more than the limit, smallest ids first,
//     idempotent).
//   - Bad input: an unknown field, a value of the wrong type, an empty In,
//     a nil Eq value, Set on the primary key, an empty Set, a Delete limit
//     of zero, a negative Find limit and more are [dao.ErrInvalidArgument]
//     and leave the table unchanged. So are values some backend would
//     refuse or alter — a string holding NUL or not UTF-8, a NaN or
//     infinite float, a time outside 0001-01-01 to 9999-12-31 23:59:59
//     UTC — given to Create, to criteria and to Set; the values at the
//     edges of that range are stored and read back unchanged.
//   - Claim: the limit, the order (of the rows picked and of the returned
//     slice) and the criteria are honoured, ineligible rows are untouched,
//     the returned rows are in their post-claim state (equal to a fresh
//     read, times within one second because MySQL DATETIME keeps whole
//     seconds), durable and visible to other readers, and a limit <= 0
//     claims nothing.
//   - No double claim: Harness.Workers goroutines (16) claim
//     Harness.Rows rows (5,000; 500 with -short) until none is left. Every
//     returned id is counted: the claimers' sets must be disjoint, their
//     union must be every row, no call may return more than its limit, and
//     each row's final state must name the worker that received it and
//     show exactly one claim (attempts = 1).
//   - The lost race that the store's Capabilities().LostRace documents,
//     forced deterministically. For the portable default, a
//     [dao.ClaimTrace] hook runs a competing claim for one candidate after
//     the candidates are read and before the guarded updates. Then
//     [dao.LostRaceSkip]: the call returns the other rows and no error;
//     [dao.LostRaceImpossible]: the competitor cannot complete until the
//     first claim returns, which gets every row; [dao.LostRaceBusy]: the
//     competitor either wins the row (skipped by the first claim) or gets
//     [dao.ErrBusy]; [dao.LostRaceConflict]: the call returns
//     [dao.ErrConflict] together with the rows claimed before the conflict.
//     For a fast path (no candidate stage) Harness.HoldLock holds a row
//     lock on the first eligible row from another transaction, and the
//     claim must skip it without blocking and without error. For
//     [dao.LostRaceBusy] HoldLock holds the database write lock, and the
//     claim must fail with ErrBusy. In every case no row goes to two
//     claims, and every row not returned is untouched, so nothing is lost:
//     afterwards every such row is claimable exactly once. A portable claim
//     whose context is canceled between its read and its writes returns
//     context.Canceled and likewise leaves nothing stranded.
//   - Cancellation sweep: 8 goroutines make 2,000 claims (400 with -short;
//     CLAIMSTORE_CANCEL_SWEEP_CALLS) of 1 to 8 rows whose contexts are
//     canceled, or reach their deadline, at a random moment 0 to 5 ms into
//     the call; no new call starts after 15 s (5 s with -short;
//     CLAIMSTORE_CANCEL_SWEEP_SECONDS). Afterwards every row was returned
//     to exactly one call and is claimed in the store by that call, or was
//     returned to none and is untouched and claimable: stranded,
//     duplicated and phantom rows are counted and printed, and must be
//     zero. The error of a call whose context had ended must wrap
//     context.Canceled or context.DeadlineExceeded; any other call may
//     fail only with a retryable error.
//   - Models (with Harness.Models, a [ModelStores]; without it the section
//     fails unless Harness.Skip names [CheckModels]): everyday GORM models
//     instead of [Job] — [Ticket] (gorm.Model, a typed string enum, an
//     embedded struct with a column prefix, a JSON-serialized field),
//     [UUIDTicket] and [V7Ticket] (UUID keys), Ticket under a naming
//     strategy with a table prefix, and [SoftJob]: the table name carries
//     the prefix; keys, enums and tagged columns work in criteria, Set,
//     Get, Update and Delete; concurrent claims take every row of each
//     model exactly once; soft delete and automatic timestamps behave as
//     GORM's (live rows only, Table.Unscoped sees every row).
//   - Coordination, leader election (with Harness.Leases; without it the
//     check fails unless Harness.Skip names CheckLeader): the lease operations one by one (insert,
//     renewal keeping the term, refusal while another holds the lease,
//     release, takeover with term + 1, bad input is
//     [dao.ErrInvalidArgument]); four electors of which the leader resigns
//     five times, each time replaced within one poll in a greater term,
//     with never two leaders at once nor two holders of a term; a leader
//     whose store fails (a crash: no renewal, no release) replaced within
//     TTL plus one renew interval, the handover time logged; and a deposed
//     leader's fenced write changing nothing.
//   - Coordination, TryLock (package coord's WithLock on [Harness.Locker],
//     by default the store itself): invalid keys are
//     [dao.ErrInvalidArgument]; 16 goroutines recording enter and exit
//     never overlap; an attempt on a held lock returns ran == false
//     without waiting (its latency is logged, not asserted); a failed unit
//     of work rolls back its writes (on stores with transactions); a
//     panic releases the lock; a holder whose session
//     [Harness.KillLockHolder] ends frees the lock once the server notices
//     ([CheckLockHolderKilled]).
//
// [RunLockProcesses] checks the try-lock's mutual exclusion across three
// processes of the test binary; it runs by default.
//
// [RunJobs] runs the job queue's group (package jobs) over a
// [JobsHarness]: lifecycle, retries and their errors, timeouts, unknown
// kinds, args limits, snooze, the state of waiting jobs, cancel, unique
// jobs under concurrent inserts (by args and by tagged fields),
// transactions (refused outside one, woken at commit), pauses (of
// unknown queues too), the rescuer, claims released before their work
// started, drain, Stop and StopAndCancel, queues and periodic jobs
// changed at run time, retention, periodic jobs (and clients listing
// different ones), events, the error handler, middleware, listings
// against an oracle, recorded output, CompleteTx, and across three
// processes every job exactly once and a killed process's jobs run
// again.
//
// [RunStress] repeats the no-double-claim check across operating-system
// processes (three processes of eight workers over 100,000 rows by
// default) when CLAIMSTORE_STRESS=1, by running the test binary again as
// child processes.
//
// # Running it against your own database
//
// Write a test in your module that runs the suite with a [Harness]. With
// the SQL adapter, package adapters/sqlstore/sqlstoretest builds a complete
// one from a *gorm.DB (a fresh table per test, dropped when it ends, and
// HoldLock):
//
//	func TestClaimstoreConformance(t *testing.T) {
//		db, err := sqlstore.Open(context.Background(), "postgres", os.Getenv("DATABASE_URL"))
//		if err != nil {
//			t.Fatal(err)
//		}
//		conformance.Run(t, sqlstoretest.Harness(db))
//	}
//
// Run it with the race detector: go test -race -run TestClaimstoreConformance.
// For another store, NewStore returns a store of [Job] over a fresh, empty
// table and drops the table when the test ends; give HoldLock when the
// store claims on a fast path or documents [dao.LostRaceBusy]. Without it
// that check fails the run, unless Harness.Skip names [CheckHeldLock]: a
// missing harness capability never passes unnoticed. Rows and Workers
// resize the concurrency test. The test logs the store's capabilities and
// the claim throughput under contention.
//
// For the stress mode, build a [StressHarness] (Setup creates the table,
// Open opens a store over it in any process) and call [RunStress] from a
// top-level test; run it with CLAIMSTORE_STRESS=1 and a -timeout that
// allows for the row count.
package conformance

// Package soak is the chaos soak of claimstore: a mixed load across OS
// processes on PostgreSQL or MariaDB while a seeded fault schedule kills,
// freezes and disconnects them, followed by a checker that reads every
// process's append-only history, the tables and the stream.
//
// The processes of a run are children of the orchestrator ([Run]), each
// running one role ([RunChild]):
//
//   - producers write business rows, each with its outbox message and its
//     job, in one transaction;
//   - producers also insert, in the same transaction, a queue job of
//     package jobs for every order (one in 20 fails its first attempt on
//     purpose) and, for one order in 10, a job of the limited queue, a
//     queue with a global limit (jobs.Limit{Max: 3}) across the workers;
//   - the orchestrator inserts a workflow (jobs.Client.InsertWorkflow)
//     every 10 s of load until 15 s before its end: a random directed acyclic graph of 12 to 20
//     tasks drawn from the seed, some with several dependencies;
//   - workers run a dispatch.Worker over the jobs, a jobs.Client over the
//     queue jobs, the limited queue's jobs and the workflow tasks (whose
//     runs record their start and end), a dispatch schedule
//     worker over once and cron schedules, and a coord.Elector whose leader
//     runs the maintenance (the schedule rescuer) and writes a row fenced
//     by its term;
//   - relays publish the outbox to an R3 stream of a three-node JetStream
//     cluster of nats-server processes on loopback ports;
//   - subscribers (with Options.SubscriberCommand) consume, as one
//     consumer group of the watermill module's Subscriber, the Watermill
//     message each producer writes for every order in its transaction.
//     They run claimstore-soaksub (watermill/internal/soaksub), since the
//     library does not depend on the watermill module.
//
// Faults (SIGKILL and restart, SIGSTOP then SIGCONT, the database
// connections of one process terminated, a NATS node killed and restarted)
// come from a schedule drawn from the seed, so a run is replayed with the
// same seed. Every process appends JSON lines to a history file of its own,
// one write per line, so a SIGKILL loses no line it wrote.
//
// The checker ([Check]) verifies that every job completed exactly once and
// was handled again only after the lease of a holder that was killed or
// frozen; that every committed transaction wrote its order, its message and
// its job, and nothing else was written half; that the stream holds every
// message exactly once; that leadership terms only increase and no fenced
// write of an older term landed after a newer one; that every queue job
// (package jobs) completed once, each earlier attempt recorded in its
// errors as the planned failure or as lost; that no more jobs of the
// limited queue ran at once than its limit, a run counted from its start
// to its end or its claim's lease end, whichever comes first (a run
// whose process was killed has no end and holds its slot until its lease
// ends); that every workflow task completed once, under the queue jobs'
// rules, no run of it started before the completing run of each of its
// dependencies ended, and every workflow finished; that every Watermill message
// was fanned out to the consumer group, acked and handed to a handler at
// least once (the messages handed out again are counted by what happened
// to the previous handler); and that no row is left claimed.
//
// The soak runs on Linux only: its children get a parent-death signal
// (SysProcAttr.Pdeathsig) and its faults freeze processes with SIGSTOP, so
// every file but this one carries a linux build constraint.
package soak

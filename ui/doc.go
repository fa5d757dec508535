// Package ui is claimstore's operator's console: an [http.Handler] that
// shows the tables a program already has — a worker's table, the schedule
// table (package dispatch), the outbox table (package outbox), the job
// table (package jobs) and the lease table of leader election (package
// coord) — and offers the few actions an operator takes: pause, resume,
// delete, fire now and add a schedule; requeue abandoned messages and
// purge old published ones; retry, cancel and delete jobs, one or many,
// and pause and resume their queues.
//
// Build the sources with [Worker], [Schedules], [Outbox], [Jobs] and
// [Leases], pass them to [New], and mount the handler in a server of your
// own (its links are relative, so http.StripPrefix mounts it under any
// prefix). The command `claimstore ui` serves it for the tables it finds
// in a database, with [Config].DB set to that database.
//
// Pages: the overview (and its JSON, api/overview), with a Cluster panel
// when [Config].DB is a node of a MariaDB Galera Cluster, schedules, outbox
// (with the cursors, lags and dead letters of each outbox log; api/logs),
// jobs (by state, queue and kind, a page at a time; api/jobs), one job
// (its args, metadata, tags and every failed attempt's error and trace,
// and links to its sequence, batch and workflow; api/job), a workflow
// (its tasks as a tree, each under the tasks it depends on, with its
// state; api/workflow), a batch (its jobs by state and its callback;
// api/batch), the sequences a job holds (their heads and the jobs
// waiting; api/sequences), queues (api/queues), leaders, and a row's
// detail.
//
// Everything is read through the library's stores and the job client;
// the console's own statements are a read of PostgreSQL's planner
// statistics, for the estimates the overview shows beyond
// [Config].ExactBound rows of one status, and, with [Config].DB set, the
// reads of a Galera node's state: whether the database is a Galera node
// is asked once per [Handler] (dialects.DetectGalera: one SHOW GLOBAL
// VARIABLES on MySQL's dialector, nothing on the others), and only a
// Galera node is then read at each overview (dialects.GaleraStatus, two
// round trips): its state (wsrep_local_state_comment), whether it serves
// clients, its component (Primary or not) with its size and members, and
// its certification failures, shown in a warning style when the node does
// not serve clients ([ClusterState], [Handler.Cluster]).
//
// Security: every change is a POST carrying a CSRF token bound to a
// cookie, and cross-origin POSTs are refused (403); [Config].ReadOnly
// serves no action at all; every value from the database is escaped by
// html/template or written as text by the page's script; answers carry a
// Content-Security-Policy without inline script, frame-ancestors 'none'
// and X-Content-Type-Options: nosniff. [Config].Auth, with [TokenAuth] or
// [BasicAuth], guards every request. The assets are embedded; the page's
// script is plain JavaScript with no library.
package ui

// Package jobsotel traces and measures a job queue (package jobs) with
// OpenTelemetry: a [Middleware] that a jobs.Client takes in
// jobs.Config.Middleware wraps every insert and every job's work in a
// span and records the metrics of the OpenTelemetry semantic conventions
// for messaging, and [ObserveJobs] reports the number of jobs by queue
// and state. The jobs package itself links no OpenTelemetry tracing: a
// program that wants it imports this package.
//
// # Spans
//
// An insert call is one span of kind producer named "send <queue>"
// (operation type send, operation name "insert", messaging.system
// "claimstore", messaging.destination.name the queue, messaging.batch.
// message_count for several jobs); the work of one job is one span of
// kind consumer named "process <queue>" (operation type process,
// operation name "work", messaging.message.id the job's id, and the
// attributes claimstore.job.kind, claimstore.job.attempt and
// claimstore.job.outcome). A failed attempt sets the span's status to
// Error and records the error.
//
// The insert writes its span's context into each job's metadata, under
// the key [MetadataKey], with the configured propagator (W3C Trace
// Context by default), when the span is recording; the work span of the
// job is then a child of the insert span, so that a trace runs from the
// request that inserted a job to its work, across processes.
//
// # Metrics
//
// Names, units and attributes follow the semantic conventions for
// messaging metrics (semconv v1.40.0):
//
//   - messaging.client.sent.messages {message}: jobs inserted, by
//     queue and kind (error.type on a failed insert);
//   - messaging.client.operation.duration (s): insert calls;
//   - messaging.client.consumed.messages {message}: jobs whose work
//     ran, by queue, kind and outcome;
//   - messaging.process.duration (s): the work of a job, by queue,
//     kind and outcome;
//   - claimstore.job.queue.wait (s): from a job's scheduled time to the
//     start of its work, by queue and kind;
//   - claimstore.jobs {job}: jobs by queue and state ([ObserveJobs]).
//
// The outcome attribute (claimstore.job.outcome) is completed, failed,
// panicked, cancelled or snoozed: what the work returned, before the
// client's error handler or retry policy decide the job's state.
package jobsotel

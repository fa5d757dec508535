// Package sweep runs the deletes of the retention sweeps of dispatch
// (old schedules) and outbox (old messages): [Delete] removes the rows a
// sweep selects in bounded batches, each batch retried with
// internal/retry while its error is one a retry can cure.
package sweep

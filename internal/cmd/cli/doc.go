// Package cli is the command tree of the operator's tool, cmd/claimstore:
// the outbox relay and the outbox's status, requeue and purge; schedules
// and the dispatcher (dispatch run); leader election status; and the
// operator's console (ui). [NewRoot] builds the tree and [Main] runs it;
// the developers' tool, tools/claimstore-dev, adds its benchmarks, demos
// and soak to a tree it builds.
//
// It links the library, the SQL drivers and NATS, never test code: a
// command's data source name comes from --dsn or CLAIMSTORE_DSN
// (internal/cmd/dsn), never from the test servers' defaults.
package cli

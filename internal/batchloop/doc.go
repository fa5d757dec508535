// Package batchloop is the batch loop shared by dispatch.Worker, outbox.Relay
// and the Watermill subscriber: claim a batch of rows under a lease, hand
// them out, write each row's outcome fenced by the lease owner, and claim
// again at once, after a poll interval or after a doubling idle backoff.
//
// [Loop] runs the cycle and logs claim failures once per episode
// ([Failures]); [Backoff] paces the relay and the subscriber (the worker
// paces itself by its tick); [ClaimContext] gives a claim its deadline;
// [Write] runs a fenced mark, retried with internal/retry within its own
// timeout; [Outcome] holds what the handling of a batch came to;
// [LogMark] logs a mark's error; [StartWindow] is how long a claim may take for its rows still to be
// started.
package batchloop

// Package natspub is the NATS JetStream publisher of the outbox relay
// (github.com/nats-io/nats.go, package jetstream).
//
// Every message is published with its outbox MessageID in the Nats-Msg-Id
// header. JetStream remembers the ids it stored during the stream's
// duplicate window (StreamConfig.Duplicates) and acknowledges a repeat
// without storing it again. The relay is at-least-once — a message may be
// published again after a crash, a lost ack or an expired lease — and the
// stream is effectively-once as long as repeats arrive within the window.
// Choose a window at least the relay's retry horizon, the longest time
// between a message's first and last publish: outbox.RetryHorizon(policy,
// relay.Config()), 21 min 46 s for the default retry policy and relay
// settings. JetStream's default window, 2 min, is shorter: a message
// retried after it is stored twice (docs/operations.md).
//
// A batch is published with PublishMsgAsync and its acks are collected
// before Publish returns, so one batch costs one pass over the network
// rather than a round trip per message.
//
// [Audit] reads a stream back and counts messages and distinct ids, as the
// demo does to prove that nothing was lost or duplicated.
package natspub

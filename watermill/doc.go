// Package watermill connects claimstore's transactional outbox to
// Watermill (github.com/ThreeDotsLabs/watermill), so that services written
// against Watermill's message.Publisher and message.Subscriber run on
// claimstore without changing their handlers. It is a Go module of its
// own: the claimstore library does not depend on Watermill.
//
// # Publishing
//
// A [Publisher] is a message.Publisher that writes into an outbox table
// through [outbox.Repository.Add]: inside the caller's transaction when it
// is bound to one with [Publisher.WithTx] (the business rows and the
// messages commit or roll back together), or on its own otherwise. A
// Watermill message's UUID becomes the outbox MessageID, the idempotency
// key, followed by a digest of the topic ([MessageID]): Watermill lets one
// message be published to several topics, and publishing one UUID twice
// to one topic is refused with dao.ErrDuplicate. Its metadata becomes the outbox headers and its
// payload the outbox payload, both unchanged. It runs on every backend
// whose store can join a transaction: PostgreSQL, MySQL/MariaDB and
// SQLite.
//
// # Subscribing: consumer groups by claims
//
// A [Subscriber] is a message.Subscriber that consumes an outbox table by
// claims. Every consumer group sees every message of a topic, and the
// subscribers of one group share the work, any number of them in
// parallel. The per-group state lives in two tables beside the message
// table T, both created by [Migrate]:
//
//   - T_groups ([Group]) lists the consumer groups of each topic.
//   - T_deliveries has the shape of an outbox table ([outbox.Message]):
//     one row per message and consumer group, with its own status, lease,
//     retry count and last error. Its target_broker is a digest of (consumer
//     group, topic) ([DeliveryKey]) and its partition_key the group's
//     name; payload and metadata are copied from the message, as a broker
//     copies a message into each subscription's queue.
//
// A message reaches the delivery table by a fan-out that every subscriber
// runs in its poll loop: it claims messages of the subscriber's target
// broker from T (the ordinary outbox claim: FOR UPDATE SKIP LOCKED on
// PostgreSQL, the portable claim elsewhere), reads the groups of their
// topics, writes one delivery per group, and marks the messages
// published. On PostgreSQL 11 or later those steps are one statement
// (rendered by dialects.Renderer.FanOut from the outbox's columns and
// claim criteria), which also inserts the subscription's own deliveries
// already claimed by it and hands them out at once (docs/watermill.md);
// each subscription picks its fan-out once, when it starts. A group registered later (the first Subscribe or
// SubscribeInitialize of a group on a topic) copies the messages of the
// topic already in T, so a new group starts from the oldest message the
// table keeps. Then each subscriber claims batches of its group's
// deliveries (again by claim, so subscribers of one group never receive
// the same delivery at once) and hands them to its handler one at a
// time:
//
//   - Ack marks the delivery published, which in the delivery table means
//     done for that group;
//   - Nack marks it failed: it comes back after the retry policy's delay
//     (exponential with jitter), and once its retries are used up it is
//     abandoned with its error kept, where the outbox tools (status,
//     requeue) see it;
//   - a subscriber that dies, or whose handler outlasts the lease, leaves
//     its deliveries to come back when their lease ends;
//   - a subscriber that is closed releases the deliveries it had not
//     handed out and marks what was acked.
//
// Delivery is at least once, per consumer group. There is no order
// guarantee: subscribers of one group run in parallel, and a nacked
// message comes back after later ones.
//
// # Relaying to any broker
//
// [NewRelayPublisher] turns any Watermill message.Publisher (AMQP, Kafka,
// Redis Streams, Google Cloud Pub/Sub, NATS, …) into an
// [outbox.Publisher], so an [outbox.Relay] moves outbox messages to that
// broker: the outbox MessageID becomes the Watermill UUID, so a consumer
// (or a broker) that drops duplicates by message id keeps one copy of a
// message the relay published twice.
//
// docs/watermill.md in the claimstore repository describes the tables,
// the guarantees of each broker, and how to move from watermill-sql's
// publisher and forwarder.
package watermill

// Package outboxenv sets up what the command-line tool's outbox commands,
// the developers' demo (tools/internal/demo) and the outbox benchmark
// (tools/internal/bench/outboxbench) run on: a message table opened on any
// backend with its repository ([Open], [Env]), quiet retries of writes that
// find SQLite's single write lock taken ([Retry], [WithBusyRetries]), and
// the NATS side: a connection ([ConnectNATS]), an embedded or external
// server ([StartBroker]) and a throw-away stream ([CreateStream]).
//
// It is tooling of the command, not part of the library: its error
// messages name the command's flags (--dsn, --table, --nats-url) because
// they reach the user through the command.
package outboxenv

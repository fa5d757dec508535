// Package hatest starts the multi-server deployments that the high
// availability tests run against, on this machine's loopback addresses:
// a three-node NATS JetStream cluster of nats-server processes
// ([StartNATSCluster]), with the means to find a stream's leader, kill,
// stop (partition), resume and restart single nodes. The stream's
// duplicate window is sized with outbox.RetryHorizon.
//
// The tests run only when CLAIMSTORE_HA=1 (make ha): they start server
// processes, take tens of seconds and need the local PostgreSQL server.
// The servers are children of the test process, started with a parent
// death signal, so they end with it even when it is killed.
package hatest

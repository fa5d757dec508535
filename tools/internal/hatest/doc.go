// Package hatest starts the multi-server deployments that the high
// availability tests run against, on this machine's loopback addresses:
// a three-node NATS JetStream cluster of nats-server processes
// ([StartNATSCluster]), with the means to find a stream's leader, kill,
// stop (partition), resume and restart single nodes; and a
// pg_auto_failover formation of PostgreSQL servers ([StartPGFormation]: a
// monitor, a primary and its synchronous secondary, run by
// scripts/pg-failover.sh), whose nodes can be killed and started again;
// and a three-node MariaDB Galera Cluster ([StartGaleraCluster], run by
// scripts/galera-cluster.sh), every node accepting writes, whose nodes
// can be killed, frozen, thawed and started again. The stream's
// duplicate window is sized with outbox.RetryHorizon.
//
// The tests run only when CLAIMSTORE_HA=1 (make ha): they start server
// processes, take tens of seconds and need the local PostgreSQL server.
// The nats-server nodes are children of the test process, started with a
// parent death signal, so they end with it even when it is killed. The
// PostgreSQL servers run as the postgres OS user, the Galera nodes as the
// mysql OS user, in sessions of their own: TestMain stops them, and what
// a killed run left is stopped when the next run starts.
//
// Like the soak it runs on Linux only (parent-death signal, SIGSTOP and
// SIGCONT): every file but this one carries a linux build constraint.
package hatest

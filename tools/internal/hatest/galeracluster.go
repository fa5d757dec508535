//go:build linux

package hatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// GaleraNodes are the names of a [GaleraCluster]'s nodes.
var GaleraNodes = []string{"g1", "g2", "g3"}

// GaleraCluster is a three-node MariaDB Galera Cluster on loopback ports,
// run by scripts/galera-cluster.sh: nodes g1, g2 and g3, each a mariadbd
// of its own that accepts writes (multi-primary, synchronous
// replication). The servers run as the mysql OS user in their own
// sessions, so they outlive a killed test process: Close stops them, and
// the next [StartGaleraCluster] on the same directory removes what is
// left.
type GaleraCluster struct {
	*clusterScript
}

// GaleraOptions says where a Galera cluster lives. Zero fields take their
// defaults.
type GaleraOptions struct {
	// Script is the path of scripts/galera-cluster.sh; required.
	Script string
	// Dir holds the nodes' data directories, configuration and logs;
	// default $TMPDIR/claimstore-galera-ha.
	Dir string
	// Port is g1's SQL port; g2 and g3 listen on Port+1 and Port+2, and
	// the group communication, IST and SST ports follow from it (see the
	// script). Default 14306.
	Port int
}

// StartGaleraCluster stops and removes what a previous run left in
// o.Dir, then bootstraps g1 and joins g2 and g3, waiting until all three
// report Synced in a cluster of three (about 45 s; the script installs
// galera-4 and rsync when missing). Errors: o.Script missing, a port
// taken by another server, or the script failing; its output and the
// log directory are in the error.
func StartGaleraCluster(ctx context.Context, o GaleraOptions) (*GaleraCluster, error) {
	o = o.withDefaults()
	script, err := newClusterScript(o.Script, o.Dir, "GALERA_DIR", o.Port, "GALERA_PORT")
	if err != nil {
		return nil, fmt.Errorf("hatest: galera cluster: %w", err)
	}
	if err := script.restart(ctx, len(GaleraNodes)); err != nil {
		return nil, err
	}
	return &GaleraCluster{script}, nil
}

// AttachGaleraCluster returns the cluster of o that another process
// started, without starting, checking or stopping anything: for a child
// process of a test that started it. Close must not be called on it.
// Errors: o.Script missing.
func AttachGaleraCluster(o GaleraOptions) (*GaleraCluster, error) {
	o = o.withDefaults()
	script, err := newClusterScript(o.Script, o.Dir, "GALERA_DIR", o.Port, "GALERA_PORT")
	if err != nil {
		return nil, fmt.Errorf("hatest: galera cluster: %w", err)
	}
	return &GaleraCluster{script}, nil
}

// withDefaults fills o's zero fields with their defaults.
func (o GaleraOptions) withDefaults() GaleraOptions {
	if o.Dir == "" {
		o.Dir = filepath.Join(os.TempDir(), "claimstore-galera-ha")
	}
	if o.Port == 0 {
		o.Port = 14306
	}
	return o
}

// DSN returns the go-sql-driver/mysql DSN of node (g1, g2 or g3): user
// root without password, database test, parseTime on.
func (c *GaleraCluster) DSN(node string) string {
	port := c.port
	for i, n := range GaleraNodes {
		if n == node {
			port = c.port + i
		}
	}
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?parseTime=true&timeout=5s", port)
}

// Status returns one line per node: its pid, port, cluster size and
// local state, or "down".
func (c *GaleraCluster) Status(ctx context.Context) (string, error) {
	out, err := c.run(ctx, "status")
	return strings.TrimSpace(out), err
}

// KillNode crashes node with SIGKILL; the others go on as a cluster of
// two once they notice (a few seconds).
func (c *GaleraCluster) KillNode(ctx context.Context, node string) error {
	_, err := c.run(ctx, "kill", node)
	return err
}

// FreezeNode stops node with SIGSTOP: a hung server, whose connections
// stay open and answer nothing. The others drop it from the cluster once
// it has been silent for evs.suspect_timeout.
func (c *GaleraCluster) FreezeNode(ctx context.Context, node string) error {
	_, err := c.run(ctx, "freeze", node)
	return err
}

// ThawNode resumes a frozen node with SIGCONT; dropped meanwhile, it
// rejoins the cluster on its own (IST).
func (c *GaleraCluster) ThawNode(ctx context.Context, node string) error {
	_, err := c.run(ctx, "thaw", node)
	return err
}

// StartNode starts node again and waits until it has rejoined, Synced.
func (c *GaleraCluster) StartNode(ctx context.Context, node string) error {
	_, err := c.run(ctx, "start", node)
	return err
}

// Wait waits until every running node reports Synced in one cluster.
func (c *GaleraCluster) Wait(ctx context.Context) error {
	_, err := c.run(ctx, "wait")
	return err
}

// Close stops every node and removes the directory.
func (c *GaleraCluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _ = c.run(ctx, "clean")
}

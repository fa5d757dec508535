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

// PGFormationOptions says where a pg_auto_failover formation lives. Zero
// fields take their defaults.
type PGFormationOptions struct {
	// Script is the path of scripts/pg-failover.sh; required.
	Script string
	// Dir holds the formation's data directories, configuration and
	// logs; default $TMPDIR/claimstore-pgaf-ha. Whatever a previous run
	// left there is stopped and removed first, so a run killed before its
	// clean-up leaves nothing running past the next one.
	Dir string
	// Port is the monitor's port; node1 and node2 listen on Port+1 and
	// Port+2, all on 127.0.0.1. Default 15500.
	Port int
}

// PGFormation is a pg_auto_failover formation on loopback ports, run by
// scripts/pg-failover.sh: a monitor and two PostgreSQL nodes, node1 and
// node2, one primary and the other its synchronous secondary. The
// servers run as the postgres OS user in their own sessions, so they
// outlive a killed test process: Close stops them, and the next
// [StartPGFormation] on the same directory stops what is left.
type PGFormation struct {
	*clusterScript
}

// StartPGFormation stops and removes what a previous run left in o.Dir,
// then starts the monitor and both nodes and waits until one is primary
// and the other secondary, with the database "test" on the primary (the
// script installs postgresql-15-auto-failover first when pg_autoctl is
// missing). Errors: o.Script missing, one of the three ports already taken
// by another server (stop it with scripts/pg-failover.sh stop), or the
// script failing; its output and the log directory are in the error.
func StartPGFormation(ctx context.Context, o PGFormationOptions) (*PGFormation, error) {
	if o.Dir == "" {
		o.Dir = filepath.Join(os.TempDir(), "claimstore-pgaf-ha")
	}
	if o.Port == 0 {
		o.Port = 15500
	}
	script, err := newClusterScript(o.Script, o.Dir, "PGAF_DIR", o.Port, "PGAF_PORT")
	if err != nil {
		return nil, fmt.Errorf("hatest: pg formation: %w", err)
	}
	if err := script.restart(ctx, 3); err != nil {
		return nil, err
	}
	return &PGFormation{script}, nil
}

// DSN returns the multi-host connection URL of the formation: both nodes,
// target_session_attrs=read-write (pgx connects to whichever accepts
// writes), no TLS, and a connect timeout of connectTimeout seconds (0
// leaves it out).
func (f *PGFormation) DSN(connectTimeout int) string {
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/test?target_session_attrs=read-write&sslmode=disable", f.port+1, f.port+2)
	if connectTimeout > 0 {
		dsn += fmt.Sprintf("&connect_timeout=%d", connectTimeout)
	}
	return dsn
}

// NodeDSN returns the connection URL of one node (node1 or node2) alone.
func (f *PGFormation) NodeDSN(node string) string {
	port := f.port + 1
	if node == "node2" {
		port = f.port + 2
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", port)
}

// Primary returns the name of the node that accepts writes (the monitor
// reports it as primary or wait_primary), or "" when none does.
func (f *PGFormation) Primary(ctx context.Context) (string, error) {
	out, err := f.run(ctx, "primary")
	return strings.TrimSpace(out), err
}

// States returns each node's reported and assigned state, one line per
// node, as the monitor has them.
func (f *PGFormation) States(ctx context.Context) (string, error) {
	out, err := f.run(ctx, "status")
	return strings.TrimSpace(out), err
}

// StopNode stops node's keeper and then its server in immediate mode (no
// shutdown checkpoint, connections cut), as a crashed machine would; the
// monitor then promotes the other node. Errors are the script's.
func (f *PGFormation) StopNode(ctx context.Context, node string) error {
	_, err := f.run(ctx, "stop", node)
	return err
}

// KillNode crashes node: SIGKILL to its keeper, its postmaster and every
// server process, so that clients' connections end without a word from
// the server and its next start runs crash recovery. The monitor
// promotes the other node once the demote timeout has passed.
func (f *PGFormation) KillNode(ctx context.Context, node string) error {
	_, err := f.run(ctx, "kill", node)
	return err
}

// StartNode starts node's keeper again; it rejoins the formation as a
// secondary (rewinding its data directory when needed).
func (f *PGFormation) StartNode(ctx context.Context, node string) error {
	_, err := f.run(ctx, "start", node)
	return err
}

// Wait waits up to timeout for one node to be primary and the other
// secondary again.
func (f *PGFormation) Wait(ctx context.Context, timeout time.Duration) error {
	_, err := f.run(ctx, "wait", fmt.Sprint(int(timeout.Seconds())))
	return err
}

// Close stops the monitor and both nodes and removes the directory.
func (f *PGFormation) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _ = f.run(ctx, "clean")
}

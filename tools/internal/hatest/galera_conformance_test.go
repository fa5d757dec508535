//go:build linux

package hatest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// galeraConformanceNodes opens a pool on each node of the Galera cluster:
// in the test process it starts the cluster (failing t when it cannot);
// in a child process of the suite (conformance.InChild) it connects to
// the cluster its parent started. The first pool, the one the harnesses'
// own stores use and through which the checks read their results, sets
// wsrep_sync_wait = 1 on its sessions (MariaDB Galera Cluster docs,
// "Galera Cluster System Variables": a read waits until the node has
// applied every write the cluster committed before it), so that a check
// reads back what claimers on the other nodes wrote; the pools of g2 and
// g3 run as a user's would, without it.
func galeraConformanceNodes(ctx context.Context, t *testing.T) []*gorm.DB {
	t.Helper()
	haEnabled(t)
	var c *hatest.GaleraCluster
	if conformance.InChild() {
		var err error
		if c, err = hatest.AttachGaleraCluster(hatest.GaleraOptions{Script: "../../../scripts/galera-cluster.sh"}); err != nil {
			t.Fatal(err)
		}
	} else {
		c = galeraCluster(ctx, t)
	}
	var dbs []*gorm.DB
	for i, n := range hatest.GaleraNodes {
		dsn := c.DSN(n)
		if i == 0 {
			dsn += "&wsrep_sync_wait=1"
		}
		db, err := sqlstore.Open(ctx, "mariadb", dsn)
		if err != nil {
			t.Fatalf("open %s: %v", n, err)
		}
		dbs = append(dbs, testdb.CloseAtCleanup(t, db))
	}
	return dbs
}

// TestGaleraConformance runs the conformance suite on the three-node
// Galera cluster with its concurrent checks spread over the three nodes:
// the claim suite (conformance.Run) on MariaDB's default claim and on
// the fast path, the claimers of the no-double-claim check and of the
// cancel sweep and the leader-election candidates on every node; the
// jobs group (conformance.RunJobs) with the clients and processes of its
// multi-client checks on every node; and the multi-process stress check
// (conformance.RunStress) with one process per node. The try-lock, which
// the cluster's documented behaviours (dialects.Behaviours: GET_LOCK is
// local to a node) say claimstore refuses on Galera, is checked for that
// refusal through every node (conformance.Harness.Unsupported) instead
// of its mutual exclusion. Nothing is skipped: a cluster that cannot
// start fails the test.
func TestGaleraConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	dbs := galeraConformanceNodes(ctx, t)
	home, others := dbs[0], dbs[1:]
	v, err := dialects.DetectVariant(ctx, home)
	if err != nil || v != dialects.Galera {
		t.Fatalf("DetectVariant = %q, %v; want %q", v, err, dialects.Galera)
	}
	var unsupported []string
	if slices.ContainsFunc(dialects.Behaviours(v), func(b dialects.Behaviour) bool { return b.Topic == "GET_LOCK" }) {
		unsupported = append(unsupported, conformance.CheckTryLock)
	}
	if len(unsupported) == 0 {
		t.Fatal("dialects.Behaviours(Galera) no longer documents GET_LOCK: say what the try-lock does on Galera, then what this test checks")
	}
	harness := func(opts ...sqlstore.Option) conformance.Harness {
		h := sqlstoretest.Harness(home, opts...)
		for _, db := range others {
			h.Nodes = append(h.Nodes, sqlstoretest.Node(db, opts...))
		}
		h.Unsupported = unsupported
		return h
	}
	t.Run("Claim", func(t *testing.T) { conformance.Run(t, harness()) })
	t.Run("FastPath", func(t *testing.T) {
		conformance.Run(t, harness(sqlstore.WithStrategy(dao.StrategyFastPath)))
	})

	jh := sqlstoretest.JobsHarness(home)
	for _, db := range others {
		jh.Nodes = append(jh.Nodes, sqlstoretest.JobsNode(db))
	}
	t.Run("Jobs", func(t *testing.T) { conformance.RunJobs(t, jh) })

	t.Run("Stress", func(t *testing.T) {
		t.Setenv(conformance.EnvStress, "1")
		ch := harness()
		open := func(db *gorm.DB) func(t *testing.T, table string) dao.Store[conformance.Job] {
			return func(t *testing.T, table string) dao.Store[conformance.Job] {
				s, err := sqlstore.New[conformance.Job](db, sqlstore.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}
		sh := conformance.StressHarness{
			Setup: func(t *testing.T) string {
				var table dialects.Table
				if s, ok := ch.NewStore(t).(dao.Aser); !ok || !s.As(&table) {
					t.Fatal("the harness's store has no table")
				}
				return table.Name
			},
			Open:      open(home),
			Processes: 3, Workers: 4, Rows: 6000, Batch: 20,
		}
		for _, db := range others {
			sh.Nodes = append(sh.Nodes, open(db))
		}
		conformance.RunStress(t, sh)
	})
}

package hatest_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// galeraState runs claimstore galera status --json against node and
// returns what it printed and its error.
func galeraState(t *testing.T, c *hatest.GaleraCluster, node string) (*dialects.GaleraNode, bool, error) {
	t.Helper()
	out, _, err := clitest.RunFresh(t, cli.NewRoot(), 30*time.Second, "galera", "status", "--backend", "mariadb", "--dsn", c.DSN(node), "--json")
	if out == "" {
		return nil, false, err
	}
	var v struct {
		dialects.GaleraNode
		Serving bool
	}
	if jerr := json.Unmarshal([]byte(out), &v); jerr != nil {
		t.Fatalf("galera status --json on %s: %v\n%s", node, jerr, out)
	}
	return &v.GaleraNode, v.Serving, err
}

// TestGaleraClusterState: claimstore galera status reports each node
// serving in a primary component of three; with g3 killed, g1 and g2
// report a component of two once the cluster dropped it (and g3 cannot
// be reached); with g3 started again, all three report three again.
func TestGaleraClusterState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	for _, n := range hatest.GaleraNodes {
		st, serving, err := galeraState(t, c, n)
		if err != nil || st == nil || !serving || st.ClusterSize != 3 || len(st.Members) != 3 || st.LocalState != "Synced" || st.ClusterStatus != "Primary" {
			t.Fatalf("galera status on %s: %+v serving %v, %v; want a synced node serving in a primary component of 3", n, st, serving, err)
		}
		// The script sets each node's wsrep_node_incoming_address.
		if slices.Contains(st.Members, "AUTO") {
			t.Errorf("galera status on %s: members %v; want the nodes' addresses", n, st.Members)
		}
	}
	out, _, err := clitest.RunFresh(t, cli.NewRoot(), 30*time.Second, "galera", "status", "--backend", "mariadb", "--dsn", c.DSN("g1"))
	if err != nil || !strings.Contains(out, "Synced, ready, connected") || !strings.Contains(out, "Primary, 3 nodes") {
		t.Fatalf("galera status on g1: %v\n%s", err, out)
	}
	t.Logf("galera status on g1:\n%s", out)

	if err := c.KillNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		if err := c.StartNode(context.Background(), "g3"); err != nil {
			t.Errorf("start g3 again: %v", err)
		}
	})
	for {
		st, serving, err := galeraState(t, c, "g1")
		if err == nil && st != nil && serving && st.ClusterSize == 2 {
			t.Logf("g1 reports a component of 2, %v after g3 was killed", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Since(killed) > time.Minute {
			t.Fatalf("g1 a minute after g3 was killed: %+v serving %v, %v; want serving in a component of 2", st, serving, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st, serving, err := galeraState(t, c, "g2"); err != nil || !serving || st.ClusterSize != 2 {
		t.Errorf("g2 with g3 killed: %+v serving %v, %v; want serving in a component of 2", st, serving, err)
	}
	if _, _, err := galeraState(t, c, "g3"); err == nil {
		t.Errorf("galera status on the killed g3 succeeded")
	}

	restarted = true
	if err := c.StartNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range hatest.GaleraNodes {
		if st, serving, err := galeraState(t, c, n); err != nil || !serving || st.ClusterSize != 3 {
			t.Errorf("%s after g3 rejoined: %+v serving %v, %v; want serving in a component of 3", n, st, serving, err)
		}
	}
}

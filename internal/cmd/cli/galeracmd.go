package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
)

func newGaleraCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "galera",
		Short: "Inspect a MariaDB Galera Cluster node: status",
		Long: `galera inspects the MariaDB Galera Cluster node that --dsn reaches (--backend
mariadb or mysql). docs/operations.md, "MariaDB Galera Cluster", says how
claimstore runs on the cluster.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newGaleraStatusCmd(g))
	return cmd
}

func newGaleraStatusCmd(g *Globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the node's state and its view of the cluster; exit 1 unless it serves clients",
		Long: `status prints the state of the Galera node --dsn reaches, from its wsrep status
variables: its own state (Synced, Joining, Donor/Desynced…), whether it is
ready and connected, its component (Primary or not) and the component's size
and members, the membership changes so far, and its certification failures
and brute-force aborts (which claimstore retries as deadlocks) since it
started. The exit status is 1 unless the node serves clients as a full member
(ready, connected, in the primary component, synced), so that it serves as a
readiness check; a server that is not a Galera node is an error too.`,
		Example: `  claimstore galera status --backend mariadb --dsn 'root@tcp(127.0.0.1:3306)/app?parseTime=true'
  claimstore galera status --backend mariadb --dsn "$NODE_DSN" --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if b := strings.ToLower(g.Backend); b != "mariadb" && b != "mysql" {
				return fmt.Errorf("%w: --backend %q: a Galera node is reached with --backend mariadb or mysql", dao.ErrInvalidArgument, g.Backend)
			}
			db, _, closeDB, err := openDB(cmd.Context(), *g, false, 1)
			if err != nil {
				return err
			}
			defer closeDB()
			n, err := dialects.GaleraStatus(cmd.Context(), db)
			if err != nil {
				return err
			}
			if err := printGaleraNode(cmd.OutOrStdout(), asJSON, n); err != nil {
				return err
			}
			if !n.Serving() {
				return fmt.Errorf("the node does not serve clients (state %s, component %s, ready %v, connected %v): %w",
					n.LocalState, n.ClusterStatus, n.Ready, n.Connected, dao.ErrUnavailable)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printGaleraNode writes n for people, or as JSON with asJSON.
func printGaleraNode(w io.Writer, asJSON bool, n *dialects.GaleraNode) error {
	if asJSON {
		return writeJSONTo(w, struct {
			*dialects.GaleraNode
			Serving bool `json:"serving"`
		}{n, n.Serving()})
	}
	yes := func(b bool, y, no string) string {
		if b {
			return y
		}
		return no
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"node", fmt.Sprintf("%s, %s, %s", n.LocalState, yes(n.Ready, "ready", "not ready"), yes(n.Connected, "connected", "not connected"))},
		{"component", fmt.Sprintf("%s, %d nodes (membership change %d)", n.ClusterStatus, n.ClusterSize, n.ConfID)},
		{"members", strings.Join(n.Members, ", ")},
		{"certification failures", fmt.Sprint(n.CertFailures)},
		{"brute-force aborts", fmt.Sprint(n.BFAborts)},
		{"flow control paused", fmt.Sprintf("%.3f", n.FlowControlPaused)},
		{"serving", yes(n.Serving(), "yes", "no")},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/cmd/dsn"
)

func newLeaderCmd(g *Globals) *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Inspect leader election: status",
		Long: `leader inspects the lease table of leader election (package coord) on the
database given by --backend and --dsn (postgres, mysql, mariadb, or sqlite
with --dsn naming the file).`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&table, "table", dialects.DefaultLeaseTable, "lease table name")
	cmd.AddCommand(newLeaderStatusCmd(g, &table))
	return cmd
}

func newLeaderStatusCmd(g *Globals, table *string) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each election's holder, term and the time left on its lease",
		Long: `status prints, for the election --name or for every election of the lease
table, the holder, the term, when the term began and how long the lease has
left by the database's clock ("expired" once it has run out or was released).`,
		Example: `  claimstore leader status --backend postgres
  claimstore leader status --backend sqlite --dsn app.db --name cron`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			leases, closeDB, err := openLeases(cmd.Context(), *g, *table)
			if err != nil {
				return err
			}
			defer closeDB()
			var rows []driver.Lease
			if name != "" {
				l, err := leases.GetLease(cmd.Context(), name)
				if errors.Is(err, dao.ErrNotFound) {
					return fmt.Errorf("election %q has no lease in table %s: no candidate has campaigned yet: %w", name, *table, err)
				}
				if err != nil {
					return err
				}
				rows = []driver.Lease{l}
			} else if rows, err = leases.ListLeases(cmd.Context()); err != nil {
				return fmt.Errorf("%w (does table %s exist? it is created by sqlstore.Leases.Migrate)", err, *table)
			}
			return printLeases(cmd, rows)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "election name (default: every election of the table)")
	return cmd
}

// openLeases opens the lease table of --backend and --dsn, g.
func openLeases(ctx context.Context, g Globals, table string) (*sqlstore.Leases, func(), error) {
	backend := strings.ToLower(g.Backend)
	if backend == "memory" {
		return nil, nil, fmt.Errorf("%w: the memory backend lives only inside one process; use --backend postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument)
	}
	d, err := dsn.Resolve(backend, g.DSN)
	if err != nil {
		return nil, nil, err
	}
	db, err := sqlstore.Open(ctx, backend, d)
	if err != nil {
		return nil, nil, err
	}
	closeDB := func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}
	leases, err := sqlstore.NewLeases(db, table)
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	return leases, closeDB, nil
}

// printLeases writes one line per lease: name, holder, term, elected at,
// expires in.
func printLeases(cmd *cobra.Command, rows []driver.Lease) error {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tHOLDER\tTERM\tELECTED AT\tEXPIRES IN")
	for _, l := range rows {
		left := "expired"
		if !l.Expired() {
			left = l.ExpiresAt.Sub(l.Now).Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", l.Name, l.Holder, l.Term, l.ElectedAt.Format(time.RFC3339Nano), left)
	}
	return w.Flush()
}

// Command claimstore-dev is the developers' tool of the claimstore
// library: every command of the operator's tool (cmd/claimstore) plus the
// benchmarks (bench, bench dispatch, bench outbox), the demos (demo, demo
// dispatch) and the chaos soak. It links the test helpers those need and
// is built only by developers and CI:
//
//	go run ./tools/claimstore-dev help
//
// Without --dsn its commands run on the local test servers (the
// CLAIMSTORE_POSTGRES_DSN and CLAIMSTORE_MYSQL_DSN variables override
// them, as in the tests) and on SQLite in a temporary file.
package main

import (
	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/cmd/cli"
)

// newRoot returns a fresh command tree of the tool: the operator's tree
// (cli.NewRoot) under the name claimstore-dev, with the benchmarks, the
// demos and the soak added.
func newRoot() *cobra.Command {
	root := cli.NewRoot()
	root.Use = "claimstore-dev"
	root.Short = "The claimstore tool with the benchmarks, the demos and the soak"
	root.Long = `claimstore-dev is the claimstore command with the developers' commands added:
bench (claim, dispatch and outbox benchmarks), demo (the outbox and the
dispatcher end to end) and soak (the chaos soak).

Every command takes --backend and --dsn. The developers' commands default,
without --dsn, to the local test servers (CLAIMSTORE_POSTGRES_DSN and
CLAIMSTORE_MYSQL_DSN override them) and to SQLite in a temporary file; the
operator's commands need a DSN as in claimstore (--dsn or CLAIMSTORE_DSN).`
	root.PersistentFlags().Lookup("dsn").Usage = "data source name of the backend; SQLite: the database file " +
		"(default: the developers' commands the local test server or a temporary SQLite file, the operator's $CLAIMSTORE_DSN)"
	bench := newBenchCmd()
	bench.AddCommand(newBenchDispatchCmd(), newBenchLogCmd(), newBenchOutboxCmd())
	demo := newDemoCmd()
	demo.AddCommand(newDemoDispatchCmd())
	root.AddCommand(bench, demo, newSoakCmd())
	return root
}

func main() { cli.Main(newRoot()) }

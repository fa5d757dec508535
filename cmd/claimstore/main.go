// Command claimstore is the operator's command-line tool of the claimstore
// library: the outbox relay and outbox inspection, schedules and the
// schedule dispatcher, leader election status and the operator's console,
// against PostgreSQL, MySQL/MariaDB, SQLite or SQL Server. Run
// `claimstore help` for the commands and their flags.
//
// It links the library and its database drivers only: the benchmarks, the
// demos and the soak are in the developers' tool, tools/claimstore-dev.
package main

import "github.com/claimstore/claimstore/internal/cmd/cli"

func main() { cli.Main(cli.NewRoot()) }

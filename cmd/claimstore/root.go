package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// rootCmd is the claimstore command. Each subcommand lives in its own file
// and adds itself with rootCmd.AddCommand in that file's init function.
var rootCmd = &cobra.Command{
	Use:   "claimstore",
	Short: "Atomic find-and-claim over SQL, Elasticsearch and in-memory stores",
	Long: `claimstore is the command-line tool of the claimstore library: the outbox demo
and relay, outbox inspection, and the claim benchmark.

Every command takes --backend and --dsn. Without --dsn the servers default to
the local test servers (CLAIMSTORE_POSTGRES_DSN and CLAIMSTORE_MYSQL_DSN
override them) and SQLite to a file chosen by the command.`,
	SilenceUsage:      true,
	SilenceErrors:     true,
	PersistentPreRunE: setupLogging,
}

// globalFlags holds the flags every subcommand shares.
var globalFlags struct {
	// Backend names the store backend; each command checks that it
	// supports it.
	Backend string
	// DSN is the data source name; empty selects the backend's default.
	DSN string
	// LogLevel is debug, info, warn or error.
	LogLevel string
}

func init() {
	// Run the root's PersistentPreRunE even when a subcommand defines its
	// own persistent hooks.
	cobra.EnableTraverseRunHooks = true
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&globalFlags.Backend, "backend", "sqlite", "store backend: sqlite, postgres, mysql, mariadb, memory (each command says which it supports)")
	pf.StringVar(&globalFlags.DSN, "dsn", "", "data source name of the backend (default: the local server, or an SQLite file)")
	pf.StringVar(&globalFlags.LogLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
}

// setupLogging checks --log-level and installs a text slog handler on
// stderr at --log-level as the default logger.
func setupLogging(cmd *cobra.Command, _ []string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(globalFlags.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	return nil
}

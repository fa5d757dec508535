package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
)

// rootCmd is the claimstore command. Each subcommand lives in its own file
// and adds itself with rootCmd.AddCommand in that file's init function.
var rootCmd = &cobra.Command{
	Use:   "claimstore",
	Short: "Atomic find-and-claim over SQL, Elasticsearch and in-memory stores",
	Long: `claimstore is the operator's command-line tool of the claimstore library: the
outbox relay and outbox inspection, schedules and the dispatcher, leader
election status, and the operator's console.

Every command takes --backend and --dsn. Without --dsn the CLAIMSTORE_DSN
environment variable gives the data source name; a command that opens a
database refuses to start with neither. For SQLite the DSN is the database
file's path (the recommended settings are added) or a "file:" URI.`,
	SilenceUsage:      true,
	SilenceErrors:     true,
	PersistentPreRunE: setupLogging,
}

// Root returns the claimstore command with its subcommands. A program
// that adds commands of its own (the developers' tool) adds them to it
// before it runs [Main].
func Root() *cobra.Command { return rootCmd }

// Main runs root on the process's arguments until it returns or SIGINT or
// SIGTERM cancels its context, prints an error as [ErrorText] does on
// stderr and exits with status 1 after one, 0 otherwise.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, ErrorText(err))
		os.Exit(1)
	}
}

// Globals are the values of the flags every command shares.
type Globals struct {
	// Backend names the store backend (--backend); each command checks
	// that it supports it.
	Backend string
	// DSN is --dsn as given, "" when absent (see dsn.Resolve).
	DSN string
	// LogLevel is --log-level: debug, info, warn or error.
	LogLevel string
}

// GlobalFlags returns the shared flags' values of the command running.
func GlobalFlags() Globals { return globalFlags }

// globalFlags holds the flags every subcommand shares.
var globalFlags Globals

func init() {
	// Run the root's PersistentPreRunE even when a subcommand defines its
	// own persistent hooks.
	cobra.EnableTraverseRunHooks = true
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&globalFlags.Backend, "backend", "sqlite", "store backend: sqlite, postgres, mysql, mariadb, memory (each command says which it supports)")
	pf.StringVar(&globalFlags.DSN, "dsn", "", "data source name of the backend; SQLite: the database file (default: $CLAIMSTORE_DSN)")
	pf.StringVar(&globalFlags.LogLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
}

// logOut is where the command's logs go: the root command's error output
// (stderr unless a test redirects it), set by setupLogging.
var logOut io.Writer = os.Stderr

// setupLogging checks --log-level and installs a text slog handler on the
// command's error output at --log-level as the default logger. It also
// routes the MySQL driver's own log lines, which it would otherwise print
// on stderr past --log-level, through that logger (see mysqlLogger).
func setupLogging(cmd *cobra.Command, _ []string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(globalFlags.LogLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", dao.ErrInvalidArgument, globalFlags.LogLevel)
	}
	logOut = cmd.ErrOrStderr()
	slog.SetDefault(slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level})))
	return mysql.SetLogger(mysqlLogger{})
}

// mysqlLogger is the MySQL driver's logger: each line it logs goes to the
// default slog logger as "mysql driver" with the driver's text in err. The
// driver logs a connection it finds broken; database/sql then retries on
// another one, and the error reaches the caller when it matters. A pooled
// connection the server closed while idle is routine: DEBUG. Anything else
// (a handshake cut short, a packet read or write failing) is WARN.
type mysqlLogger struct{}

// Print logs the driver's message v.
func (mysqlLogger) Print(v ...any) {
	msg := strings.TrimSpace(fmt.Sprint(v...))
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "closing bad idle connection") {
		level = slog.LevelDebug
	}
	slog.Log(context.Background(), level, "mysql driver", "err", msg)
}

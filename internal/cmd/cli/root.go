package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
)

// rootLong is the long help of the claimstore command.
const rootLong = `claimstore is the operator's command-line tool of the claimstore library: the
outbox relay and outbox inspection, schedules and the dispatcher, leader
election status, and the operator's console.

Every command takes --backend and --dsn. Without --dsn the CLAIMSTORE_DSN
environment variable gives the data source name; a command that opens a
database refuses to start with neither. For SQLite the DSN is the database
file's path (the recommended settings are added) or a "file:" URI.`

// NewRoot returns the claimstore command with its subcommands. Each call
// builds a fresh command tree, independent of every other one: its flags
// are bound to values of its own and no state is shared between trees, so
// tests and the developers' tool (tools/claimstore-dev, which adds its
// commands to the tree before it runs [Main]) compose it without globals.
// A run of a tree installs the process's default slog logger on the
// tree's error output at --log-level.
func NewRoot() *cobra.Command {
	g := &Globals{}
	root := &cobra.Command{
		Use:           "claimstore",
		Short:         "Atomic find-and-claim over SQL, Elasticsearch and in-memory stores",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return setupLogging(cmd, g.LogLevel)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.Backend, "backend", "sqlite", "store backend: sqlite, postgres, mysql, mariadb, memory (each command says which it supports)")
	pf.StringVar(&g.DSN, "dsn", "", "data source name of the backend; SQLite: the database file (default: $CLAIMSTORE_DSN)")
	pf.StringVar(&g.LogLevel, "log-level", "info", "log level on stderr: debug, info, warn or error")
	root.AddCommand(
		newDispatchCmd(g),
		newGaleraCmd(g),
		newJobsCmd(g),
		newQueuesCmd(g),
		newLeaderCmd(g),
		newOutboxCmd(g),
		newRelayCmd(g),
		newScheduleCmd(g),
		newUICmd(g),
	)
	return root
}

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

// GlobalFlags returns the values of the shared flags of cmd's tree, a
// tree [NewRoot] built (the zero Globals for a tree without them). A
// command the developers' tool adds reads --backend, --dsn and
// --log-level with it.
func GlobalFlags(cmd *cobra.Command) Globals {
	pf := cmd.Root().PersistentFlags()
	value := func(name string) string {
		if f := pf.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return Globals{Backend: value("backend"), DSN: value("dsn"), LogLevel: value("log-level")}
}

func init() {
	// Run the root's PersistentPreRunE even when a subcommand defines its
	// own persistent hooks. This is cobra's setting for the whole process,
	// the same for every tree.
	cobra.EnableTraverseRunHooks = true
}

// setupLogging checks level, the value of --log-level, and installs a
// text slog handler on the command's error output (stderr unless a test
// redirects it) at that level as the default logger. It also routes the
// MySQL driver's own log lines, which it would otherwise print on stderr
// past --log-level, through that logger (see mysqlLogger).
func setupLogging(cmd *cobra.Command, logLevel string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", dao.ErrInvalidArgument, logLevel)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))
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

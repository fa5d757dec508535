package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/dsn"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/ui"
)

// uiOptions are the flags of `claimstore ui`.
type uiOptions struct {
	addr     string
	auth     string
	readOnly bool
	tables   string // comma-separated
	pool     int
	// jobs and queues name the job table and its queue table;
	// jobsNamed is set when --jobs-table was given, which makes a
	// missing job table an error.
	jobs, queues string
	jobsNamed    bool
}

func newUICmd(g *Globals) *cobra.Command {
	var o uiOptions
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the operator's console: backlog, schedules, outbox, jobs and leaders in a web page",
		Long: `ui serves the operator's console (package ui) for the tables it finds in the
database given by --backend and --dsn (postgres, mysql, mariadb, or sqlite with
--dsn naming the file): every schedule table (package dispatch), outbox message
table (package outbox) and lease table (package coord), recognised by their
columns, and the job table of package jobs named by --jobs-table (default
claimstore_jobs) when it exists, with its queue table (--queue-table, default
claimstore_job_queues) for the queues page. --tables keeps only the tables
named. On a node of a MariaDB Galera Cluster the overview also shows the
node's view of its cluster, as claimstore galera status prints it.

It listens on --addr, 127.0.0.1:8080 by default. Any other interface needs
--auth, which names where the credentials are read — never the command line:
file:PATH (a file readable by you alone: one its group or other users can
read or write is refused, as ssh refuses such a key) or env:NAME (an environment
variable). They hold a token (sent as "Authorization: Bearer TOKEN", or as the
password of the browser's login prompt with any user name) or user:password
for Basic authentication. Without --auth it answers only requests addressed to
localhost, 127.0.0.1 or [::1] (403 for another Host, as a page of another
site made to resolve to 127.0.0.1 sends). --read-only serves no action.`,
		Example: `  claimstore ui --backend postgres
  claimstore ui --backend sqlite --dsn app.db --read-only
  CONSOLE_TOKEN=$(openssl rand -hex 16) claimstore ui --backend postgres --addr :8080 --auth env:CONSOLE_TOKEN`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.jobsNamed = cmd.Flags().Changed("jobs-table")
			return runUI(cmd.Context(), *g, o, func(addr string) {
				fmt.Fprintf(cmd.OutOrStdout(), "claimstore console on http://%s/\n", addr)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.auth, "auth", "", "where to read the credentials: file:PATH or env:NAME (a token, or user:password)")
	f.BoolVar(&o.readOnly, "read-only", false, "serve no action: pages only")
	f.StringVar(&o.tables, "tables", "", "show only these tables, comma-separated (default: every table found)")
	f.IntVar(&o.pool, "pool", 4, "database connections at most (1 to 50)")
	addJobTableFlags(f, &o)
	return cmd
}

// loopback reports whether addr's host is a loopback address or
// "localhost".
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHostsOnly serves h to requests whose Host names the loopback
// interface only (localhost, 127.0.0.0/8, ::1) and refuses others with
// 403. Without --auth the console trusts whoever reaches the loopback
// address; a page of another site whose name was made to resolve to
// 127.0.0.1 (DNS rebinding) reaches it too, as its own origin, and could
// read the CSRF token and post; its requests carry that site's name as
// Host.
func loopbackHostsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hp, _, err := net.SplitHostPort(host); err == nil {
			host = hp
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		ip := net.ParseIP(host)
		if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "without --auth the console answers only to localhost, 127.0.0.1 and [::1], not to "+strconv.Quote(r.Host), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// errNeedAuth is the error of a non-loopback --addr without --auth.
func errNeedAuth(addr string) error {
	return fmt.Errorf(`%w: refusing to serve the console on %s without --auth: anyone who reaches that address could pause schedules, requeue or purge messages, and retry, cancel or delete jobs.
Put a token (or user:password) in a file only you can read and pass --auth file:PATH,
or in an environment variable and pass --auth env:NAME, for example:
  export CONSOLE_TOKEN=$(openssl rand -hex 16)
  claimstore ui --addr %s --auth env:CONSOLE_TOKEN
or listen on 127.0.0.1 (the default)`, dao.ErrInvalidArgument, addr, addr)
}

// readAuth reads the credentials --auth names and returns the
// authenticator: Basic for user:password, a token otherwise.
func readAuth(spec string) (func(*http.Request) bool, error) {
	kind, where, ok := strings.Cut(spec, ":")
	var secret string
	switch {
	case ok && kind == "file":
		b, err := readPrivateFile(where)
		if err != nil {
			return nil, fmt.Errorf("--auth: %w", err)
		}
		secret = string(b)
	case ok && kind == "env":
		v, set := os.LookupEnv(where)
		if !set {
			return nil, fmt.Errorf("--auth: %w: environment variable %s is not set", dao.ErrInvalidArgument, where)
		}
		secret = v
	default:
		return nil, fmt.Errorf("--auth: %w: %q: give file:PATH or env:NAME (credentials never go on the command line)", dao.ErrInvalidArgument, spec)
	}
	secret = strings.TrimSpace(secret)
	if len(secret) < 8 {
		return nil, fmt.Errorf("--auth: %w: the credentials are empty or shorter than 8 bytes", dao.ErrInvalidArgument)
	}
	if user, pass, ok := strings.Cut(secret, ":"); ok && user != "" && pass != "" {
		return ui.BasicAuth(user, pass), nil
	}
	return ui.TokenAuth(secret), nil
}

// readPrivateFile returns the content of the credentials file path, or an
// error wrapping [dao.ErrInvalidArgument] when its group or other users
// may read or write it (any of the mode bits 077), as ssh refuses such a
// private key: the error names the permissions and the chmod that fixes
// them. The mode is read from the opened file, so the file checked is the
// file read. Windows, whose file modes do not say who may read a file, is
// not checked.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: permissions %04o (%s) of %s are too open: other users can read or change the console's credentials; "+
			"make the file readable by you alone: chmod 600 %s", dao.ErrInvalidArgument, perm, perm.String()[1:], path, path)
	}
	return io.ReadAll(f)
}

// runUI opens the database of --backend and --dsn (g), finds its tables
// and serves the console until ctx ends; listening calls ready with the
// address.
func runUI(ctx context.Context, g Globals, o uiOptions, ready func(addr string)) error {
	var c FlagChecks
	Between(&c, "pool", o.pool, 1, 50)
	if c.err != nil {
		return c.err
	}
	if err := checkJobTableFlags(&o); err != nil {
		return err
	}
	var auth func(*http.Request) bool
	if o.auth != "" {
		a, err := readAuth(o.auth)
		if err != nil {
			return err
		}
		auth = a
	} else if !loopback(o.addr) {
		return errNeedAuth(o.addr)
	}
	backend := strings.ToLower(g.Backend)
	if backend == "memory" {
		return fmt.Errorf("%w: the memory backend lives only inside one process; use --backend postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument)
	}
	d, err := dsn.Resolve(backend, g.DSN)
	if err != nil {
		return err
	}
	db, err := sqlstore.Open(ctx, backend, d)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
		sqlDB.SetMaxOpenConns(o.pool)
		sqlDB.SetMaxIdleConns(o.pool)
	}
	var only []string
	for _, t := range strings.Split(o.tables, ",") {
		if t = strings.TrimSpace(t); t != "" {
			only = append(only, t)
		}
	}
	sources, err := findSources(ctx, db, only)
	if err != nil {
		return err
	}
	js, err := findJobs(ctx, db, o, only)
	if err != nil {
		return err
	}
	if js != nil {
		sources = append(sources, js)
	}
	if len(sources) == 0 {
		return fmt.Errorf("%w: no schedule, outbox, job or lease table found on %s%s", dao.ErrNotFound, backend, onlyTables(only))
	}
	// DB lets the console show the cluster's state on a MariaDB Galera
	// Cluster node; it asks a MySQL or MariaDB server once whether it is
	// one, and the other backends not at all.
	h, err := ui.New(ui.Config{Sources: sources, ReadOnly: o.readOnly, Auth: auth, Logger: slog.Default(), DB: db})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	var served http.Handler = h
	if auth == nil {
		served = loopbackHostsOnly(h)
	}
	srv := &http.Server{Handler: served, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	ready(ln.Addr().String())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func onlyTables(t []string) string {
	if len(t) == 0 {
		return ""
	}
	return " among --tables " + strings.Join(t, ",")
}

// findSources returns the console sources of the tables of db recognised
// by their columns, in name order: schedule tables (schedule_key,
// next_fire_at, lease_owner, lease_until, status), outbox tables (every
// column of [outbox.Columns]), outbox logs (a table with part, seq,
// message_id, msg_key and created_us beside its _cursors and _dead
// tables) and lease tables (leader_id, term, expires_at). With only set,
// other tables are skipped.
func findSources(ctx context.Context, db *gorm.DB, only []string) ([]ui.Source, error) {
	m := db.WithContext(ctx).Migrator()
	names, err := m.GetTables()
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	slices.Sort(names)
	var out []ui.Source
	for _, name := range names {
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		cols, err := m.ColumnTypes(name)
		if err != nil {
			continue // a view or a table we may not read
		}
		has := map[string]bool{}
		for _, c := range cols {
			has[strings.ToLower(c.Name())] = true
		}
		all := func(cs ...string) bool {
			for _, c := range cs {
				if !has[c] {
					return false
				}
			}
			return true
		}
		var s ui.Source
		switch {
		case all(dispatch.ColKey, dispatch.ColNextFireAt, dispatch.ColLeaseOwner, dispatch.ColLeaseUntil, dispatch.ColStatus):
			if dispatch.CheckTable(name) != nil {
				continue
			}
			store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(name))
			if err != nil {
				return nil, err
			}
			s, err = ui.Schedules(name, store)
			if err != nil {
				return nil, err
			}
		case all(outbox.Columns()...):
			if outbox.CheckTable(name) != nil {
				continue
			}
			store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(name))
			if err != nil {
				return nil, err
			}
			repo, err := outbox.New(store)
			if err != nil {
				return nil, err
			}
			if s, err = ui.Outbox(name, repo); err != nil {
				return nil, err
			}
		case all("name", "leader_id", "term", "elected_at", "expires_at"):
			leases, err := sqlstore.NewLeases(db, name)
			if err != nil {
				return nil, err
			}
			if s, err = ui.Leases(name, leases); err != nil {
				return nil, err
			}
		case all("part", "seq", "message_id", "msg_key", "created_us") && slices.Contains(names, name+"_cursors") && slices.Contains(names, name+"_dead"):
			store, err := sqlstore.NewLog(db, name)
			if err != nil {
				continue // a dialect that does not offer the log
			}
			lg, err := outbox.NewLog(store, 1) // the lags do not depend on the partition count
			if err != nil {
				return nil, err
			}
			if s, err = ui.OutboxLog(name, lg); err != nil {
				return nil, err
			}
		default:
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

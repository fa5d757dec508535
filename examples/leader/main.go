// Command leader runs three candidates as separate processes that elect a
// leader over one lease table and print their terms. After a while the
// leader is killed (SIGKILL: no renewal, no release) and another takes
// over once the lease expires; then the new leader resigns (SIGTERM) and
// another takes over at its next poll.
//
// It runs on an SQLite file by default and needs nothing installed:
//
//	go run ./examples/leader
//	go run ./examples/leader -backend postgres   # $CLAIMSTORE_POSTGRES_DSN or the local server
//
// The program starts itself again as each candidate, with the candidate's
// settings in the environment (see candidateEnv).
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	// The backends this program can open.
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
)

// config is what the flags set.
type config struct {
	backend   string        // sqlite or postgres
	dsn       string        // empty: a file in a temporary directory, or the local PostgreSQL
	ttl       time.Duration // lease length
	candidate string        // set in the candidate processes
}

// candidateEnv holds a candidate process's settings:
// "<id>|<backend>|<ttl>|<dsn>".
const candidateEnv = "CLAIMSTORE_EXAMPLE_LEADER_CANDIDATE"

// candidateConfig returns the settings of a candidate process from the
// environment, and false in the parent process.
func candidateConfig() (config, bool) {
	parts := strings.SplitN(os.Getenv(candidateEnv), "|", 4)
	if len(parts) != 4 {
		return config{}, false
	}
	ttl, err := time.ParseDuration(parts[2])
	if err != nil {
		log.Fatalf("%s: %v", candidateEnv, err)
	}
	return config{candidate: parts[0], backend: parts[1], ttl: ttl, dsn: parts[3]}, true
}

// runCandidate runs the candidate of the environment until SIGTERM.
func runCandidate(cfg config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := candidate(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func main() {
	var cfg config
	flag.StringVar(&cfg.backend, "backend", "sqlite", "database: sqlite or postgres")
	flag.StringVar(&cfg.dsn, "dsn", "", "data source name (default: an SQLite file in a temporary directory, or $CLAIMSTORE_POSTGRES_DSN, else the local PostgreSQL)")
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "lease length")
	flag.Parse()
	if c, ok := candidateConfig(); ok {
		runCandidate(c)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// openLeases opens the database of cfg and returns its lease table
// (example_leaders) and the function that closes the database.
func openLeases(ctx context.Context, cfg config) (*sqlstore.Leases, func(), error) {
	db, err := sqlstore.Open(ctx, cfg.backend, cfg.dsn)
	if err != nil {
		return nil, nil, err
	}
	closeDB := func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}
	leases, err := sqlstore.NewLeases(db, "example_leaders")
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	return leases, closeDB, nil
}

// candidate campaigns until ctx is done (then resigns), printing every
// term it wins and loses.
func candidate(ctx context.Context, cfg config, out io.Writer) error {
	leases, closeDB, err := openLeases(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	e, err := coord.NewElector(leases, coord.ElectorConfig{
		Name: "example", ID: cfg.candidate, Lease: cfg.ttl, PollInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnElected: func(ctx context.Context, l coord.Leader) {
			say("%s: elected, term %d", l.ID(), l.Term())
			// Leader-only work goes here, and stops when ctx is done.
			<-ctx.Done()
		},
		OnDeposed: func(l coord.Leader) { say("%s: leadership of term %d ended", l.ID(), l.Term()) },
	})
	if err != nil {
		return err
	}
	say("%s: campaigning", cfg.candidate)
	return e.Run(ctx)
}

// run creates the lease table, starts three candidate processes, kills
// the first leader, makes the second resign, and stops them all.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.dsn == "" {
		switch cfg.backend {
		case "sqlite":
			dir, err := os.MkdirTemp("", "claimstore-leader-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			cfg.dsn = filepath.Join(dir, "leader.db") // sqlstore.Open gives a path WAL, a busy timeout, BEGIN IMMEDIATE
		case "postgres":
			cfg.dsn = cmp.Or(os.Getenv("CLAIMSTORE_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		default:
			return fmt.Errorf("-backend %q: want sqlite or postgres", cfg.backend)
		}
	}
	leases, closeDB, err := openLeases(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := leases.Migrate(ctx); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	elected := make(chan string, 16) // ids, in order of election
	var mu sync.Mutex
	procs := map[string]*exec.Cmd{}
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("candidate-%d", i)
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), candidateEnv+"="+strings.Join([]string{id, cfg.backend, cfg.ttl.String(), cfg.dsn}, "|"))
		cmd.Stderr = os.Stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs[id] = cmd
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				mu.Lock()
				fmt.Fprintln(out, sc.Text())
				mu.Unlock()
				if who, _, ok := strings.Cut(sc.Text(), ": elected"); ok {
					elected <- who
				}
			}
			_ = cmd.Wait()
		}()
	}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		wg.Wait()
	}()
	wait := func() (string, error) {
		select {
		case id := <-elected:
			return id, nil
		case <-time.After(3*cfg.ttl + 5*time.Second):
			return "", errors.New("no leader was elected in time")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	first, err := wait()
	if err != nil {
		return err
	}
	began := time.Now()
	mu.Lock()
	fmt.Fprintf(out, "-- killing %s (SIGKILL)\n", first)
	mu.Unlock()
	_ = procs[first].Process.Kill()
	second, err := wait()
	if err != nil {
		return err
	}
	mu.Lock()
	fmt.Fprintf(out, "-- %s took over %v after the kill (TTL %v); asking it to resign (SIGTERM)\n", second, time.Since(began).Round(time.Millisecond), cfg.ttl)
	mu.Unlock()
	began = time.Now()
	_ = procs[second].Process.Signal(syscall.SIGTERM)
	third, err := wait()
	if err != nil {
		return err
	}
	mu.Lock()
	fmt.Fprintf(out, "-- %s took over %v after the resignation\n", third, time.Since(began).Round(time.Millisecond))
	mu.Unlock()
	return nil
}

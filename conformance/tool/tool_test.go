package tool_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/mysql"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestConformanceTool runs the whole conformance suite against the
// database CLAIMSTORE_CONFORMANCE_DB and CLAIMSTORE_CONFORMANCE_DSN name
// and prints a report; see the package documentation.
func TestConformanceTool(t *testing.T) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv(envDB)))
	if name == "" {
		t.Skipf("%s is not set; run the suite against a database with: make conformance DB=postgres|mysql|mariadb|sqlite|sqlserver|cockroach|yugabyte|elasticsearch|memory DSN=...", envDB)
	}
	b := openBackend(t, name)
	if os.Getenv(envChild) != "" {
		conformance.Run(t, b.harness)
		return
	}

	began := time.Now()
	groups, suiteErr := runSuite(t)
	suiteTook := time.Since(began)

	caps := b.harness.NewStore(t).Capabilities()
	var race raceReport
	t.Run("ObservedLostRace", func(t *testing.T) { race = observeLostRace(t, b.harness) })
	var measured string
	t.Run("RoundTrips", func(t *testing.T) { measured = measureRoundTrips(t, b) })

	report(os.Stdout, b, caps, groups, race, measured, suiteTook)

	if suiteErr != nil {
		t.Errorf("the suite failed on %s: %v (the failures are in the output above)", name, suiteErr)
	}
	for _, g := range groups {
		if g.result == "FAIL" {
			t.Errorf("guarantee group %s failed on %s", g.name, name)
		}
	}
	if race.observed != 0 && race.observed != caps.LostRace {
		t.Errorf("lost race on %s: observed %v, declared %v", name, race.observed, caps.LostRace)
	}
}

// group is the outcome of one top-level subtest of conformance.Run.
type group struct {
	name, result string // result: PASS, FAIL or SKIP; "" when it never reported
	took         string
	skipped      []string // nested subtests that skipped
}

var (
	runLine    = regexp.MustCompile(`^=== RUN\s+TestConformanceTool/([^/\s]+)$`)
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformanceTool/([^/\s]+) \(([^)]*)\)`)
	nestedSkip = regexp.MustCompile(`^\s*--- SKIP: TestConformanceTool/([^/\s]+)/(\S+) \(`)
)

// runSuite runs conformance.Run in a child process (this test binary
// again, with CLAIMSTORE_CONFORMANCE_CHILD set), copies its output to
// stdout as it comes, and returns the outcome of each top-level group in
// the order they ran. The error is the child's exit status.
func runSuite(t *testing.T) ([]group, error) {
	t.Helper()
	args := []string{"-test.run=^TestConformanceTool$", "-test.v=true", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		// Leave a minute for the probes and the report.
		args = append(args, "-test.timeout="+max(time.Until(d)-time.Minute, time.Minute).Round(time.Second).String())
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envChild+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the suite's process: %v", err)
	}
	var groups []group
	index := map[string]int{}
	sc := bufio.NewScanner(io.TeeReader(out, os.Stdout))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := runLine.FindStringSubmatch(line); m != nil {
			if _, ok := index[m[1]]; !ok {
				index[m[1]] = len(groups)
				groups = append(groups, group{name: m[1]})
			}
		} else if m := resultLine.FindStringSubmatch(line); m != nil {
			i, ok := index[m[2]]
			if !ok {
				i = len(groups)
				index[m[2]] = i
				groups = append(groups, group{name: m[2]})
			}
			groups[i].result, groups[i].took = m[1], m[3]
		} else if m := nestedSkip.FindStringSubmatch(line); m != nil {
			if i, ok := index[m[1]]; ok {
				groups[i].skipped = append(groups[i].skipped, m[2])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the suite's output: %v", err)
	}
	return groups, cmd.Wait()
}

// raceReport is what observeLostRace saw.
type raceReport struct {
	observed dao.LostRace // 0: could not be forced
	how      string
}

// probeSet is the claim of the lost-race probe.
func probeSet(who string) dao.Set { return dao.Set{"status": "claimed", "locked_by": who} }

// probeSeed inserts three ready rows, priorities 3, 2, 1.
func probeSeed(t *testing.T, s dao.Store[conformance.Job]) []int64 {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	jobs := make([]*conformance.Job, 3)
	for i := range jobs {
		jobs[i] = &conformance.Job{Status: "ready", Priority: 3 - i, Payload: fmt.Sprintf("probe-%d", i), MaxAttempts: 3, CreatedAt: now}
	}
	if err := s.Create(context.Background(), jobs...); err != nil {
		t.Fatalf("seed the probe rows: %v", err)
	}
	return []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID}
}

func jobIDs(rows []conformance.Job) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// observeLostRace forces one lost race and classifies what the losing
// claim saw, independently of what the store declares. A claim with a
// candidate stage (the portable default) lets a competing claim take its
// second candidate between the read and the guarded updates. A claim
// without one (a fast path), or a store whose writers serialize (declared
// ErrBusy), is run while Harness.HoldLock holds the competing writer's
// lock on the first row.
func observeLostRace(t *testing.T, h conformance.Harness) raceReport {
	s := h.NewStore(t)
	caps := s.Capabilities()
	ids := probeSeed(t, s)
	req := dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: probeSet("first"), Limit: 3, OrderBy: []dao.Order{dao.Desc("priority")}}

	if caps.Strategy != dao.StrategyFastPath && caps.LostRace != dao.LostRaceBusy {
		var thiefErr error
		var thiefGot []conformance.Job
		thiefDone := make(chan struct{})
		blocked := false
		trace := &dao.ClaimTrace{CandidatesRead: func(_ context.Context, cands []any) {
			go func() {
				defer close(thiefDone)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				thiefGot, thiefErr = s.Claim(ctx, dao.ClaimRequest{
					Where: dao.And(dao.Eq("status", "ready"), dao.Eq("id", cands[1])), Set: probeSet("thief"), Limit: 1,
				})
			}()
			select {
			case <-thiefDone:
			case <-time.After(3 * time.Second):
				blocked = true
			}
		}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got, err := s.Claim(dao.WithClaimTrace(ctx, trace), req)
		<-thiefDone
		switch {
		case blocked && err == nil && len(got) == 3 && len(thiefGot) == 0 && thiefErr == nil:
			return raceReport{dao.LostRaceImpossible, "the competing claim waited until the claim returned, which got all 3 rows"}
		case blocked:
			return raceReport{0, fmt.Sprintf("the competing claim blocked; the claim returned %v, %v and the competitor %v, %v", jobIDs(got), err, jobIDs(thiefGot), thiefErr)}
		case thiefErr != nil:
			return raceReport{0, fmt.Sprintf("the competing claim failed: %v", thiefErr)}
		case len(thiefGot) != 1:
			return raceReport{0, fmt.Sprintf("the competing claim got %v, not the second candidate", jobIDs(thiefGot))}
		case slices.Contains(jobIDs(got), thiefGot[0].ID):
			t.Errorf("DOUBLE CLAIM: row %d returned to both claims", thiefGot[0].ID)
			return raceReport{0, fmt.Sprintf("DOUBLE CLAIM of row %d", thiefGot[0].ID)}
		case err == nil && len(got) == 2:
			return raceReport{dao.LostRaceSkip, fmt.Sprintf("a competitor took row %d after the candidate read; the claim returned the other 2 rows and no error", thiefGot[0].ID)}
		case errors.Is(err, dao.ErrConflict):
			return raceReport{dao.LostRaceConflict, fmt.Sprintf("a competitor took row %d after the candidate read; the claim returned ErrConflict with the %d rows claimed before it", thiefGot[0].ID, len(got))}
		case errors.Is(err, dao.ErrBusy):
			return raceReport{dao.LostRaceBusy, fmt.Sprintf("the claim returned ErrBusy with %d rows", len(got))}
		}
		return raceReport{0, fmt.Sprintf("after a competitor took row %d the claim returned %v, %v", thiefGot[0].ID, jobIDs(got), err)}
	}

	if h.HoldLock == nil {
		return raceReport{0, "not forced: the harness has no HoldLock"}
	}
	release := h.HoldLock(t, s, ids[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	got, err := s.Claim(ctx, req)
	took := time.Since(began).Round(time.Millisecond)
	release()
	switch {
	case err == nil && len(got) == 2 && !slices.Contains(jobIDs(got), ids[0]):
		return raceReport{dao.LostRaceSkip, fmt.Sprintf("with row %d locked by another transaction the claim returned the other 2 rows and no error after %v", ids[0], took)}
	case errors.Is(err, dao.ErrBusy):
		return raceReport{dao.LostRaceBusy, fmt.Sprintf("with the write lock held by another connection the claim returned ErrBusy after %v (the busy timeout) with %d rows", took, len(got))}
	case errors.Is(err, context.DeadlineExceeded):
		return raceReport{0, "the claim blocked on the held lock for a minute"}
	}
	return raceReport{0, fmt.Sprintf("with the lock held the claim returned %v, %v after %v", jobIDs(got), err, took)}
}

// measureRoundTrips claims 10 rows of a fresh table through a connection
// whose every Exec, Query, Prepare, Begin, Commit and Rollback the
// roundtrip package counts, and says how many it counted. Only SQL
// backends have such a driver hook.
func measureRoundTrips(t *testing.T, b *backend) string {
	if b.sql == "" {
		return "not measured (no SQL driver to count on)"
	}
	if strings.Contains(b.dsn, ":memory:") || strings.Contains(b.dsn, "mode=memory") {
		return "not measured (an in-memory SQLite database is private to its connection)"
	}
	dsn := b.dsn
	if b.requested == "mysql" || b.requested == "mariadb" {
		full, err := mysql.DSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		dsn = full
	}
	if b.sql == dialects.SQLite {
		// The settings sqlstore.Open gives a path or a "file:" URI.
		dsn = sqlstore.SQLiteDefaults(dsn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c roundtrip.Counter
	// The counting driver knows the drivers: CockroachDB and YugabyteDB
	// run on PostgreSQL's.
	db, err := roundtrip.OpenGorm(ctx, string(dialects.Family(b.sql)), dsn, &c, sqlstore.Config())
	if err != nil {
		t.Fatalf("open a counting connection: %v", err)
	}
	// A cleanup, not a defer: the table's cleanup drops it through this
	// pool, and cleanups run after defers, last first.
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	s := sqlStore(t, db, testdb.Table(t, db, "claimstore_rt"), b.opts...)
	const n = 10
	now := time.Now().UTC().Truncate(time.Second)
	jobs := make([]*conformance.Job, n)
	for i := range jobs {
		jobs[i] = &conformance.Job{Status: "ready", Payload: "rt", MaxAttempts: 3, CreatedAt: now}
	}
	if err := s.Create(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: probeSet("rt"), Limit: n})
	trips := c.Count()
	if err != nil || len(got) != n {
		t.Fatalf("claim of %d rows returned %d rows, %v", n, len(got), err)
	}
	rt := s.Capabilities().ClaimRoundTrips
	declared := int64(rt.Fixed + rt.PerRow*n)
	if trips != declared {
		t.Logf("measured %d round trips for a claim of %d rows, declared %d", trips, n, declared)
	}
	return fmt.Sprintf("%d for a claim of %d rows (declared for %d rows: %d)", trips, n, n, declared)
}

// report prints the per-backend report.
func report(w io.Writer, b *backend, caps dao.Capabilities, groups []group, race raceReport, measured string, took time.Duration) {
	var pass, fail, skip int
	fmt.Fprintf(w, "\n==== claimstore conformance report: %s ====\n", b.requested)
	backend := caps.Backend
	if requested, _ := dialects.Parse(b.requested); b.sql != "" && b.sql != requested {
		backend += fmt.Sprintf(" (detected; %s was requested)", b.sql)
	}
	fmt.Fprintf(w, "backend:      %s, claim strategy %v\n", backend, caps.Strategy)
	fmt.Fprintf(w, "guarantees (top-level groups of conformance.Run, %v):\n", took.Round(time.Millisecond))
	for _, g := range groups {
		r := g.result
		switch r {
		case "PASS":
			pass++
		case "FAIL":
			fail++
		case "SKIP":
			skip++
		default:
			r = "NO RESULT"
			fail++
		}
		note := ""
		if len(g.skipped) > 0 {
			note = "  skipped inside: " + strings.Join(g.skipped, ", ")
		}
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-16s %-9s %-8s%s", g.name, r, g.took, note), " "))
	}
	if len(groups) == 0 {
		fmt.Fprintln(w, "  (the suite reported no group; see its output above)")
	}
	fmt.Fprintf(w, "  %d passed, %d failed, %d skipped\n", pass, fail, skip)
	obs := "could not be forced"
	if race.observed != 0 {
		obs = race.observed.String()
	}
	verdict := "matches"
	if race.observed != caps.LostRace {
		verdict = "DIFFERS"
	}
	fmt.Fprintf(w, "lost race:    declared %q, observed %q (%s): %s\n", caps.LostRace, obs, verdict, race.how)
	fmt.Fprintf(w, "round trips per claim: declared %d + %d per row; measured: %s\n", caps.ClaimRoundTrips.Fixed, caps.ClaimRoundTrips.PerRow, measured)
	fmt.Fprintf(w, "==== end of report ====\n\n")
}

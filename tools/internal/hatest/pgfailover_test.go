//go:build linux

package hatest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// The pg_auto_failover formation is started once, by the first test that
// needs it, and stopped by TestMain.
var pgf struct {
	once sync.Once
	f    *hatest.PGFormation
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pgf.f != nil {
		pgf.f.Close()
	}
	if galera.c != nil {
		galera.c.Close()
	}
	os.Exit(code)
}

// pgFormation returns the formation with one node primary and the other
// its synchronous secondary, starting it on first use (7–30 s).
func pgFormation(ctx context.Context, t *testing.T) *hatest.PGFormation {
	t.Helper()
	haEnabled(t)
	pgf.once.Do(func() {
		start := time.Now()
		pgf.f, pgf.err = hatest.StartPGFormation(ctx, hatest.PGFormationOptions{Script: "../../../scripts/pg-failover.sh"})
		if pgf.err == nil {
			t.Logf("pg_auto_failover formation up in %.1fs", time.Since(start).Seconds())
		}
	})
	if pgf.err != nil {
		t.Fatal(pgf.err)
	}
	if err := pgf.f.Wait(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	return pgf.f
}

// openFormation opens the formation's multi-host DSN with a pool of at
// most conns connections, closed at cleanup.
func openFormation(ctx context.Context, t *testing.T, f *hatest.PGFormation, conns int) *gorm.DB {
	t.Helper()
	db, err := sqlstore.Open(ctx, "postgres", f.DSN(haConnectTimeout))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	return testdb.CloseAtCleanup(t, db)
}

// haConnectTimeout is the connect_timeout (seconds) of the formation's
// DSN: a node that is down refuses at once on loopback; one that hangs
// costs at most this per host tried.
const haConnectTimeout = 3

// haRows is the number of rows of the claim burn-down:
// CLAIMSTORE_HA_ROWS, default 20 000.
func haRows(t *testing.T) int { return haCount(t, "CLAIMSTORE_HA_ROWS") }

// haJob is a row of the burn-down table.
type haJob struct {
	ID          int64 `gorm:"primaryKey;autoIncrement:false"`
	State       string
	LockedBy    *string
	LockedUntil *time.Time
}

// outage records the write failures of a run: the first one, and the
// first success of a statement sent after it.
type outage struct {
	mu           sync.Mutex
	firstFail    time.Time
	recovered    time.Time
	failures     int
	kinds        map[string]int // error text -> count, for the log
	nonRetryable []error
}

// fail records err, seen at now; it reports whether err is retryable.
func (o *outage) fail(err error) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.firstFail.IsZero() {
		o.firstFail = time.Now()
	}
	o.failures++
	if o.kinds == nil {
		o.kinds = map[string]int{}
	}
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	o.kinds[fmt.Sprintf("retryable=%v %s", dao.IsRetryable(err), msg)]++
	if !dao.IsRetryable(err) {
		o.nonRetryable = append(o.nonRetryable, err)
		return false
	}
	return true
}

// ok records a success of a statement sent at sent.
func (o *outage) ok(sent time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.firstFail.IsZero() && o.recovered.IsZero() && sent.After(o.firstFail) {
		o.recovered = time.Now()
	}
}

// unwritable is the time from the first failure to the first success of a
// statement sent after it (0 when nothing failed or nothing succeeded yet).
func (o *outage) unwritable() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.firstFail.IsZero() || o.recovered.IsZero() {
		return 0
	}
	return o.recovered.Sub(o.firstFail)
}

func (o *outage) log(t *testing.T, what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]string, 0, len(o.kinds))
	for k := range o.kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%s error ×%d: %s", what, o.kinds[k], k)
	}
}

// backoffSleep waits 50 ms doubling to 1 s by attempt, or until ctx ends.
func backoffSleep(ctx context.Context, attempt int) bool {
	d := 50 * time.Millisecond << min(attempt, 5)
	d = min(d, time.Second)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// A claim burn-down on a pg_auto_failover formation (primary + synchronous
// secondary) through the multi-host DSN with target_session_attrs=
// read-write. W workers claim batches with a lease and mark them done
// until no ready row is left; when a third is done the primary is killed
// (SIGKILL to its keeper and every server process), the monitor promotes the secondary, and the old
// primary is started again and rejoins as secondary. Every failed
// statement must be retryable (dao.IsRetryable); the workers retry and go
// on on the new primary. A claim whose commit reached the secondary but
// whose answer was lost leaves rows claimed that no worker holds
// ("stranded"): they are reclaimed once their lease has run out. In the
// end every row is done and was returned to exactly one claimer.
func TestPostgresFailoverClaimBurnDown(t *testing.T) {
	haEnabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := pgFormation(ctx, t)
	n := haRows(t)
	const workers, batch, lease = 4, 25, 10 * time.Second
	start := time.Now()
	since := func() string { return fmt.Sprintf("%6.2fs", time.Since(start).Seconds()) }

	db := openFormation(ctx, t, f, workers+2)
	table := testdb.Table(t, db, "ha_claims")
	// The table name is testdb's random one; the row count is bound.
	if err := db.Exec(`CREATE TABLE ` + table + ` (id bigint PRIMARY KEY, state text NOT NULL, locked_by text, locked_until timestamptz)`).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO `+table+` (id, state) SELECT g, 'ready' FROM generate_series(1, ?) g`, n).Error; err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New[haJob](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	var syncNames, syncState string
	if err := db.Raw(`SELECT current_setting('synchronous_standby_names'), coalesce((SELECT string_agg(sync_state, ',') FROM pg_stat_replication), '')`).Row().Scan(&syncNames, &syncState); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %d rows; primary's synchronous_standby_names %q, standby sync_state %q", since(), n, syncNames, syncState)
	if syncNames == "" || (syncState != "sync" && syncState != "quorum") {
		t.Fatalf("replication is not synchronous: synchronous_standby_names %q, sync_state %q", syncNames, syncState)
	}

	returned := make([]atomic.Int32, n+1) // returned[id]: claims that returned row id
	var done, claimRetries, markRetries atomic.Int64
	var out outage
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for w := range workers {
		name := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for attempt := 0; ; {
				sent := time.Now()
				rows, err := store.Claim(runCtx, dao.ClaimRequest{
					Where: dao.Eq("state", "ready"),
					Set:   dao.Set{"state": "claimed", "locked_by": name, "locked_until": sent.Add(lease)},
					Limit: batch,
				})
				if err != nil {
					if runCtx.Err() != nil || !out.fail(fmt.Errorf("claim: %w", err)) {
						return
					}
					claimRetries.Add(1)
					attempt++
					if !backoffSleep(runCtx, attempt) {
						return
					}
					continue
				}
				attempt = 0
				out.ok(sent)
				if len(rows) == 0 {
					return
				}
				ids := make([]any, len(rows))
				for i, r := range rows {
					returned[r.ID].Add(1)
					ids[i] = r.ID
				}
				// The mark is retried until it is known to have
				// committed: a retry after a lost answer finds the
				// rows done already and changes none.
				for mattempt := 0; ; {
					msent := time.Now()
					_, err := store.Update(runCtx, dao.And(dao.In("id", ids...), dao.Eq("state", "claimed"), dao.Eq("locked_by", name)),
						dao.Set{"state": "done"})
					if err == nil {
						out.ok(msent)
						break
					}
					if runCtx.Err() != nil || !out.fail(fmt.Errorf("mark done: %w", err)) {
						return
					}
					markRetries.Add(1)
					mattempt++
					if !backoffSleep(runCtx, mattempt) {
						return
					}
				}
				done.Add(int64(len(rows)))
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s: %d of %d done", what, done.Load(), n)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	// 1. Crash the primary once a third is done.
	waitFor("a third done", func() bool { return done.Load() >= int64(n/3) })
	primary, err := f.Primary(ctx)
	if err != nil || primary == "" {
		t.Fatalf("no primary: %q, %v", primary, err)
	}
	tStop := time.Now()
	if err := f.KillNode(ctx, primary); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed primary %s (SIGKILL) at %d done", since(), primary, done.Load())

	// 2. Once the workers write again, start the old primary: it rejoins
	// as secondary while the burn-down goes on.
	waitFor("writes on the new primary", func() bool {
		select {
		case <-finished:
			return true
		default:
		}
		return out.unwritable() > 0
	})
	newPrimary, _ := f.Primary(ctx)
	t.Logf("%s writes resumed on %s at %d done; without a writable primary for %.2fs (from the first failed statement), %.2fs after the stop",
		since(), newPrimary, done.Load(), out.unwritable().Seconds(), out.recovered.Sub(tStop).Seconds())
	var aloneSync string
	if err := db.Raw(`SELECT current_setting('synchronous_standby_names')`).Row().Scan(&aloneSync); err == nil {
		t.Logf("%s new primary alone: synchronous_standby_names %q", since(), aloneSync)
	}
	tStart := time.Now()
	if err := f.StartNode(ctx, primary); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatalf("workers did not finish: %d of %d done", done.Load(), n)
	}
	stop()
	t.Logf("%s workers finished: %d done, %d claim retries, %d mark retries", since(), done.Load(), claimRetries.Load(), markRetries.Load())
	out.log(t, "write")
	if len(out.nonRetryable) > 0 {
		t.Fatalf("%d failed statements were not retryable, first: %v", len(out.nonRetryable), out.nonRetryable[0])
	}
	if err := f.Wait(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s rejoined as secondary %.2fs after its start", since(), primary, time.Since(tStart).Seconds())
	if err := db.Raw(`SELECT current_setting('synchronous_standby_names')`).Row().Scan(&aloneSync); err == nil {
		t.Logf("%s after the rejoin: synchronous_standby_names %q", since(), aloneSync)
	}

	// 3. Rows left claimed were committed by a claim whose answer was
	// lost: no worker holds them. They come back when their lease ends.
	var stranded []haJob
	if err := db.Table(table).Where("state = ?", "claimed").Order("id").Find(&stranded).Error; err != nil {
		t.Fatal(err)
	}
	held := 0
	var leaseEnd time.Time
	for _, r := range stranded {
		if returned[r.ID].Load() != 0 {
			held++ // returned to a worker whose mark did not land: a lost outcome
		}
		if r.LockedUntil != nil && r.LockedUntil.After(leaseEnd) {
			leaseEnd = *r.LockedUntil
		}
	}
	if held > 0 {
		t.Errorf("%d rows left claimed were returned to a worker that marked them done", held)
	}
	time.Sleep(time.Until(leaseEnd) + 100*time.Millisecond)
	reclaimed := 0
	for {
		now := time.Now()
		rows, err := store.Claim(ctx, dao.ClaimRequest{
			Where: dao.And(dao.Eq("state", "claimed"), dao.Lt("locked_until", now)),
			Set:   dao.Set{"state": "claimed", "locked_by": "reclaimer", "locked_until": now.Add(lease)},
			Limit: 100,
		})
		if err != nil {
			t.Fatalf("lease-expiry reclaim: %v", err)
		}
		if len(rows) == 0 {
			break
		}
		ids := make([]any, len(rows))
		for i, r := range rows {
			returned[r.ID].Add(1)
			ids[i] = r.ID
		}
		if _, err := store.Update(ctx, dao.And(dao.In("id", ids...), dao.Eq("locked_by", "reclaimer")), dao.Set{"state": "done"}); err != nil {
			t.Fatal(err)
		}
		reclaimed += len(rows)
	}

	// 4. The verdict.
	var notDone int64
	if err := db.Table(table).Where("state <> ?", "done").Count(&notDone).Error; err != nil {
		t.Fatal(err)
	}
	duplicates, never := 0, 0
	for id := 1; id <= n; id++ {
		switch c := returned[id].Load(); {
		case c == 0:
			never++
		case c > 1:
			duplicates++
		}
	}
	lost := int(notDone) + never
	t.Logf("FIGURES claim burn-down: t_unwritable=%.2fs rows=%d duplicates=%d lost=%d stranded=%d reclaimed_after_lease=%d claim_retries=%d mark_retries=%d",
		out.unwritable().Seconds(), n, duplicates, lost, len(stranded), reclaimed, claimRetries.Load(), markRetries.Load())
	if duplicates != 0 || lost != 0 || reclaimed != len(stranded) {
		t.Errorf("%d rows claimed twice, %d lost (%d not done, %d never returned), %d of %d stranded rows reclaimed", duplicates, lost, notDone, never, reclaimed, len(stranded))
	}
	if out.failures == 0 {
		t.Error("no statement failed though the primary was stopped")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("ran out of time")
	}
}

// An outbox on the pg_auto_failover formation relays to a JetStream stream
// (an embedded server) while writers add messages in their own
// transactions. When a third is published the primary is killed; writers
// and relay retry (the writers' transaction errors through
// sqlstore.MapError and dao.IsRetryable) and go on on the new primary; the
// old primary rejoins as secondary. Afterwards the stream holds every
// message exactly once (Nats-Msg-Id, within the duplicate window) and every
// row is marked published.
func TestPostgresFailoverOutboxRelay(t *testing.T) {
	haEnabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := pgFormation(ctx, t)
	n := haMessages(t)
	start := time.Now()
	since := func() string { return fmt.Sprintf("%6.2fs", time.Since(start).Seconds()) }

	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.URL(), nats.Name("pg-ha-relay"), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	db := openFormation(ctx, t, f, 8)
	table := testdb.Table(t, db, "ha_pgoutbox")
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := outbox.New(store, outbox.WithRetryPolicy(haPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tag := outboxenv.RandomHex(4)
	streamName, subject := "PGHA_"+tag, "pgha."+tag
	rc := haRelay
	rc.WorkerID = "pgha-" + tag
	rc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	pub, err := natspub.New(nc, natspub.Config{Subject: func(*outbox.Message) string { return subject }})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(repo, pub, rc)
	if err != nil {
		t.Fatal(err)
	}
	horizon := outbox.RetryHorizon(haPolicy, relay.Config())
	window := horizon.Round(time.Minute) + time.Minute
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{subject}, Storage: jetstream.FileStorage, Duplicates: window}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s stream %s, duplicate window %v (retry horizon %v); outbox table %s on the formation", since(), streamName, window, horizon, table)

	// Writers add groups of messages in their own transactions, at a
	// steady pace over about 15 s, and retry a transaction that failed
	// for a reason a retry cures. A retried group whose first commit did
	// land meets its own message ids: dao.ErrDuplicate, already written.
	var out outage
	var writeRetries, alreadyWritten atomic.Int64
	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	const group = 100
	pace := 15 * time.Second / time.Duration(n/group)
	writers := outboxenv.StartWriters(writeCtx, 2, group, n, func(ctx context.Context, first, count int) error {
		next := time.Now().Add(pace)
		for attempt := 0; ; {
			msgs := make([]*outbox.Message, count)
			for i := range msgs {
				msgs[i] = &outbox.Message{MessageID: msgID(first + i), Topic: "pgha", Payload: []byte(`{"n":` + strconv.Itoa(first+i) + `}`)}
			}
			sent := time.Now()
			err := sqlstore.MapError(db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return repo.Add(ctx, tx, msgs...) }))
			switch {
			case err == nil:
				out.ok(sent)
			case attempt > 0 && errors.Is(err, dao.ErrDuplicate):
				out.ok(sent)
				alreadyWritten.Add(1)
			case ctx.Err() == nil && out.fail(fmt.Errorf("add: %w", err)):
				writeRetries.Add(1)
				attempt++
				if !backoffSleep(ctx, attempt) {
					return ctx.Err()
				}
				continue
			default:
				return err
			}
			time.Sleep(time.Until(next))
			return nil
		}
	})
	run := startRelay(ctx, relay, writers, n)
	defer run.halt() // before the table is dropped
	published := run.published
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		run.waitFor(t, what, cond)
	}

	waitFor("a third published", func() bool { return published() >= n/3 })
	primary, err := f.Primary(ctx)
	if err != nil || primary == "" {
		t.Fatalf("no primary: %q, %v", primary, err)
	}
	tKill := time.Now()
	if err := f.KillNode(ctx, primary); err != nil {
		t.Fatal(err)
	}
	atKill, writtenAtKill := published(), int(writers.Written.Load())
	t.Logf("%s killed primary %s (SIGKILL) at %d published, %d written", since(), primary, atKill, writtenAtKill)
	waitFor("writes on the new primary", func() bool { return out.unwritable() > 0 })
	t.Logf("%s writers wrote again %.2fs after the kill (%.2fs from their first failure)", since(), out.recovered.Sub(tKill).Seconds(), out.unwritable().Seconds())
	waitFor("a message written after the kill published", func() bool { return published() > writtenAtKill })
	t.Logf("%s relay publishing again (%d published)", since(), published())
	tStart := time.Now()
	if err := f.StartNode(ctx, primary); err != nil {
		t.Fatal(err)
	}
	run.waitWriters(t)
	// A mark whose answer was lost counts as a mark error although it may
	// have committed; a batch whose mark did not commit is published
	// again after its lease. The table says when every row is published.
	waitFor("every row marked published", func() bool {
		time.Sleep(200 * time.Millisecond)
		c, err := repo.Counts(ctx)
		return err == nil && c[outbox.StatusPublished] >= int64(n)
	})
	t.Logf("%s every row marked published", since())
	run.stop(t)
	if err := f.Wait(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s rejoined as secondary %.2fs after its start", since(), primary, time.Since(tStart).Seconds())
	out.log(t, "writer")
	if len(out.nonRetryable) > 0 {
		t.Errorf("%d writer errors were not retryable, first: %v", len(out.nonRetryable), out.nonRetryable[0])
	}

	st := relay.Stats()
	audit := auditStream(ctx, t, js, streamName)
	lost := 0
	for i := range n {
		if audit.IDs[msgID(i)] == 0 {
			lost++
		}
	}
	counts, err := repo.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("relay totals: claimed %d, published %d, failed attempts %d, abandoned %d, released %d, lease lost %d, mark errors %d",
		st.Claimed, st.Published, st.Failed, st.Abandoned, st.Released, st.LeaseLost, st.MarkErrors)
	t.Logf("FIGURES outbox relay: t_unwritable=%.2fs messages=%d in_stream=%d distinct=%d duplicates=%d lost=%d rows_published=%d write_retries=%d groups_found_written=%d relay_mark_errors=%d",
		out.unwritable().Seconds(), n, audit.Messages, audit.Distinct(), audit.Duplicates(), lost, counts[outbox.StatusPublished],
		writeRetries.Load(), alreadyWritten.Load(), st.MarkErrors)
	if audit.Messages != uint64(n) || audit.Distinct() != n || audit.Duplicates() != 0 || audit.NoID != 0 || lost != 0 {
		t.Errorf("stream holds %d messages (%d distinct, %d duplicates, %d lost), want %d exactly once",
			audit.Messages, audit.Distinct(), audit.Duplicates(), lost, n)
	}
	if counts[outbox.StatusPublished] != int64(n) || st.Abandoned != 0 || st.LeaseLost != 0 {
		t.Errorf("table: %v, relay abandoned %d, lease lost %d; want %d published, none abandoned or lost", counts, st.Abandoned, st.LeaseLost, n)
	}
	if out.failures == 0 {
		t.Error("no write failed though the primary was killed")
	}
}

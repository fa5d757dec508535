package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Fault tests of the fast-path claims: the claimer's connection killed
// while a claim runs, other sessions holding candidate rows, and contexts
// cancelled at random moments. Every call claims with its own owner tag,
// so the table tells afterwards which call committed each row, and the
// ledger compares that with what each call returned.

// faultRounds returns the number of rounds (or calls) of a fault test:
// def, a quarter with -short, or def times $CLAIMSTORE_FAULT_SCALE (a
// positive integer) for longer runs.
func faultRounds(def int) int {
	if v, err := strconv.Atoi(os.Getenv("CLAIMSTORE_FAULT_SCALE")); err == nil && v > 0 {
		return def * v
	}
	if testing.Short() {
		return max(1, def/4)
	}
	return def
}

// ledger records what each claim call returned.
type ledger struct {
	mu        sync.Mutex
	calls     int
	cancelled int
	errs      map[int]error   // call -> error
	returned  map[int64][]int // row -> calls that returned it
	returnedN int
	// cancelledRows counts the calls whose context ended and that
	// returned committed rows (with a context error).
	cancelledRows int
}

func newLedger() *ledger {
	return &ledger{errs: map[int]error{}, returned: map[int64][]int{}}
}

// next returns a fresh call number.
func (l *ledger) next() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return l.calls
}

func (l *ledger) record(call int, rows []job, err error, cancelled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cancelled {
		l.cancelled++
		if len(rows) > 0 {
			l.cancelledRows++
		}
	}
	if err != nil {
		l.errs[call] = err
	}
	for _, r := range rows {
		l.returned[r.ID] = append(l.returned[r.ID], call)
		l.returnedN++
	}
}

func owner(call int) string { return "c" + strconv.Itoa(call) }

func ownerCall(o *string) int {
	if o == nil || !strings.HasPrefix(*o, "c") {
		return 0
	}
	n, _ := strconv.Atoi((*o)[1:])
	return n
}

// faultReq claims up to limit pending rows for call.
func faultReq(call, limit int) dao.ClaimRequest {
	return dao.ClaimRequest{
		Where:   dao.Eq("status", "pending"),
		Set:     dao.Set{"status": "processing", "owner": owner(call), "attempts": dao.Incr(1)},
		Limit:   limit,
		OrderBy: []dao.Order{dao.Asc("priority")},
	}
}

// tally is the outcome of a fault run, read back from the table.
type tally struct {
	rows, pending, returned, duplicates, phantoms, lostAcks, stranded, unaccounted int
}

func (c tally) String() string {
	return fmt.Sprintf("rows %d: returned %d, still pending %d, duplicates %d, phantoms %d, committed unreturned: lost acks %d, stranded %d, unaccounted %d",
		c.rows, c.returned, c.pending, c.duplicates, c.phantoms, c.lostAcks, c.stranded, c.unaccounted)
}

// settle reads every row of the store's table and classifies it:
//   - returned: returned to exactly one call, and the table says that
//     call claimed it (attempts 1);
//   - duplicate: returned to more than one call;
//   - phantom: returned to a call although the table says the row is
//     pending or another call claimed it;
//   - lost ack: claimed by a call that returned no rows and an error
//     wrapping dao.ErrUnavailable (its commit went through, its
//     acknowledgement did not);
//   - stranded: claimed by a call that did not return it otherwise;
//   - pending: claimed by nobody and returned to nobody.
func (l *ledger) settle(t *testing.T, s *store) tally {
	t.Helper()
	all, err := s.Find(context.Background(), dao.Query{})
	for try := 0; errors.Is(err, dao.ErrUnavailable) && try < 3; try++ {
		all, err = s.Find(context.Background(), dao.Query{}) // the pooled connection was killed
	}
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var c tally
	c.rows = len(all)
	for _, r := range all {
		got := l.returned[r.ID]
		claimedBy := ownerCall(r.Owner)
		switch {
		case len(got) > 1:
			c.duplicates++
		case len(got) == 1 && (r.Status != "processing" || claimedBy != got[0] || r.Attempts != 1):
			c.phantoms++
		case len(got) == 1:
			c.returned++
		case r.Status == "pending" && claimedBy == 0:
			c.pending++
		case r.Status == "processing" && errors.Is(l.errs[claimedBy], dao.ErrUnavailable):
			c.lostAcks++
		case r.Status == "processing":
			c.stranded++
		default:
			c.unaccounted++
		}
	}
	return c
}

// seedJobs inserts n pending rows.
func seedJobs(t testing.TB, s *store, n int) {
	t.Helper()
	items := make([]*job, n)
	for i := range items {
		items[i] = &job{Name: "f" + strconv.Itoa(i), Status: "pending", Priority: int64(i % 7)}
	}
	if err := s.Create(context.Background(), items...); err != nil {
		t.Fatal(err)
	}
}

// oneConn limits db's pool to one connection, so the claimer's server
// session is the one a test asks for.
func oneConn(t testing.TB, db *gorm.DB) {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// killRun runs rounds claims of batch rows on s, each while kill
// terminates the claimer's session after a random delay up to 1.5 times
// the duration of a claim that is not killed (the first, measured);
// session returns the id of the claimer's session before each round.
func killRun(t *testing.T, s *store, rounds, batch int,
	session func() (int64, error), kill func(id int64) error) *ledger {
	t.Helper()
	l := newLedger()
	call := l.next()
	start := time.Now()
	rows, err := s.Claim(context.Background(), faultReq(call, batch))
	maxDelay := time.Since(start) * 3 / 2
	l.record(call, rows, err, false)
	if err != nil || len(rows) != batch {
		t.Fatalf("first claim: %d rows, %v", len(rows), err)
	}
	t.Logf("a claim of %d rows takes %v; kills land within %v of the start", batch, maxDelay*2/3, maxDelay)
	var killed, ok, otherErr int
	for i := 0; i < rounds; i++ {
		// A killed session fails the first statement of the next use of
		// its pooled connection; ask again.
		id, err := session()
		for try := 0; err != nil && try < 3; try++ {
			id, err = session()
		}
		if err != nil {
			t.Fatalf("claimer session id: %v", err)
		}
		call := l.next()
		done := make(chan struct{})
		var rows []job
		go func() {
			defer close(done)
			rows, err = s.Claim(context.Background(), faultReq(call, batch))
		}()
		time.Sleep(rand.N(maxDelay))
		if kerr := kill(id); kerr != nil {
			t.Logf("kill %d: %v", id, kerr)
		} else {
			killed++
		}
		<-done
		l.record(call, rows, err, false)
		switch {
		case err == nil:
			ok++
		case errors.Is(err, dao.ErrUnavailable):
			if len(rows) > 0 {
				t.Errorf("call %d: %d rows returned with %v", call, len(rows), err)
			}
		default:
			otherErr++
			t.Errorf("call %d: unexpected error %v", call, err)
		}
	}
	t.Logf("calls %d, kills sent %d, succeeded %d, other errors %d", l.calls, killed, ok, otherErr)
	return l
}

// serializablePostgres opens the PostgreSQL test database with
// default_transaction_isolation=serializable, so that a store's fast path
// runs its claim in a READ COMMITTED transaction.
func serializablePostgres(t testing.TB) *gorm.DB {
	t.Helper()
	testdb.Postgres(t) // skip or fail like every Postgres test when unreachable
	dsn := testdb.PostgresDSN()
	switch {
	case strings.Contains(dsn, "://") && strings.Contains(dsn, "?"):
		dsn += "&default_transaction_isolation=serializable"
	case strings.Contains(dsn, "://"):
		dsn += "?default_transaction_isolation=serializable"
	default:
		dsn += " default_transaction_isolation=serializable"
	}
	db, err := gorm.Open(postgres.Open(dsn), testdb.Config())
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	return db
}

// A PostgreSQL claim whose backend is terminated while it runs, also while
// its 1,000 rows stream back, returns its rows only when its statement
// committed: no row is returned to two calls, and a row committed but
// returned to nobody belongs to a call that got ErrUnavailable (a lost
// acknowledgement).
func TestFaultPostgresTerminateDuringClaim(t *testing.T) {
	for _, variant := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"autocommit", testdb.Postgres}, {"transaction", serializablePostgres}} {
		t.Run(variant.name, func(t *testing.T) {
			admin := testdb.Postgres(t)
			db := variant.open(t)
			oneConn(t, db)
			s := newStore(t, db)
			if got := s.Capabilities().ClaimRoundTrips.Fixed; (got == 3) != (variant.name == "transaction") {
				t.Fatalf("%s variant claims in %d round trips", variant.name, got)
			}
			const batch = 1000
			rounds := faultRounds(20)
			seedJobs(t, s, batch*rounds/2)
			l := killRun(t, s, rounds, batch,
				func() (int64, error) {
					var pid int64
					err := db.Raw("SELECT pg_backend_pid()").Scan(&pid).Error
					return pid, err
				},
				func(pid int64) error { return admin.Exec("SELECT pg_terminate_backend(?)", pid).Error })
			c := l.settle(t, s)
			t.Logf("postgres terminate (%s): calls %d, rows returned %d; %v", variant.name, l.calls, l.returnedN, c)
			if c.duplicates != 0 || c.phantoms != 0 || c.stranded != 0 || c.unaccounted != 0 {
				t.Fatalf("contract broken: %v", c)
			}
		})
	}
}

// A MariaDB fast-path claim whose connection is killed (KILL CONNECTION)
// during its transaction returns rows only after its COMMIT succeeded.
func TestFaultMariaDBKillDuringClaim(t *testing.T) {
	admin := testdb.MySQL(t)
	db := testdb.MySQL(t)
	oneConn(t, db)
	s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyFastPath))
	const batch = 1000
	rounds := faultRounds(20)
	seedJobs(t, s, batch*rounds/2)
	l := killRun(t, s, rounds, batch,
		func() (int64, error) {
			var id int64
			err := db.Raw("SELECT CONNECTION_ID()").Scan(&id).Error
			return id, err
		},
		func(id int64) error { return admin.Exec("KILL CONNECTION " + strconv.FormatInt(id, 10)).Error })
	c := l.settle(t, s)
	t.Logf("mariadb kill: calls %d, rows returned %d; %v", l.calls, l.returnedN, c)
	if c.duplicates != 0 || c.phantoms != 0 || c.stranded != 0 || c.unaccounted != 0 {
		t.Fatalf("contract broken: %v", c)
	}
}

// sweep runs claimers goroutines of calls claims of up to limit rows on s,
// each with a context cancelled after a random delay, and checks the
// outcome: every error of a cancelled call is a context error, and no row
// is duplicated, phantom or stranded. allowed reports whether an error of
// a call whose context was not cancelled is acceptable.
func sweep(t *testing.T, s *store, l *ledger, window time.Duration, claimers, calls, limit int, allowed func(error) bool) tally {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var badCancelled, badOther []error
	for w := 0; w < claimers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls/claimers; i++ {
				call := l.next()
				ctx, cancel := context.WithCancel(context.Background())
				timer := time.AfterFunc(rand.N(window), cancel)
				rows, err := s.Claim(ctx, faultReq(call, limit))
				timer.Stop()
				cancelled := ctx.Err() != nil
				cancel()
				l.record(call, rows, err, cancelled)
				if err == nil {
					continue
				}
				mu.Lock()
				switch {
				case cancelled && !isCtxErr(err):
					badCancelled = append(badCancelled, err)
				case !cancelled && !allowed(err):
					badOther = append(badOther, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c := l.settle(t, s)
	var ctxErrs int
	for _, err := range l.errs {
		if isCtxErr(err) {
			ctxErrs++
		}
	}
	t.Logf("calls %d, cancelled %d (returning committed rows %d), context errors %d, other errors %d, rows returned %d; %v",
		l.calls, l.cancelled, l.cancelledRows, ctxErrs, len(l.errs)-ctxErrs, l.returnedN, c)
	for i, err := range badCancelled {
		if i < 5 {
			t.Errorf("cancelled call's error is not a context error: %v", err)
		}
	}
	if len(badCancelled) > 5 {
		t.Errorf("... %d such errors in all", len(badCancelled))
	}
	for i, err := range badOther {
		if i < 5 {
			t.Errorf("unexpected error: %v", err)
		}
	}
	if c.duplicates != 0 || c.phantoms != 0 || c.stranded != 0 || c.lostAcks != 0 || c.unaccounted != 0 {
		t.Errorf("contract broken: %v", c)
	}
	return c
}

// cancelWindow returns the range of the sweep's random cancellation
// delays: 0-5 ms, or twice the median duration of claims run by claimers
// concurrent uncancelled callers when that is longer (a loaded machine
// under -race), so that cancellations land before, during and after the
// claims' statements. The measuring claims are recorded in l.
func cancelWindow(t *testing.T, s *store, claimers, limit int, l *ledger) time.Duration {
	t.Helper()
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	for w := 0; w < claimers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				call := l.next()
				start := time.Now()
				rows, err := s.Claim(context.Background(), faultReq(call, limit))
				d := time.Since(start)
				l.record(call, rows, err, false)
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(took)
	window := max(5*time.Millisecond, 2*took[len(took)/2])
	t.Logf("median claim under %d claimers %v: cancellations within %v", claimers, took[len(took)/2], window)
	return window
}

// Fast-path claims cancelled at random moments: each row is returned to
// exactly one caller or stays claimable, and each cancelled call's error
// is a context error.
func TestFastPathCancellationSweep(t *testing.T) {
	calls := faultRounds(800)
	stores := fastStores()
	stores["postgres-transaction"] = func(t *testing.T) *store { return newStore(t, serializablePostgres(t)) }
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			seedJobs(t, s, calls*3)
			l := newLedger()
			window := cancelWindow(t, s, 8, 5, l)
			sweep(t, s, l, window, 8, calls, 5, func(error) bool { return false })
		})
	}
}

// holdCandidates opens a transaction at isolation level iso on a
// connection of db that the store does not use, and stays idle in it
// until release, holding: row locks on the first held pending rows of
// table in claim order (SELECT ... WHERE id IN (...) FOR UPDATE), and the
// locks of a locking read of the rows in status 'processing', the status
// claims write. Under READ COMMITTED that read locks no gap; under
// REPEATABLE READ on MariaDB it takes next-key locks on the status index
// where claimed rows' entries go, so a claim's UPDATE waits on them.
func holdCandidates(t *testing.T, db *gorm.DB, table, iso string, held int) (ids []int64, release func()) {
	t.Helper()
	ctx := context.Background()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mysql := db.Dialector.Name() == "mysql"
	q := func(s string) string {
		if mysql {
			return strings.ReplaceAll(s, `"`, "`")
		}
		return s
	}
	fail := func(err error) {
		t.Helper()
		conn.Close()
		t.Fatal(err)
	}
	ids = pluck(t, conn, q(`SELECT id FROM "`+table+`" WHERE status = 'pending' ORDER BY priority, id LIMIT `+strconv.Itoa(held)))
	if mysql {
		_, err = conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL "+iso)
		if err == nil {
			_, err = conn.ExecContext(ctx, "START TRANSACTION")
		}
	} else {
		_, err = conn.ExecContext(ctx, "BEGIN ISOLATION LEVEL "+iso)
	}
	if err != nil {
		fail(err)
	}
	in := make([]string, len(ids))
	for i, id := range ids {
		in[i] = strconv.FormatInt(id, 10)
	}
	if got := pluck(t, conn, q(`SELECT id FROM "`+table+`" WHERE id IN (`+strings.Join(in, ",")+`) FOR UPDATE`)); len(got) != len(ids) {
		fail(fmt.Errorf("locked %d rows of %d", len(got), len(ids)))
	}
	pluck(t, conn, q(`SELECT id FROM "`+table+`" WHERE status = 'processing' FOR UPDATE`))
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Errorf("ROLLBACK: %v", err)
			}
			conn.Close()
		})
	}
	t.Cleanup(release)
	return ids, release
}

func pluck(t *testing.T, conn *sql.Conn, query string) []int64 {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// With another session idle in a transaction that holds candidate rows
// (READ COMMITTED and REPEATABLE READ), fast-path claims cancelled at
// random moments still return each row to one caller at most, never a
// held row, and every cancelled call's error is a context error. On
// MariaDB a REPEATABLE READ holder's next-key locks make the claim's
// UPDATE wait; the store's lock-wait limit ends that wait with ErrBusy and
// nothing claimed.
func TestFastPathHeldCandidatesCancelled(t *testing.T) {
	for _, iso := range []string{"READ COMMITTED", "REPEATABLE READ"} {
		for _, name := range []string{"postgres", "mysql"} {
			t.Run(name+"/"+strings.ReplaceAll(iso, " ", "_"), func(t *testing.T) {
				var db, other *gorm.DB
				var opts []sqlstore.Option
				if name == "postgres" {
					db, other = testdb.Postgres(t), testdb.Postgres(t)
				} else {
					db, other = testdb.MySQL(t), testdb.MySQL(t)
					opts = append(opts, sqlstore.WithStrategy(dao.StrategyFastPath))
				}
				s := newStore(t, db, append(opts, sqlstore.WithLockWaitLimit(time.Second))...)
				// Behind a MariaDB REPEATABLE READ holder every call waits
				// out the lock-wait limit (1 s): keep the count small.
				calls := 48
				seedJobs(t, s, 1000)
				l := newLedger()
				window := cancelWindow(t, s, 8, 5, l)
				held, release := holdCandidates(t, other, s.TableName(), iso, 20)
				busy := func(err error) bool { return errors.Is(err, dao.ErrBusy) }
				sweep(t, s, l, window, 8, calls, 5, busy)
				release()
				for _, id := range held {
					if len(l.returned[id]) > 0 {
						t.Errorf("row %d claimed while another transaction held it", id)
					}
				}
			})
		}
	}
}

// A MariaDB fast-path claim behind a REPEATABLE READ transaction that
// holds next-key locks on the claim's index waits no longer than the
// store's lock-wait limit: it returns ErrBusy with no rows, and nothing
// is claimed. (The holder is released after 20 s whatever happens, so a
// claim that waits for the holder's whole life returns rows instead.)
func TestMariaDBFastPathBoundedBehindRepeatableRead(t *testing.T) {
	db := testdb.MySQL(t)
	s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyFastPath), sqlstore.WithLockWaitLimit(time.Second))
	seedJobs(t, s, 50)
	_, release := holdCandidates(t, testdb.MySQL(t), s.TableName(), "REPEATABLE READ", 5)
	watchdog := time.AfterFunc(20*time.Second, release)
	defer watchdog.Stop()
	rows, err := s.Claim(context.Background(), faultReq(1, 10))
	release()
	if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) || len(rows) != 0 {
		t.Fatalf("claim behind a REPEATABLE READ holder: %d rows, %v; want no rows and ErrBusy", len(rows), err)
	}
	if n, err := s.Count(context.Background(), dao.Eq("status", "pending")); err != nil || n != 50 {
		t.Fatalf("%d rows pending, %v; want all 50", n, err)
	}
	t.Logf("claim behind the holder: %v", err)
}

// A MariaDB fast-path claim behind a REPEATABLE READ holder's next-key
// locks returns at its caller's deadline, not at the store's lock-wait
// limit: the UPDATE waiting for the gap locks is ended by KILL QUERY, its
// transaction rolled back, and nothing is claimed. Before, the fast path
// ran without the interrupt and the claim waited out the limit (10 s).
func TestMariaDBFastPathInterruptedAtDeadline(t *testing.T) {
	db := testdb.MySQL(t)
	s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyFastPath), sqlstore.WithLockWaitLimit(10*time.Second))
	seedJobs(t, s, 50)
	_, release := holdCandidates(t, testdb.MySQL(t), s.TableName(), "REPEATABLE READ", 5)
	watchdog := time.AfterFunc(20*time.Second, release)
	defer watchdog.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	rows, err := s.Claim(ctx, faultReq(1, 10))
	took := time.Since(began)
	release()
	t.Logf("claim behind the holder returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) || len(rows) != 0 {
		t.Fatalf("claim behind a REPEATABLE READ holder: %d rows, %v; want none and context.DeadlineExceeded", len(rows), err)
	}
	if took > 2*time.Second {
		t.Fatalf("claim returned %v after it began; want about its 300 ms deadline", took)
	}
	if n, err := s.Count(context.Background(), dao.Eq("status", "pending")); err != nil || n != 50 {
		t.Fatalf("%d rows pending, %v; want all 50", n, err)
	}
}

// A PostgreSQL claim behind a table lock (another session's LOCK TABLE,
// as DDL takes): in the READ COMMITTED transaction variant the store's
// lock-wait limit (lock_timeout) ends the wait with ErrBusy and nothing
// claimed; the one statement in autocommit carries no server-side limit,
// so the claim timeout ends the call's wait with ErrUnavailable, and the
// statement, still queued on the server, either claims its rows once the
// lock is released (a lost acknowledgement, back after the lease) or
// does not.
func TestPostgresClaimBehindTableLock(t *testing.T) {
	for _, variant := range []struct {
		name string
		open func(testing.TB) *gorm.DB
		want error
	}{{"transaction", serializablePostgres, dao.ErrBusy}, {"autocommit", testdb.Postgres, dao.ErrUnavailable}} {
		t.Run(variant.name, func(t *testing.T) {
			db := variant.open(t)
			s := newStore(t, db, sqlstore.WithLockWaitLimit(500*time.Millisecond), sqlstore.WithClaimTimeout(3*time.Second))
			seedJobs(t, s, 10)
			holder := testdb.Postgres(t)
			tx := holder.Begin()
			if tx.Error != nil {
				t.Fatal(tx.Error)
			}
			if err := tx.Exec(`LOCK TABLE "` + s.TableName() + `" IN ACCESS EXCLUSIVE MODE`).Error; err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			rows, err := s.Claim(context.Background(), faultReq(1, 5))
			tx.Rollback()
			if !errors.Is(err, variant.want) || !dao.IsRetryable(err) || len(rows) != 0 {
				t.Fatalf("claim behind a table lock: %d rows, %v; want none and %v", len(rows), err, variant.want)
			}
			t.Logf("claim behind a table lock: %v", err)
			if variant.want == dao.ErrBusy {
				if n, err := s.Count(context.Background(), dao.Eq("status", "pending")); err != nil || n != 10 {
					t.Fatalf("%d rows pending, %v; want all 10", n, err)
				}
			}
		})
	}
}

package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/argerr"
)

// Limit limits the jobs of a queue across every client that runs it: at
// most Max running at once and at most Rate started per Period, in each
// partition of the queue's jobs (the whole queue, or the jobs of one kind
// and of the same values of some args fields). It is enforced in the
// claim: the claims of a limited queue are serialized across clients by
// a row lock on the queue's row in the limit table ([LimitTable]; a
// process mutex on the memory store), and each claim counts the jobs
// running in each partition — jobs stored available with a lease that
// ends after the claim's time, found through the slot rows the claims
// wrote ([LimitSlotTable]) — and takes no more than the room left.
// A client that dies holds its slots until the leases of its jobs end,
// never longer and never shorter. Jobs over the limit stay available,
// neither failed nor delayed. Every client that runs the queue must give
// it the same Limit. docs/jobs.md, "Global limits and rate limits", has
// the details and the cost.
type Limit struct {
	// Max is the most jobs of a partition running at once across every
	// client; 0: no concurrency limit.
	Max int
	// Rate is the most jobs of a partition started per Period across
	// every client, smoothed by a token bucket of Burst tokens refilled
	// at Rate per Period; 0: no rate limit.
	Rate int
	// Period is the rate's period; default 1 s.
	Period time.Duration
	// Burst is the token bucket's size: the most jobs of a partition
	// started at once after an idle spell; default Rate/10, at least 1.
	// Over any window of length d, at most Burst + Rate·d/Period jobs of
	// a partition start.
	Burst int
	// ByKind partitions the queue's jobs by kind: each kind has the
	// limit.
	ByKind bool
	// ByArgs partitions the queue's jobs by the values of these
	// top-level fields of their args' JSON (a missing field is null):
	// each combination of values has the limit.
	ByArgs []string
}

// LimitScan is the most available jobs of a partitioned limited queue
// one claim reads to find jobs of partitions with room: jobs behind
// LimitScan jobs of full partitions wait until those start.
const LimitScan = 500

// LimitTable returns the name of the table in which [Migrate] keeps the
// limited queues' lock rows and rate-limit token buckets for job table
// table: table + "_limits".
func LimitTable(table string) string { return table + "_limits" }

// check validates l and sets its defaults.
func (l *Limit) check() error {
	if l.Max < 0 || l.Rate < 0 || l.Period < 0 || l.Burst < 0 {
		return argerr.Errorf("limit: negative Max, Rate, Period or Burst")
	}
	if l.Max == 0 && l.Rate == 0 {
		return argerr.Errorf("limit: neither Max nor Rate set")
	}
	if l.Rate == 0 && (l.Burst > 0 || l.Period > 0) {
		return argerr.Errorf("limit: Burst or Period without Rate")
	}
	seen := map[string]bool{}
	for _, f := range l.ByArgs {
		if f == "" || seen[f] {
			return argerr.Errorf("limit: ByArgs field %q empty or repeated", f)
		}
		seen[f] = true
	}
	if l.Rate > 0 {
		if l.Period == 0 {
			l.Period = time.Second
		}
		if l.Burst == 0 {
			l.Burst = max(1, l.Rate/10)
		}
	}
	return nil
}

// partitioned reports whether l has partitions.
func (l *Limit) partitioned() bool { return l.ByKind || len(l.ByArgs) > 0 }

// maxPartLen is the longest partition key kept as it is; longer ones
// are replaced by their digest.
const maxPartLen = 191

// partition returns the key of row's partition: "" for an unpartitioned
// limit, else the JSON array of the kind (ByKind) and the ByArgs values,
// or "sha256:" and its digest when longer than maxPartLen.
func (l *Limit) partition(row *Row) string {
	if !l.partitioned() {
		return ""
	}
	var vals []json.RawMessage
	if l.ByKind {
		k, _ := json.Marshal(row.Kind)
		vals = append(vals, k)
	}
	if len(l.ByArgs) > 0 {
		var fields map[string]json.RawMessage
		_ = json.Unmarshal([]byte(row.EncodedArgs), &fields) // args that are not an object: every field null
		for _, f := range l.ByArgs {
			v, ok := fields[f]
			var b bytes.Buffer
			if !ok || json.Compact(&b, v) != nil {
				b.Reset()
				b.WriteString("null")
			}
			vals = append(vals, b.Bytes())
		}
	}
	key, _ := json.Marshal(vals)
	if len(key) > maxPartLen {
		sum := sha256.Sum256(key)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return string(key)
}

// limitRow is a row of the limit table: the lock row of a limited queue
// (Part ""), and the token bucket of a partition (of the whole queue for
// Part "").
type limitRow struct {
	Queue string `gorm:"primaryKey;size:128"`
	Part  string `gorm:"primaryKey;size:191"`
	// Claims counts the limited claims of the queue (the lock row's
	// write).
	Claims int64 `gorm:"not null"`
	// Tokens is the bucket's tokens at RefilledAt.
	Tokens     float64   `gorm:"not null"`
	RefilledAt time.Time `gorm:"not null"`
	// Settings is, on the lock row, the JSON of the Limit a client of the
	// queue last recorded (see [Client.Limits]; schema version 7); nil
	// before any did, and on the other rows.
	Settings *string
	// SettingsAt is when Settings was recorded, by the claim's clock.
	SettingsAt *time.Time
}

// bucketColumns are the columns of a token bucket in the limit table,
// named rather than *, so that a statement prepared before a migration
// adds columns still reads the same columns after it (PostgreSQL refuses
// a cached plan whose result changed).
var bucketColumns = []string{"queue", "part", "claims", "tokens", "refilled_at"}

// limitRowV4 is limitRow as schema version 4 creates it.
type limitRowV4 struct {
	Queue      string    `gorm:"primaryKey;size:128"`
	Part       string    `gorm:"primaryKey;size:191"`
	Claims     int64     `gorm:"not null"`
	Tokens     float64   `gorm:"not null"`
	RefilledAt time.Time `gorm:"not null"`
}

// LimitSlotTable returns the name of the table in which [Migrate] keeps
// the slot rows of the limited queues of job table table: table +
// "_slots". A slot row (queue, job id) is written by the claim that
// takes a job of a queue with a Max, in the claim's transaction, and
// deleted by a later claim once its job holds no lease any more; the job
// row stays the truth of whether the job runs.
func LimitSlotTable(table string) string { return table + "_slots" }

// limitSlot is a row of the slot table: a job claimed under its queue's
// Max that may still hold its lease, and the partition it counts in.
type limitSlot struct {
	Queue string `gorm:"primaryKey;size:128"`
	JobID int64  `gorm:"primaryKey;autoIncrement:false"`
	Part  string `gorm:"size:191;not null"`
}

// slotState is a slot row as a claim reads it: with whether its job
// runs.
type slotState struct {
	JobID int64
	Part  string
	Held  int // slotFree, slotLeased or slotRunning
}

// The states of a slot row's job at the claim's time.
const (
	// slotFree: the job holds no lease (it finished, was released or
	// rescued, or is gone): the row is deleted.
	slotFree = iota
	// slotLeased: the job is stored available with a lease that ended:
	// not running, but its owner may still renew it, so the row is kept.
	slotLeased
	// slotRunning: the job is stored available with a lease that ends
	// after the claim's time: it holds its slot.
	slotRunning
)

// limitReconcile is how often, at most, a client's limited claim reads
// every leased job of its queue (the backlog scan the slot table spares
// the other claims) and adds the slot rows missing: the leases taken
// without a slot row, by a client of a release before the slot table,
// hold their slots from the next reconcile on. A client's first limited
// claim reconciles.
const limitReconcile = time.Minute

// slotChunk is the most slot rows one statement deletes or writes (a
// written row binds three parameters; SQL Server binds at most 2,100).
const slotChunk = 500

// staleSlots is how many slot rows of jobs that hold no lease any more
// a claim lets accumulate before it deletes them: one DELETE every few
// claims rather than one each. They are read by each claim meanwhile,
// and not counted.
const staleSlots = 256

// limitTx is the state a limited claim reads and writes under its
// queue's lock: the job store, the token buckets and the slot rows.
type limitTx interface {
	jobs() dao.Store[Row]
	// claim claims jobs in the transaction, as the store's Claim does;
	// an error wrapping errors.ErrUnsupported (nothing sent) when the
	// store cannot claim inside a transaction.
	claim(ctx context.Context, req dao.ClaimRequest) ([]Row, error)
	buckets(ctx context.Context, parts []string) (map[string]limitRow, error)
	saveBuckets(ctx context.Context, rows []limitRow) error
	// slots returns the queue's slot rows with the state of their jobs
	// at now.
	slots(ctx context.Context, now time.Time) ([]slotState, error)
	// usage returns the queue's running jobs at now by partition, counted
	// from its slot rows as slots states them, and how many of its slot
	// rows are free (slotFree).
	usage(ctx context.Context, now time.Time) (map[string]int, int, error)
	// dropFree deletes the queue's free slot rows.
	dropFree(ctx context.Context) error
	// addSlots writes slot rows, replacing the partition of those the
	// queue has.
	addSlots(ctx context.Context, rows []limitSlot) error
	// dropSlots deletes the queue's slot rows of ids.
	dropSlots(ctx context.Context, ids []int64) error
	// usedBuckets returns at most n of the queue's token buckets of
	// partitions (Part not "") refilled after since, the latest first.
	usedBuckets(ctx context.Context, since time.Time, n int) ([]limitRow, error)
}

// limiter claims the jobs of one limited queue.
type limiter struct {
	c     *Client
	queue string
	lim   Limit
	// rateWake, when set, is called with how long until a token of a
	// partition that has jobs waiting comes.
	rateWake func(d time.Duration)
	// short is set when the last claim took fewer jobs than asked: the
	// queue may be at its limit, so the next claim looks without the
	// lock first.
	short atomic.Bool
	// reconciled is when, in Unix nanoseconds of the worker's clock, the
	// last reconcile of the slot rows ran (0: never).
	reconciled atomic.Int64
	// settings is the JSON of lim recorded in the queue's lock row
	// (see recordEvery).
	settings string
	// recorded is when, in Unix nanoseconds of the worker's clock, the
	// last claim recorded settings (0: never).
	recorded atomic.Int64
}

// claim claims up to req.Limit jobs of the queue within the limit, at
// now (the worker's clock): under the queue's lock it counts the running
// jobs by partition, reads candidates, chooses those with room (and
// tokens), claims them by id with req.Where checked again, and debits
// their buckets.
func (l *limiter) claim(ctx context.Context, now time.Time, req dao.ClaimRequest) ([]Row, error) {
	var rows []Row
	last := l.reconciled.Load()
	reconcile := l.lim.Max > 0 && (last == 0 || now.Sub(time.Unix(0, last)) >= limitReconcile || now.UnixNano() < last)
	rec := l.recorded.Load()
	record := rec == 0 || now.Sub(time.Unix(0, rec)) >= recordEvery || now.UnixNano() < rec
	run := func(tx limitTx) error {
		at, req, err := l.lockedAt(ctx, tx, now, req)
		if err != nil {
			return err
		}
		rows, _, err = l.claimIn(ctx, tx, at, req, false, reconcile)
		return err
	}
	var err error
	db, ok := gormOf(l.c.store)
	if ok && l.c.txb != nil && l.short.Load() {
		// After a short claim, a first pass without the lock (reads
		// only) finds out whether there is room: a queue at its limit
		// takes no write lock, which on SQLite would hold up every other
		// writer.
		dry := sqlLimitTx{tx: db.Session(&gorm.Session{NewDB: true}).WithContext(ctx), table: LimitTable(l.c.table), slotTable: LimitSlotTable(l.c.table), jobTable: l.c.table, queue: l.queue, store: l.c.store}
		_, n, dryErr := l.claimIn(ctx, dry, now, req, true, false)
		if dryErr != nil {
			return nil, fmt.Errorf("jobs: queue %s: limited claim: %w", l.queue, storeError(l.c.store, dryErr))
		}
		if n == 0 {
			if record {
				l.recordAlone(ctx, db, now)
			}
			return nil, nil
		}
	}
	if ok && l.c.txb != nil {
		err = l.inSQL(ctx, db, now, record, l.lim.Max > 0 && l.lim.Rate == 0 && !reconcile, run)
	} else {
		err = l.inMemory(now, record, run)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: queue %s: limited claim: %w", l.queue, storeError(l.c.store, err))
	}
	l.short.Store(len(rows) < req.Limit)
	if reconcile {
		l.reconciled.Store(now.UnixNano())
	}
	if record {
		l.recorded.Store(now.UnixNano())
	}
	return rows, nil
}

// lockedAt returns the time of a rate-limited claim that holds its
// queue's lock, and req with its jobs' attempted_at set to it: the
// database's clock read in tx, after the lock was granted (one statement;
// none on SQLite, whose clock is the host's). The token
// buckets then refill by one clock in the order the claims took the
// lock: with now, the time each worker read by its own estimate of the
// database's clock before it waited for the lock, a client whose estimate
// ran ahead refilled a bucket early, and the starts recorded by several
// clients were closer together than the bucket let them happen. A queue
// without a rate, or a store without a database clock (memory), keeps
// now and req.
func (l *limiter) lockedAt(ctx context.Context, tx limitTx, now time.Time, req dao.ClaimRequest) (time.Time, dao.ClaimRequest, error) {
	st := tx.jobs()
	clock, ok := st.(dao.Clock)
	if l.lim.Rate == 0 || !ok || !st.Capabilities().DatabaseClock {
		return now, req, nil
	}
	t, err := clock.Now(ctx)
	if err != nil {
		return now, req, fmt.Errorf("read the database's clock: %w", err)
	}
	if _, ok := req.Set[ColAttemptedAt]; ok {
		req.Set = maps.Clone(req.Set)
		req.Set[ColAttemptedAt] = t
	}
	return t, req, nil
}

// claimIn is claim's work in tx; it returns the rows claimed and how
// many it chose. With dry it only chooses, writing nothing; with
// reconcile it reconciles the slot rows (see countRunning).
func (l *limiter) claimIn(ctx context.Context, tx limitTx, now time.Time, req dao.ClaimRequest, dry, reconcile bool) ([]Row, int, error) {
	st := tx.jobs()
	running := map[string]int{}
	if l.lim.Max > 0 {
		var err error
		if running, err = l.countRunning(ctx, tx, now, dry, reconcile); err != nil {
			return nil, 0, err
		}
		if !l.lim.partitioned() && running[""] >= l.lim.Max {
			return nil, 0, nil
		}
	}
	if !dry && !l.lim.partitioned() && l.lim.Rate == 0 {
		// The whole queue in one partition and no tokens to count: the
		// room left is all there is to choose, and the jobs are claimed
		// in one operation of the store inside the transaction.
		one := req
		if l.lim.Max > 0 {
			one.Limit = min(one.Limit, l.lim.Max-running[""])
		}
		rows, err := tx.claim(ctx, one)
		if err == nil {
			return rows, len(rows), l.addSlots(ctx, tx, rows, nil)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return nil, 0, fmt.Errorf("claim jobs: %w", err)
		}
	}
	ch, err := l.choose(ctx, tx, now, req, running)
	if err != nil {
		return nil, 0, err
	}
	chosen, chosenPart, buckets := ch.ids, ch.part, ch.buckets
	if len(chosen) == 0 || dry {
		return nil, len(chosen), nil
	}
	byID := req
	byID.Where, byID.Limit = dao.And(req.Where, dao.In(ColID, chosen...)), len(chosen)
	rows, err := tx.claim(ctx, byID)
	if errors.Is(err, errors.ErrUnsupported) {
		rows, err = claimByUpdate(ctx, st, req, chosen)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("claim chosen jobs: %w", err)
	}
	if err := l.addSlots(ctx, tx, rows, chosenPart); err != nil {
		return nil, 0, err
	}
	if buckets != nil {
		// A chosen job another writer took meanwhile (none under the
		// lock, save a rescue) gives its token back.
		got := make(map[int64]bool, len(rows))
		for i := range rows {
			got[rows[i].ID] = true
		}
		for id, p := range chosenPart {
			if !got[id] {
				b := buckets[p]
				b.Tokens++
				buckets[p] = b
			}
		}
		save := make([]limitRow, 0, len(buckets))
		for _, b := range buckets {
			save = append(save, b)
		}
		if err := tx.saveBuckets(ctx, save); err != nil {
			return nil, 0, fmt.Errorf("write token buckets: %w", err)
		}
	}
	return rows, len(chosen), nil
}

// choice is the jobs a limited claim chose: their ids in the claim's
// order, the partition of each, and the token buckets with their tokens
// debited (nil without a rate).
type choice struct {
	ids     []any
	part    map[int64]string
	buckets map[string]limitRow
}

// choose reads the queue's candidates in the claim's order and chooses
// up to req.Limit of them whose partitions have room (running, by
// partition, counts the jobs running) and tokens. A partitioned limit
// first reads twice req.Limit candidates, and all LimitScan of them only
// when those were not enough because their partitions were full or out
// of tokens: a queue whose partitions have room reads no more than it
// takes.
func (l *limiter) choose(ctx context.Context, tx limitTx, now time.Time, req dao.ClaimRequest, running map[string]int) (choice, error) {
	scan := req.Limit
	if l.lim.partitioned() {
		scan = min(2*req.Limit, LimitScan)
	}
	for {
		cands, err := tx.jobs().Find(ctx, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: scan})
		if err != nil {
			return choice{}, fmt.Errorf("read candidates: %w", err)
		}
		ch, tokenWait, err := l.chooseFrom(ctx, tx, now, req.Limit, cands, maps.Clone(running))
		if err != nil {
			return choice{}, err
		}
		if len(ch.ids) < req.Limit && len(cands) == scan && scan < LimitScan && l.lim.partitioned() {
			scan = LimitScan
			continue
		}
		if tokenWait > 0 && l.rateWake != nil {
			l.rateWake(tokenWait)
		}
		return ch, nil
	}
}

// chooseFrom chooses up to limit of cands, in their order, whose
// partitions have room and tokens, counting them in running; it returns
// the choice and, when a partition was out of tokens, how long until a
// quarter of its bucket (at most the jobs still asked for) has come.
func (l *limiter) chooseFrom(ctx context.Context, tx limitTx, now time.Time, limit int, cands []Row, running map[string]int) (choice, time.Duration, error) {
	parts := make([]string, len(cands))
	for i := range cands {
		parts[i] = l.lim.partition(&cands[i])
	}
	ch := choice{part: map[int64]string{}}
	if l.lim.Rate > 0 && len(cands) > 0 {
		uniq := slices.Compact(slices.Sorted(slices.Values(parts)))
		var err error
		if ch.buckets, err = tx.buckets(ctx, uniq); err != nil {
			return choice{}, 0, fmt.Errorf("read token buckets: %w", err)
		}
		for _, p := range uniq {
			ch.buckets[p] = l.refill(ch.buckets[p], p, now)
		}
	}
	var tokenWait time.Duration
	for i := range cands {
		if len(ch.ids) == limit {
			break
		}
		p := parts[i]
		if l.lim.Max > 0 && running[p] >= l.lim.Max {
			continue
		}
		if ch.buckets != nil {
			b := ch.buckets[p]
			if b.Tokens < 1 {
				// Wake when a quarter of the bucket (at most the jobs still
				// asked for) has come, not at each token: one claim per
				// token would put a locked transaction per job start in
				// the way of the rate.
				need := float64(min(max(1, l.lim.Burst/4), limit-len(ch.ids)))
				w := time.Duration((need - b.Tokens) * float64(l.lim.Period) / float64(l.lim.Rate))
				if tokenWait == 0 || w < tokenWait {
					tokenWait = w
				}
				continue
			}
			b.Tokens--
			ch.buckets[p] = b
		}
		running[p]++
		ch.ids = append(ch.ids, cands[i].ID)
		ch.part[cands[i].ID] = p
	}
	return ch, tokenWait, nil
}

// claimByUpdate claims the chosen jobs ids with an UPDATE that checks
// req.Where again and a read of the rows it wrote, for a store that
// cannot claim inside a transaction.
func claimByUpdate(ctx context.Context, st dao.Store[Row], req dao.ClaimRequest, ids []any) ([]Row, error) {
	if _, err := st.Update(ctx, dao.And(req.Where, dao.In(ColID, ids...)), req.Set); err != nil {
		return nil, err
	}
	rows, err := st.Find(ctx, dao.Query{
		Where:   dao.And(dao.In(ColID, ids...), dao.Eq(ColLeaseOwner, req.Set[ColLeaseOwner])),
		OrderBy: req.OrderBy,
	})
	if err != nil {
		return nil, fmt.Errorf("read claimed jobs: %w", err)
	}
	return rows, nil
}

// addSlots writes the slot rows of the claimed jobs rows of a queue with
// a Max, each in its partition in part (nil: the whole queue's).
func (l *limiter) addSlots(ctx context.Context, tx limitTx, rows []Row, part map[int64]string) error {
	if l.lim.Max == 0 || len(rows) == 0 {
		return nil
	}
	slots := make([]limitSlot, len(rows))
	for i := range rows {
		slots[i] = limitSlot{Queue: l.queue, JobID: rows[i].ID, Part: part[rows[i].ID]}
	}
	if err := tx.addSlots(ctx, slots); err != nil {
		return fmt.Errorf("write slot rows: %w", err)
	}
	return nil
}

// countRunning returns the queue's running jobs by partition at now:
// the jobs of its slot rows that are stored available with a lease that
// ends after now. The slot rows are read with their jobs, joined by
// primary key, instead of the queue's leased jobs, which no index
// separates from its waiting ones (a claim writes no indexed column, so
// that it stays a HOT update on PostgreSQL). The slot rows whose jobs
// hold no lease any more (finished, released, rescued) are not counted,
// and are deleted once there are staleSlots of them; one whose lease
// ended is kept but not counted, since a client that is only slow may
// still renew it with the same owner token (a claim that takes the job
// again keeps the row). With reconcile it reads the queue's leased
// jobs instead, counts them, and adds the slot rows missing (and
// rewrites those of another partition). With dry it writes nothing.
func (l *limiter) countRunning(ctx context.Context, tx limitTx, now time.Time, dry, reconcile bool) (map[string]int, error) {
	if !reconcile || dry {
		running, free, err := tx.usage(ctx, now)
		if err != nil {
			return nil, fmt.Errorf("count slot rows: %w", err)
		}
		if !dry && free >= staleSlots {
			if err := tx.dropFree(ctx); err != nil {
				return nil, fmt.Errorf("delete slot rows: %w", err)
			}
		}
		return running, nil
	}
	slots, err := tx.slots(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("read slot rows: %w", err)
	}
	held, err := tx.jobs().Find(ctx, dao.Query{Where: dao.And(
		dao.Eq(ColState, string(StateAvailable)), dao.Eq(ColQueue, l.queue), dao.Ne(ColLeaseOwner, ""),
	)})
	if err != nil {
		return nil, fmt.Errorf("read leased jobs: %w", err)
	}
	running := map[string]int{}
	part := make(map[int64]string, len(slots))
	for _, s := range slots {
		part[s.JobID] = s.Part
	}
	var fix []limitSlot
	for i := range held {
		p := l.lim.partition(&held[i])
		if u := held[i].LeaseUntil; u != nil && u.After(now) {
			running[p]++
		}
		if q, ok := part[held[i].ID]; !ok || q != p {
			fix = append(fix, limitSlot{Queue: l.queue, JobID: held[i].ID, Part: p})
		}
		delete(part, held[i].ID)
	}
	stale := slices.Collect(maps.Keys(part))
	for c := range slices.Chunk(stale, slotChunk) {
		if err := tx.dropSlots(ctx, c); err != nil {
			return nil, fmt.Errorf("delete slot rows: %w", err)
		}
	}
	for c := range slices.Chunk(fix, slotChunk) {
		if err := tx.addSlots(ctx, c); err != nil {
			return nil, fmt.Errorf("write slot rows: %w", err)
		}
	}
	return running, nil
}

// refill returns b refilled to now: Rate tokens per Period since its
// last refill, at most Burst; a partition without a bucket starts full.
func (l *limiter) refill(b limitRow, part string, now time.Time) limitRow {
	// The bucket refills to now in whole milliseconds, the precision of
	// refilled_at on MySQL and MariaDB (GORM's DATETIME(3)): refilling to
	// the nanosecond and storing the time truncated gave each saved bucket
	// the time truncated away again at its next refill, up to a millisecond
	// of tokens a claim (5% over the rate at 200 starts a second).
	now = now.Truncate(time.Millisecond)
	burst := float64(l.lim.Burst)
	if b.RefilledAt.IsZero() {
		return limitRow{Queue: l.queue, Part: part, Tokens: burst, RefilledAt: now}
	}
	if el := now.Sub(b.RefilledAt); el > 0 {
		b.Tokens = min(burst, b.Tokens+float64(el)*float64(l.lim.Rate)/float64(l.lim.Period))
		b.RefilledAt = now
	}
	b.Queue, b.Part = l.queue, part
	return b
}

// inSQL runs fn in one transaction on db that first locks the queue's
// row of the limit table (creating it when missing): PostgreSQL and
// MySQL/MariaDB row lock, SQLite's write lock (PostgreSQL manual,
// "Row-Level Locks"; MySQL manual, "Locking Reads"; SQLite, "File
// Locking And Concurrency"). MySQL and MariaDB run it in READ
// COMMITTED, so that each read sees the claims committed before the
// lock was granted. With record the lock's write also records the
// queue's Limit (l.settings) at now. With count, on PostgreSQL, the
// lock's statement also counts the queue's running jobs at now
// (lockCounting), which fn's first usage then returns.
func (l *limiter) inSQL(ctx context.Context, db *gorm.DB, now time.Time, record, count bool, fn func(limitTx) error) error {
	var opts []*sql.TxOptions
	var d dialects.Name
	if a, ok := l.c.store.(dao.Aser); ok && a.As(&d) && (d == dialects.MySQL || d == dialects.MariaDB) {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	lt := LimitTable(l.c.table)
	return db.Session(&gorm.Session{NewDB: true}).WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		ltx := sqlLimitTx{tx: tx, table: lt, slotTable: LimitSlotTable(l.c.table), jobTable: l.c.table, queue: l.queue, store: l.c.txb.WithTx(tx)}
		set := map[string]any{"claims": gorm.Expr("? + 1", clause.Column{Name: "claims"})}
		if record {
			set["settings"], set["settings_at"] = l.settings, now.UTC()
		}
		lock := func() (int64, error) {
			res := tx.Table(lt).Where("queue = ? AND part = ?", l.queue, "").UpdateColumns(set)
			return res.RowsAffected, res.Error
		}
		var n int64
		var err error
		if count && dialects.Family(d) == dialects.Postgres {
			n, ltx.counted, err = ltx.lockCounting(now, record, l.settings)
		} else {
			n, err = lock()
		}
		if err != nil {
			return fmt.Errorf("lock the queue's limit row: %w", err)
		}
		if n == 0 {
			row := limitRow{Queue: l.queue, Part: "", Tokens: float64(l.lim.Burst), RefilledAt: now.UTC()}
			if err := tx.Table(lt).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
				return fmt.Errorf("create the queue's limit row: %w", err)
			}
			if _, err := lock(); err != nil {
				return fmt.Errorf("lock the queue's limit row: %w", err)
			}
		}
		return fn(ltx)
	}, opts...)
}

// slotUsage is the usage of a queue's slots: its running jobs by
// partition, and how many of its slot rows are free.
type slotUsage struct {
	running map[string]int
	free    int
}

// lockCounting is the lock of inSQL on PostgreSQL (the UPDATE of the
// queue's lock row, with the settings when record) and the count of
// usage at now in one statement, a round trip fewer. A statement's reads
// see the snapshot taken when it began, before the lock was granted
// (PostgreSQL manual, "Read Committed Isolation Level"), so the count
// may miss claims committed while it waited: the statement also reads
// the lock row's claims counter in its snapshot, and the count is kept
// only when the counter the lock wrote is that one plus one, no claim of
// the queue having committed in between; otherwise (nil) usage counts
// again. Jobs finished in between make the count higher than it is,
// never lower. It returns the rows the lock updated (0: no lock row).
func (t sqlLimitTx) lockCounting(now time.Time, record bool, settings string) (int64, *slotUsage, error) {
	set, args := "claims = claims + 1", []any{clause.Table{Name: t.table}}
	if record {
		set += ", settings = ?, settings_at = ?"
		args = append(args, settings, now.UTC())
	}
	uq, uargs := t.usageSQL(now)
	args = append(args, t.queue, clause.Table{Name: t.table}, t.queue)
	args = append(args, uargs...)
	var rows []struct {
		Locked  int64
		Seen    int64
		Part    *string
		Running int
		Free    int
	}
	q := "WITH lk AS (UPDATE ? SET " + set + " WHERE queue = ? AND part = '' RETURNING claims)" +
		" SELECT lk.claims AS locked, (SELECT claims FROM ? WHERE queue = ? AND part = '') AS seen, u.part, u.running, u.free" +
		" FROM lk LEFT JOIN (" + uq + ") u ON TRUE"
	if err := t.tx.Raw(q, args...).Scan(&rows).Error; err != nil {
		return 0, nil, err
	}
	if len(rows) == 0 {
		return 0, nil, nil
	}
	if rows[0].Seen != rows[0].Locked-1 {
		return 1, nil, nil
	}
	usage := make([]usageRow, len(rows))
	for i, r := range rows {
		usage[i] = usageRow{Part: r.Part, Running: r.Running, Free: r.Free}
	}
	return 1, tally(usage), nil
}

// sqlLimitTx is a limitTx in a SQL transaction.
type sqlLimitTx struct {
	tx        *gorm.DB
	table     string
	slotTable string
	jobTable  string
	queue     string
	store     dao.Store[Row]
	// counted, when set, is the usage the lock's statement counted
	// (lockCounting), which usage returns.
	counted *slotUsage
}

func (t sqlLimitTx) jobs() dao.Store[Row] { return t.store }

func (t sqlLimitTx) claim(ctx context.Context, req dao.ClaimRequest) ([]Row, error) {
	c, ok := t.store.(interface {
		ClaimInTx(context.Context, dao.ClaimRequest) ([]Row, error)
	})
	if !ok {
		return nil, fmt.Errorf("%w: the job store claims in no transaction", errors.ErrUnsupported)
	}
	return c.ClaimInTx(ctx, req)
}

func (t sqlLimitTx) buckets(ctx context.Context, parts []string) (map[string]limitRow, error) {
	var rows []limitRow
	if err := t.tx.Table(t.table).Select(bucketColumns).Where("queue = ? AND part IN ?", t.queue, parts).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]limitRow, len(rows))
	for _, r := range rows {
		out[r.Part] = r
	}
	return out, nil
}

func (t sqlLimitTx) saveBuckets(ctx context.Context, rows []limitRow) error {
	if len(rows) == 0 {
		return nil
	}
	for i := range rows {
		rows[i].RefilledAt = rows[i].RefilledAt.UTC()
	}
	return t.tx.Table(t.table).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "queue"}, {Name: "part"}},
		DoUpdates: clause.AssignmentColumns([]string{"tokens", "refilled_at"}),
	}).Create(&rows).Error
}

func (t sqlLimitTx) slots(ctx context.Context, now time.Time) ([]slotState, error) {
	// One statement: the slot rows of the queue, each joined with its
	// job by primary key alone. The job's other conditions are in the
	// CASE, not in the join: in the join they let a planner without
	// statistics (a new table) read the job through the fetch index,
	// stepping over the queue's whole backlog for each slot row. The time
	// is bound in UTC, as the store binds every time (on SQLite, stored
	// as text that compares in time order).
	var out []slotState
	q := fmt.Sprintf("SELECT s.job_id, s.part, CASE WHEN %s THEN %d WHEN j.%s > ? THEN %d ELSE %d END AS held"+
		" FROM ? s LEFT JOIN ? j ON j.%s = s.job_id WHERE s.queue = ?",
		slotFreeSQL, slotFree, ColLeaseUntil, slotRunning, slotLeased, ColID)
	err := t.tx.Raw(q, string(StateAvailable), now.UTC(), clause.Table{Name: t.slotTable}, clause.Table{Name: t.jobTable}, t.queue).Scan(&out).Error
	return out, err
}

// slotFreeSQL is the condition of a free slot row s whose job is j (LEFT
// JOIN by primary key): no job, or one that is not of the queue's
// available jobs with a lease. It binds the available state.
var slotFreeSQL = fmt.Sprintf("j.%[1]s IS NULL OR j.%[2]s <> ? OR j.%[3]s <> s.queue OR j.%[4]s = ''",
	ColID, ColState, ColQueue, ColLeaseOwner)

func (t sqlLimitTx) usage(ctx context.Context, now time.Time) (map[string]int, int, error) {
	if t.counted != nil {
		return t.counted.running, t.counted.free, nil
	}
	var rows []usageRow
	q, args := t.usageSQL(now)
	if err := t.tx.Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, 0, err
	}
	u := tally(rows)
	return u.running, u.free, nil
}

// usageRow is a row of usageSQL's result: a partition's running jobs
// and free slot rows (Part nil: none, from lockCounting's outer join).
type usageRow struct {
	Part    *string
	Running int
	Free    int
}

// tally returns the usage of usageSQL's rows.
func tally(rows []usageRow) *slotUsage {
	u := &slotUsage{running: make(map[string]int, len(rows))}
	for _, r := range rows {
		if r.Part == nil {
			continue
		}
		if r.Running > 0 {
			u.running[*r.Part] = r.Running
		}
		u.free += r.Free
	}
	return u
}

// usageSQL returns the statement of usage at now and its arguments: a
// row a partition, the counts made by the server over the slot rows
// joined with their jobs by primary key (see slots).
func (t sqlLimitTx) usageSQL(now time.Time) (string, []any) {
	q := "SELECT s.part, COUNT(CASE WHEN " + slotFreeSQL + " THEN NULL WHEN j." + ColLeaseUntil + " > ? THEN 1 END) AS running," +
		" COUNT(CASE WHEN " + slotFreeSQL + " THEN 1 END) AS free" +
		" FROM ? s LEFT JOIN ? j ON j." + ColID + " = s.job_id WHERE s.queue = ? GROUP BY s.part"
	avail := string(StateAvailable)
	return q, []any{avail, now.UTC(), avail, clause.Table{Name: t.slotTable}, clause.Table{Name: t.jobTable}, t.queue}
}

// dropFree deletes the slot rows that slotFreeSQL calls free: it reads
// their job ids through the join by primary key that slots and usage
// use, then deletes them by id (dropSlots, slotChunk at a time). One
// DELETE … WHERE NOT EXISTS reads the same rows, but on a job table
// without statistics (a backlog loaded into a new table) PostgreSQL
// planned it as a nested-loop anti join over the fetch index by queue
// alone, reading the queue's whole backlog for each slot row.
func (t sqlLimitTx) dropFree(ctx context.Context) error {
	var ids []int64
	q := fmt.Sprintf("SELECT s.job_id FROM ? s LEFT JOIN ? j ON j.%s = s.job_id WHERE s.queue = ? AND (%s)", ColID, slotFreeSQL)
	if err := t.tx.Raw(q, clause.Table{Name: t.slotTable}, clause.Table{Name: t.jobTable}, t.queue, string(StateAvailable)).Scan(&ids).Error; err != nil {
		return err
	}
	for c := range slices.Chunk(ids, slotChunk) {
		if err := t.dropSlots(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (t sqlLimitTx) addSlots(ctx context.Context, rows []limitSlot) error {
	return t.tx.Table(t.slotTable).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "queue"}, {Name: "job_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"part"}),
	}).Create(&rows).Error
}

func (t sqlLimitTx) dropSlots(ctx context.Context, ids []int64) error {
	return t.tx.Table(t.slotTable).Where("queue = ? AND job_id IN ?", t.queue, ids).Delete(&limitSlot{}).Error
}

// memLimits is the limit state of the limited queues on stores that are
// not on SQL (the memory store: every client of it is in this process),
// by job table and queue.
var memLimits = struct {
	sync.Mutex
	queues map[[2]string]*memLimitQueue
}{queues: map[[2]string]*memLimitQueue{}}

// memLimitQueue is one queue's lock, token buckets, slot rows and
// recorded Limit.
type memLimitQueue struct {
	mu      sync.Mutex
	buckets map[string]limitRow
	slots   map[int64]string // job id -> partition
	// settings is the JSON of the Limit last recorded, at settingsAt
	// ("" and zero: none).
	settings   string
	settingsAt time.Time
}

// inMemory runs fn under the queue's process mutex; with record it
// first records the queue's Limit (l.settings) at now.
func (l *limiter) inMemory(now time.Time, record bool, fn func(limitTx) error) error {
	key := [2]string{l.c.table, l.queue}
	memLimits.Lock()
	q := memLimits.queues[key]
	if q == nil {
		q = &memLimitQueue{buckets: map[string]limitRow{}, slots: map[int64]string{}}
		memLimits.queues[key] = q
	}
	memLimits.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if record {
		q.settings, q.settingsAt = l.settings, now
	}
	return fn(memLimitTx{q: q, queue: l.queue, store: l.c.store})
}

// memLimitTx is a limitTx under a memLimitQueue's mutex.
type memLimitTx struct {
	q     *memLimitQueue
	queue string
	store dao.Store[Row]
}

func (t memLimitTx) jobs() dao.Store[Row] { return t.store }

// claim runs the store's own claim, atomic on the memory store, under
// the queue's mutex.
func (t memLimitTx) claim(ctx context.Context, req dao.ClaimRequest) ([]Row, error) {
	return t.store.Claim(ctx, req)
}

func (t memLimitTx) buckets(_ context.Context, parts []string) (map[string]limitRow, error) {
	out := map[string]limitRow{}
	for _, p := range parts {
		if b, ok := t.q.buckets[p]; ok {
			out[p] = b
		}
	}
	return out, nil
}

func (t memLimitTx) saveBuckets(_ context.Context, rows []limitRow) error {
	for _, r := range rows {
		t.q.buckets[r.Part] = r
	}
	return nil
}

func (t memLimitTx) slots(ctx context.Context, now time.Time) ([]slotState, error) {
	ids := slices.Sorted(maps.Keys(t.q.slots))
	out := make([]slotState, len(ids))
	pos := make(map[int64]int, len(ids))
	for i, id := range ids {
		out[i] = slotState{JobID: id, Part: t.q.slots[id], Held: slotFree}
		pos[id] = i
	}
	for c := range slices.Chunk(ids, slotChunk) {
		in := make([]any, len(c))
		for i, id := range c {
			in[i] = id
		}
		rows, err := t.store.Find(ctx, dao.Query{Where: dao.And(dao.In(ColID, in...),
			dao.Eq(ColState, string(StateAvailable)), dao.Eq(ColQueue, t.queue), dao.Ne(ColLeaseOwner, ""))})
		if err != nil {
			return nil, err
		}
		for i := range rows {
			st := &out[pos[rows[i].ID]]
			st.Held = slotLeased
			if u := rows[i].LeaseUntil; u != nil && u.After(now) {
				st.Held = slotRunning
			}
		}
	}
	return out, nil
}

func (t memLimitTx) usage(ctx context.Context, now time.Time) (map[string]int, int, error) {
	slots, err := t.slots(ctx, now)
	if err != nil {
		return nil, 0, err
	}
	running, free := map[string]int{}, 0
	for _, s := range slots {
		switch s.Held {
		case slotRunning:
			running[s.Part]++
		case slotFree:
			free++
		}
	}
	return running, free, nil
}

func (t memLimitTx) dropFree(ctx context.Context) error {
	slots, err := t.slots(ctx, time.Time{})
	if err != nil {
		return err
	}
	for _, s := range slots {
		if s.Held == slotFree {
			delete(t.q.slots, s.JobID)
		}
	}
	return nil
}

func (t memLimitTx) addSlots(_ context.Context, rows []limitSlot) error {
	for _, r := range rows {
		t.q.slots[r.JobID] = r.Part
	}
	return nil
}

func (t memLimitTx) dropSlots(_ context.Context, ids []int64) error {
	for _, id := range ids {
		delete(t.q.slots, id)
	}
	return nil
}

// createLimitSlots creates the slot table of job table table (schema
// version 6). It depends on no other version's tables but the job
// table's.
func createLimitSlots(db *gorm.DB, table string, _ dialects.Name) error {
	return autoMigrate(db, LimitSlotTable(table), &limitSlot{})
}

// createLimits creates the limit table of job table table (schema
// version 4).
func createLimits(db *gorm.DB, table string, _ dialects.Name) error {
	return autoMigrate(db, LimitTable(table), &limitRowV4{})
}

// createLimitSettings adds the columns of the recorded Limit, settings
// and settings_at, to the limit table of job table table (schema version
// 7).
func createLimitSettings(db *gorm.DB, table string, _ dialects.Name) error {
	return autoMigrate(db, LimitTable(table), &limitRow{})
}

// limitedClaim returns the dispatch worker settings of queue name with
// limit lim (nil: unlimited, the worker's own claim): its claim, its
// Written callback — which for a limited queue also wakes the queue, so
// that a slot freed in this client is taken at once (slots freed by
// other clients are seen at the next tick) — and bind, to be called with
// the worker once built (the wake-ups need it).
func (c *Client) limitedClaim(name string, lim *Limit) (claim func(context.Context, time.Time, dao.ClaimRequest) ([]Row, error), written func(*dispatch.Job[Row], dao.Set), bind func(*dispatch.Worker[Row])) {
	if lim == nil {
		return nil, c.written, func(*dispatch.Worker[Row]) {}
	}
	var w *dispatch.Worker[Row]
	var timerMu sync.Mutex
	var timer *time.Timer
	l := &limiter{c: c, queue: name, lim: *lim, settings: encodeLimit(*lim), rateWake: func(d time.Duration) {
		// One wake-up pending at a time: the claim it causes sets the
		// next.
		timerMu.Lock()
		defer timerMu.Unlock()
		if timer == nil {
			timer = time.AfterFunc(d, func() {
				timerMu.Lock()
				timer = nil
				timerMu.Unlock()
				w.Wake()
			})
		}
	}}
	written = func(j *dispatch.Job[Row], set dao.Set) {
		c.written(j, set)
		w.Wake()
	}
	return l.claim, written, func(worker *dispatch.Worker[Row]) { w = worker }
}

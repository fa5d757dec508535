package jobs

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DefaultSignalInterval is how often, when Config.SignalInterval is zero, a
// running client reads the job table's change signal on a backend without
// notifications (MySQL/MariaDB, SQLite, SQL Server, CockroachDB): one
// SELECT MAX(id) per interval per client, 40 queries per second at 25 ms,
// so that a job another process inserts starts about half an interval
// after its commit on average.
const DefaultSignalInterval = 25 * time.Millisecond

// DefaultPollInterval is DefaultSignalInterval, the default period of the
// change signal; it is not the default of Config.PollInterval, the claim
// period (dispatch.PollIntervalFor).
//
// Deprecated: use DefaultSignalInterval.
const DefaultPollInterval = DefaultSignalInterval

// signalSpan is the most ids, between two reads of the signal, whose
// queues a client running several queues reads to wake only those; past
// it (a bulk insert) it wakes every queue without reading.
const signalSpan = 1000

// signalTimeout bounds one read of the signal.
const signalTimeout = 10 * time.Second

// The change signal.
//
// A backend without notifications tells a client of another process's
// insert through the job table itself: the client reads the table's
// highest id every poll interval, and a higher id than at the last read
// means jobs were inserted; it wakes its queues then. The statement is
// "SELECT MAX(id) FROM <table>" on the primary key:
//
//   - InnoDB (MySQL/MariaDB) answers it from the end of the clustered
//     index without reading rows ("Select tables optimized away": MySQL
//     manual, "Optimizing SELECT Statements", min/max on an index; the
//     same optimization in MariaDB's "MIN/MAX optimization").
//   - SQLite answers it with one descent of the table's B-tree (SQLite
//     documentation, "The SQLite Query Optimizer Overview", section
//     "The MIN/MAX optimization"), in a read transaction that in WAL mode
//     blocks no writer.
//
// Other signals were weighed and not taken:
//
//   - SQLite's PRAGMA data_version (SQLite documentation, "Pragma
//     statements", data_version) changes when any other connection
//     commits, claims and outcome writes included, so a busy neighbour
//     wakes an idle queue at every commit; and it must be read on one
//     connection held for good, which a pool of one connection cannot
//     spare.
//   - A counter row per queue, bumped by each insert, would be read as
//     cheaply and name the queue, but every insert of a queue would update
//     one row: on InnoDB inserts of a queue would queue behind its row
//     lock until commit, and SQLite writes one more page per insert.
//
// The highest id names no queue: a client running one queue wakes it; one
// running several reads the queues of the ids that arrived (at most
// signalSpan of them, by primary key) and wakes those.
//
// A limit, documented in docs/jobs.md: InnoDB hands out auto-increment ids
// at insert, not at commit, so a job whose transaction commits after that
// of a job with a higher id, already seen, wakes nothing; a queue finds it
// at its next claim (another wake-up or its tick). SQLite commits one
// writer at a time, in id order. The signal reads committed rows only, so
// a job inserted in a caller's transaction is signalled when that commits.

// pollSignal reads the change signal of c's job table every signal
// interval and wakes the queues that got jobs, until ctx ends. It returns
// at once when the signal interval is negative or the store is not on SQL. After
// its first read it wakes every queue once, so that a job committed
// between the queues' first claims and that read is not left for the tick.
func (c *Client) pollSignal(ctx context.Context) {
	interval := c.cfg.SignalInterval
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = DefaultSignalInterval
	}
	db, ok := gormOf(c.store)
	if !ok {
		return
	}
	session := func() (*gorm.DB, context.CancelFunc) {
		rctx, cancel := context.WithTimeout(ctx, signalTimeout)
		return db.Session(&gorm.Session{NewDB: true, Context: rctx}), cancel
	}
	id := clause.Column{Name: ColID}
	maxID := func() (int64, error) {
		d, cancel := session()
		defer cancel()
		var n sql.NullInt64
		err := d.Raw("SELECT MAX(?) FROM ?", id, clause.Table{Name: c.table}).Row().Scan(&n)
		return n.Int64, err
	}
	// arrived returns the queues of the available jobs with ids in
	// (from, to].
	arrived := func(from, to int64) ([]string, error) {
		d, cancel := session()
		defer cancel()
		var queues []string
		err := d.Table(c.table).Distinct(ColQueue).
			Where("? > ? AND ? <= ? AND ? = ?", id, from, id, to, clause.Column{Name: ColState}, string(StateAvailable)).
			Pluck(ColQueue, &queues).Error
		return queues, err
	}
	last, failing := int64(0), false
	wait := interval
	for first := true; ; {
		top, err := maxID()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				c.log.Warn("reading the job table's change signal failed; queues poll at each tick until it resumes", "err", err)
			}
			failing = true
			wait = min(2*wait, max(c.cfg.PollInterval, interval))
		default:
			if failing {
				c.log.Info("reading the job table's change signal resumed")
			}
			failing, wait = false, interval
			switch {
			case first:
				c.wake("")
				first = false
			case top > last:
				c.wakeArrived(ctx, last, top, arrived)
			}
			last = top // lower after a delete of the newest jobs
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// wakeArrived wakes the queues of c that jobs with ids in (from, to] went
// to: with one queue that queue, with several the queues arrived reads,
// or every queue when the span is wider than signalSpan or the read
// fails.
func (c *Client) wakeArrived(ctx context.Context, from, to int64, arrived func(from, to int64) ([]string, error)) {
	if c.queueCount() <= 1 || to-from > signalSpan {
		c.wake("")
		return
	}
	queues, err := arrived(from, to)
	if err != nil {
		if ctx.Err() == nil {
			c.wake("")
		}
		return
	}
	for _, q := range queues {
		c.wake(q)
	}
}

// localKey names a job table for the in-process wake-ups: its backend
// and name, and for a SQL store the *gorm.Config its pool was opened
// with, so that stores over one pool share a key and another pool (as
// another process would) does not.
type localKey struct {
	backend, table string
	pool           *gorm.Config
}

// local holds, by job table, the clients of this process that are
// running queues, so that an insert through one client wakes the queues
// of the others at once (the memory store's only wake-up across clients,
// and a shortcut past the change signal and notifications elsewhere).
var local = struct {
	mu      sync.RWMutex
	clients map[localKey]map[*Client]bool
}{clients: map[localKey]map[*Client]bool{}}

// localKeyOf returns the in-process key of c's job table.
func (c *Client) localKeyOf() localKey {
	k := localKey{backend: c.store.Capabilities().Backend, table: c.table}
	if db, ok := gormOf(c.store); ok {
		k.pool = db.Config
	}
	return k
}

// joinLocal adds c to the clients woken by inserts of this process into
// its job table, and returns the function that removes it.
func (c *Client) joinLocal() (leave func()) {
	k := c.localKeyOf()
	local.mu.Lock()
	if local.clients[k] == nil {
		local.clients[k] = map[*Client]bool{}
	}
	local.clients[k][c] = true
	local.mu.Unlock()
	return func() {
		local.mu.Lock()
		delete(local.clients[k], c)
		if len(local.clients[k]) == 0 {
			delete(local.clients, k)
		}
		local.mu.Unlock()
	}
}

// wakeLocal wakes the queues named in queues of every other client of
// this process running on c's job table (an insert through c committed
// jobs available in them; c woke its own).
func (c *Client) wakeLocal(queues map[string]bool) {
	if len(queues) == 0 {
		return
	}
	k := c.localKeyOf()
	local.mu.RLock()
	defer local.mu.RUnlock()
	for o := range local.clients[k] {
		if o == c {
			continue
		}
		for q := range queues {
			o.wake(q)
		}
	}
}

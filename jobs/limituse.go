package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/internal/argerr"
)

// recordEvery is how often, at most, a client's limited claim of a
// queue records the client's Limit in the queue's lock row of the limit
// table; a client's first limited claim of a queue records it.
const recordEvery = time.Minute

// recordAlone records the queue's Limit (l.settings) at now in its lock
// row by a statement of its own, for a claim that took no lock (no room:
// see claim), so that a queue at its limit or idle is recorded once a
// minute too. A failure is logged, and the next claim records again.
func (l *limiter) recordAlone(ctx context.Context, db *gorm.DB, now time.Time) {
	err := db.Session(&gorm.Session{NewDB: true}).WithContext(ctx).Table(LimitTable(l.c.table)).
		Where("queue = ? AND part = ?", l.queue, "").
		UpdateColumns(map[string]any{"settings": l.settings, "settings_at": now.UTC()}).Error
	if err != nil {
		if ctx.Err() == nil {
			l.c.log.Warn("recording the queue's limit failed; the next claim records it", "queue", l.queue, "err", storeError(l.c.store, err))
		}
		return
	}
	l.recorded.Store(now.UnixNano())
}

// usedBucketScan is the most token buckets of partitions that
// [Client.Limits] reads per queue.
const usedBucketScan = 1000

// limitSettings is the JSON of a Limit recorded in the limit table.
type limitSettings struct {
	Max      int      `json:"max,omitempty"`
	Rate     int      `json:"rate,omitempty"`
	PeriodNS int64    `json:"period_ns,omitempty"`
	Burst    int      `json:"burst,omitempty"`
	ByKind   bool     `json:"by_kind,omitempty"`
	ByArgs   []string `json:"by_args,omitempty"`
}

// encodeLimit returns the JSON of l as the limit table records it.
func encodeLimit(l Limit) string {
	b, _ := json.Marshal(limitSettings{Max: l.Max, Rate: l.Rate, PeriodNS: int64(l.Period), Burst: l.Burst, ByKind: l.ByKind, ByArgs: l.ByArgs})
	return string(b)
}

// decodeLimit returns the Limit of recorded JSON s, nil when s is empty
// or unreadable.
func decodeLimit(s string) *Limit {
	var ls limitSettings
	if s == "" || json.Unmarshal([]byte(s), &ls) != nil {
		return nil
	}
	return &Limit{Max: ls.Max, Rate: ls.Rate, Period: time.Duration(ls.PeriodNS), Burst: ls.Burst, ByKind: ls.ByKind, ByArgs: ls.ByArgs}
}

// LimitParams selects what [Client.Limits] reads.
type LimitParams struct {
	// Queue, when set, reads this queue only.
	Queue string
	// Partitions is the most partitions listed per queue, the most
	// running first; default 20, at most [MaxListLimit].
	Partitions int
}

// LimitInfo is the state of one limited queue ([Client.Limits]).
type LimitInfo struct {
	// Queue is the queue's name.
	Queue string
	// Limit is the queue's Limit as a client of the queue last recorded
	// it, with its defaults (Period, Burst) set; nil when no client
	// recorded one (clients of a release before schema version 7).
	// Clients record their Limit at their first limited claim of the
	// queue and then once a minute: when clients give the queue
	// different limits, each enforces its own in its claims and this is
	// the last one recorded.
	Limit *Limit
	// RecordedAt is when Limit was recorded, by the recording claim's
	// clock; nil with Limit.
	RecordedAt *time.Time
	// Running is the queue's running jobs in every partition, counted
	// as a claim counts them: the jobs of the queue's slot rows
	// ([LimitSlotTable]) stored available with a lease that ends after
	// now. Slot rows are written only under a Max: a queue limited by
	// Rate alone has none, and Running 0.
	Running int
	// Partitions are the partitions in use, the most running first (then
	// the fewest whole tokens, then by key), at most
	// LimitParams.Partitions: a partition is in use when it has running
	// jobs or, under a known rate, a token bucket that is not full. An
	// unpartitioned queue has one, of key "", always listed.
	Partitions []LimitPartition
	// More is the number of partitions in use left out of Partitions.
	More int
}

// LimitPartition is the state of one partition of a limited queue.
type LimitPartition struct {
	// Key is the partition's key: "" for the whole queue, else the JSON
	// array of the job's kind (ByKind) and its ByArgs values, or
	// "sha256:" and the array's digest when it is longer than 191 bytes.
	Key string
	// Running is the partition's running jobs (see LimitInfo.Running).
	Running int
	// Tokens is the partition's token bucket refilled to now, as a claim
	// would refill it: a job of the partition starts only with a whole
	// token. Nil when no rate limit is known for the queue.
	Tokens *float64
}

// Limits returns the state of the limited queues of the job table, by
// queue name (of p.Queue only when set): each queue's recorded Limit,
// its running jobs in all and by partition, and its partitions' rate
// tokens at now (the database's clock). A queue is listed once a client
// claimed from it with a Limit, and stays listed, with its last recorded
// Limit, after its clients dropped the Limit. It takes no lock and
// writes nothing: per queue it reads the slot rows with their jobs (one
// statement, by primary key, as a claim does), the token buckets of the
// partitions with running jobs and, for a partitioned rate limit, up to
// 1000 token buckets refilled within a full bucket's refill time (a
// scan of the queue's rows of the limit table). Errors:
// dao.ErrInvalidArgument for an invalid queue name or p.Partitions out
// of range; the store's errors, mapped, among them a missing column on a
// job table not yet migrated to schema version 7.
func (c *Client) Limits(ctx context.Context, p LimitParams) ([]LimitInfo, error) {
	if p.Partitions < 0 || p.Partitions > MaxListLimit {
		return nil, fmt.Errorf("jobs: limits: %w", argerr.Errorf("partitions %d: use 0 to %d", p.Partitions, MaxListLimit))
	}
	if p.Queue != "" {
		if err := CheckQueue(p.Queue); err != nil {
			return nil, fmt.Errorf("jobs: limits: %w", err)
		}
	}
	most := cmp.Or(p.Partitions, 20)
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: limits: %w", err)
	}
	var out []LimitInfo
	if db, ok := gormOf(c.store); ok && c.txb != nil {
		out, err = c.sqlLimits(ctx, db, p.Queue, now, most)
	} else {
		out, err = c.memLimits(ctx, p.Queue, now, most)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: limits: %w", storeError(c.store, err))
	}
	return out, nil
}

// sqlLimits is Limits on a SQL store: the lock rows of the limit table
// name the limited queues and hold their recorded Limits.
func (c *Client) sqlLimits(ctx context.Context, db *gorm.DB, queue string, now time.Time, most int) ([]LimitInfo, error) {
	g := db.Session(&gorm.Session{NewDB: true}).WithContext(ctx)
	lt := LimitTable(c.table)
	q := g.Table(lt).Select(append(slices.Clip(bucketColumns), "settings", "settings_at")).Where("part = ?", "")
	if queue != "" {
		q = q.Where("queue = ?", queue)
	}
	var locks []limitRow
	if err := q.Order("queue").Find(&locks).Error; err != nil {
		return nil, fmt.Errorf("read %s: %w", lt, err)
	}
	out := make([]LimitInfo, 0, len(locks))
	for _, lock := range locks {
		info := LimitInfo{Queue: lock.Queue}
		if lock.Settings != nil {
			if info.Limit = decodeLimit(*lock.Settings); info.Limit != nil {
				info.RecordedAt = lock.SettingsAt
			}
		}
		tx := sqlLimitTx{tx: g, table: lt, slotTable: LimitSlotTable(c.table), jobTable: c.table, queue: lock.Queue, store: c.store}
		if err := limitUse(ctx, tx, &info, now, most); err != nil {
			return nil, fmt.Errorf("queue %s: %w", lock.Queue, err)
		}
		out = append(out, info)
	}
	return out, nil
}

// memLimits is Limits on the memory store: the limit state of this
// process.
func (c *Client) memLimits(ctx context.Context, queue string, now time.Time, most int) ([]LimitInfo, error) {
	memLimits.Lock()
	queues := map[string]*memLimitQueue{}
	for k, q := range memLimits.queues {
		if k[0] == c.table && (queue == "" || k[1] == queue) {
			queues[k[1]] = q
		}
	}
	memLimits.Unlock()
	out := make([]LimitInfo, 0, len(queues))
	for _, name := range slices.Sorted(maps.Keys(queues)) {
		q := queues[name]
		info, err := func() (LimitInfo, error) {
			q.mu.Lock()
			defer q.mu.Unlock()
			info := LimitInfo{Queue: name}
			if info.Limit = decodeLimit(q.settings); info.Limit != nil {
				at := q.settingsAt
				info.RecordedAt = &at
			}
			return info, limitUse(ctx, memLimitTx{q: q, queue: name, store: c.store}, &info, now, most)
		}()
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", name, err)
		}
		out = append(out, info)
	}
	return out, nil
}

// limitUse fills in info, whose Queue and Limit are set, from tx at now:
// the running jobs by partition, the tokens of the partitions in use,
// and at most most partitions.
func limitUse(ctx context.Context, tx limitTx, info *LimitInfo, now time.Time, most int) error {
	slots, err := tx.slots(ctx, now)
	if err != nil {
		return fmt.Errorf("read slot rows: %w", err)
	}
	running := map[string]int{}
	for _, s := range slots {
		if s.Held == slotRunning {
			running[s.Part]++
			info.Running++
		}
	}
	lim := info.Limit
	partitioned := lim != nil && lim.partitioned()
	if _, ok := running[""]; !ok && lim != nil && !partitioned {
		running[""] = 0 // the whole queue is listed
	}
	tokens := map[string]float64{}
	if lim != nil && lim.Rate > 0 && lim.Period > 0 && lim.Burst > 0 {
		l := limiter{queue: info.Queue, lim: *lim}
		parts := slices.Sorted(maps.Keys(running))
		if len(parts) > 0 {
			b, err := tx.buckets(ctx, parts)
			if err != nil {
				return fmt.Errorf("read token buckets: %w", err)
			}
			for _, p := range parts {
				tokens[p] = l.refill(b[p], p, now).Tokens
			}
		}
		if partitioned {
			full := time.Duration(float64(lim.Burst) * float64(lim.Period) / float64(lim.Rate))
			used, err := tx.usedBuckets(ctx, now.Add(-full), usedBucketScan)
			if err != nil {
				return fmt.Errorf("read token buckets: %w", err)
			}
			for _, b := range used {
				if _, ok := tokens[b.Part]; ok {
					continue
				}
				if t := l.refill(b, b.Part, now).Tokens; t < float64(lim.Burst) {
					tokens[b.Part] = t
				}
			}
		}
	}
	keys := map[string]bool{}
	for p, n := range running {
		if n > 0 || (lim != nil && !partitioned) {
			keys[p] = true
		}
	}
	for p := range tokens {
		keys[p] = true
	}
	parts := make([]LimitPartition, 0, len(keys))
	for p := range keys {
		lp := LimitPartition{Key: p, Running: running[p]}
		if t, ok := tokens[p]; ok {
			lp.Tokens = &t
		}
		parts = append(parts, lp)
	}
	tok := func(p LimitPartition) float64 {
		if p.Tokens == nil {
			return math.Inf(1)
		}
		return math.Floor(*p.Tokens)
	}
	slices.SortFunc(parts, func(a, b LimitPartition) int {
		return cmp.Or(cmp.Compare(b.Running, a.Running), cmp.Compare(tok(a), tok(b)), strings.Compare(a.Key, b.Key))
	})
	if len(parts) > most {
		info.More = len(parts) - most
		parts = parts[:most]
	}
	info.Partitions = parts
	return nil
}

func (t sqlLimitTx) usedBuckets(_ context.Context, since time.Time, n int) ([]limitRow, error) {
	var rows []limitRow
	err := t.tx.Table(t.table).Select(bucketColumns).Where("queue = ? AND part <> ? AND refilled_at > ?", t.queue, "", since.UTC()).
		Order("refilled_at DESC").Limit(n).Find(&rows).Error
	return rows, err
}

func (t memLimitTx) usedBuckets(_ context.Context, since time.Time, n int) ([]limitRow, error) {
	var rows []limitRow
	for _, b := range t.q.buckets {
		if b.Part != "" && b.RefilledAt.After(since) {
			rows = append(rows, b)
		}
	}
	slices.SortFunc(rows, func(a, b limitRow) int { return b.RefilledAt.Compare(a.RefilledAt) })
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows, nil
}

package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/argerr"
)

// periodicKeyPrefix prefixes the schedule key of a periodic job.
const periodicKeyPrefix = "jobs:"

// PeriodicJob inserts a job at every occurrence of a cron schedule, kept
// in the schedule table of package dispatch (Config.ScheduleStore) so that
// an occurrence is inserted once however many clients run, and after a
// restart or a leader change an occurrence that came meanwhile is
// inserted (once, dispatch's misfire policy). Each occurrence's job is
// unique in every state by the schedule's key and the occurrence's time:
// a fire that runs twice (its outcome write lost) inserts one job.
type PeriodicJob struct {
	// Key names the periodic job: 1 to 180 bytes, unique among the
	// client's periodic jobs; its schedule's key is "jobs:" + Key.
	Key string
	// Cron is the cron expression of the occurrences (see
	// dispatch.CheckCron), read in TimeZone (an IANA name; "" is UTC).
	Cron, TimeZone string
	// Construct returns the args of the job of one occurrence and its
	// insert options (nil for none; unique options are ignored; without
	// metadata the job gets [PeriodicMetadata]).
	Construct func() (Args, *InsertOpts)
	// RunOnStart also inserts a job when a client that lists the
	// periodic job starts (or adds it, [Client.AddPeriodic]): one job
	// before each occurrence however many clients start meanwhile (it is
	// unique by the schedule's key and the next occurrence's time), with
	// [PeriodicMetadata] whose Occurrence is that next occurrence and
	// whose Start is true.
	RunOnStart bool
}

// PeriodicMetadata is the metadata of a periodic job's job (unless its
// Construct gives metadata of its own): the periodic job's key and the
// occurrence the job is for.
type PeriodicMetadata struct {
	Periodic   string    `json:"periodic"`
	Occurrence time.Time `json:"occurrence"`
	// Start is true for the job a client inserted as it started
	// (RunOnStart), before the occurrence.
	Start bool `json:"start,omitempty"`
}

// checkKey validates p's key. Errors wrap dao.ErrInvalidArgument.
func (p *PeriodicJob) checkKey() error {
	if p.Key == "" || len(periodicKeyPrefix+p.Key) > dispatch.MaxKeyLen || strings.TrimSpace(p.Key) != p.Key || !utf8.ValidString(p.Key) || strings.IndexByte(p.Key, 0) >= 0 {
		return argerr.Errorf("periodic job key %q: use 1-%d bytes of UTF-8 without NUL or surrounding spaces", p.Key, dispatch.MaxKeyLen-len(periodicKeyPrefix))
	}
	return nil
}

// check validates p. Errors wrap dao.ErrInvalidArgument.
func (p *PeriodicJob) check() error {
	if err := p.checkKey(); err != nil {
		return err
	}
	if p.Construct == nil {
		return argerr.Errorf("periodic job %q has no Construct", p.Key)
	}
	if err := dispatch.CheckCron(p.Cron, p.TimeZone); err != nil {
		return fmt.Errorf("periodic job %q: %w", p.Key, err)
	}
	return nil
}

// periodicRunner fires a client's periodic jobs: those of
// Config.Periodic and those added since ([Client.AddPeriodic]).
type periodicRunner struct {
	c         *Client
	schedules *dispatch.Schedules
	sw        *dispatch.ScheduleWorker

	mu      sync.RWMutex
	byKey   map[string]*PeriodicJob // by schedule key
	keys    []any                   // the schedule keys, sorted
	started bool                    // run has recorded the schedules
}

// newPeriodicRunner checks the client's periodic jobs and builds what
// fires them. Errors wrap dao.ErrInvalidArgument.
func (c *Client) newPeriodicRunner() (*periodicRunner, error) {
	schedules, err := dispatch.NewSchedules(c.cfg.ScheduleStore, dispatch.SchedulesConfig{Now: c.cfg.Now})
	if err != nil {
		return nil, fmt.Errorf("periodic: %w", err)
	}
	p := &periodicRunner{c: c, schedules: schedules, byKey: map[string]*PeriodicJob{}}
	for i := range c.cfg.Periodic {
		if err := p.add(&c.cfg.Periodic[i]); err != nil {
			return nil, err
		}
	}
	// The client fires the schedules of its own periodic jobs only, and
	// leaves the others to the clients that list them; with none, it
	// claims nothing.
	sw, err := dispatch.NewScheduleWorker(c.cfg.ScheduleStore, p.fire, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		Due: func(time.Time) dao.Criteria {
			p.mu.RLock()
			defer p.mu.RUnlock()
			return dao.In(dispatch.ColKey, p.keys...)
		},
		Paused: func() bool {
			p.mu.RLock()
			defer p.mu.RUnlock()
			return len(p.keys) == 0
		},
		WorkerID:     c.cfg.WorkerID + "/periodic",
		PollInterval: c.cfg.PollInterval,
		Now:          c.cfg.Now,
		Logger:       c.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("periodic: %w", err)
	}
	p.sw = sw
	return p, nil
}

// add checks pj and adds it to the periodic jobs fired. Errors wrap
// dao.ErrInvalidArgument.
func (p *periodicRunner) add(pj *PeriodicJob) error {
	if err := pj.check(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	key := periodicKeyPrefix + pj.Key
	if p.byKey[key] != nil {
		return argerr.Errorf("periodic job key %q given twice", pj.Key)
	}
	p.byKey[key] = pj
	p.keys = anys(slices.Sorted(maps.Keys(p.byKey)))
	return nil
}

// remove removes periodic job key from those fired and reports whether
// it was there.
func (p *periodicRunner) remove(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKey[periodicKeyPrefix+key] == nil {
		return false
	}
	delete(p.byKey, periodicKeyPrefix+key)
	p.keys = anys(slices.Sorted(maps.Keys(p.byKey)))
	return true
}

// lookup returns the periodic job of schedule key, or nil.
func (p *periodicRunner) lookup(key string) *PeriodicJob {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.byKey[key]
}

// fire inserts the job of one occurrence of a schedule.
func (p *periodicRunner) fire(ctx context.Context, f dispatch.Fire) error {
	pj := p.lookup(f.Schedule.Key)
	if pj == nil {
		// Removed since the claim, or not claimed: the worker fires only
		// the keys of byKey.
		return fmt.Errorf("jobs: periodic: no periodic job %q in client %s", f.Schedule.Key, p.c.cfg.WorkerID)
	}
	return p.insert(ctx, pj, f.Schedule.NextFireAt, false)
}

// insert inserts the job of pj for occurrence at (start: the job of a
// client's start before that occurrence), unique by the schedule's key,
// the occurrence and start.
func (p *periodicRunner) insert(ctx context.Context, pj *PeriodicJob, at time.Time, start bool) error {
	args, opts := pj.Construct()
	var o InsertOpts
	if opts != nil {
		o = *opts
	}
	o.UniqueOpts = UniqueOpts{}
	what := "periodic:"
	if start {
		what = "periodic-start:"
	}
	sum := sha256.Sum256([]byte(what + p.c.table + ":" + periodicKeyPrefix + pj.Key + "@" + strconv.FormatInt(at.UnixMilli(), 10)))
	o.uniqueKey = hex.EncodeToString(sum[:])
	if o.Metadata == nil {
		o.Metadata, _ = json.Marshal(PeriodicMetadata{Periodic: pj.Key, Occurrence: at.UTC(), Start: start})
	}
	_, err := p.c.Insert(ctx, args, &o)
	return err
}

// record records pj's schedule (idempotently: an unchanged definition is
// left as it is) and, for RunOnStart, inserts its start job.
func (p *periodicRunner) record(ctx context.Context, pj *PeriodicJob) error {
	if _, err := p.schedules.Upsert(ctx, dispatch.Spec{Key: periodicKeyPrefix + pj.Key, Cron: pj.Cron, TimeZone: pj.TimeZone}); err != nil {
		return fmt.Errorf("jobs: periodic %s: %w", pj.Key, err)
	}
	if !pj.RunOnStart {
		return nil
	}
	now, err := p.c.now(ctx)
	if err == nil {
		var next time.Time
		if next, err = dispatch.NextCron(pj.Cron, pj.TimeZone, now); err == nil {
			err = p.insert(ctx, pj, next, true)
		}
	}
	if err != nil {
		return fmt.Errorf("jobs: periodic %s: run on start: %w", pj.Key, err)
	}
	return nil
}

// AddPeriodic adds periodic job pj to the client: a running client
// records its schedule at once (and inserts its start job when
// RunOnStart), a client not running yet when Run starts; from then on the
// client fires it. It lasts as long as the client: add it again after a
// restart (or list it in Config.Periodic). Errors: dao.ErrInvalidArgument
// for a client without ScheduleStore, an invalid periodic job, or a key
// the client has; the store's errors, mapped (pj is not added then).
func (c *Client) AddPeriodic(ctx context.Context, pj PeriodicJob) error {
	p := c.periodic
	if p == nil {
		return fmt.Errorf("jobs: add periodic %s: %w", pj.Key, argerr.Errorf("no ScheduleStore"))
	}
	if err := p.add(&pj); err != nil {
		return fmt.Errorf("jobs: add periodic: %w", err)
	}
	p.mu.RLock()
	started := p.started
	p.mu.RUnlock()
	if started {
		if err := p.record(ctx, &pj); err != nil {
			p.remove(pj.Key)
			return err
		}
	}
	return nil
}

// RemovePeriodic removes periodic job key: this client stops firing it
// (when it lists it) and its schedule is deleted from the schedule table
// (Config.ScheduleStore), so that no client fires it until one that lists
// it starts or adds it again. Use it for a periodic job removed from the
// code, from any client. Errors: dao.ErrInvalidArgument for a bad key or
// a client without ScheduleStore; dao.ErrNotFound when the table has no
// schedule for key; the store's errors, mapped.
func (c *Client) RemovePeriodic(ctx context.Context, key string) error {
	pj := PeriodicJob{Key: key}
	if err := pj.checkKey(); err != nil {
		return fmt.Errorf("jobs: remove periodic: %w", err)
	}
	if c.periodic == nil {
		return fmt.Errorf("jobs: remove periodic %s: %w", key, argerr.Errorf("no ScheduleStore"))
	}
	c.periodic.remove(key)
	if err := c.periodic.schedules.Delete(ctx, periodicKeyPrefix+key); err != nil {
		return fmt.Errorf("jobs: remove periodic %s: %w", key, err)
	}
	return nil
}

// run records the periodic jobs' schedules and fires them until ctx
// ends.
func (p *periodicRunner) run(ctx context.Context) error {
	p.mu.Lock()
	jobs := slices.Collect(maps.Values(p.byKey))
	p.started = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.started = false
		p.mu.Unlock()
	}()
	slices.SortFunc(jobs, func(a, b *PeriodicJob) int { return strings.Compare(a.Key, b.Key) })
	for _, pj := range jobs {
		if err := p.record(ctx, pj); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	if err := p.sw.Run(ctx); err != nil {
		return fmt.Errorf("jobs: periodic: %w", err)
	}
	return nil
}

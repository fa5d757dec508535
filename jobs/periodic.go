package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dispatch"
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
}

// PeriodicMetadata is the metadata of a periodic job's job (unless its
// Construct gives metadata of its own): the periodic job's key and the
// occurrence the job is for.
type PeriodicMetadata struct {
	Periodic   string    `json:"periodic"`
	Occurrence time.Time `json:"occurrence"`
}

// check validates p. Errors wrap dao.ErrInvalidArgument.
func (p *PeriodicJob) check() error {
	if p.Key == "" || len(periodicKeyPrefix+p.Key) > dispatch.MaxKeyLen || strings.TrimSpace(p.Key) != p.Key {
		return invalid("periodic job key %q: use 1-%d bytes without surrounding spaces", p.Key, dispatch.MaxKeyLen-len(periodicKeyPrefix))
	}
	if p.Construct == nil {
		return invalid("periodic job %q has no Construct", p.Key)
	}
	if err := dispatch.CheckCron(p.Cron, p.TimeZone); err != nil {
		return fmt.Errorf("periodic job %q: %w", p.Key, err)
	}
	return nil
}

// runPeriodic records the periodic jobs' schedules (idempotently: an
// unchanged definition is left as it is) and fires them until ctx ends.
func (c *Client) runPeriodic(ctx context.Context) error {
	schedules, err := dispatch.NewSchedules(c.cfg.ScheduleStore, dispatch.SchedulesConfig{Now: c.cfg.Now})
	if err != nil {
		return fmt.Errorf("jobs: periodic: %w", err)
	}
	byKey := map[string]*PeriodicJob{}
	for i := range c.cfg.Periodic {
		p := &c.cfg.Periodic[i]
		byKey[periodicKeyPrefix+p.Key] = p
		if _, err := schedules.Upsert(ctx, dispatch.Spec{Key: periodicKeyPrefix + p.Key, Cron: p.Cron, TimeZone: p.TimeZone}); err != nil {
			return fmt.Errorf("jobs: periodic %s: %w", p.Key, err)
		}
	}
	fire := func(ctx context.Context, f dispatch.Fire) error {
		p, ok := byKey[f.Schedule.Key]
		if !ok {
			// Another client's periodic job: failing the fire leaves
			// it to the dispatch retry ladder, and so to that client.
			return fmt.Errorf("jobs: periodic: no periodic job %q in client %s", f.Schedule.Key, c.cfg.ID)
		}
		args, opts := p.Construct()
		var o InsertOpts
		if opts != nil {
			o = *opts
		}
		o.UniqueOpts = UniqueOpts{}
		sum := sha256.Sum256([]byte("periodic:" + c.table + ":" + f.Schedule.Key + "@" + strconv.FormatInt(f.Schedule.NextFireAt.UnixMilli(), 10)))
		o.uniqueKey = hex.EncodeToString(sum[:])
		if o.Metadata == nil {
			o.Metadata, _ = json.Marshal(PeriodicMetadata{Periodic: p.Key, Occurrence: f.Schedule.NextFireAt.UTC()})
		}
		_, err := c.Insert(ctx, args, &o)
		return err
	}
	sw, err := dispatch.NewScheduleWorker(c.cfg.ScheduleStore, fire, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		WorkerID: c.cfg.ID + "/periodic",
		Tick:     c.cfg.Tick,
		Now:      c.cfg.Now,
		Logger:   c.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("jobs: periodic: %w", err)
	}
	if err := sw.Run(ctx); err != nil {
		return fmt.Errorf("jobs: periodic: %w", err)
	}
	return nil
}

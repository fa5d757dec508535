package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/ui"
)

// addJobTableFlags adds the flags of `claimstore ui` that name the job
// table and its queue table.
func addJobTableFlags(f *pflag.FlagSet, o *uiOptions) {
	f.StringVar(&o.jobs, "jobs-table", jobs.DefaultTable, "the job table (package jobs) to show, when it exists")
	f.StringVar(&o.queues, "queue-table", jobs.DefaultQueueTable, "the queue table of the job table, for the queues page")
}

// checkJobTableFlags checks the job and queue table names of o, empty
// ones set to the defaults. Errors wrap dao.ErrInvalidArgument.
func checkJobTableFlags(o *uiOptions) error {
	o.jobs, o.queues = cmp.Or(o.jobs, jobs.DefaultTable), cmp.Or(o.queues, jobs.DefaultQueueTable)
	for _, t := range []string{o.jobs, o.queues} {
		if err := jobs.CheckTable(t); err != nil {
			return fmt.Errorf("--jobs-table or --queue-table: %w", err)
		}
	}
	return nil
}

// findJobs returns the console source of the job table o names, with its
// queue table when that exists, or nil when the job table does not exist
// (an error when --jobs-table named it) or --tables leaves it out. A
// table of that name without the job table's columns is an error.
func findJobs(ctx context.Context, db *gorm.DB, o uiOptions, only []string) (ui.Source, error) {
	if len(only) > 0 && !slices.Contains(only, o.jobs) {
		return nil, nil
	}
	m := db.WithContext(ctx).Migrator()
	if !m.HasTable(o.jobs) {
		if o.jobsNamed {
			return nil, fmt.Errorf("%w: --jobs-table %s: no such table (jobs.Migrate creates it)", dao.ErrNotFound, o.jobs)
		}
		return nil, nil
	}
	cols, err := m.ColumnTypes(o.jobs)
	if err != nil {
		return nil, fmt.Errorf("job table %s: %w", o.jobs, err)
	}
	have := map[string]bool{}
	for _, c := range cols {
		have[strings.ToLower(c.Name())] = true
	}
	for _, c := range []string{jobs.ColKind, jobs.ColQueue, jobs.ColState, jobs.ColArgs, jobs.ColErrors, jobs.ColMaxAttempts, jobs.ColScheduledAt, jobs.ColLeaseUntil} {
		if !have[c] {
			return nil, fmt.Errorf("%w: table %s has no column %s: it is not a job table of package jobs; name one with --jobs-table", dao.ErrInvalidArgument, o.jobs, c)
		}
	}
	cfg := jobs.Config{}
	if cfg.Store, err = sqlstore.New[jobs.Row](db, sqlstore.WithTable(o.jobs)); err != nil {
		return nil, err
	}
	if m.HasTable(o.queues) {
		if cfg.QueueStore, err = sqlstore.New[jobs.Queue](db, sqlstore.WithTable(o.queues)); err != nil {
			return nil, err
		}
	}
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return ui.Jobs(o.jobs, c)
}

package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// DefaultMaintenanceEvery is the default period of [Maintenance] tasks.
const DefaultMaintenanceEvery = time.Minute

// Task is one maintenance task, such as a retention sweep that deletes
// fired rows older than some age in bounded batches. It returns an error
// to have it logged; the next period runs it again.
type Task struct {
	// Name names the task in logs.
	Name string
	// Run does the work once.
	Run func(ctx context.Context) error
	// Every, optional, is the task's own period: the task runs at the
	// first period of its [Maintenance] that begins at least Every after
	// its last run (so Every is rounded up to whole periods). Zero runs
	// it every period.
	Every time.Duration
}

// Maintenance runs periodic tasks beside a worker, on the leader only when
// Leader is set. A leader election (the coordination package's, or any
// other) plugs in as Leader; its fencing term may be checked by the tasks
// themselves.
type Maintenance struct {
	// Every is the period; default one minute.
	Every time.Duration
	// Leader reports whether this process may run the tasks now (asked
	// before each task; [ElectorGate] builds it from a coord.Elector); nil
	// runs them on every worker, so tasks must then be safe to run
	// concurrently (bounded, idempotent deletes are).
	Leader func(ctx context.Context) bool
	// Tasks run one after another each period.
	Tasks []Task
}

func (m *Maintenance) check() error {
	if m.Every < 0 {
		return fmt.Errorf("%w: negative maintenance period", dao.ErrInvalidArgument)
	}
	for _, t := range m.Tasks {
		if t.Run == nil {
			return fmt.Errorf("%w: maintenance task %q has no Run", dao.ErrInvalidArgument, t.Name)
		}
		if t.Every < 0 {
			return fmt.Errorf("%w: maintenance task %q has a negative period", dao.ErrInvalidArgument, t.Name)
		}
	}
	return nil
}

// Run runs the tasks every period until ctx ends, as a worker whose
// Config.Maintenance is m does beside its loop; it is for maintenance
// that belongs to no one worker (package jobs runs its scheduler, rescuer
// and retention sweep so, for all its queues). Each period, it asks Leader
// (when set) before each task and stops the period at the first no; a
// task's error is logged at Warn on log (slog.Default() when nil) and the
// task runs again at its next period. It returns nil when ctx ends, or,
// before running anything, an error wrapping dao.ErrInvalidArgument for a
// negative period or a task without Run.
func (m *Maintenance) Run(ctx context.Context, log *slog.Logger) error {
	if err := m.check(); err != nil {
		return fmt.Errorf("dispatch: maintenance: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	m.run(ctx, log)
	return nil
}

// run runs the tasks every period until ctx ends.
func (m *Maintenance) run(ctx context.Context, log *slog.Logger) {
	every := m.Every
	if every == 0 {
		every = DefaultMaintenanceEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := make([]time.Time, len(m.Tasks))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, task := range m.Tasks {
			if ctx.Err() != nil {
				return
			}
			if task.Every > 0 && !last[i].IsZero() && time.Since(last[i]) < task.Every {
				continue
			}
			if m.Leader != nil && !m.Leader(ctx) {
				break
			}
			last[i] = time.Now()
			if err := task.Run(ctx); err != nil && ctx.Err() == nil {
				log.Warn("maintenance task failed", "task", task.Name, "err", err)
			}
		}
	}
}

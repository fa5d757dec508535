package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimstore/claimstore/dao"
)

// ErrPaused reports an operation that needs an active schedule (fire now)
// on a paused one: resume it first.
var ErrPaused = errors.New("dispatch: schedule is paused")

// FireNow makes the active schedule key due now: its next fire time is set
// to the clock's now (the database's when the store reads one), so that
// the next worker poll fires it, once, as it fires a due occurrence. A
// cron schedule then goes on from the occurrence after that fire. It is
// one UPDATE guarded by status = active; the schedule is read only when
// nothing changed, to say why.
//
// Errors: [dao.ErrNotFound] when no schedule has key; [ErrPaused] for a
// paused schedule (resume it first); [ErrTerminal] for a fired or failed
// one (add it anew, or resume a failed one); the store's and the database
// clock's errors, wrapped.
func (s *Schedules) FireNow(ctx context.Context, key string) error {
	now, err := s.now(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: fire now %q: %w", key, err)
	}
	n, err := s.store.Update(ctx, dao.And(dao.Eq(ColKey, key), dao.Eq(ColStatus, string(StatusActive))),
		dao.Set{ColNextFireAt: now})
	if err != nil {
		return fmt.Errorf("dispatch: fire now %q: %w", key, err)
	}
	if n > 0 {
		return nil
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("dispatch: fire now: %w", err)
	}
	if got.Status == StatusPaused {
		return fmt.Errorf("dispatch: fire now %q: %w: resume it first", key, ErrPaused)
	}
	return fmt.Errorf("dispatch: fire now %q: status %s: %w", key, got.Status, ErrTerminal)
}

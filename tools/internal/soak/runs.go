//go:build linux

package soak

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/claimstore/claimstore/jobs"
)

// Work of the limited queue's jobs and of the workflow tasks, in
// milliseconds: long enough that the limited queue's runs overlap and
// that faults land on runs.
const (
	limitedWorkMin, limitedWorkMax = 40, 160
	taskWorkMin, taskWorkMax       = 100, 400
)

// runLimitedJob is the work of a job of the limited queue: it records its
// start and end in the history, works 40 to 160 ms and, for one order in
// 20, fails its first attempt.
func (c *child) runLimitedJob(ctx context.Context, j *jobs.Job[LimitedJob]) error {
	return c.timedRun(ctx, j.Row, EvLimStart, EvLimEnd, j.Args.Order, limitedWorkMin, limitedWorkMax)
}

// runTask is the work of a workflow task: as runLimitedJob, 100 to 400 ms.
func (c *child) runTask(ctx context.Context, j *jobs.Job[TaskJob]) error {
	return c.timedRun(ctx, j.Row, EvTaskStart, EvTaskEnd, j.Args.Key(), taskWorkMin, taskWorkMax)
}

// timedRun records a run's start (kind start) with the claim's lease end,
// works lo to hi ms or until ctx ends, records its end (kind end) and
// returns the planned failure of the first attempt of key, or ctx's cause.
// The end is recorded before the work returns, so a completed attempt
// always has it.
func (c *child) timedRun(ctx context.Context, row *jobs.Row, start, end, key string, lo, hi int) error {
	e := Event{Kind: start, Key: key, N: int64(row.Attempt), Owner: row.LeaseOwner}
	if row.LeaseUntil != nil {
		e.LeaseUntil = *row.LeaseUntil
	}
	c.h.Add(e)
	var err error
	select {
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-time.After(time.Duration(lo+rand.IntN(hi-lo+1)) * time.Millisecond):
		if row.Attempt == 1 && plannedFailure(key) {
			err = errors.New(errPlanned)
		}
	}
	done := Event{Kind: end, Key: key, N: int64(row.Attempt)}
	if err != nil {
		done.Err = err.Error()
	}
	c.h.Add(done)
	return err
}

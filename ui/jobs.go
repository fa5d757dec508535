package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// jobSource is a job table (package jobs), read and changed through its
// client.
type jobSource struct {
	name string
	c    *jobs.Client
}

// Jobs returns the [Source] of a job table (package jobs) read and changed
// through c, a client of the table (one that runs no queue is enough; with
// a queue store in its config, the console also lists, pauses and resumes
// the queues). name is the table's name on the page. The console reads
// and changes jobs only through c: Count, List, Get, Retry, Cancel,
// Delete, Queues, PauseQueue, ResumeQueue, UnknownKinds, Workflow, Batch
// and Sequences. Errors wrap
// [dao.ErrInvalidArgument] for a nil client or an empty name.
func Jobs(name string, c *jobs.Client) (Source, error) {
	if c == nil || name == "" {
		return nil, fmt.Errorf("ui: jobs: %w: a name and a jobs client are required", dao.ErrInvalidArgument)
	}
	return &jobSource{name: name, c: c}, nil
}

func (s *jobSource) sourceName() string { return s.name }
func (s *jobSource) sourceKind() string { return "jobs" }

// clock returns the host's time: the job client reads the database's
// clock itself where it needs it.
func (s *jobSource) clock(context.Context) (time.Time, error) { return time.Now().UTC(), nil }

// overview counts the jobs of every state (exactly: package jobs tells a
// running job from an available one by its lease, which the planner's
// statistics do not know), and reads the running jobs, newest first, as
// the rows in flight. Due now is the available jobs; failures are the
// retryable and discarded jobs; done the completed ones. The oldest due
// age is not shown: the client lists jobs by id only.
func (s *jobSource) overview(ctx context.Context, _ time.Time, _ int64) (TableOverview, error) {
	start := time.Now()
	o := TableOverview{Name: s.name, Kind: "jobs", InFlight: []Lease{}}
	counts, err := s.c.Count(ctx, "")
	if err != nil {
		return o, err
	}
	for _, st := range jobs.States() {
		c := Count{Status: string(st), N: counts[st]}
		o.Counts = append(o.Counts, c)
		o.Total = sum(o.Total, c)
		switch st {
		case jobs.StateAvailable:
			o.Due = c
		case jobs.StateRetryable, jobs.StateDiscarded:
			o.Failures = sum(o.Failures, c)
		case jobs.StateCompleted:
			o.Done = c
		}
	}
	if counts[jobs.StateRunning] > 0 {
		rows, err := s.c.List(ctx, jobs.ListParams{States: []jobs.State{jobs.StateRunning}, Limit: 10})
		if err != nil {
			return o, fmt.Errorf("in flight: %w", err)
		}
		for _, r := range rows {
			l := Lease{ID: strconv.FormatInt(r.ID, 10), Owner: r.LeaseOwner}
			if r.LeaseUntil != nil {
				l.Until = *r.LeaseUntil
			}
			o.InFlight = append(o.InFlight, l)
		}
	}
	o.Elapsed = float64(time.Since(start).Microseconds()) / 1000
	return o, nil
}

// parseJobID returns the job id in s. Errors wrap dao.ErrInvalidArgument.
func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: job id %q is not a positive integer", dao.ErrInvalidArgument, s)
	}
	return id, nil
}

// detail returns job id as a row: the fields of its JSON view, its lease
// and its last attempt's error. The job page (job?t=…&id=…) shows more.
func (s *jobSource) detail(ctx context.Context, id string) (RowDetail, error) {
	n, err := parseJobID(id)
	if err != nil {
		return RowDetail{}, err
	}
	r, err := s.c.Get(ctx, n)
	if err != nil {
		return RowDetail{}, err
	}
	v := jobadmin.View(r)
	d := RowDetail{Table: s.name, ID: id, Fields: map[string]any{}, LastError: v.LastError()}
	if d.JSON, err = textJSON(v); err != nil {
		return RowDetail{}, err
	}
	if err := json.Unmarshal([]byte(d.JSON), &d.Fields); err != nil {
		return RowDetail{}, err
	}
	if r.LeaseOwner != "" && r.LeaseUntil != nil {
		d.Lease = &Lease{ID: id, Owner: r.LeaseOwner, Until: *r.LeaseUntil}
	}
	return d, nil
}

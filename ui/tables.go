package ui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/outbox"
)

// scheduleSource is a schedule table: the backlog view plus the schedule
// API for the actions.
type scheduleSource struct {
	*backlog[dispatch.Schedule]
	api *dispatch.Schedules
}

// Schedules returns the [Source] of a schedule table (package dispatch)
// read and changed through store; name is the table's name on the page
// (default the store's table name). Errors wrap [dao.ErrInvalidArgument]
// for a nil store.
func Schedules(name string, store dao.Store[dispatch.Schedule]) (Source, error) {
	if store == nil {
		return nil, fmt.Errorf("ui: schedules: %w: nil store", dao.ErrInvalidArgument)
	}
	api, err := dispatch.NewSchedules(store, dispatch.SchedulesConfig{})
	if err != nil {
		return nil, fmt.Errorf("ui: schedules: %w", err)
	}
	b, err := newBacklog(WorkerTable[dispatch.Schedule]{
		Name:           name,
		Store:          store,
		StatusField:    dispatch.ColStatus,
		Statuses:       []string{string(dispatch.StatusActive), string(dispatch.StatusPaused), string(dispatch.StatusFired), string(dispatch.StatusFailed)},
		FailedStatuses: []string{string(dispatch.StatusFailed)},
		Due: func(now time.Time) dao.Criteria {
			return dao.And(dao.Eq(dispatch.ColStatus, string(dispatch.StatusActive)), dao.Le(dispatch.ColNextFireAt, now))
		},
		DueField:   dispatch.ColNextFireAt,
		OwnerField: dispatch.ColLeaseOwner,
		UntilField: dispatch.ColLeaseUntil,
		ErrorField: dispatch.ColLastError,
	}, "schedules", string(dispatch.StatusFired))
	if err != nil {
		return nil, err
	}
	// A schedule in flight is an active, due schedule under a lease: the
	// due index (status, next_fire_at, id) serves the read.
	b.inFlight = func(now time.Time) dao.Criteria {
		return dao.And(dao.Eq(dispatch.ColStatus, string(dispatch.StatusActive)), dao.Le(dispatch.ColNextFireAt, now), dao.Gt(dispatch.ColLeaseUntil, now))
	}
	return &scheduleSource{backlog: b, api: api}, nil
}

// scheduleFilter selects the schedules listed on the schedules page.
type scheduleFilter struct {
	Status string // "" for all
	Search string // a substring of the key, any case; "" for all
	Limit  int
}

// searchScan bounds the schedules a search reads, in key order (a
// variable for the tests).
var searchScan = 100_000

// scheduleList is a page of schedules.
type scheduleList struct {
	Rows []dispatch.Schedule
	// More is true when more schedules match than Rows holds.
	More bool
	// Scanned is the number of schedules a search read when it stopped
	// at searchScan before reaching the end of the table; 0 otherwise.
	Scanned int
}

// list returns up to f.Limit schedules in key order. A search reads the
// table in key order, 1000 schedules a read, until f.Limit match, the
// table ends or searchScan schedules were read.
func (s *scheduleSource) list(ctx context.Context, f scheduleFilter) (scheduleList, error) {
	var out scheduleList
	if f.Search == "" {
		rows, err := s.api.List(ctx, dispatch.ListOptions{Status: dispatch.Status(f.Status), Limit: f.Limit + 1})
		if len(rows) > f.Limit {
			rows, out.More = rows[:f.Limit], true
		}
		out.Rows = rows
		return out, err
	}
	const page = 1000
	q := strings.ToLower(f.Search)
	after := ""
	for scanned := 0; ; {
		if scanned >= searchScan {
			out.Scanned = scanned
			return out, nil
		}
		rows, err := s.api.List(ctx, dispatch.ListOptions{Status: dispatch.Status(f.Status), AfterKey: after, Limit: page})
		if err != nil {
			return out, err
		}
		for _, r := range rows {
			if !strings.Contains(strings.ToLower(r.Key), q) {
				continue
			}
			if len(out.Rows) == f.Limit {
				out.More = true
				return out, nil
			}
			out.Rows = append(out.Rows, r)
		}
		if len(rows) < page {
			return out, nil
		}
		scanned += len(rows)
		after = rows[len(rows)-1].Key
	}
}

// outboxSource is an outbox table: the backlog view plus the repository
// for the actions.
type outboxSource struct {
	*backlog[outbox.Message]
	repo *outbox.Repository
}

// Outbox returns the [Source] of an outbox message table read and changed
// through repo; name is the table's name on the page (default the store's
// table name). Errors wrap [dao.ErrInvalidArgument] for a nil repository.
func Outbox(name string, repo *outbox.Repository) (Source, error) {
	if repo == nil {
		return nil, fmt.Errorf("ui: outbox: %w: nil repository", dao.ErrInvalidArgument)
	}
	statuses := make([]string, len(outbox.Statuses))
	for i, s := range outbox.Statuses {
		statuses[i] = string(s)
	}
	b, err := newBacklog(WorkerTable[outbox.Message]{
		Name:           name,
		Store:          repo.Store(),
		StatusField:    outbox.ColStatus,
		Statuses:       statuses,
		FailedStatuses: []string{string(outbox.StatusFailed), string(outbox.StatusAbandoned)},
		// Due: the messages waiting to be published.
		Due: func(time.Time) dao.Criteria {
			return outbox.StatusCriteria(outbox.StatusPending, outbox.StatusFailed)
		},
		DueField:   outbox.ColCreatedAt,
		OwnerField: outbox.ColLockedBy,
		UntilField: outbox.ColLockedUntil,
		ErrorField: outbox.ColLastError,
	}, "outbox", string(outbox.StatusPublished))
	if err != nil {
		return nil, err
	}
	// Every status but published is counted through the claim index, as
	// outbox.Repository.Counts counts it.
	b.count = func(s string) dao.Criteria { return outbox.StatusCriteria(outbox.Status(s)) }
	// Due now: pending and failed messages, from their counts.
	b.dueStatuses = []string{string(outbox.StatusPending), string(outbox.StatusFailed)}
	b.inFlightStatus = string(outbox.StatusProcessing)
	b.inFlight = func(now time.Time) dao.Criteria {
		return dao.And(outbox.StatusCriteria(outbox.StatusProcessing), dao.Gt(outbox.ColLockedUntil, now))
	}
	return &outboxSource{backlog: b, repo: repo}, nil
}

// unpublished returns up to limit unpublished messages in one of
// statuses, oldest first, through the claim index (outbox.StatusCriteria):
// on 1,000,000 rows, 1 % unpublished, a read of the oldest 1000 takes tens
// of milliseconds instead of hundreds.
func (o *outboxSource) unpublished(ctx context.Context, limit int, statuses ...outbox.Status) ([]outbox.Message, error) {
	return o.repo.List(ctx, outbox.Filter{Statuses: statuses, Limit: limit})
}

// requeue moves abandoned messages back to pending: the one id, or, when
// id is 0, up to bound of them, oldest first. It returns how many moved.
func (o *outboxSource) requeue(ctx context.Context, id int64, bound int) (int64, error) {
	if id != 0 {
		return o.repo.Requeue(ctx, []outbox.Status{outbox.StatusAbandoned}, id)
	}
	rows, err := o.repo.Abandoned(ctx, bound)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	ids := make([]int64, len(rows))
	for i, m := range rows {
		ids[i] = m.ID
	}
	return o.repo.Requeue(ctx, []outbox.Status{outbox.StatusAbandoned}, ids...)
}

// purge deletes published messages older than age, at most 100 batches of
// 1000 per call, and returns how many it deleted.
func (o *outboxSource) purge(ctx context.Context, age time.Duration) (int64, error) {
	return o.repo.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusPublished, OlderThan: age, MaxBatches: 100})
}

// LeaseLister lists the leases of a lease table; sqlstore.Leases
// implements it.
type LeaseLister interface {
	// ListLeases returns every lease of the table, with the store's clock
	// in each Lease.Now.
	ListLeases(ctx context.Context) ([]coord.Lease, error)
}

// leaseSource is a lease table of leader election.
type leaseSource struct {
	name   string
	leases LeaseLister
}

func (l *leaseSource) sourceName() string { return l.name }
func (l *leaseSource) sourceKind() string { return "leases" }

// Leases returns the [Source] of a lease table of leader election
// (package coord); name is its name on the page. Errors wrap
// [dao.ErrInvalidArgument] for a nil lister or an empty name.
func Leases(name string, leases LeaseLister) (Source, error) {
	if leases == nil || name == "" {
		return nil, fmt.Errorf("ui: leases: %w: a name and a lease lister are required", dao.ErrInvalidArgument)
	}
	return &leaseSource{name: name, leases: leases}, nil
}

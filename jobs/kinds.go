package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// How the clients running a queue record the kinds they have workers for
// in the queue table (Queue.Kinds).
const (
	// KindsRefresh is how often a running client records its kinds in
	// the queue row of each queue it runs (and once when Run starts).
	KindsRefresh = time.Minute
	// KindsTTL is how long a recorded kind counts as known after the
	// last client that recorded it did: three refreshes, so that a client
	// that stopped (or died) no longer counts after it.
	KindsTTL = 3 * KindsRefresh
)

// maxKindTries bounds the read-then-guarded-write loop of recordKinds:
// each try fails only when another client recorded its kinds meanwhile.
const maxKindTries = 10

// kindsSeen is the Kinds column of a queue row: each kind a client of
// the queue has a worker for, with when a client last recorded it.
type kindsSeen map[string]time.Time

// parseKinds reads a Kinds column; NULL, empty or unreadable is none.
func parseKinds(s *string) kindsSeen {
	out := kindsSeen{}
	if s != nil && *s != "" {
		_ = json.Unmarshal([]byte(*s), &out)
	}
	return out
}

// known returns the kinds recorded within KindsTTL before now, sorted.
func (k kindsSeen) known(now time.Time) []string {
	var out []string
	for kind, at := range k {
		if now.Sub(at) <= KindsTTL {
			out = append(out, kind)
		}
	}
	slices.Sort(out)
	return out
}

// recordKinds adds the client's queues to the queue table unless they
// exist and records in each row the kinds of the client's workers at the
// current time, dropping the kinds no client recorded within KindsTTL.
// Each row is written guarded by the Kinds it read, read again when
// another client wrote it meanwhile.
func (c *Client) recordKinds(ctx context.Context) error {
	var names []string
	for _, q := range c.queueList() {
		names = append(names, q.name)
	}
	if err := c.registerQueues(ctx, names...); err != nil {
		return err
	}
	kinds := c.cfg.Workers.Kinds()
	for _, name := range names {
		if err := c.recordQueueKinds(ctx, name, kinds); err != nil {
			return fmt.Errorf("queue %s: %w", name, err)
		}
	}
	return nil
}

// recordQueueKinds records kinds in the row of queue name (see
// recordKinds).
func (c *Client) recordQueueKinds(ctx context.Context, name string, kinds []string) error {
	for range maxKindTries {
		now, err := c.now(ctx)
		if err != nil {
			return err
		}
		rows, err := c.cfg.QueueStore.Find(ctx, dao.Query{Where: dao.Eq("name", name), Limit: 1})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("queue row gone: %w", dao.ErrNotFound)
		}
		seen := parseKinds(rows[0].Kinds)
		for kind, at := range seen {
			if now.Sub(at) > KindsTTL {
				delete(seen, kind)
			}
		}
		for _, k := range kinds {
			seen[k] = now.UTC().Truncate(time.Second)
		}
		b, _ := json.Marshal(seen)
		guard := dao.IsNull("kinds")
		if rows[0].Kinds != nil {
			guard = dao.Eq("kinds", *rows[0].Kinds)
		}
		n, err := c.cfg.QueueStore.Update(ctx, dao.And(dao.Eq("name", name), guard), dao.Set{"kinds": string(b)})
		if err != nil || n == 1 {
			return err
		}
	}
	return fmt.Errorf("the queue row kept changing: %w", dao.ErrConflict)
}

// WaitingKind is a kind of available jobs of a queue that no running
// client of the queue has a worker for (see [Client.UnknownKinds]).
type WaitingKind struct {
	// Queue and Kind name the queue and the kind.
	Queue, Kind string
	// Jobs is the number of available jobs of the kind in the queue.
	Jobs int64
}

// UnknownKinds returns the kinds of available jobs that wait with no
// client that knows them: no client running their queue recorded a
// worker for the kind within [KindsTTL] (clients record their kinds in
// the queue table when they start and every [KindsRefresh]), or no
// client runs the queue. A job of such a kind is never claimed, so it
// waits until a client that knows it runs (a rolling deploy that is not
// finished, a worker removed too early, a typo in a kind). It returns
// them by queue and kind with their job counts, in two statements per
// kind found. Errors: [ErrNoQueueStore]; the stores' errors, mapped.
func (c *Client) UnknownKinds(ctx context.Context) ([]WaitingKind, error) {
	if c.cfg.QueueStore == nil {
		return nil, fmt.Errorf("jobs: unknown kinds: %w", ErrNoQueueStore)
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: unknown kinds: %w", err)
	}
	qs, err := c.cfg.QueueStore.Find(ctx, dao.Query{})
	if err != nil {
		return nil, fmt.Errorf("jobs: unknown kinds: %w", err)
	}
	waiting := dao.And(dao.Eq(ColState, string(StateAvailable)), leaseFree(now))
	// Left out: the jobs of the kinds a client of their queue knows, and
	// then each (queue, kind) found.
	var out []WaitingKind
	var skip []dao.Criteria
	for _, q := range qs {
		if kinds := parseKinds(q.Kinds).known(now); len(kinds) > 0 {
			skip = append(skip, notOf(q.Name, kinds...))
		}
	}
	for {
		rows, err := c.store.Find(ctx, dao.Query{Where: dao.And(append([]dao.Criteria{waiting}, skip...)...), OrderBy: []dao.Order{dao.Asc(ColID)}, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("jobs: unknown kinds: %w", err)
		}
		if len(rows) == 0 {
			break
		}
		q, k := rows[0].Queue, rows[0].Kind
		n, err := c.store.Count(ctx, dao.And(waiting, dao.Eq(ColQueue, q), dao.Eq(ColKind, k)))
		if err != nil {
			return nil, fmt.Errorf("jobs: unknown kinds: %w", err)
		}
		out = append(out, WaitingKind{Queue: q, Kind: k, Jobs: n})
		skip = append(skip, notOf(q, k))
	}
	slices.SortFunc(out, func(a, b WaitingKind) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

// notOf returns the criteria of the jobs that are not of queue with one
// of kinds (criteria have no Not: it is written with Ne).
func notOf(queue string, kinds ...string) dao.Criteria {
	ne := make([]dao.Criteria, len(kinds))
	for i, k := range kinds {
		ne[i] = dao.Ne(ColKind, k)
	}
	return dao.Or(dao.Ne(ColQueue, queue), dao.And(ne...))
}

// anys returns ss as []any.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

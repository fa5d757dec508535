package esstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// DefaultLeaseIndex is the index of leader leases when none is given.
const DefaultLeaseIndex = "claimstore_leaders"

// Leases is the Elasticsearch [driver.LeaseStore]: one document per
// election name (its id) in a lease index, holding the holder, the term,
// the holder's TTL and a released flag. Every change is one index request
// conditioned on the _seq_no and _primary_term read just before
// (if_seq_no/if_primary_term, "Optimistic concurrency control" in the
// Elasticsearch reference), so of two candidates racing for the same
// version one wins and the other gets a version conflict.
//
// Elasticsearch offers no server clock to a conditional write, and the
// candidates' wall clocks may disagree, so expiry is decided the way a
// lease observer does it: a lease is expired for this store when the
// document has stayed at the same version for the holder's TTL on this
// process's monotonic clock, counted from when this store first read that
// version (for its own writes, from the start of the write). The holder
// renews before then, changing the version; a new observer waits a full
// TTL before it takes a lease over. A released lease is free at once.
// ElectedAt and ExpiresAt are the holder's wall-clock times, for display;
// Lease.Now is this process's clock. Create it with [NewLeases].
type Leases struct {
	client *elasticsearch.Client
	index  string
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]observed // by election name
}

// observed is a version of a lease document and when this store first
// saw it (monotonic).
type observed struct {
	seqNo, primaryTerm int64
	at                 time.Time
}

// leaseDoc is the source of a lease document.
type leaseDoc struct {
	Holder    string    `json:"holder"`
	Term      int64     `json:"term"`
	TTLMillis int64     `json:"ttl_ms"`
	ElectedAt time.Time `json:"elected_at"`
	RenewedAt time.Time `json:"renewed_at"`
	Released  bool      `json:"released"`
}

// NewLeases returns the lease store over index ("" means
// claimstore_leaders) of client. Errors wrap [dao.ErrInvalidArgument] for
// a nil client.
func NewLeases(client *elasticsearch.Client, index string) (*Leases, error) {
	if client == nil {
		return nil, fmt.Errorf("claimstore: leases: %w: nil client", dao.ErrInvalidArgument)
	}
	return &Leases{client: client, index: cmp.Or(index, DefaultLeaseIndex), now: time.Now, seen: map[string]observed{}}, nil
}

// Index returns the name of the lease index.
func (l *Leases) Index() string { return l.index }

// Migrate creates the lease index (dynamic mapping strict) unless it
// exists. Errors are mapped like every Elasticsearch error.
func (l *Leases) Migrate(ctx context.Context) error {
	body, err := jsonBody(obj{"mappings": obj{"dynamic": "strict", "properties": obj{
		"holder": obj{"type": "keyword"}, "term": obj{"type": "long"}, "ttl_ms": obj{"type": "long"},
		"elected_at": obj{"type": "date"}, "renewed_at": obj{"type": "date"}, "released": obj{"type": "boolean"},
	}}})
	if err != nil {
		return fmt.Errorf("claimstore: leases: migrate: %w", err)
	}
	_, _, esErr, err := l.do(ctx, "migrate "+l.index, esapi.IndicesCreateRequest{Index: l.index, Body: body})
	if err != nil {
		return fmt.Errorf("claimstore: leases: %w", err)
	}
	if esErr != nil && esErr.Type != "resource_already_exists_exception" {
		return fmt.Errorf("claimstore: leases: %w", wrapES("migrate "+l.index, esErr))
	}
	return nil
}

// do sends req with the lease store's client (see [send]).
func (l *Leases) do(ctx context.Context, op string, req esapi.Request) (int, []byte, *Error, error) {
	return send(ctx, l.client, op, req)
}

// current is a lease document as read, with its version.
type current struct {
	found              bool
	doc                leaseDoc
	seqNo, primaryTerm int64
}

// read gets name's document (real-time get API).
func (l *Leases) read(ctx context.Context, name string) (current, error) {
	const op = "get lease"
	_, body, esErr, err := l.do(ctx, op, esapi.GetRequest{Index: l.index, DocumentID: url.PathEscape(name)})
	if err != nil {
		return current{}, err
	}
	if esErr != nil && esErr.Status != 404 {
		return current{}, wrapES(op, esErr)
	}
	var res struct {
		Found       bool     `json:"found"`
		SeqNo       int64    `json:"_seq_no"`
		PrimaryTerm int64    `json:"_primary_term"`
		Source      leaseDoc `json:"_source"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return current{}, fmt.Errorf("%s: decode response: %w", op, err)
	}
	if esErr != nil && esErr.Type != "" {
		return current{}, wrapES(op, esErr) // a missing index
	}
	return current{found: res.Found, doc: res.Source, seqNo: res.SeqNo, primaryTerm: res.PrimaryTerm}, nil
}

// write indexes doc as name's document, created when c is not found,
// else conditioned on c's version. It reports false on a version
// conflict (another candidate wrote first).
func (l *Leases) write(ctx context.Context, name string, c current, doc leaseDoc, began time.Time) (bool, error) {
	seqNo, primaryTerm, ok, err := writeVersioned(ctx, l.client, "write lease", l.index, url.PathEscape(name), doc, !c.found, c.seqNo, c.primaryTerm)
	if !ok || err != nil {
		return false, err
	}
	l.mu.Lock()
	l.seen[name] = observed{seqNo: seqNo, primaryTerm: primaryTerm, at: began}
	l.mu.Unlock()
	return true, nil
}

// expiry returns when c's lease expires for this store (monotonic),
// recording c's version as first seen now when it is new to the store.
func (l *Leases) expiry(name string, c current, now time.Time) time.Time {
	if c.doc.Released {
		return now
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.seen[name]
	if !ok || o.seqNo != c.seqNo || o.primaryTerm != c.primaryTerm {
		o = observed{seqNo: c.seqNo, primaryTerm: c.primaryTerm, at: now}
		l.seen[name] = o
	}
	return o.at.Add(time.Duration(c.doc.TTLMillis) * time.Millisecond)
}

// lease converts c into a driver.Lease as of now.
func (l *Leases) lease(name string, c current, now time.Time) driver.Lease {
	exp := l.expiry(name, c, now)
	wall := time.Now()
	return driver.Lease{
		Name: name, Holder: c.doc.Holder, Term: c.doc.Term, ElectedAt: c.doc.ElectedAt.UTC(),
		ExpiresAt: wall.Add(exp.Sub(now)).Round(0).UTC(), Now: wall.Round(0).UTC(),
	}
}

// AcquireLease implements [driver.LeaseStore.AcquireLease] with a
// real-time get and one conditional index request: create the document
// (op_type=create) when there is none; take over a released lease, or
// one whose version this store has seen unchanged for its TTL, with term
// + 1; renew holder's own unexpired lease with the term kept. A version
// conflict (another candidate wrote between the get and the write) is
// reported as not held, with the lease read again. Errors wrap
// [dao.ErrInvalidArgument] for bad arguments (nothing is sent), or the
// sentinel of the Elasticsearch error (a missing index is
// [dao.ErrNotFound]; run Migrate).
func (l *Leases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (driver.Lease, bool, error) {
	if err := driver.CheckAcquire(name, holder, ttl); err != nil {
		return driver.Lease{}, false, fmt.Errorf("claimstore: acquire lease: %w", err)
	}
	lease, held, err := l.acquire(ctx, name, holder, ttl)
	if err != nil {
		return driver.Lease{}, false, fmt.Errorf("claimstore: acquire lease %q for %q: %w", name, holder, err)
	}
	return lease, held, nil
}

func (l *Leases) acquire(ctx context.Context, name, holder string, ttl time.Duration) (driver.Lease, bool, error) {
	began := l.now()
	c, err := l.read(ctx, name)
	if err != nil {
		return driver.Lease{}, false, err
	}
	wall := time.Now().UTC()
	next := leaseDoc{Holder: holder, Term: 1, TTLMillis: ttl.Milliseconds(), ElectedAt: wall, RenewedAt: wall}
	if c.found {
		expired := !l.expiry(name, c, began).After(began)
		switch {
		case expired:
			next.Term = c.doc.Term + 1
		case c.doc.Holder == holder:
			next.Term, next.ElectedAt = c.doc.Term, c.doc.ElectedAt
		default:
			return l.lease(name, c, began), false, nil
		}
	}
	won, err := l.write(ctx, name, c, next, began)
	if err != nil {
		return driver.Lease{}, false, err
	}
	if !won {
		if c, err = l.read(ctx, name); err != nil {
			return driver.Lease{}, false, err
		}
		now := l.now()
		return l.lease(name, c, now), false, nil
	}
	return driver.Lease{
		Name: name, Holder: holder, Term: next.Term, ElectedAt: next.ElectedAt.UTC(),
		ExpiresAt: wall.Add(ttl), Now: wall,
	}, true, nil
}

// ReleaseLease implements [driver.LeaseStore.ReleaseLease]: a conditional
// write of the document with released set, when holder holds its
// unexpired lease in term. Errors as AcquireLease's.
func (l *Leases) ReleaseLease(ctx context.Context, name, holder string, term int64) (bool, error) {
	for what, id := range map[string]string{"name": name, "holder": holder} {
		if err := driver.CheckLeaseID(what, id); err != nil {
			return false, fmt.Errorf("claimstore: release lease: %w", err)
		}
	}
	began := l.now()
	c, err := l.read(ctx, name)
	if err != nil {
		return false, fmt.Errorf("claimstore: release lease %q of %q: %w", name, holder, err)
	}
	if !c.found || c.doc.Holder != holder || c.doc.Term != term || !l.expiry(name, c, began).After(began) {
		return false, nil
	}
	doc := c.doc
	doc.Released = true
	won, err := l.write(ctx, name, c, doc, began)
	if err != nil {
		return false, fmt.Errorf("claimstore: release lease %q of %q: %w", name, holder, err)
	}
	return won, nil
}

// GetLease implements [driver.LeaseStore.GetLease] with the real-time get
// API. ExpiresAt is as this store sees it (see [Leases]). Errors wrap
// [dao.ErrNotFound] when name has no document, [dao.ErrInvalidArgument]
// for a bad name, or the Elasticsearch error's sentinel.
func (l *Leases) GetLease(ctx context.Context, name string) (driver.Lease, error) {
	if err := driver.CheckLeaseID("name", name); err != nil {
		return driver.Lease{}, fmt.Errorf("claimstore: get lease: %w", err)
	}
	now := l.now()
	c, err := l.read(ctx, name)
	if err != nil {
		return driver.Lease{}, fmt.Errorf("claimstore: get lease %q: %w", name, err)
	}
	if !c.found {
		return driver.Lease{}, fmt.Errorf("claimstore: get lease %q: %w", name, dao.ErrNotFound)
	}
	return l.lease(name, c, now), nil
}

var _ driver.LeaseStore = (*Leases)(nil)

// String names the store, for logs.
func (l *Leases) String() string { return "elasticsearch leases " + strconv.Quote(l.index) }

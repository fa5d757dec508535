package esstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"gorm.io/gorm/schema"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// Refresh is the value of the refresh parameter the store sends with its
// single-document and bulk writes (Create, Delete, the claim writes): when
// the write's response arrives, the change is visible to searches, so the
// next Find, Count or claim sees it. See the Elasticsearch reference,
// "refresh parameter".
type Refresh string

const (
	// RefreshWaitFor waits for the next scheduled refresh of the index
	// (index.refresh_interval, 1s by default) before answering. It costs
	// the cluster nothing extra but adds up to one refresh interval of
	// latency to every write; a claim of N rows waits N times.
	RefreshWaitFor Refresh = "wait_for"
	// RefreshTrue refreshes the affected shard right after the write.
	// Writes answer at once, at the price of one small segment per write;
	// suited to low write rates or an index with a long refresh interval.
	RefreshTrue Refresh = "true"
)

// DefaultPageSize is the number of hits one search asks for when a Find
// has no limit or a limit above it: the default index.max_result_window.
const DefaultPageSize = 10000

// Option configures a Store.
type Option func(*options) error

type options struct {
	lockTTL  time.Duration
	index    string
	refresh  Refresh
	pageSize int
	namer    schema.Namer
}

// WithIndex names the index that holds the documents (default: the table
// name GORM gives the model, such as "jobs"). The name must be a valid
// Elasticsearch index name: lowercase, at most 255 bytes, not starting
// with '-', '_', '+' or '.', none of \ / * ? " < > | , # : or space.
// An invalid name makes New fail with dao.ErrInvalidArgument.
func WithIndex(name string) Option {
	return func(o *options) error { o.index = name; return nil }
}

// WithRefresh selects the refresh parameter of the store's writes
// (default RefreshWaitFor). Update always refreshes with refresh=true,
// because the update-by-query API does not support wait_for. Any other
// value makes New fail with dao.ErrInvalidArgument.
func WithRefresh(r Refresh) Option {
	return func(o *options) error {
		if r != RefreshWaitFor && r != RefreshTrue {
			return fmt.Errorf("%w: refresh %q (want %q or %q)", dao.ErrInvalidArgument, r, RefreshWaitFor, RefreshTrue)
		}
		o.refresh = r
		return nil
	}
}

// WithPageSize sets how many hits one search request asks for (default
// DefaultPageSize, which must not exceed the index's
// index.max_result_window). Find without a limit, or with a larger one,
// pages with search_after; a claim reads at most one page of candidates.
// n <= 0 makes New fail with dao.ErrInvalidArgument.
func WithPageSize(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: page size %d", dao.ErrInvalidArgument, n)
		}
		o.pageSize = n
		return nil
	}
}

// WithNamer parses the model with namer instead of GORM's default naming
// strategy, so the column names match those of a SQL store configured with
// the same namer.
func WithNamer(namer schema.Namer) Option {
	return func(o *options) error { o.namer = namer; return nil }
}

// esDriver is the driver.Driver of T over one Elasticsearch index. It is
// safe for concurrent use.
type esDriver[T any] struct {
	client   *elasticsearch.Client
	model    *driver.Model[T]
	index    string
	seqIndex string
	refresh  Refresh
	pageSize int
	lockTTL  time.Duration
	cols     []column
	byName   map[string]column
	pk       column
}

// column is one column of the model with its storage kind.
type column struct {
	name  string
	kind  kind
	field *schema.Field
}

var (
	_ driver.Driver[struct{ ID int64 }] = (*esDriver[struct{ ID int64 }])(nil)
	_ driver.Getter[struct{ ID int64 }] = (*esDriver[struct{ ID int64 }])(nil)
	_ driver.Migrator                   = (*esDriver[struct{ ID int64 }])(nil)
	_ driver.As                         = (*esDriver[struct{ ID int64 }])(nil)
)

// New returns the store of T over an index reached through client: the
// portable [dao.Table] over this package's driver. It does no I/O; call
// Migrate to create the index. It fails with an error wrapping
// dao.ErrInvalidArgument when T is not a model GORM can parse with exactly
// one primary key, when the primary key is not an integer or a string, or
// when an option is invalid.
//
// The client is used as configured. Its transport retries a request after a
// network error (three times by default); a retried claim write whose first
// attempt did reach the server then fails with a version conflict, and the
// row it had claimed is not returned. Configure the client with
// DisableRetry: true (or a RetryOnError that refuses POST) to have such a
// write reported as dao.ErrUnavailable instead.
func New[T any](client *elasticsearch.Client, opts ...Option) (*dao.Table[T], error) {
	d, err := newDriver[T](client, opts...)
	if err != nil {
		return nil, fmt.Errorf("claimstore: new: %w", err)
	}
	return dao.New[T](d)
}

// newDriver builds the driver of New.
func newDriver[T any](client *elasticsearch.Client, opts ...Option) (*esDriver[T], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", dao.ErrInvalidArgument)
	}
	o := options{refresh: RefreshWaitFor, pageSize: DefaultPageSize, lockTTL: DefaultLockLease}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	m, err := driver.NewModel[T](o.namer)
	if err != nil {
		return nil, err
	}
	if o.index == "" {
		o.index = m.Table()
	}
	if err := checkIndexName(o.index); err != nil {
		return nil, err
	}
	s := &esDriver[T]{
		client:   client,
		model:    m,
		index:    o.index,
		seqIndex: o.index + "-claimstore-seq",
		refresh:  o.refresh,
		pageSize: o.pageSize,
		lockTTL:  o.lockTTL,
		byName:   map[string]column{},
	}
	for _, name := range m.Columns() {
		f, _ := m.Field(name)
		c := column{name: name, kind: fieldKind(f), field: f}
		s.cols = append(s.cols, c)
		s.byName[name] = c
	}
	s.pk = s.byName[m.PrimaryKey()]
	switch s.pk.kind {
	case kindInt, kindUint, kindString, kindUUID:
	default:
		return nil, fmt.Errorf("%w: primary key %q must be an integer or a string", dao.ErrInvalidArgument, s.pk.name)
	}
	return s, nil
}

func checkIndexName(name string) error {
	bad := name == "" || name == "." || name == ".." || len(name) > 255 ||
		strings.ContainsAny(name[:1], "-_+.") || strings.ContainsAny(name, `\/*?"<>|,# :`) ||
		strings.ToLower(name) != name
	if bad {
		return fmt.Errorf("%w: invalid index name %q", dao.ErrInvalidArgument, name)
	}
	return nil
}

// Model returns the parsed model of T.
func (s *esDriver[T]) Model() *driver.Model[T] { return s.model }

// Indexes names the indexes of a store: Index holds the documents, and
// Sequence the counter document from which Create assigns integer primary
// keys (Index followed by "-claimstore-seq"). dao.Table.As sets a
// *Indexes.
type Indexes struct{ Index, Sequence string }

// As sets target to the store's client when it is a
// **elasticsearch.Client, and to its index names when it is an *Indexes.
func (s *esDriver[T]) As(target any) bool {
	switch t := target.(type) {
	case **elasticsearch.Client:
		*t = s.client
	case *Indexes:
		*t = Indexes{Index: s.index, Sequence: s.seqIndex}
	case **esDriver[T]:
		*t = s
	default:
		return false
	}
	return true
}

// Info states the portable claim guarded by sequence numbers: one search
// plus one conditional write per candidate, and a lost race reported as
// dao.ErrConflict together with the rows claimed before it.
func (s *esDriver[T]) Info() driver.Info {
	return driver.Info{
		Backend:  "elasticsearch",
		Table:    s.index,
		LostRace: dao.LostRaceConflict,
		// keyword fields match terms exactly and sort by their UTF-8
		// bytes (Reference, Keyword type family).
		Collation:    dao.Collation{Name: "keyword"},
		ClaimTimeout: claimWriteTimeout,
	}
}

// do sends req with the store's client (see [send]).
func (s *esDriver[T]) do(ctx context.Context, op string, req esapi.Request) (int, []byte, *Error, error) {
	return send(ctx, s.client, op, req)
}

// send sends req with client and reads the whole response. A transport
// error is returned mapped (dao.ErrUnavailable unless the context ended);
// a response with status >= 300 is returned as an *Error for the caller
// to map, since the meaning of a 404 or a 409 depends on the operation.
func send(ctx context.Context, client esapi.Transport, op string, req esapi.Request) (int, []byte, *Error, error) {
	res, err := req.Do(ctx, client)
	if err != nil {
		return 0, nil, nil, wrapTransport(ctx, op, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, nil, wrapTransport(ctx, op, err)
	}
	if res.StatusCode >= 300 {
		return res.StatusCode, body, parseError(res.StatusCode, body), nil
	}
	return res.StatusCode, body, nil, nil
}

// writeVersioned indexes doc as document id of index: created when
// create, else only if the document is still at version (seqNo,
// primaryTerm) (Elasticsearch reference, "Optimistic concurrency
// control"). It returns the version written; ok is false, with no error,
// on a version conflict (409), meaning another writer came first.
func writeVersioned(ctx context.Context, client esapi.Transport, op, index, id string, doc any, create bool, seqNo, primaryTerm int64) (newSeqNo, newPrimaryTerm int64, ok bool, err error) {
	body, err := jsonBody(doc)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: %w", op, err)
	}
	req := esapi.IndexRequest{Index: index, DocumentID: id, Body: body}
	if create {
		req.OpType = "create"
	} else {
		req.IfSeqNo, req.IfPrimaryTerm = ptr(int(seqNo)), ptr(int(primaryTerm))
	}
	_, resBody, esErr, err := send(ctx, client, op, req)
	if err != nil {
		return 0, 0, false, err
	}
	if esErr != nil {
		if esErr.Status == 409 {
			return 0, 0, false, nil
		}
		return 0, 0, false, wrapES(op, esErr)
	}
	var res struct {
		SeqNo       int64 `json:"_seq_no"`
		PrimaryTerm int64 `json:"_primary_term"`
	}
	if err := json.Unmarshal(resBody, &res); err != nil {
		return 0, 0, false, fmt.Errorf("%s: decode response: %w", op, err)
	}
	return res.SeqNo, res.PrimaryTerm, true, nil
}

func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dao.ErrInvalidArgument, err)
	}
	return bytes.NewReader(b), nil
}

func ptr[V any](v V) *V { return &v }

package esstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
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
	_ driver.Migrator                   = (*esDriver[struct{ ID int64 }])(nil)
	_ driver.As                         = (*esDriver[struct{ ID int64 }])(nil)
	_ driver.Getter[struct{ ID int64 }] = (*esDriver[struct{ ID int64 }])(nil)
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
	o := options{refresh: RefreshWaitFor, pageSize: DefaultPageSize}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("%w", err)
		}
	}
	m, err := driver.NewModel[T](o.namer)
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	if o.index == "" {
		o.index = m.Table()
	}
	if err := checkIndexName(o.index); err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	s := &esDriver[T]{
		client:   client,
		model:    m,
		index:    o.index,
		seqIndex: o.index + "-claimstore-seq",
		refresh:  o.refresh,
		pageSize: o.pageSize,
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
	case kindInt, kindUint, kindString:
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

// Info states the portable claim guarded by sequence numbers: a lost race
// is reported as dao.ErrConflict together with the rows claimed before it.
func (s *esDriver[T]) Info() driver.Info {
	return driver.Info{
		Backend:  "elasticsearch",
		LostRace: dao.LostRaceConflict,
		// keyword fields match terms exactly and sort by their UTF-8
		// bytes (Reference, Keyword type family).
		Collation:    dao.Collation{Name: "keyword"},
		ClaimTimeout: claimWriteTimeout,
	}
}

// do sends req and reads the whole response. A transport error is
// returned mapped (dao.ErrUnavailable unless the context ended); a
// response with status >= 300 is returned as an *Error for the caller to
// map, since the meaning of a 404 or a 409 depends on the operation.
func (s *esDriver[T]) do(ctx context.Context, op string, req esapi.Request) (int, []byte, *Error, error) {
	res, err := req.Do(ctx, s.client)
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

func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dao.ErrInvalidArgument, err)
	}
	return bytes.NewReader(b), nil
}

func ptr[V any](v V) *V { return &v }

// Migrate creates the index with an explicit mapping derived from the
// model, and the sequence index. Strings map to keyword, integers to long,
// floats to double, booleans to boolean, times to date, []byte to binary,
// and any other column (JSON, custom types) to a disabled object kept only
// in _source; the mapping is strict, so a document with an unknown field
// is refused. An index that already exists is left as it is, so Migrate
// is idempotent. Errors are mapped as every other call's.
func (s *esDriver[T]) Migrate(ctx context.Context) error {
	props := obj{}
	for _, c := range s.cols {
		props[c.name] = mappingOf(c.kind)
	}
	if err := s.createIndex(ctx, s.index, obj{"mappings": obj{"dynamic": "strict", "properties": props}}); err != nil {
		return err
	}
	return s.createIndex(ctx, s.seqIndex, obj{"mappings": obj{
		"dynamic":    "strict",
		"properties": obj{"next": obj{"type": "long", "index": false}},
	}})
}

func mappingOf(k kind) obj {
	switch k {
	case kindInt, kindUint:
		return obj{"type": "long"}
	case kindFloat:
		return obj{"type": "double"}
	case kindString:
		return obj{"type": "keyword"}
	case kindBool:
		return obj{"type": "boolean"}
	case kindTime:
		return obj{"type": "date", "format": "strict_date_optional_time||epoch_millis"}
	case kindBytes:
		return obj{"type": "binary"}
	}
	return obj{"type": "object", "enabled": false}
}

func (s *esDriver[T]) createIndex(ctx context.Context, name string, body obj) error {
	r, err := jsonBody(body)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	_, _, esErr, err := s.do(ctx, "migrate "+name, esapi.IndicesCreateRequest{Index: name, Body: r})
	if err != nil {
		return err
	}
	if esErr != nil && esErr.Type != "resource_already_exists_exception" {
		return wrapES("migrate "+name, esErr)
	}
	return nil
}

// Drop deletes the index and the sequence index of store, an Elasticsearch
// store built by [New], with all their documents. Indexes that do not
// exist are ignored. A store of another backend is
// dao.ErrInvalidArgument.
func Drop[T any](ctx context.Context, store *dao.Table[T]) error {
	var d *esDriver[T]
	if !store.As(&d) {
		return fmt.Errorf("claimstore: drop: %w: not an Elasticsearch store", dao.ErrInvalidArgument)
	}
	if err := d.drop(ctx); err != nil {
		return fmt.Errorf("claimstore: drop: %w", err)
	}
	return nil
}

// drop deletes the driver's indexes.
func (s *esDriver[T]) drop(ctx context.Context) error {
	for _, name := range []string{s.index, s.seqIndex} {
		_, _, esErr, err := s.do(ctx, "drop "+name, esapi.IndicesDeleteRequest{Index: []string{name}})
		if err != nil {
			return err
		}
		if esErr != nil && esErr.Status != 404 {
			return wrapES("drop "+name, esErr)
		}
	}
	return nil
}

// Get returns the document whose _id is the primary key id, read in real
// time with the get API (no refresh needed). key is the checked primary
// key. A missing document or index is an error wrapping dao.ErrNotFound
// and the 404 *Error.
func (s *esDriver[T]) Get(ctx context.Context, key any) (T, error) {
	var zero T
	did, err := docID(key)
	if err != nil {
		return zero, err
	}
	op := "get API"
	_, body, esErr, err := s.do(ctx, op, esapi.GetRequest{Index: s.index, DocumentID: url.PathEscape(did)})
	if err != nil {
		return zero, err
	}
	if esErr != nil {
		return zero, wrapES(op, esErr)
	}
	var res struct {
		Found  bool            `json:"found"`
		Source json.RawMessage `json:"_source"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return zero, fmt.Errorf("%s: decode response: %w", op, err)
	}
	if !res.Found {
		return zero, fmt.Errorf("%s: %w", op, dao.ErrNotFound)
	}
	row, err := s.decodeDoc(res.Source)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", op, err)
	}
	return row, nil
}

// hit is one search hit.
type hit struct {
	ID          string            `json:"_id"`
	SeqNo       *int64            `json:"_seq_no"`
	PrimaryTerm *int64            `json:"_primary_term"`
	Source      json.RawMessage   `json:"_source"`
	Sort        []json.RawMessage `json:"sort"`
}

// search runs q (checked) and returns up to q.Limit hits (all when 0),
// paging with search_after over the total order of q.OrderBy. With
// onePage it sends a single request of at most the page size.
func (s *esDriver[T]) search(ctx context.Context, op string, q dao.Query, seqNo, source, onePage bool) ([]hit, error) {
	query, err := s.query(q.Where)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	sort, err := s.sort(q.OrderBy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out []hit
	var after []json.RawMessage
	for {
		size := s.pageSize
		if q.Limit > 0 && q.Limit-len(out) < size {
			size = q.Limit - len(out)
		}
		body := obj{"query": query, "sort": sort, "size": size, "track_total_hits": false, "seq_no_primary_term": seqNo}
		if !source {
			body["_source"] = false
		}
		if after != nil {
			body["search_after"] = after
		}
		r, err := jsonBody(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		_, resBody, esErr, err := s.do(ctx, op, esapi.SearchRequest{Index: []string{s.index}, Body: r})
		if err != nil {
			return nil, err
		}
		if esErr != nil {
			return nil, wrapES(op, esErr)
		}
		var res struct {
			Hits struct {
				Hits []hit `json:"hits"`
			} `json:"hits"`
		}
		if err := json.Unmarshal(resBody, &res); err != nil {
			return nil, fmt.Errorf("%s: decode response: %w", op, err)
		}
		out = append(out, res.Hits.Hits...)
		n := len(res.Hits.Hits)
		if onePage || n < size || (q.Limit > 0 && len(out) >= q.Limit) {
			return out, nil
		}
		after = res.Hits.Hits[n-1].Sort
		if len(after) == 0 {
			return nil, fmt.Errorf("%s: hit without sort values, cannot page", op)
		}
	}
}

// Select returns the documents matching q.Where in q.OrderBy order (the
// primary key breaking ties), at most q.Limit of them when it is > 0.
// Criteria and ordering on binary or object columns are
// dao.ErrInvalidArgument. Only refreshed documents are seen; the store's
// own writes refresh. Pages of the result are separate searches, so a
// read longer than one page is not a snapshot.
func (s *esDriver[T]) Select(ctx context.Context, q dao.Query) ([]T, error) {
	hits, err := s.search(ctx, "find", q, false, true, false)
	if err != nil {
		return nil, err
	}
	return s.decodeHits("find", hits)
}

func (s *esDriver[T]) decodeHits(op string, hits []hit) ([]T, error) {
	out := make([]T, len(hits))
	for i, h := range hits {
		row, err := s.decodeDoc(h.Source)
		if err != nil {
			return nil, fmt.Errorf("%s: document %s: %w", op, h.ID, err)
		}
		out[i] = row
	}
	return out, nil
}

// Count returns how many refreshed documents match where (the count API).
func (s *esDriver[T]) Count(ctx context.Context, where dao.Criteria) (int64, error) {
	query, err := s.query(where)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	r, err := jsonBody(obj{"query": query})
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	_, body, esErr, err := s.do(ctx, "count", esapi.CountRequest{Index: []string{s.index}, Body: r})
	if err != nil {
		return 0, err
	}
	if esErr != nil {
		return 0, wrapES("count", esErr)
	}
	var res struct {
		Count *int64 `json:"count"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Count == nil {
		return 0, fmt.Errorf("count: decode response %q: %v", body, err)
	}
	return *res.Count, nil
}

// bulkItem is one item of a bulk response.
type bulkItem struct {
	ID     string      `json:"_id"`
	Status int         `json:"status"`
	Result string      `json:"result"`
	Error  *errorCause `json:"error"`
	raw    json.RawMessage
}

// bulk sends NDJSON lines to the bulk API with the store's refresh and
// returns the items in request order.
func (s *esDriver[T]) bulk(ctx context.Context, op string, lines [][]byte) ([]bulkItem, error) {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	_, body, esErr, err := s.do(ctx, op, esapi.BulkRequest{Index: s.index, Body: &buf, Refresh: string(s.refresh)})
	if err != nil {
		return nil, err
	}
	if esErr != nil {
		return nil, wrapES(op, esErr)
	}
	var res struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("%s: decode response: %w", op, err)
	}
	items := make([]bulkItem, len(res.Items))
	for i, m := range res.Items {
		for _, raw := range m {
			if err := json.Unmarshal(raw, &items[i]); err != nil {
				return nil, fmt.Errorf("%s: decode item: %w", op, err)
			}
			items[i].raw = raw
		}
	}
	return items, nil
}

func action(name string, meta obj) []byte {
	b, _ := json.Marshal(obj{name: meta})
	return b
}

// Create indexes items as new documents with the bulk API (op_type create)
// and the store's refresh. An item whose integer primary key is zero gets
// the next value of the index's counter, written back into the item. A
// document whose _id exists already is dao.ErrDuplicate. Bulk writes are
// not atomic: when any item fails, the documents this call created are
// deleted again before the error is returned, and assigned keys are reset
// to zero in the items; other readers may see them in between. Unique
// indexes of the model other than the primary key are not enforced. A nil
// item is refused by the portable layer before anything is sent.
func (s *esDriver[T]) Insert(ctx context.Context, items []*T) error {
	docs := make([]map[string]any, len(items))
	var zeros []int
	var maxExplicit int64
	seen := map[string]bool{}
	for i, it := range items {
		if it == nil {
			return fmt.Errorf("create: %w: nil item", dao.ErrInvalidArgument)
		}
		doc, err := s.encodeDoc(it)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		docs[i] = doc
		id := s.model.ID(it)
		switch x := id.(type) {
		case int64:
			if x == 0 {
				zeros = append(zeros, i)
				continue
			}
			maxExplicit = max(maxExplicit, x)
		case uint64:
			if x == 0 {
				zeros = append(zeros, i)
				continue
			}
			if x > math.MaxInt64 {
				return fmt.Errorf("create: %w: primary key %d exceeds the long range", dao.ErrInvalidArgument, x)
			}
			maxExplicit = max(maxExplicit, int64(x))
		}
		did, err := docID(id)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		if seen[did] {
			return fmt.Errorf("create: %w: primary key %s twice in one batch", dao.ErrDuplicate, did)
		}
		seen[did] = true
	}
	if s.pk.kind != kindString {
		first, err := s.allocate(ctx, int64(len(zeros)), maxExplicit)
		if err != nil {
			return err
		}
		for j, i := range zeros {
			if err := s.model.Apply(items[i], dao.Set{s.pk.name: first + int64(j)}); err != nil {
				return fmt.Errorf("create: assign id: %w", err)
			}
			docs[i][s.pk.name] = first + int64(j)
		}
	}
	resetIDs := func() {
		for _, i := range zeros {
			_ = s.model.Apply(items[i], dao.Set{s.pk.name: int64(0)})
		}
	}
	lines := make([][]byte, 0, 2*len(items))
	for i, it := range items {
		did, _ := docID(s.model.ID(it))
		src, err := json.Marshal(docs[i])
		if err != nil {
			resetIDs()
			return fmt.Errorf("create: %w: %w", dao.ErrInvalidArgument, err)
		}
		lines = append(lines, action("create", obj{"_id": did}), src)
	}
	res, err := s.bulk(ctx, "create", lines)
	if err != nil {
		resetIDs()
		return err
	}
	var failed *bulkItem
	var undo [][]byte
	for i := range res {
		if res[i].Error != nil || res[i].Status >= 300 {
			if failed == nil {
				failed = &res[i]
			}
			continue
		}
		undo = append(undo, action("delete", obj{"_id": res[i].ID}))
	}
	if failed == nil {
		return nil
	}
	resetIDs()
	var cause errorCause
	if failed.Error != nil {
		cause = *failed.Error
	}
	esErr := causeError(failed.Status, cause, failed.raw)
	op := "create " + failed.ID
	var result error
	if esErr.Status == 409 {
		result = fmt.Errorf("%s: %w: %w", op, dao.ErrDuplicate, esErr)
	} else {
		result = wrapES(op, esErr)
	}
	if len(undo) > 0 {
		if _, err := s.bulk(ctx, "create: undo", undo); err != nil {
			return fmt.Errorf("%w (and the documents created before it could not be deleted: %w)", result, err)
		}
	}
	return result
}

// allocate reserves n consecutive integer keys above both the counter and
// floor, and returns the first. The counter is one document of the sequence
// index updated with optimistic concurrency: read it (a real-time get, with
// its _seq_no and _primary_term), write the new value with if_seq_no and
// if_primary_term, and on a version conflict read again. One Create costs
// two round trips for the counter, whatever the batch size. With n == 0 it
// only raises the counter to floor, so later keys never collide with keys
// the caller chose.
func (s *esDriver[T]) allocate(ctx context.Context, n, floor int64) (int64, error) {
	const op = "create: allocate ids"
	for attempt := 0; ; attempt++ {
		_, body, esErr, err := s.do(ctx, op, esapi.GetRequest{Index: s.seqIndex, DocumentID: url.PathEscape(s.index)})
		if err != nil {
			return 0, err
		}
		var cur struct {
			Found       bool `json:"found"`
			SeqNo       int  `json:"_seq_no"`
			PrimaryTerm int  `json:"_primary_term"`
			Source      struct {
				Next int64 `json:"next"`
			} `json:"_source"`
		}
		if esErr != nil && esErr.Type != "" {
			return 0, fmt.Errorf("%w (has Migrate run?)", wrapES(op, esErr))
		}
		if err := json.Unmarshal(body, &cur); err != nil {
			return 0, fmt.Errorf("%s: decode response: %w", op, err)
		}
		base := max(cur.Source.Next, floor)
		if cur.Found && base+n == cur.Source.Next {
			return base + 1, nil
		}
		if n == 0 && base == 0 {
			return 1, nil
		}
		req := esapi.IndexRequest{Index: s.seqIndex, DocumentID: url.PathEscape(s.index)}
		if cur.Found {
			req.IfSeqNo, req.IfPrimaryTerm = ptr(cur.SeqNo), ptr(cur.PrimaryTerm)
		} else {
			req.OpType = "create"
		}
		if req.Body, err = jsonBody(obj{"next": base + n}); err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		_, _, esErr, err = s.do(ctx, op, req)
		if err != nil {
			return 0, err
		}
		if esErr == nil {
			return base + 1, nil
		}
		if esErr.Status != 409 || attempt >= 100 {
			return 0, wrapES(op, esErr)
		}
		// Another writer moved the counter: back off a little, then retry.
		d := time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(attempt+1, 20))))
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: %w", op, ctx.Err())
		case <-time.After(d):
		}
	}
}

// Update applies set to every refreshed document matching where, with the
// update-by-query API, the fixed WriteScript and the values as params, and
// refresh=true. It returns the number of documents updated. Set values and
// increments are applied by the script on the server. A document changed
// by someone else while the update runs aborts it with an error wrapping
// dao.ErrConflict; the documents updated before stay updated and are
// counted in the returned number.
func (s *esDriver[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	query, err := s.query(where)
	if err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	plain, incr, err := s.scriptParams(set)
	if err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	r, err := jsonBody(obj{"query": query, "script": obj{
		"source": WriteScript, "lang": "painless",
		"params": obj{"where": nil, "set": plain, "incr": incr},
	}})
	if err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	status, body, esErr, err := s.do(ctx, "update", esapi.UpdateByQueryRequest{
		Index: []string{s.index}, Body: r, Refresh: ptr(true), Conflicts: "abort",
	})
	if err != nil {
		return 0, err
	}
	var res struct {
		Updated  int64 `json:"updated"`
		TimedOut bool  `json:"timed_out"`
		Failures []struct {
			ID     string     `json:"id"`
			Status int        `json:"status"`
			Cause  errorCause `json:"cause"`
		} `json:"failures"`
	}
	if esErr != nil && esErr.Type != "" {
		return 0, wrapES("update", esErr)
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return 0, fmt.Errorf("update: decode response: %w", err)
	}
	if len(res.Failures) > 0 {
		f := res.Failures[0]
		st := f.Status
		if st == 0 {
			st = status
		}
		return res.Updated, wrapES("update "+f.ID, causeError(st, f.Cause, body))
	}
	if esErr != nil {
		return res.Updated, wrapES("update", esErr)
	}
	if res.TimedOut {
		return res.Updated, fmt.Errorf("update: timed out after %d documents", res.Updated)
	}
	return res.Updated, nil
}

// Delete removes at most limit documents matching where, smallest primary
// keys first: it searches the victims' _id, _seq_no and _primary_term
// (sorted by primary key, at most one page) and deletes them with one bulk
// request, each delete guarded by if_seq_no and if_primary_term so that a
// document changed since the search (and perhaps no longer matching) is
// left alone; it repeats while the limit is not reached and more may match.
// Documents already gone or changed are not counted; after a round with
// changed documents it searches again (at most eight such rounds). It is
// idempotent.
func (s *esDriver[T]) Delete(ctx context.Context, where dao.Criteria, limit int) (int64, error) {
	var deleted int64
	for conflictRounds := 0; deleted < int64(limit) && conflictRounds < 8; {
		want := min(limit-int(deleted), s.pageSize)
		q := dao.Query{Where: where, OrderBy: []dao.Order{{Field: s.pk.name}}, Limit: want}
		hits, err := s.search(ctx, "delete: search", q, true, false, true)
		if err != nil {
			return deleted, err
		}
		if len(hits) == 0 {
			break
		}
		lines := make([][]byte, len(hits))
		for i, h := range hits {
			if h.SeqNo == nil || h.PrimaryTerm == nil {
				return deleted, fmt.Errorf("delete: hit %s without _seq_no", h.ID)
			}
			lines[i] = action("delete", obj{"_id": h.ID, "if_seq_no": *h.SeqNo, "if_primary_term": *h.PrimaryTerm})
		}
		items, err := s.bulk(ctx, "delete", lines)
		if err != nil {
			return deleted, err
		}
		conflicts := 0
		for _, it := range items {
			switch {
			case it.Status == 200 && it.Result == "deleted":
				deleted++
			case it.Status == 404:
			case it.Status == 409:
				conflicts++
			default:
				var cause errorCause
				if it.Error != nil {
					cause = *it.Error
				}
				return deleted, wrapES("delete "+it.ID, causeError(it.Status, cause, it.raw))
			}
		}
		if conflicts > 0 {
			conflictRounds++
		} else if len(hits) < want {
			break // no more matching documents
		}
	}
	return deleted, nil
}

type seqPT struct{ seqNo, primaryTerm int64 }

// claimWriteTimeout bounds how long a claim waits for the answer to an
// update it has sent, after the caller's context ended or not.
const claimWriteTimeout = 30 * time.Second

// The portable claim on Elasticsearch is guarded by sequence numbers: one
// search for candidates (with seq_no_primary_term, at most one page), then
// for each candidate one update API call carrying if_seq_no and
// if_primary_term and the fixed WriteScript, which re-checks the criteria
// on the current document and sets ctx.op = 'noop' when they no longer
// hold (the row is skipped). Each write uses the store's refresh, so a
// claimed document is not seen as claimable by the next search. A version
// conflict (409 version_conflict_engine_exception: another writer changed
// the document after the search) ends the claim: the rows claimed before
// it are returned together with an error wrapping dao.ErrConflict and the
// *Error. A candidate deleted since the search is skipped.

// ReadCandidates checks that the claim's criteria can be written as a
// guard script (dao.ErrInvalidArgument otherwise, before any I/O), then
// searches the candidates with their _seq_no and _primary_term, each
// candidate's version.
func (s *esDriver[T]) ReadCandidates(ctx context.Context, q dao.Query) ([]driver.Candidate[T], error) {
	if _, err := s.guardProgram(q.Where); err != nil {
		return nil, err
	}
	hits, err := s.search(ctx, "claim: search", q, true, true, true)
	if err != nil {
		return nil, err
	}
	rows, err := s.decodeHits("claim", hits)
	if err != nil {
		return nil, err
	}
	out := driver.Candidates(rows)
	for i, h := range hits {
		if h.SeqNo == nil || h.PrimaryTerm == nil {
			return nil, fmt.Errorf("claim: hit %s without _seq_no", h.ID)
		}
		out[i].Version = seqPT{*h.SeqNo, *h.PrimaryTerm}
	}
	return out, nil
}

// ClaimRow writes set to the candidate with the update API, conditioned on
// the candidate's sequence number and primary term.
func (s *esDriver[T]) ClaimRow(ctx context.Context, c *driver.Candidate[T], where dao.Criteria, set dao.Set) (bool, error) {
	did, err := docID(s.model.ID(&c.Row))
	if err != nil {
		return false, err
	}
	sp, ok := c.Version.(seqPT)
	if !ok {
		return false, fmt.Errorf("claim: no sequence number for candidate %s", did)
	}
	prog, err := s.guardProgram(where)
	if err != nil {
		return false, err
	}
	plain, incr, err := s.scriptParams(set)
	if err != nil {
		return false, err
	}
	var guard any
	if prog != nil {
		guard = prog
	}
	r, err := jsonBody(obj{"script": obj{
		"source": WriteScript, "lang": "painless",
		"params": obj{"where": guard, "set": plain, "incr": incr},
	}})
	if err != nil {
		return false, err
	}
	op := "claim " + did
	// Once sent, the update's outcome is waited for whatever becomes of
	// ctx: abandoning the request would leave a document claimed that no
	// caller received. claimWriteTimeout bounds the wait.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimWriteTimeout)
	defer cancel()
	_, body, esErr, err := s.do(uctx, op, esapi.UpdateRequest{
		Index: s.index, DocumentID: url.PathEscape(did), Body: r,
		IfSeqNo: ptr(int(sp.seqNo)), IfPrimaryTerm: ptr(int(sp.primaryTerm)),
		Refresh: string(s.refresh),
	})
	if err != nil && uctx.Err() != nil {
		return false, fmt.Errorf("%s: %w: no answer within %v, outcome unknown (%v)", op, dao.ErrUnavailable, claimWriteTimeout, err)
	}
	if err != nil {
		return false, err
	}
	if esErr != nil {
		if esErr.Status == 404 && esErr.Type == "document_missing_exception" {
			return false, nil
		}
		return false, wrapES(op, esErr)
	}
	var res struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return false, fmt.Errorf("%s: decode response: %w", op, err)
	}
	switch res.Result {
	case "updated":
		return true, nil
	case "noop":
		return false, nil
	}
	return false, fmt.Errorf("%s: unexpected result %q", op, res.Result)
}

package esstore_test

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/adapters/esstore/internal/fakees"
	"github.com/claimstore/claimstore/dao"
)

// Item is the model of the adapter tests: every column kind the mapping
// knows.
type Item struct {
	ID     int64 `gorm:"primaryKey"`
	Status string
	N      int
	F      float64
	Ok     bool
	At     time.Time
	Until  *time.Time
	Tag    *string
	Blob   []byte
	Attrs  Attrs
	Meta   Meta `gorm:"serializer:json"`
}

// Attrs is a JSON column type (GormDataType "json"): the document holds it
// as JSON in a disabled object, kept in _source, not searchable.
type Attrs struct {
	Labels []string       `json:"labels"`
	Extra  map[string]int `json:"extra"`
}

// GormDataType makes Attrs a json column.
func (Attrs) GormDataType() string { return "json" }

// Value serializes Attrs for SQL drivers.
func (a Attrs) Value() (driver.Value, error) { return json.Marshal(a) }

// Scan reads Attrs from SQL drivers.
func (a *Attrs) Scan(v any) error {
	switch x := v.(type) {
	case []byte:
		return json.Unmarshal(x, a)
	case string:
		return json.Unmarshal([]byte(x), a)
	}
	return fmt.Errorf("scan %T into Attrs", v)
}

// Meta is written through GORM's JSON serializer: the document holds the
// serialized text.
type Meta struct {
	Owner string `json:"owner"`
}

// ItemPlus has one column more than Item, for mapping errors.
type ItemPlus struct {
	Item
	Extra string
}

// Keyed has a string primary key.
type Keyed struct {
	Key    string `gorm:"primaryKey"`
	Status string
}

// backend is one server the tests run against.
type backend struct {
	url  string
	fake *fakees.Server // nil on a real server
	opts []esstore.Option
}

// eachBackend runs fn against a fresh fake server and, when
// CLAIMSTORE_ELASTICSEARCH_URL is set, against the real server (with
// refresh=true, to keep the run short).
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("fake", func(t *testing.T) {
		f := newFake(t)
		fn(t, backend{url: f.URL(), fake: f})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		fn(t, backend{url: realURL(t), opts: []esstore.Option{esstore.WithRefresh(esstore.RefreshTrue)}})
	})
}

func itemStore(t *testing.T, b backend, opts ...esstore.Option) *dao.Table[Item] {
	return newStore[Item](t, b.url, append(slices.Clone(b.opts), opts...)...)
}

func seedItems(t *testing.T, s dao.Store[Item], n int) []Item {
	t.Helper()
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	items := make([]Item, n)
	ptrs := make([]*Item, n)
	for i := range items {
		items[i] = Item{Status: "ready", N: i, F: float64(i) / 2, At: base.Add(time.Duration(i) * time.Minute)}
		ptrs[i] = &items[i]
	}
	if err := s.Create(context.Background(), ptrs...); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return items
}

func itemIDs(rows []Item) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

var ready = dao.Eq("status", "ready")

func claimSet(who string) dao.Set {
	return dao.Set{"status": "claimed", "tag": who, "n": dao.Incr(100)}
}

// TestLostRaceReturnsConflictWithClaimedRows forces a write to the second
// candidate between the candidate search and the guarded updates: the
// claim must stop with ErrConflict (the 409 reachable with errors.As),
// return the first row it claimed, and leave the others unclaimed; no row
// is ever claimed twice.
func TestLostRaceReturnsConflictWithClaimedRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		rows := seedItems(t, s, 4)
		var stolen []Item
		var stealErr error
		trace := &dao.ClaimTrace{CandidatesRead: func(ctx context.Context, ids []any) {
			if len(ids) != 4 {
				t.Errorf("candidates %v, want 4", ids)
				return
			}
			// Another claimer takes the second candidate first.
			stolen, stealErr = s.Claim(context.Background(), dao.ClaimRequest{
				Where: dao.And(ready, dao.Eq("id", ids[1])), Set: claimSet("thief"), Limit: 1,
			})
		}}
		got, err := s.Claim(dao.WithClaimTrace(ctx, trace), dao.ClaimRequest{
			Where: ready, Set: claimSet("first"), Limit: 4, OrderBy: []dao.Order{dao.Asc("n")},
		})
		if stealErr != nil || len(stolen) != 1 || stolen[0].ID != rows[1].ID {
			t.Fatalf("competing claim = %v, %v; want row %d", itemIDs(stolen), stealErr, rows[1].ID)
		}
		if !errors.Is(err, dao.ErrConflict) || !dao.IsRetryable(err) {
			t.Fatalf("claim error = %v; want a retryable ErrConflict", err)
		}
		var esErr *esstore.Error
		if !errors.As(err, &esErr) || esErr.Status != http.StatusConflict || esErr.Type != "version_conflict_engine_exception" {
			t.Errorf("errors.As(*esstore.Error) = %+v; want the 409 version_conflict_engine_exception", esErr)
		}
		if !slices.Equal(itemIDs(got), []int64{rows[0].ID}) {
			t.Fatalf("claim returned %v with the conflict; want the row claimed before it, %d", itemIDs(got), rows[0].ID)
		}
		if got[0].Status != "claimed" || got[0].Tag == nil || *got[0].Tag != "first" || got[0].N != 100 {
			t.Errorf("returned row is not in its post-claim state: %+v", got[0])
		}
		owner := map[int64]string{rows[0].ID: "first", rows[1].ID: "thief"}
		for _, r := range rows {
			cur, err := s.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := owner[r.ID]
			switch {
			case want == "" && (cur.Status != "ready" || cur.Tag != nil || cur.N != r.N):
				t.Errorf("row %d was not returned to anyone but changed: %+v", r.ID, cur)
			case want != "" && (cur.Status != "claimed" || cur.Tag == nil || *cur.Tag != want || cur.N != r.N+100):
				t.Errorf("row %d should be claimed once by %s: %+v", r.ID, want, cur)
			}
		}
		// The rows left are claimable, once.
		rest, err := s.Claim(ctx, dao.ClaimRequest{Where: ready, Set: claimSet("after"), Limit: 10})
		if err != nil || !slices.Equal(itemIDs(rest), []int64{rows[2].ID, rows[3].ID}) {
			t.Errorf("claim of the rest = %v, %v; want rows %d and %d", itemIDs(rest), err, rows[2].ID, rows[3].ID)
		}
	})
}

// TestLostRaceOnFirstCandidate: a conflict on the very first guarded
// update returns no rows with ErrConflict, and changes nothing.
func TestLostRaceOnFirstCandidate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		rows := seedItems(t, s, 3)
		trace := &dao.ClaimTrace{CandidatesRead: func(ctx context.Context, ids []any) {
			// A plain update (the row stays eligible) still changes its
			// _seq_no, so the guarded update must fail.
			if _, err := s.Update(context.Background(), dao.Eq("id", ids[0]), dao.Set{"f": 9.5}); err != nil {
				t.Errorf("concurrent update: %v", err)
			}
		}}
		got, err := s.Claim(dao.WithClaimTrace(ctx, trace), dao.ClaimRequest{Where: ready, Set: claimSet("first"), Limit: 3})
		if !errors.Is(err, dao.ErrConflict) || len(got) != 0 {
			t.Fatalf("claim = %v, %v; want no rows and ErrConflict", itemIDs(got), err)
		}
		if n, err := s.Count(ctx, dao.Eq("status", "claimed")); err != nil || n != 0 {
			t.Errorf("claimed rows after the conflict = %d, %v; want 0", n, err)
		}
		again, err := s.Claim(ctx, dao.ClaimRequest{Where: ready, Set: claimSet("second"), Limit: 3})
		if err != nil || len(again) != len(rows) {
			t.Errorf("retry = %v, %v; want all %d rows", itemIDs(again), err, len(rows))
		}
	})
}

// TestDeletedCandidateIsSkipped deletes a candidate between the candidate
// search and the guarded writes: the claim skips it without an error and
// claims the others; the deleted document stays deleted.
func TestDeletedCandidateIsSkipped(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		rows := seedItems(t, s, 3)
		trace := &dao.ClaimTrace{CandidatesRead: func(ctx context.Context, ids []any) {
			if n, err := s.Delete(context.Background(), dao.Eq("id", ids[1]), 1); err != nil || n != 1 {
				t.Errorf("concurrent delete = %d, %v", n, err)
			}
		}}
		got, err := s.Claim(dao.WithClaimTrace(ctx, trace), dao.ClaimRequest{
			Where: ready, Set: claimSet("w"), Limit: 3, OrderBy: []dao.Order{dao.Asc("id")},
		})
		if err != nil || !slices.Equal(itemIDs(got), []int64{rows[0].ID, rows[2].ID}) {
			t.Fatalf("claim = %v, %v; want rows %d and %d, no error", itemIDs(got), err, rows[0].ID, rows[2].ID)
		}
		if _, err := s.Get(ctx, rows[1].ID); !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("deleted candidate after the claim: Get = %v; want ErrNotFound", err)
		}
	})
}

// TestClaimRequests checks on the fake server what a claim sends: one
// search with seq_no_primary_term, then one index API write per candidate
// carrying if_seq_no, if_primary_term and the refresh parameter, exactly
// Capabilities().ClaimRoundTrips.For(n) requests.
func TestClaimRequests(t *testing.T) {
	for _, refresh := range []esstore.Refresh{esstore.RefreshWaitFor, esstore.RefreshTrue} {
		t.Run(string(refresh), func(t *testing.T) {
			f := newFake(t)
			s := newStore[Item](t, f.URL(), esstore.WithRefresh(refresh))
			seedItems(t, s, 5)
			f.ResetRequests()
			got, err := s.Claim(context.Background(), dao.ClaimRequest{Where: ready, Set: claimSet("w"), Limit: 3})
			if err != nil || len(got) != 3 {
				t.Fatalf("claim = %v, %v", itemIDs(got), err)
			}
			reqs := f.Requests()
			if want := s.Capabilities().ClaimRoundTrips.For(3); len(reqs) != want {
				t.Fatalf("claim of 3 rows sent %d requests, want %d: %v", len(reqs), want, reqs)
			}
			if !strings.HasPrefix(reqs[0], "POST /"+indexOf(s)+"/_search") {
				t.Errorf("first request %q is not the candidate search", reqs[0])
			}
			for i, r := range reqs[1:] {
				id := got[i].ID
				for _, part := range []string{
					fmt.Sprintf("PUT /%s/_doc/%d?", indexOf(s), id), "if_seq_no=", "if_primary_term=1", "refresh=" + string(refresh),
				} {
					if !strings.Contains(r, part) {
						t.Errorf("guarded write %q lacks %q", r, part)
					}
				}
			}
			// The claimed documents are visible to the next search at once:
			// the fake has no periodic refresh.
			if n, err := s.Count(context.Background(), dao.Eq("status", "claimed")); err != nil || n != 3 {
				t.Errorf("Count(claimed) right after the claim = %d, %v; want 3", n, err)
			}
		})
	}
}

// TestTimes: a time round-trips to the nanosecond as the same instant in
// UTC; criteria compare at the index's millisecond resolution.
func TestTimes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		at := time.Date(2031, 3, 4, 5, 6, 7, 123456789, zone)
		until := time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC)
		it := Item{Status: "t", At: at, Until: &until}
		if err := s.Create(ctx, &it); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.At.Equal(at) || got.At.Location() != time.UTC || got.At.Nanosecond() != 123456789 {
			t.Errorf("At = %v (%v), want the instant %v in UTC to the nanosecond", got.At, got.At.Location(), at)
		}
		if got.Until == nil || !got.Until.Equal(until) {
			t.Errorf("Until = %v, want %v", got.Until, until)
		}
		sameMilli := at.Add(-123456789 + 123000001) // 2031-03-04T…:07.123000001
		for _, c := range []struct {
			name string
			c    dao.Criteria
			want int64
		}{
			{"Eq at the nanosecond", dao.Eq("at", at), 1},
			{"Eq within the same millisecond", dao.Eq("at", sameMilli), 1},
			{"Gt within the same millisecond", dao.Gt("at", sameMilli), 0},
			{"Lt the next millisecond", dao.Lt("at", at.Truncate(time.Millisecond).Add(time.Millisecond)), 1},
			{"Lt before 1970", dao.Lt("until", time.Unix(0, 0)), 1},
		} {
			if n, err := s.Count(ctx, c.c); err != nil || n != c.want {
				t.Errorf("%s: Count = %d, %v; want %d", c.name, n, err, c.want)
			}
		}
	})
}

// TestColumnKinds: binary and JSON (object) columns round-trip, are refused
// in criteria and ordering without a request, and every searchable kind
// works in criteria.
func TestColumnKinds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		tag := "red"
		it := Item{Status: "k", N: -7, F: 2.25, Ok: true, Tag: &tag, Blob: []byte{0, 1, 2, 255},
			Attrs: Attrs{Labels: []string{"x", "y"}, Extra: map[string]int{"a": 1}}, Meta: Meta{Owner: "me"}}
		if err := s.Create(ctx, &it); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.N != -7 || got.F != 2.25 || !got.Ok || *got.Tag != "red" || string(got.Blob) != string(it.Blob) ||
			!slices.Equal(got.Attrs.Labels, it.Attrs.Labels) || got.Attrs.Extra["a"] != 1 || got.Meta.Owner != "me" {
			t.Errorf("round trip: got %+v, want %+v", got, it)
		}
		for _, c := range []dao.Criteria{
			dao.Eq("ok", true), dao.Lt("n", 0), dao.Ge("f", 2.25), dao.In("tag", "blue", "red"),
			dao.LtField("n", "f"), dao.NotNull("tag"),
		} {
			if n, err := s.Count(ctx, c); err != nil || n != 1 {
				t.Errorf("Count(%v) = %d, %v; want 1", c, n, err)
			}
		}
		if b.fake != nil {
			b.fake.ResetRequests()
		}
		for name, call := range map[string]func() error{
			"criteria on binary": func() error { _, err := s.Count(ctx, dao.NotNull("blob")); return err },
			"criteria on object": func() error { _, err := s.Find(ctx, dao.Query{Where: dao.IsNull("attrs")}); return err },
			"order on binary":    func() error { _, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("blob")}}); return err },
			"serialized column":  func() error { _, err := s.Count(ctx, dao.Eq("meta", `{"owner":"me"}`)); return err },
			"claim on binary": func() error {
				_, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.NotNull("blob"), Set: dao.Set{"ok": false}, Limit: 1})
				return err
			},
		} {
			if err := call(); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("%s: error %v, want ErrInvalidArgument", name, err)
			}
		}
		if b.fake != nil {
			if r := b.fake.Requests(); len(r) != 0 {
				t.Errorf("refused calls sent requests: %v", r)
			}
		}
	})
}

// TestErrors checks the mapping of native errors.
func TestErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		var esErr *esstore.Error

		_, err := s.Get(ctx, 12345)
		if !errors.Is(err, dao.ErrNotFound) || !errors.As(err, &esErr) || esErr.Status != 404 {
			t.Errorf("Get of a missing document: %v (%+v); want ErrNotFound with the 404", err, esErr)
		}

		missing, err := esstore.New[Item](newClient(t, b.url), esstore.WithIndex(indexName()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = missing.Find(ctx, dao.Query{})
		if !errors.Is(err, dao.ErrNotFound) || !errors.As(err, &esErr) || esErr.Type != "index_not_found_exception" {
			t.Errorf("Find on a missing index: %v; want ErrNotFound with index_not_found_exception", err)
		}

		// A model with a column the strict mapping does not know.
		plus, err := esstore.New[ItemPlus](newClient(t, b.url), esstore.WithIndex(indexOf(s)), esstore.WithRefresh(esstore.RefreshTrue))
		if err != nil {
			t.Fatal(err)
		}
		err = plus.Create(ctx, &ItemPlus{Item: Item{ID: 77, Status: "x"}, Extra: "y"})
		if !errors.Is(err, dao.ErrInvalidArgument) || !errors.As(err, &esErr) || esErr.Status != 400 {
			t.Errorf("Create with a field outside the strict mapping: %v; want ErrInvalidArgument with the 400", err)
		}
		if n, err := s.Count(ctx, dao.Criteria{}); err != nil || n != 0 {
			t.Errorf("after the refused Create, Count = %d, %v; want 0", n, err)
		}

		// A keyword longer than Lucene's term limit.
		err = s.Create(ctx, &Item{Status: strings.Repeat("x", 40000)})
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Create with an immense keyword: %v; want ErrInvalidArgument", err)
		}
	})
}

// TestErrorsFakeOnly covers failures only the fake can produce on demand.
func TestErrorsFakeOnly(t *testing.T) {
	ctx := context.Background()
	f := fakees.New(scripts)
	defer f.Close()
	s, err := esstore.New[Item](newClient(t, f.URL()), esstore.WithIndex(indexName()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows := seedItems(t, s, 3)

	// A document changed after the last refresh (a write without refresh,
	// from another client) makes update by query conflict.
	req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/%s/_doc/%d", f.URL(), indexOf(s), rows[1].ID),
		strings.NewReader(`{"id":`+fmt.Sprint(rows[1].ID)+`,"status":"ready","n":1,"f":0,"ok":false,"at":"2024-01-01T00:00:00Z"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	n, err := s.Update(ctx, ready, dao.Set{"ok": true})
	var esErr *esstore.Error
	if !errors.Is(err, dao.ErrConflict) || !errors.As(err, &esErr) || esErr.Type != "version_conflict_engine_exception" {
		t.Errorf("Update over a stale snapshot: %d, %v; want ErrConflict with the version conflict", n, err)
	}
	if n != 1 {
		t.Errorf("Update reported %d documents updated before the conflict, want 1", n)
	}

	f.Close()
	_, err = s.Count(ctx, dao.Criteria{})
	if !errors.Is(err, dao.ErrUnavailable) || !dao.IsRetryable(err) {
		t.Errorf("Count against a closed server: %v; want a retryable ErrUnavailable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Count(cctx, dao.Criteria{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, dao.ErrUnavailable) {
		t.Errorf("Count with a cancelled context: %v; want context.Canceled, not ErrUnavailable", err)
	}
}

// TestStringKeys: string primary keys with characters that need escaping in
// a URL path, and values that look like painless, round-trip.
func TestStringKeys(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore[Keyed](t, b.url, b.opts...)
		keys := []string{"a/b", "q?x=1&y", "sp ace", "ünï%2F", "#frag"}
		evil := `x'; ctx.op = 'delete'; '`
		for _, k := range keys {
			if err := s.Create(ctx, &Keyed{Key: k, Status: evil}); err != nil {
				t.Fatalf("Create %q: %v", k, err)
			}
		}
		for _, k := range keys {
			got, err := s.Get(ctx, k)
			if err != nil || got.Key != k || got.Status != evil {
				t.Errorf("Get(%q) = %+v, %v", k, got, err)
			}
		}
		if err := s.Create(ctx, &Keyed{Key: "", Status: "x"}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Create with an empty key: %v; want ErrInvalidArgument", err)
		}
		got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", evil), Set: dao.Set{"status": evil + "!"}, Limit: 10})
		if err != nil || len(got) != len(keys) {
			t.Fatalf("Claim = %v, %v", got, err)
		}
		if n, err := s.Count(ctx, dao.Eq("status", evil+"!")); err != nil || n != int64(len(keys)) {
			t.Errorf("Count after claim = %d, %v", n, err)
		}
		if n, err := s.Delete(ctx, dao.Criteria{}, 100); err != nil || n != int64(len(keys)) {
			t.Errorf("Delete = %d, %v", n, err)
		}
	})
}

// TestCreateIDs: concurrent Creates get distinct keys from the counter,
// explicit keys raise it, and a failed batch is undone.
func TestCreateIDs(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		const writers, batches, per = 6, 8, 3
		var mu sync.Mutex
		var all []int64
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range batches {
					items := []*Item{{Status: "c"}, {Status: "c"}, {Status: "c"}}
					if err := s.Create(ctx, items...); err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
					mu.Lock()
					for _, it := range items {
						all = append(all, it.ID)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		for i, id := range all {
			if id != int64(i+1) {
				t.Fatalf("keys of %d concurrent creates are not 1..%d without repeats: %v", writers*batches*per, writers*batches*per, all)
			}
		}

		explicit := Item{ID: 1000, Status: "e"}
		if err := s.Create(ctx, &explicit); err != nil {
			t.Fatal(err)
		}
		next := Item{Status: "e"}
		if err := s.Create(ctx, &next); err != nil || next.ID != 1001 {
			t.Errorf("key after an explicit 1000 = %d, %v; want 1001", next.ID, err)
		}

		before, _ := s.Count(ctx, dao.Criteria{})
		a, dup, c := Item{Status: "u"}, Item{ID: 1000, Status: "u"}, Item{Status: "u"}
		err := s.Create(ctx, &a, &dup, &c)
		if !errors.Is(err, dao.ErrDuplicate) {
			t.Errorf("Create with an existing key: %v; want ErrDuplicate", err)
		}
		if a.ID != 0 || c.ID != 0 {
			t.Errorf("assigned keys not reset after the failed batch: %d, %d", a.ID, c.ID)
		}
		if after, err := s.Count(ctx, dao.Criteria{}); err != nil || after != before {
			t.Errorf("Count after the failed batch = %d, %v; want %d (the batch undone)", after, err, before)
		}
	})
}

// TestPaging: Find beyond one page pages with search_after over the total
// order, NULLs included, and Delete beyond one page deletes up to its limit.
func TestPaging(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b, esstore.WithPageSize(3))
		tags := []string{"b", "", "a", "c", "", "b", "a", "", "c", "b", "a"}
		var items []*Item
		for i, tg := range tags {
			it := &Item{Status: "p", N: i % 4, F: float64(i)}
			if tg != "" {
				it.Tag = &tg
			}
			items = append(items, it)
		}
		if err := s.Create(ctx, items...); err != nil {
			t.Fatal(err)
		}
		orders := [][]dao.Order{
			{dao.Desc("tag"), dao.Asc("n")},
			{dao.Asc("tag"), dao.Desc("f")},
			{dao.Asc("n")},
		}
		for _, order := range orders {
			want := make([]Item, len(items))
			for i, it := range items {
				want[i] = *it
			}
			full := append(slices.Clone(order), dao.Asc("id")) // the primary key breaks ties
			sort.SliceStable(want, func(i, j int) bool { return s.Model().Less(&want[i], &want[j], full) })
			for _, limit := range []int{0, 7} {
				got, err := s.Find(ctx, dao.Query{OrderBy: order, Limit: limit})
				if err != nil {
					t.Fatalf("Find %v limit %d: %v", order, limit, err)
				}
				w := want
				if limit > 0 {
					w = want[:limit]
				}
				if !slices.Equal(itemIDs(got), itemIDs(w)) {
					t.Errorf("Find order %v limit %d = %v, want %v", order, limit, itemIDs(got), itemIDs(w))
				}
			}
		}
		n, err := s.Delete(ctx, dao.NotNull("tag"), 7)
		if err != nil || n != 7 {
			t.Errorf("Delete limit 7 with pages of 3 = %d, %v; want 7", n, err)
		}
		if left, err := s.Count(ctx, dao.NotNull("tag")); err != nil || left != 1 {
			t.Errorf("left after Delete = %d, %v; want 1", left, err)
		}
	})
}

// TestMigrateIdempotent: Migrate on an existing index succeeds and keeps
// the documents.
func TestMigrateIdempotent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := itemStore(t, b)
		seedItems(t, s, 2)
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		if n, err := s.Count(ctx, dao.Criteria{}); err != nil || n != 2 {
			t.Errorf("Count after the second Migrate = %d, %v; want 2", n, err)
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1")
	for name, opts := range map[string][]esstore.Option{
		"uppercase index": {esstore.WithIndex("Jobs")},
		"index with /":    {esstore.WithIndex("a/b")},
		"index with _":    {esstore.WithIndex("_jobs")},
		"refresh false":   {esstore.WithRefresh("false")},
		"page size 0":     {esstore.WithPageSize(0)},
	} {
		if _, err := esstore.New[Item](c, opts...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
	type floatKey struct {
		K float64 `gorm:"primaryKey"`
	}
	if _, err := esstore.New[floatKey](c); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("float primary key: %v; want ErrInvalidArgument", err)
	}
	if _, err := esstore.New[Item](nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil client: %v; want ErrInvalidArgument", err)
	}
}

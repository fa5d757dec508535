package fakees_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/esstore/internal/fakees"
)

// The fixtures under testdata/ are answers of Elasticsearch 8 as its
// reference documents them (each test names the page): an HTTP status and
// a body. The fake's answer to the corresponding request must have the
// same status and the same shape: the same keys at every level, values of
// the same JSON kind, arrays of the same length. Values that vary from
// one server or request to another (took, _seq_no, uuids, reasons, names)
// are not compared, except for the keys in pinned, which carry meaning.
var pinned = map[string]bool{
	"type": true, "result": true, "status": true, "errors": true, "found": true,
	"forced_refresh": true, "acknowledged": true, "timed_out": true,
}

// answer is an HTTP status and a decoded JSON body.
type answer struct {
	Status int `json:"status"`
	Body   any `json:"body"`
}

func fixture(t *testing.T, name string) answer {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := decodeJSON(raw, &a); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return a
}

func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// differences lists where got departs from the shape of want.
func differences(path string, got, want any) []string {
	kind := func(v any) string {
		switch v.(type) {
		case map[string]any:
			return "object"
		case []any:
			return "array"
		case json.Number:
			return "number"
		case nil:
			return "null"
		}
		return fmt.Sprintf("%T", v)
	}
	if kind(got) != kind(want) {
		return []string{fmt.Sprintf("%s: %s, want %s", path, kind(got), kind(want))}
	}
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for k := range g {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: not in the documented answer", path, k))
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s.%s: missing", path, k))
			case pinned[k] && kind(wv) != "object" && kind(wv) != "array" && !reflect.DeepEqual(gv, wv):
				out = append(out, fmt.Sprintf("%s.%s = %v, want %v", path, k, gv, wv))
			default:
				out = append(out, differences(path+"."+k, gv, wv)...)
			}
		}
	case []any:
		g := got.([]any)
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %d elements, want %d", path, len(g), len(w))}
		}
		for i := range w {
			out = append(out, differences(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
	}
	slices.Sort(out)
	return out
}

// matches fails t when got does not match the fixture name.
func matches(t *testing.T, what string, got answer, name string) {
	t.Helper()
	want := fixture(t, name)
	if got.Status != want.Status {
		t.Errorf("%s: status %d, want %d as in %s", what, got.Status, want.Status, name)
	}
	for _, d := range differences("body", got.Body, want.Body) {
		t.Errorf("%s: %s (%s)", what, d, name)
	}
}

type client struct {
	t    *testing.T
	base string
}

// call sends a request and returns the answer.
func (c client) call(method, path, body string) answer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("X-Elastic-Product") != "Elasticsearch" {
		c.t.Errorf("%s %s: no X-Elastic-Product header (the client refuses such a server)", method, path)
	}
	a := answer{Status: res.StatusCode}
	if err := json.NewDecoder(res.Body).Decode(&a.Body); err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	raw, _ := json.Marshal(a.Body)
	_ = decodeJSON(raw, &a.Body) // numbers as json.Number, as in the fixtures
	return a
}

// field returns the value at a dotted path of an object answer.
func (a answer) field(path string) any {
	var v any = a.Body
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// int returns the number at path, or -1 when there is none.
func (a answer) int(path string) int64 {
	n, ok := a.field(path).(json.Number)
	if !ok {
		return -1
	}
	i, _ := n.Int64()
	return i
}

const mapping = `{"mappings":{"dynamic":"strict","properties":{
	"status":{"type":"keyword"},"n":{"type":"long"},"f":{"type":"double"},"ok":{"type":"boolean"},
	"at":{"type":"date","format":"strict_date_optional_time||epoch_millis"},
	"blob":{"type":"binary"},"attrs":{"type":"object","enabled":false}}}}`

// Test scripts: the fake matches a script by its source only.
var scripts = fakees.Scripts{FieldCompare: "compare", Write: "write"}

func newServer(t *testing.T) client {
	srv := fakees.New(scripts)
	t.Cleanup(srv.Close)
	return client{t, srv.URL()}
}

// Create index API:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/indices-create-index.html
func TestCreateIndex(t *testing.T) {
	c := newServer(t)
	matches(t, "create index", c.call("PUT", "/jobs", mapping), "create_index.json")
	matches(t, "create an existing index", c.call("PUT", "/jobs", mapping), "create_index_exists.json")
	if a := c.call("DELETE", "/jobs", ""); a.Status != 200 || a.field("acknowledged") != true {
		t.Errorf("delete index: %+v", a)
	}
	matches(t, "delete a missing index", c.call("DELETE", "/jobs", ""), "index_not_found.json")
}

// Index API and optimistic concurrency control:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/docs-index_.html
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/optimistic-concurrency-control.html
func TestVersionConflict(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	first := c.call("PUT", "/jobs/_doc/17", `{"status":"ready","n":1}`)
	matches(t, "index a new document", first, "index_created.json")
	seq := first.int("_seq_no")

	guarded := fmt.Sprintf("/jobs/_doc/17?if_seq_no=%d&if_primary_term=1", seq)
	second := c.call("PUT", guarded, `{"status":"ready","n":2}`)
	if second.Status != 200 || second.field("result") != "updated" || second.int("_seq_no") <= seq || second.int("_version") != 2 {
		t.Errorf("write with the current seq_no: %+v; want 200 updated, a later _seq_no, _version 2", second)
	}
	matches(t, "write with a stale seq_no", c.call("PUT", guarded, `{"status":"ready","n":3}`), "index_conflict.json")
	matches(t, "write with another primary term",
		c.call("PUT", fmt.Sprintf("/jobs/_doc/17?if_seq_no=%d&if_primary_term=2", second.int("_seq_no")), `{"n":3}`), "index_conflict.json")
	matches(t, "guarded write to a missing document",
		c.call("PUT", "/jobs/_doc/18?if_seq_no=0&if_primary_term=1", `{"n":3}`), "index_conflict.json")
	matches(t, "op_type=create over an existing document",
		c.call("PUT", "/jobs/_doc/17?op_type=create", `{"n":3}`), "index_conflict.json")
	if a := c.call("GET", "/jobs/_doc/17", ""); a.field("_source.n") != json.Number("2") {
		t.Errorf("after the refused writes the document is %v; want the second version", a.field("_source"))
	}
}

// Get API:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/docs-get.html
func TestGet(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	c.call("PUT", "/jobs/_doc/17", `{"status":"ready","n":1}`)
	w := c.call("PUT", "/jobs/_doc/17", `{"status":"ready","n":2}`)
	got := c.call("GET", "/jobs/_doc/17", "")
	matches(t, "get", got, "get_found.json")
	if got.int("_seq_no") != w.int("_seq_no") || got.int("_version") != 2 {
		t.Errorf("get: _seq_no %d, _version %d; want those of the last write, %d and 2", got.int("_seq_no"), got.int("_version"), w.int("_seq_no"))
	}
	matches(t, "get a missing document", c.call("GET", "/jobs/_doc/99", ""), "get_missing.json")
	matches(t, "get from a missing index", c.call("GET", "/archive/_doc/1", ""), "index_not_found.json")
}

// Bulk API, a response with failed items:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/docs-bulk.html
func TestBulkPartialFailure(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	// The first write to a new index gets _seq_no 0: the deletes carry it.
	body := strings.Join([]string{
		`{"create":{"_id":"a"}}`, `{"n":1}`,
		`{"create":{"_id":"a"}}`, `{"n":2}`,
		`{"delete":{"_id":"a","if_seq_no":0,"if_primary_term":1}}`,
		`{"delete":{"_id":"c"}}`,
		`{"delete":{"_id":"a","if_seq_no":0,"if_primary_term":1}}`,
	}, "\n") + "\n"
	got := c.call("POST", "/jobs/_bulk?refresh=wait_for", body)
	matches(t, "bulk with failed items", got, "bulk_partial_failure.json")
	if a := c.call("GET", "/jobs/_doc/a", ""); a.Status != 404 {
		t.Errorf("after the bulk request, document a: %d; want deleted", a.Status)
	}
}

// refresh parameter: refresh=wait_for answers once a refresh made the
// write visible to search, without forcing one (no forced_refresh in the
// answer); refresh=true refreshes at once and says forced_refresh: true;
// without refresh a write is not visible to search until a refresh, while
// GET is real time:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/docs-refresh.html
func TestRefresh(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	count := func() int64 { return c.call("POST", "/jobs/_count", `{"query":{"match_all":{}}}`).int("count") }

	c.call("PUT", "/jobs/_doc/1", `{"n":1}`)
	if n := count(); n != 0 {
		t.Errorf("a write without refresh is visible to _count (%d)", n)
	}
	if a := c.call("GET", "/jobs/_doc/1", ""); a.Status != 200 {
		t.Errorf("GET is not real time: %d", a.Status)
	}
	matches(t, "write with refresh=wait_for", c.call("PUT", "/jobs/_doc/17?refresh=wait_for", `{"n":1}`), "index_created.json")
	if n := count(); n != 2 {
		t.Errorf("after a refresh=wait_for write, _count = %d; want 2 (both writes)", n)
	}
	c.call("PUT", "/jobs/_doc/17", `{"n":2}`)
	matches(t, "write with refresh=true", c.call("PUT", "/jobs/_doc/17?refresh=true", `{"n":3}`), "index_forced_refresh.json")
	c.call("POST", "/jobs/_bulk", "{\"create\":{\"_id\":\"2\"}}\n{\"n\":1}\n")
	if n := count(); n != 2 {
		t.Errorf("a bulk write without refresh is visible to _count (%d)", n)
	}
	c.call("POST", "/jobs/_bulk?refresh=wait_for", "{\"delete\":{\"_id\":\"1\"}}\n")
	if n := count(); n != 2 {
		t.Errorf("after a refresh=wait_for bulk, _count = %d; want 2 (2 created, 1 deleted)", n)
	}
}

// Search API with seq_no_primary_term, sort and track_total_hits: false
// (the answer then has no hits.total):
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/search-search.html
func TestSearchSeqNo(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	writes := map[string]int64{}
	for id, doc := range map[string]string{"4": `{"status":"ready","n":1}`, "9": `{"status":"ready","n":3}`, "5": `{"status":"done","n":2}`} {
		writes[id] = c.call("PUT", "/jobs/_doc/"+id+"?refresh=true", doc).int("_seq_no")
	}
	got := c.call("POST", "/jobs/_search", `{"query":{"term":{"status":{"value":"ready"}}},
		"sort":[{"n":{"order":"asc","missing":"_last"}},{"_id":{"order":"asc"}}],"size":10,
		"track_total_hits":false,"seq_no_primary_term":true}`)
	matches(t, "search", got, "search_seq_no.json")
	hits, _ := got.field("hits.hits").([]any)
	for _, h := range hits {
		h := answer{Body: h}
		if id := h.field("_id").(string); h.int("_seq_no") != writes[id] || h.int("_primary_term") != 1 {
			t.Errorf("hit %s: _seq_no %d, _primary_term %d; want %d and 1, those of its write", id, h.int("_seq_no"), h.int("_primary_term"), writes[id])
		}
	}
}

// Count API:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/search-count.html
func TestCount(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	c.call("POST", "/jobs/_bulk?refresh=true", "{\"create\":{\"_id\":\"1\"}}\n{\"n\":1}\n{\"create\":{\"_id\":\"2\"}}\n{\"n\":2}\n{\"create\":{\"_id\":\"3\"}}\n{\"n\":9}\n")
	got := c.call("POST", "/jobs/_count", `{"query":{"range":{"n":{"lte":2}}}}`)
	matches(t, "count", got, "count.json")
	if got.int("count") != 2 {
		t.Errorf("count = %d, want 2", got.int("count"))
	}
}

// Update by query API, with the write script; a document changed since
// the last refresh is a version conflict that aborts the request:
// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/docs-update-by-query.html
func TestUpdateByQuery(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	c.call("POST", "/jobs/_bulk?refresh=true", "{\"create\":{\"_id\":\"4\"}}\n{\"n\":1,\"f\":0.5}\n{\"create\":{\"_id\":\"9\"}}\n{\"status\":\"x\",\"n\":null}\n")
	script := `"script":{"source":"write","lang":"painless","params":{"set":{"status":"claimed"},"incr":{"n":2,"f":1}}}`
	matches(t, "update by query", c.call("POST", "/jobs/_update_by_query?refresh=true&conflicts=abort",
		`{"query":{"match_all":{}},`+script+`}`), "update_by_query.json")
	four, nine := c.call("GET", "/jobs/_doc/4", ""), c.call("GET", "/jobs/_doc/9", "")
	if four.field("_source.status") != "claimed" || four.int("_source.n") != 3 || four.field("_source.f") != json.Number("1.5") ||
		nine.field("_source.status") != "claimed" || nine.field("_source.n") != nil {
		t.Errorf("after the update: %v and %v; want status claimed, n + 2 (null stays null), f + 1", four.field("_source"), nine.field("_source"))
	}
	c.call("PUT", "/jobs/_doc/4", `{"n":7}`) // not refreshed: the search sees the old version
	matches(t, "update by query over a changed document", c.call("POST", "/jobs/_update_by_query?refresh=true",
		`{"query":{"match_all":{}},`+script+`}`), "update_by_query_conflict.json")
	if a := c.call("POST", "/jobs/_update_by_query", `{"query":{"match_all":{}},"script":{"source":"ctx._source.n++"}}`); a.Status != 400 {
		t.Errorf("an unknown script: %d, want 400", a.Status)
	}
}

// TestQueries checks the query DSL subset, sorting with missing values and
// search_after paging.
func TestQueries(t *testing.T) {
	c := newServer(t)
	c.call("PUT", "/jobs", mapping)
	for i, d := range []string{
		`{"n":1,"status":"b","at":"2024-01-01T00:00:00.0005Z","f":1.5,"ok":true}`,
		`{"n":2,"status":"a","at":"2024-01-01T00:00:00.0009Z","f":2,"ok":false}`,
		`{"n":3,"at":"2024-01-01T00:00:01Z","f":3}`,
		`{"n":4,"status":"c","f":null}`,
	} {
		c.call("PUT", fmt.Sprintf("/jobs/_doc/%d?refresh=true", i+1), d)
	}
	ids := func(body string) string {
		t.Helper()
		a := c.call("POST", "/jobs/_search", body)
		if a.Status != 200 {
			t.Fatalf("search %s: %d %v", body, a.Status, a.Body)
		}
		var out []string
		hits, _ := a.field("hits.hits").([]any)
		for _, h := range hits {
			out = append(out, answer{Body: h}.field("_id").(string))
		}
		return strings.Join(out, ",")
	}
	byN := `"sort":[{"n":{"order":"asc","missing":"_last"}}]`
	for _, tc := range []struct{ body, want string }{
		{`{"query":{"term":{"status":{"value":"a"}}},` + byN + `}`, "2"},
		{`{"query":{"terms":{"n":[1,4,9]}},` + byN + `}`, "1,4"},
		{`{"query":{"range":{"n":{"gt":1,"lte":3}}},` + byN + `}`, "2,3"},
		{`{"query":{"bool":{"must_not":[{"exists":{"field":"status"}}]}},` + byN + `}`, "3"},
		{`{"query":{"exists":{"field":"f"}},` + byN + `}`, "1,2,3"},
		{`{"query":{"bool":{"should":[{"term":{"n":{"value":1}}},{"term":{"status":{"value":"c"}}}],"minimum_should_match":1}},` + byN + `}`, "1,4"},
		{`{"query":{"bool":{"filter":[{"exists":{"field":"status"}}],"must_not":[{"term":{"status":{"value":"a"}}}]}},` + byN + `}`, "1,4"},
		// Dates are indexed at the millisecond: .0005 and .0009 are both .000.
		{`{"query":{"term":{"at":{"value":"2024-01-01T00:00:00.0001Z"}}},` + byN + `}`, "1,2"},
		{`{"query":{"range":{"at":{"lt":"2024-01-01T00:00:00.001Z"}}},` + byN + `}`, "1,2"},
		{`{"query":{"script":{"script":{"source":"compare","params":{"a":"n","b":"f","op":"lt"}}}},` + byN + `}`, "1"},
		{`{"query":{"script":{"script":{"source":"compare","params":{"a":"n","b":"f","op":"eq"}}}},` + byN + `}`, "2,3"},
		{`{"sort":[{"status":{"order":"desc","missing":"_first"}},{"n":{"order":"asc"}}]}`, "3,4,1,2"},
		{`{"sort":[{"status":{"order":"asc","missing":"_last"}},{"n":{"order":"asc"}}]}`, "2,1,4,3"},
		{`{"sort":[{"ok":{"order":"desc","missing":"_last"}},{"n":{"order":"asc"}}]}`, "1,2,3,4"},
		{`{` + byN + `,"size":2}`, "1,2"},
		{`{"sort":[{"status":{"order":"asc","missing":"_last"}},{"n":{"order":"asc"}}],"search_after":["b",1]}`, "4,3"},
		{`{"sort":[{"status":{"order":"asc","missing":"_last"}},{"n":{"order":"asc"}}],"search_after":[null,3]}`, ""},
		{`{"sort":[{"f":{"order":"desc","missing":"_first"}},{"n":{"order":"asc"}}],"search_after":["Infinity",4]}`, "3,2,1"},
		{`{"sort":[{"at":{"order":"asc","missing":"_last"}},{"n":{"order":"asc"}}],"search_after":[1704067200000,2]}`, "3,4"},
	} {
		if got := ids(tc.body); got != tc.want {
			t.Errorf("%s: ids [%s], want [%s]", tc.body, got, tc.want)
		}
	}
	// The sort values of a hit page on: each page starts after the last hit.
	var seen []string
	var after string
	for range 4 {
		body := `{"sort":[{"status":{"order":"desc","missing":"_last"}},{"n":{"order":"asc"}}],"size":1` + after + `}`
		a := c.call("POST", "/jobs/_search", body)
		hits, _ := a.field("hits.hits").([]any)
		if len(hits) != 1 {
			t.Fatalf("page %d: %v", len(seen), a.Body)
		}
		h := answer{Body: hits[0]}
		seen = append(seen, h.field("_id").(string))
		raw, _ := json.Marshal(h.field("sort"))
		after = `,"search_after":` + string(raw)
	}
	if got := strings.Join(seen, ","); got != "4,1,2,3" {
		t.Errorf("pages of one hit: %s, want 4,1,2,3", got)
	}
	for name, body := range map[string]string{
		"unknown script":      `{"query":{"script":{"script":{"source":"doc['n'].value > 1"}}}}`,
		"unknown query":       `{"query":{"match":{"status":"a"}}}`,
		"unknown request key": `{"aggs":{}}`,
	} {
		if a := c.call("POST", "/jobs/_search", body); a.Status != 400 {
			t.Errorf("%s: %d, want 400", name, a.Status)
		}
	}
	for body, typ := range map[string]string{
		`{"n":1,"other":2}`: "strict_dynamic_mapping_exception",
		`{"status":"` + strings.Repeat("x", 40000) + `"}`: "illegal_argument_exception",
	} {
		if a := c.call("PUT", "/jobs/_doc/9", body); a.Status != 400 || a.field("error.type") != typ {
			t.Errorf("refused document: %d %v; want 400 %s", a.Status, a.field("error.type"), typ)
		}
	}
}

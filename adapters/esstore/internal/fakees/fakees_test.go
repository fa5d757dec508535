package fakees

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// Response bodies as the Elasticsearch 8 reference documents them (values
// are examples; the shape is what the tests compare).
const (
	// Optimistic concurrency control / Index API.
	docIndexResponse = `{"_shards":{"total":2,"failed":0,"successful":1},"_index":"products","_id":"1567",
		"_version":1,"_seq_no":362,"_primary_term":2,"result":"created"}`
	// Get API.
	docGetResponse = `{"_index":"my-index-000001","_id":"0","_version":1,"_seq_no":0,"_primary_term":1,
		"found":true,"_source":{"n":1}}`
	docGetMissing = `{"_index":"my-index-000001","_id":"9","found":false}`
	// A version conflict on a write guarded by if_seq_no.
	docConflict = `{"error":{"root_cause":[{"type":"version_conflict_engine_exception",
		"reason":"[1]: version conflict, required seqNo [1], primary term [1]. current document has seqNo [3] and primary term [1]",
		"index_uuid":"UlI06z5_T4udCzy65Yq6Mg","shard":"0","index":"customer"}],
		"type":"version_conflict_engine_exception",
		"reason":"[1]: version conflict, required seqNo [1], primary term [1]. current document has seqNo [3] and primary term [1]",
		"index_uuid":"UlI06z5_T4udCzy65Yq6Mg","shard":"0","index":"customer"},"status":409}`
	// Update API, "Detect noop updates".
	docUpdateNoop = `{"_shards":{"total":0,"successful":0,"failed":0},"_index":"test","_id":"1","_version":2,
		"_primary_term":1,"_seq_no":1,"result":"noop"}`
	// Search API with seq_no_primary_term and a sort.
	docSearchResponse = `{"took":5,"timed_out":false,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0},
		"hits":{"total":{"value":1,"relation":"eq"},"max_score":null,"hits":[{"_index":"my-index-000001",
		"_id":"0","_seq_no":0,"_primary_term":1,"_score":null,"_source":{"n":1},"sort":[1]}]}}`
	// Count API.
	docCountResponse = `{"count":1,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0}}`
	// Update by query API.
	docUpdateByQuery = `{"took":147,"timed_out":false,"total":120,"updated":120,"deleted":0,"batches":1,
		"version_conflicts":0,"noops":0,"retries":{"bulk":0,"search":0},"throttled_millis":0,
		"requests_per_second":-1.0,"throttled_until_millis":0,"failures":[]}`
	// Bulk API: a created document and a failed create.
	docBulkCreated = `{"_index":"test","_id":"3","_version":1,"result":"created",
		"_shards":{"total":2,"successful":1,"failed":0},"status":201,"_seq_no":2,"_primary_term":3}`
	docBulkFailed = `{"_index":"index1","_id":"5","status":409,"error":{"type":"version_conflict_engine_exception",
		"reason":"[5]: version conflict, document already exists (current version [1])",
		"index_uuid":"aAsFqTI0Tc2W0LCWgPNrOA","shard":"0","index":"index1"}}`
	// Index missing.
	docIndexNotFound = `{"error":{"root_cause":[{"type":"index_not_found_exception","reason":"no such index [nope]",
		"resource.type":"index_or_alias","resource.id":"nope","index_uuid":"_na_","index":"nope"}],
		"type":"index_not_found_exception","reason":"no such index [nope]","resource.type":"index_or_alias",
		"resource.id":"nope","index_uuid":"_na_","index":"nope"},"status":404}`
)

// shape describes the JSON kinds of v, recursively: objects by their keys,
// arrays by their first element.
func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + shape(x[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return "[" + shape(x[0]) + "]"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func mustShape(t *testing.T, doc string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("documented body does not parse: %v", err)
	}
	return shape(v)
}

type client struct {
	t    *testing.T
	base string
}

// call sends a request and returns the status and the decoded body.
func (c client) call(method, path, body string) (int, map[string]any) {
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
		c.t.Errorf("%s %s: X-Elastic-Product header missing", method, path)
	}
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		c.t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
	}
	return res.StatusCode, m
}

func newTestServer(t *testing.T) client {
	srv := New(Scripts{FieldCompare: "fc", Write: "write"})
	t.Cleanup(srv.Close)
	c := client{t, srv.URL()}
	st, _ := c.call("PUT", "/idx", `{"mappings":{"dynamic":"strict","properties":{
		"n":{"type":"long"},"s":{"type":"keyword"},"d":{"type":"date"},"f":{"type":"double"},"b":{"type":"boolean"}}}}`)
	if st != 200 {
		t.Fatalf("create index: status %d", st)
	}
	return c
}

func checkShape(t *testing.T, what, documented string, got map[string]any) {
	t.Helper()
	if want, have := mustShape(t, documented), shape(got); want != have {
		t.Errorf("%s: shape differs from the documented response\n want %s\n got  %s", what, want, have)
	}
}

func num(v any) int64 {
	n, _ := v.(json.Number).Int64()
	return n
}

func TestResponseShapes(t *testing.T) {
	c := newTestServer(t)
	st, res := c.call("PUT", "/idx/_doc/1?refresh=wait_for", `{"n":1}`)
	if st != 201 || res["result"] != "created" || num(res["_seq_no"]) != 0 || num(res["_version"]) != 1 {
		t.Errorf("index: %d %v", st, res)
	}
	checkShape(t, "index", docIndexResponse, res)

	st, res = c.call("GET", "/idx/_doc/1", "")
	if st != 200 {
		t.Errorf("get: %d", st)
	}
	checkShape(t, "get", docGetResponse, res)
	st, res = c.call("GET", "/idx/_doc/9", "")
	if st != 404 {
		t.Errorf("get missing: %d", st)
	}
	checkShape(t, "get missing", docGetMissing, res)

	st, res = c.call("PUT", "/idx/_doc/1?if_seq_no=7&if_primary_term=1", `{"n":2}`)
	if st != 409 {
		t.Errorf("guarded write with a stale seq_no: status %d, want 409", st)
	}
	checkShape(t, "version conflict", docConflict, res)
	wantReason := "[1]: version conflict, required seqNo [7], primary term [1]. current document has seqNo [0] and primary term [1]"
	if e := res["error"].(map[string]any); e["reason"] != wantReason {
		t.Errorf("conflict reason = %q, want %q", e["reason"], wantReason)
	}

	st, res = c.call("POST", "/idx/_update/1?if_seq_no=0&if_primary_term=1&refresh=true",
		`{"script":{"source":"write","lang":"painless","params":{"where":[{"op":"eq","f":"n","k":"num","v":5}],"set":{"n":3},"incr":{}}}}`)
	if st != 200 || res["result"] != "noop" {
		t.Errorf("update whose guard does not hold: %d %v, want a noop", st, res)
	}
	checkShape(t, "update noop", docUpdateNoop, res)

	st, res = c.call("POST", "/idx/_search", `{"query":{"match_all":{}},"sort":[{"n":{"order":"asc"}}],"seq_no_primary_term":true}`)
	if st != 200 {
		t.Errorf("search: %d", st)
	}
	checkShape(t, "search", docSearchResponse, res)

	st, res = c.call("POST", "/idx/_count", `{"query":{"term":{"n":{"value":1}}}}`)
	if st != 200 || num(res["count"]) != 1 {
		t.Errorf("count: %d %v", st, res)
	}
	checkShape(t, "count", docCountResponse, res)

	st, res = c.call("POST", "/idx/_update_by_query?refresh=true",
		`{"query":{"match_all":{}},"script":{"source":"write","lang":"painless","params":{"where":null,"set":{"s":"x"},"incr":{"n":1}}}}`)
	if st != 200 || num(res["updated"]) != 1 {
		t.Errorf("update by query: %d %v", st, res)
	}
	checkShape(t, "update by query", docUpdateByQuery, res)

	st, res = c.call("POST", "/idx/_bulk", "{\"create\":{\"_id\":\"2\"}}\n{\"n\":2}\n{\"create\":{\"_id\":\"2\"}}\n{\"n\":2}\n")
	if st != 200 || res["errors"] != true {
		t.Errorf("bulk: %d %v", st, res)
	}
	items := res["items"].([]any)
	checkShape(t, "bulk created item", docBulkCreated, items[0].(map[string]any)["create"].(map[string]any))
	checkShape(t, "bulk failed item", docBulkFailed, items[1].(map[string]any)["create"].(map[string]any))

	st, res = c.call("GET", "/nope/_doc/1", "")
	if st != 404 {
		t.Errorf("missing index: %d", st)
	}
	checkShape(t, "index not found", docIndexNotFound, res)
}

func TestSeqNoAndVersion(t *testing.T) {
	c := newTestServer(t)
	c.call("PUT", "/idx/_doc/a", `{"n":1}`)
	c.call("PUT", "/idx/_doc/b", `{"n":1}`)
	_, res := c.call("PUT", "/idx/_doc/a", `{"n":2}`)
	if num(res["_seq_no"]) != 2 || num(res["_version"]) != 2 || res["result"] != "updated" || num(res["_primary_term"]) != 1 {
		t.Errorf("third write: %v; want seq_no 2 (per index), version 2 (per document), updated", res)
	}
	st, res := c.call("PUT", "/idx/_doc/a?op_type=create", `{"n":3}`)
	if st != 409 || !strings.Contains(fmt.Sprint(res["error"]), "document already exists (current version [2])") {
		t.Errorf("create over an existing document: %d %v", st, res)
	}
	st, _ = c.call("PUT", "/idx/_doc/a?if_seq_no=2&if_primary_term=1", `{"n":3}`)
	if st != 200 {
		t.Errorf("write guarded by the current seq_no: status %d", st)
	}
	st, res = c.call("PUT", "/idx/_doc/zz?if_seq_no=0&if_primary_term=1", `{"n":3}`)
	if st != 409 || !strings.Contains(fmt.Sprint(res["error"]), "but no document was found") {
		t.Errorf("guarded write to a missing document: %d %v", st, res)
	}
	st, res = c.call("POST", "/idx/_bulk", "{\"delete\":{\"_id\":\"b\"}}\n{\"delete\":{\"_id\":\"b\"}}\n")
	items := res["items"].([]any)
	first := items[0].(map[string]any)["delete"].(map[string]any)
	second := items[1].(map[string]any)["delete"].(map[string]any)
	if st != 200 || first["result"] != "deleted" || second["result"] != "not_found" || num(second["status"]) != 404 {
		t.Errorf("bulk delete twice: %v", res)
	}
	st, res = c.call("POST", "/idx/_update/b", `{"script":{"source":"write","params":{"where":null,"set":{},"incr":{}}}}`)
	if st != 404 || res["error"].(map[string]any)["type"] != "document_missing_exception" {
		t.Errorf("update of a deleted document: %d %v", st, res)
	}
}

func TestRefreshVisibility(t *testing.T) {
	c := newTestServer(t)
	count := func() int64 {
		_, res := c.call("POST", "/idx/_count", `{"query":{"match_all":{}}}`)
		return num(res["count"])
	}
	c.call("PUT", "/idx/_doc/1", `{"n":1}`)
	if n := count(); n != 0 {
		t.Errorf("an unrefreshed write is visible to _count (%d)", n)
	}
	if st, _ := c.call("GET", "/idx/_doc/1", ""); st != 200 {
		t.Errorf("GET is not real time: %d", st)
	}
	c.call("POST", "/idx/_refresh", "")
	if n := count(); n != 1 {
		t.Errorf("after _refresh, _count = %d, want 1", n)
	}
	c.call("PUT", "/idx/_doc/2?refresh=wait_for", `{"n":1}`)
	if n := count(); n != 2 {
		t.Errorf("after refresh=wait_for, _count = %d, want 2", n)
	}
	_, res := c.call("PUT", "/idx/_doc/3?refresh=true", `{"n":1}`)
	if n := count(); n != 3 || res["forced_refresh"] != true {
		t.Errorf("after refresh=true, _count = %d (want 3), forced_refresh %v", n, res["forced_refresh"])
	}
	// A document changed after the last refresh makes update by query
	// conflict, as the snapshot it searched is stale.
	c.call("PUT", "/idx/_doc/1", `{"n":5}`)
	st, res := c.call("POST", "/idx/_update_by_query",
		`{"query":{"term":{"n":1}},"script":{"source":"write","params":{"where":null,"set":{"s":"y"},"incr":{}}}}`)
	if st != 409 || num(res["version_conflicts"]) != 1 || len(res["failures"].([]any)) != 1 {
		t.Errorf("update by query over a stale snapshot: %d %v", st, res)
	}
}

func TestQueriesAndSort(t *testing.T) {
	c := newTestServer(t)
	docs := []string{
		`{"n":1,"s":"b","d":"2024-01-01T00:00:00.0005Z","f":1.5,"b":true}`,
		`{"n":2,"s":"a","d":"2024-01-01T00:00:00.0009Z","f":2,"b":false}`,
		`{"n":3,"d":"2024-01-01T00:00:01Z","f":3}`,
		`{"n":4,"s":"c","f":null}`,
	}
	for i, d := range docs {
		c.call("PUT", fmt.Sprintf("/idx/_doc/%d?refresh=true", i+1), d)
	}
	ids := func(q string) string {
		t.Helper()
		st, res := c.call("POST", "/idx/_search", q)
		if st != 200 {
			t.Fatalf("search %s: %d %v", q, st, res)
		}
		var out []string
		for _, h := range res["hits"].(map[string]any)["hits"].([]any) {
			out = append(out, h.(map[string]any)["_id"].(string))
		}
		return strings.Join(out, ",")
	}
	cases := []struct{ query, want string }{
		{`{"query":{"term":{"s":{"value":"a"}}},"sort":["n"]}`, "2"},
		{`{"query":{"terms":{"n":[1,4,9]}},"sort":["n"]}`, "1,4"},
		{`{"query":{"range":{"n":{"gt":1,"lte":3}}},"sort":["n"]}`, "2,3"},
		{`{"query":{"bool":{"must_not":[{"exists":{"field":"s"}}]}},"sort":["n"]}`, "3"},
		{`{"query":{"exists":{"field":"f"}},"sort":["n"]}`, "1,2,3"},
		{`{"query":{"bool":{"should":[{"term":{"n":1}},{"term":{"s":"c"}}],"minimum_should_match":1}},"sort":["n"]}`, "1,4"},
		{`{"query":{"bool":{"filter":[{"exists":{"field":"s"}}],"must_not":[{"term":{"s":"a"}}]}},"sort":["n"]}`, "1,4"},
		// Dates compare at millisecond resolution: .0005 and .0009 are both .000.
		{`{"query":{"term":{"d":"2024-01-01T00:00:00.0001Z"}},"sort":["n"]}`, "1,2"},
		{`{"query":{"range":{"d":{"lt":"2024-01-01T00:00:00.001Z"}}},"sort":["n"]}`, "1,2"},
		{`{"query":{"script":{"script":{"source":"fc","params":{"a":"n","b":"f","op":"lt"}}}},"sort":["n"]}`, "1"},
		{`{"query":{"script":{"script":{"source":"fc","params":{"a":"n","b":"f","op":"eq"}}}},"sort":["n"]}`, "2,3"},
		{`{"query":{"match_all":{}},"sort":[{"s":{"order":"desc","missing":"_first"}},"n"]}`, "3,4,1,2"},
		{`{"query":{"match_all":{}},"sort":[{"s":{"order":"asc","missing":"_last"}},"n"]}`, "2,1,4,3"},
		{`{"query":{"match_all":{}},"sort":[{"b":{"order":"desc"}},"n"]}`, "1,2,3,4"},
		{`{"query":{"match_all":{}},"sort":["n"],"size":2}`, "1,2"},
		{`{"query":{"match_all":{}},"sort":[{"s":{"order":"asc","missing":"_last"}},"n"],"search_after":["b",1]}`, "4,3"},
		{`{"query":{"match_all":{}},"sort":[{"s":{"order":"asc","missing":"_last"}},"n"],"search_after":[null,3]}`, ""},
		{`{"query":{"match_all":{}},"sort":[{"f":{"order":"desc","missing":"_first"}},"n"],"search_after":["Infinity",4]}`, "3,2,1"},
	}
	for _, c := range cases {
		if got := ids(c.query); got != c.want {
			t.Errorf("%s: got ids [%s], want [%s]", c.query, got, c.want)
		}
	}
	st, res := c.call("POST", "/idx/_search", `{"query":{"script":{"script":{"source":"doc['n'].value > 1"}}}}`)
	if st != 400 || res["error"].(map[string]any)["type"] != "script_exception" {
		t.Errorf("unknown script: %d %v, want 400 script_exception", st, res)
	}
	st, _ = c.call("POST", "/idx/_search", `{"size":10001}`)
	if st != 400 {
		t.Errorf("size above max_result_window: %d, want 400", st)
	}
	st, res = c.call("PUT", "/idx/_doc/9", `{"n":1,"other":2}`)
	if st != 400 || res["error"].(map[string]any)["type"] != "strict_dynamic_mapping_exception" {
		t.Errorf("unknown field under a strict mapping: %d %v", st, res)
	}
	st, res = c.call("PUT", "/idx/_doc/9", `{"n":"abc"}`)
	if st != 400 || res["error"].(map[string]any)["type"] != "document_parsing_exception" {
		t.Errorf("value that does not fit the mapping: %d %v", st, res)
	}
}

func TestWriteScript(t *testing.T) {
	src := map[string]any{"n": json.Number("2"), "f": json.Number("1.5"), "s": "x", "d": "2024-01-01T00:00:00.123456Z", "z": nil}
	cases := []struct {
		prog string
		want bool
	}{
		{`[{"op":"eq","f":"n","k":"num","v":2}]`, true},
		{`[{"op":"lt","f":"f","k":"num","g":"n"}]`, true},
		{`[{"op":"eq","f":"d","k":"date","v":"2024-01-01T00:00:00.123999Z"}]`, true},
		{`[{"op":"gt","f":"d","k":"date","v":"2024-01-01T00:00:00.122Z"}]`, true},
		{`[{"op":"null","f":"z"},{"op":"null","f":"missing"},{"op":"and","n":2}]`, true},
		{`[{"op":"ne","f":"z","k":"str","v":"x"}]`, false},
		{`[{"op":"in","f":"s","k":"str","vs":["a","x"]},{"op":"eq","f":"n","k":"num","v":3},{"op":"or","n":2}]`, true},
		{`[{"op":"in","f":"s","k":"str","vs":["a"]},{"op":"notnull","f":"s"},{"op":"and","n":2}]`, false},
	}
	for _, c := range cases {
		var prog []any
		dec := json.NewDecoder(strings.NewReader(c.prog))
		dec.UseNumber()
		if err := dec.Decode(&prog); err != nil {
			t.Fatal(err)
		}
		got, err := evalProgram(prog, src)
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.prog, got, err, c.want)
		}
	}
	if _, err := cmpv("x", json.Number("1"), "num"); err == nil {
		t.Error("comparing a string as a number did not fail, as painless would")
	}
}

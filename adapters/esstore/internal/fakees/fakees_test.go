package fakees_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/esstore/internal/fakees"
)

// answer is an HTTP status and a decoded JSON body.
type answer struct {
	Status int `json:"status"`
	Body   any `json:"body"`
}

func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
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

// Package fakees is an in-process HTTP server, for tests only, that answers
// the part of the Elasticsearch 8 REST API the esstore adapter sends, and
// nothing else:
//
//	PUT    /{index}                       create with a mapping
//	DELETE /{index}
//	GET    /{index}/_doc/{id}             real-time get
//	PUT    /{index}/_doc/{id}             index API: op_type=create, if_seq_no/if_primary_term, refresh
//	POST   /{index}/_bulk                 create and delete actions (delete with if_seq_no), refresh
//	POST   /{index}/_search               query, sort, size, search_after, seq_no_primary_term, _source, track_total_hits
//	POST   /{index}/_count                query
//	POST   /{index}/_update_by_query      query and the write script, conflicts=abort|proceed, refresh
//
// The query DSL is the adapter's: match_all, term, terms, range, exists,
// bool (filter, must_not, should with minimum_should_match) and the
// field-to-field script query. Any other request, body key, query or
// script is a 400, so that a change in what the adapter sends shows up in
// its tests; query-string parameters not listed above are ignored.
//
// The semantics the adapter relies on are Elasticsearch's, for one primary
// shard: every write takes the next _seq_no of the index and _primary_term
// is always 1; a write carrying if_seq_no and if_primary_term that do not
// match the current document (or finds none) is 409
// version_conflict_engine_exception; searches, counts and update by query
// see the documents of the last refresh, which a write's refresh parameter
// (true or wait_for) makes before it answers; GET is real time. There is no
// periodic refresh: a write without one stays invisible to searches. Dates
// are indexed at millisecond resolution; a strict mapping refuses unknown
// fields, and a keyword refuses a term longer than Lucene's limit.
//
// Painless is not interpreted: a script is accepted only when its source
// is byte for byte one of [Scripts], and the server runs a Go version of
// it. The answers' shapes are pinned by the fixtures under testdata/,
// written from the Elasticsearch reference.
package fakees

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
)

// Scripts are the painless sources the server recognizes.
type Scripts struct {
	// FieldCompare is the script query comparing two fields of a document:
	// params a, b (field names) and op (eq, ne, lt, le, gt, ge).
	FieldCompare string
	// Write is the update-by-query script: params set (field -> value) and
	// incr (field -> long added to a non-null value).
	Write string
}

// Server is the fake node. Create it with New.
type Server struct {
	scripts Scripts
	hs      *httptest.Server

	mu       sync.Mutex
	indices  map[string]*index
	requests []string
	created  int // indexes created so far, for their uuids
}

// New starts a server that recognizes scripts. Close it when done.
func New(scripts Scripts) *Server {
	s := &Server{scripts: scripts, indices: map[string]*index{}}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL returns the base URL of the server, such as http://127.0.0.1:40123.
func (s *Server) URL() string { return s.hs.URL }

// Close shuts the server down; later requests fail to connect.
func (s *Server) Close() { s.hs.Close() }

// Requests returns the requests served so far in arrival order, each as
// "METHOD /path?query" with the path unescaped and the query as sent.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// ResetRequests clears the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// apiError is an error answer: its status and body.
type apiError struct {
	status int
	body   map[string]any
}

// cause is an error object: type, reason and the extra keys.
func cause(typ, reason string, extra map[string]any) map[string]any {
	c := map[string]any{"type": typ, "reason": reason}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// fail builds an error answer: {"error": {"root_cause": [c], …c}, "status"}.
func fail(status int, c map[string]any) *apiError {
	top := map[string]any{"root_cause": []any{c}}
	for k, v := range c {
		top[k] = v
	}
	return &apiError{status, map[string]any{"error": top, "status": status}}
}

func badRequest(typ, format string, args ...any) *apiError {
	return fail(400, cause(typ, fmt.Sprintf(format, args...), nil))
}

func indexNotFound(name string) *apiError {
	return fail(404, cause("index_not_found_exception", "no such index ["+name+"]", map[string]any{
		"resource.type": "index_or_alias", "resource.id": name, "index_uuid": "_na_", "index": name,
	}))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var path []string
	for _, p := range strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/") {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		path = append(path, p)
	}
	body, _ := io.ReadAll(r.Body)
	logged := r.Method + " /" + strings.Join(path, "/")
	if r.URL.RawQuery != "" {
		logged += "?" + r.URL.RawQuery
	}
	s.mu.Lock()
	s.requests = append(s.requests, logged)
	status, res, aerr := s.route(r.Method, path, r.URL.Query(), body)
	s.mu.Unlock()
	if aerr != nil {
		status, res = aerr.status, aerr.body
	}
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(res)
}

// route dispatches a request; it runs under s.mu.
func (s *Server) route(method string, path []string, q url.Values, body []byte) (int, any, *apiError) {
	name, ix := path[0], s.indices[path[0]]
	switch {
	case name == "" || strings.HasPrefix(name, "_"):
	case len(path) == 1 && method == "PUT":
		return s.createIndex(name, body)
	case ix == nil:
		return 0, nil, indexNotFound(name)
	case len(path) == 1 && method == "DELETE":
		delete(s.indices, name)
		return 200, map[string]any{"acknowledged": true}, nil
	case len(path) == 3 && path[1] == "_doc" && method == "GET":
		return ix.get(path[2])
	case len(path) == 3 && path[1] == "_doc" && (method == "PUT" || method == "POST"):
		return ix.indexDoc(path[2], q, body)
	case len(path) == 2 && method == "POST":
		switch path[1] {
		case "_bulk":
			return ix.bulk(q, body)
		case "_search":
			return ix.search(s.scripts, body)
		case "_count":
			return ix.count(s.scripts, body)
		case "_update_by_query":
			return ix.updateByQuery(s.scripts, q, body)
		}
	}
	return 0, nil, badRequest("illegal_argument_exception", "fakees: unsupported request %s /%s", method, strings.Join(path, "/"))
}

// decode parses a JSON request body into v, keeping numbers as
// json.Number and refusing keys v does not have.
func decode(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("x_content_parse_exception", "%v", err)
	}
	return nil
}

func (s *Server) createIndex(name string, body []byte) (int, any, *apiError) {
	if ix := s.indices[name]; ix != nil {
		return 0, nil, fail(400, cause("resource_already_exists_exception",
			fmt.Sprintf("index [%s/%s] already exists", name, ix.uuid), map[string]any{"index": name, "index_uuid": ix.uuid}))
	}
	var req struct {
		Mappings struct {
			Dynamic    string `json:"dynamic"`
			Properties map[string]struct {
				Type    string `json:"type"`
				Format  string `json:"format"`
				Index   *bool  `json:"index"`
				Enabled *bool  `json:"enabled"`
			} `json:"properties"`
		} `json:"mappings"`
	}
	if aerr := decode(body, &req); aerr != nil {
		return 0, nil, aerr
	}
	s.created++
	ix := &index{
		name: name, uuid: fmt.Sprintf("fakeuuid%06d", s.created), strict: req.Mappings.Dynamic == "strict",
		types: map[string]string{}, live: map[string]*doc{}, visible: map[string]*doc{}, seqNo: -1,
	}
	for f, p := range req.Mappings.Properties {
		ix.types[f] = p.Type
	}
	s.indices[name] = ix
	return 200, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name}, nil
}

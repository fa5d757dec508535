// Package fakees is an in-process HTTP server, for tests only, that
// implements the small subset of the Elasticsearch 8 REST API the esstore
// adapter uses, with Elasticsearch's semantics where the adapter can
// observe them:
//
//   - one primary shard per index: every write takes the next _seq_no of
//     the index, _primary_term is always 1, _version counts the writes of a
//     document (kept across deletes);
//   - if_seq_no / if_primary_term on index, create, delete (also in bulk)
//     and update; a mismatch, or a guarded write to a missing document, is
//     409 version_conflict_engine_exception with the body Elasticsearch
//     sends; op_type=create on an existing _id is 409 "document already
//     exists";
//   - near-real-time search: _search, _count and _update_by_query see only
//     the documents of the last refresh; GET is real time; the refresh
//     parameter (true or wait_for) makes the write visible before the
//     response, as does POST /<index>/_refresh. There is no periodic
//     refresh: a write without refresh stays invisible until one, which is
//     stricter than Elasticsearch's default one-second interval;
//   - explicit strict mappings of the types long, double, keyword, boolean,
//     date (millisecond resolution), binary and disabled object, with the
//     parse errors of a value that does not fit;
//   - the query DSL: match_all, term, terms, range, exists, bool (filter,
//     must, should with minimum_should_match, must_not) and script queries;
//     sort on fields with order and missing, size, search_after,
//     seq_no_primary_term, _source: false, track_total_hits;
//   - update (script only), update by query (script only, conflicts abort
//     or proceed), bulk (index, create, delete), count, index creation and
//     deletion.
//
// Painless is not interpreted. A script is accepted only when its source is
// byte-for-byte one of the sources given in [Scripts]; the server then runs
// a Go implementation of that script's semantics with the request's
// params. Any other script is a 400 script_exception.
package fakees

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Scripts are the painless sources the server recognizes.
type Scripts struct {
	// FieldCompare is the script query comparing two fields of a document:
	// params a, b (field names) and op (eq, ne, lt, le, gt, ge).
	FieldCompare string
	// Write is the update script: params where (null or a postfix program
	// of criteria), set (field -> value) and incr (field -> long).
	Write string
}

// Server is the fake Elasticsearch node. Its zero value is not usable; call
// New.
type Server struct {
	scripts Scripts
	hs      *httptest.Server

	mu       sync.Mutex
	indices  map[string]*index
	requests []string
	uuidSeq  int
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

// Requests returns the requests served so far, as "METHOD /path?query"
// with the path unescaped (the query as sent), in arrival order.
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

// apiError is an error response.
type apiError struct {
	status int
	body   map[string]any
}

// errBody builds the error body Elasticsearch sends:
// {"error": {"root_cause": [cause], "type", "reason", extra…}, "status"}.
func errBody(status int, typ, reason string, extra map[string]any) *apiError {
	cause := map[string]any{"type": typ, "reason": reason}
	for k, v := range extra {
		cause[k] = v
	}
	top := map[string]any{"root_cause": []any{cause}}
	for k, v := range cause {
		top[k] = v
	}
	return &apiError{status: status, body: map[string]any{"error": top, "status": status}}
}

func indexNotFound(name string) *apiError {
	return errBody(404, "index_not_found_exception", "no such index ["+name+"]", map[string]any{
		"resource.type": "index_or_alias", "resource.id": name, "index_uuid": "_na_", "index": name,
	})
}

func badRequest(typ, reason string) *apiError { return errBody(400, typ, reason, nil) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var segs []string
	for _, p := range strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			u = p
		}
		if u != "" {
			segs = append(segs, u)
		}
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	logged := r.Method + " /" + strings.Join(segs, "/")
	if r.URL.RawQuery != "" {
		logged += "?" + r.URL.RawQuery
	}
	s.requests = append(s.requests, logged)
	status, res, aerr := s.route(r.Method, segs, r.URL.Query(), body)
	s.mu.Unlock()
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	w.Header().Set("Content-Type", "application/json")
	if aerr != nil {
		status, res = aerr.status, aerr.body
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(res)
	}
}

// route dispatches a request; it runs under s.mu.
func (s *Server) route(method string, segs []string, q url.Values, body []byte) (int, any, *apiError) {
	switch {
	case len(segs) == 0 && (method == "GET" || method == "HEAD"):
		return 200, map[string]any{
			"name": "fakees", "cluster_name": "fakees", "tagline": "You Know, for Search",
			"version": map[string]any{"number": "8.19.0", "build_flavor": "default"},
		}, nil
	case len(segs) == 1 && segs[0] == "_bulk" && (method == "POST" || method == "PUT"):
		return s.bulk("", q, body)
	case len(segs) == 1 && method == "PUT":
		return s.createIndex(segs[0], body)
	case len(segs) == 1 && method == "DELETE":
		return s.deleteIndex(segs[0])
	case len(segs) == 1 && (method == "GET" || method == "HEAD"):
		ix := s.indices[segs[0]]
		if ix == nil {
			return 0, nil, indexNotFound(segs[0])
		}
		return 200, map[string]any{ix.name: map[string]any{"mappings": ix.mappingJSON()}}, nil
	case len(segs) == 0:
		return 0, nil, badRequest("illegal_argument_exception", "unsupported request "+method+" /")
	}
	name, api := segs[0], segs[1]
	if api == "_bulk" && (method == "POST" || method == "PUT") && len(segs) == 2 {
		return s.bulk(name, q, body)
	}
	ix := s.indices[name]
	if ix == nil {
		return 0, nil, indexNotFound(name)
	}
	switch {
	case api == "_refresh" && len(segs) == 2:
		ix.refresh()
		return 200, map[string]any{"_shards": shards(1, 1)}, nil
	case (api == "_doc" || api == "_create") && len(segs) == 3 && (method == "PUT" || method == "POST"):
		opType := q.Get("op_type")
		if api == "_create" {
			opType = "create"
		}
		meta, aerr := writeMeta(segs[2], q)
		if aerr != nil {
			return 0, nil, aerr
		}
		status, res, aerr := ix.index(meta, opType, body)
		if aerr == nil && ix.refreshFor(q) {
			res["forced_refresh"] = true
		}
		return status, res, aerr
	case api == "_doc" && len(segs) == 3 && (method == "GET" || method == "HEAD"):
		return ix.get(segs[2])
	case api == "_doc" && len(segs) == 3 && method == "DELETE":
		meta, aerr := writeMeta(segs[2], q)
		if aerr != nil {
			return 0, nil, aerr
		}
		status, res, aerr := ix.delete(meta)
		if aerr == nil && ix.refreshFor(q) {
			res["forced_refresh"] = true
		}
		return status, res, aerr
	case api == "_update" && len(segs) == 3 && method == "POST":
		meta, aerr := writeMeta(segs[2], q)
		if aerr != nil {
			return 0, nil, aerr
		}
		status, res, aerr := ix.update(s.scripts, meta, body)
		if aerr == nil && res["result"] != "noop" && ix.refreshFor(q) {
			res["forced_refresh"] = true
		}
		return status, res, aerr
	case api == "_search" && len(segs) == 2 && (method == "GET" || method == "POST"):
		return ix.search(s.scripts, q, body)
	case api == "_count" && len(segs) == 2 && (method == "GET" || method == "POST"):
		return ix.count(s.scripts, body)
	case api == "_update_by_query" && len(segs) == 2 && method == "POST":
		return ix.updateByQuery(s.scripts, q, body)
	}
	return 0, nil, badRequest("illegal_argument_exception", "unsupported request "+method+" /"+strings.Join(segs, "/"))
}

func shards(total, ok int) map[string]any {
	return map[string]any{"total": total, "successful": ok, "failed": 0}
}

// writeMeta reads the _id and the optimistic-concurrency parameters of a
// single-document write from the query string.
func writeMeta(id string, q url.Values) (docMeta, *apiError) {
	m := docMeta{id: id, ifSeqNo: -1, ifPrimaryTerm: -1}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"if_seq_no", &m.ifSeqNo}, {"if_primary_term", &m.ifPrimaryTerm}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return m, badRequest("illegal_argument_exception", "invalid "+p.name+" ["+v+"]")
			}
			*p.dst = n
		}
	}
	if (m.ifSeqNo >= 0) != (m.ifPrimaryTerm >= 0) {
		return m, badRequest("action_request_validation_exception", "Validation Failed: 1: if_seq_no and if_primary_term must be set together;")
	}
	return m, nil
}

func (s *Server) createIndex(name string, body []byte) (int, any, *apiError) {
	if name != strings.ToLower(name) || strings.ContainsAny(name, `\/*?"<>|,# :`) || strings.HasPrefix(name, "_") || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "+") {
		return 0, nil, errBody(400, "invalid_index_name_exception", "Invalid index name ["+name+"]", map[string]any{"index": name, "index_uuid": "_na_"})
	}
	if ix, ok := s.indices[name]; ok {
		return 0, nil, errBody(400, "resource_already_exists_exception", fmt.Sprintf("index [%s/%s] already exists", name, ix.uuid), map[string]any{"index": name, "index_uuid": ix.uuid})
	}
	var req struct {
		Mappings struct {
			Dynamic    any                        `json:"dynamic"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"mappings"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return 0, nil, badRequest("x_content_parse_exception", err.Error())
		}
	}
	s.uuidSeq++
	ix := newIndex(name, fmt.Sprintf("fakeuuid%06d", s.uuidSeq))
	ix.strict = fmt.Sprint(req.Mappings.Dynamic) == "strict"
	for f, raw := range req.Mappings.Properties {
		var p struct {
			Type    string `json:"type"`
			Enabled *bool  `json:"enabled"`
			Index   *bool  `json:"index"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return 0, nil, badRequest("mapper_parsing_exception", err.Error())
		}
		if p.Type == "" {
			p.Type = "object"
		}
		switch p.Type {
		case "long", "double", "keyword", "boolean", "date", "binary":
		case "object":
			if p.Enabled == nil || *p.Enabled {
				return 0, nil, badRequest("mapper_parsing_exception", "fakees: only disabled objects are supported, field ["+f+"]")
			}
		default:
			return 0, nil, badRequest("mapper_parsing_exception", "No handler for type ["+p.Type+"] declared on field ["+f+"]")
		}
		ix.fields[f] = fieldMapping{typ: p.Type, indexed: p.Index == nil || *p.Index}
	}
	s.indices[name] = ix
	return 200, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name}, nil
}

func (s *Server) deleteIndex(name string) (int, any, *apiError) {
	if _, ok := s.indices[name]; !ok {
		return 0, nil, indexNotFound(name)
	}
	delete(s.indices, name)
	return 200, map[string]any{"acknowledged": true}, nil
}

// bulk runs a bulk request: NDJSON pairs of an action line and, for index
// and create, a source line.
func (s *Server) bulk(defaultIndex string, q url.Values, body []byte) (int, any, *apiError) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	var items []any
	errorsSeen := false
	touched := map[*index]bool{}
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var act map[string]struct {
			Index         string `json:"_index"`
			ID            string `json:"_id"`
			IfSeqNo       *int64 `json:"if_seq_no"`
			IfPrimaryTerm *int64 `json:"if_primary_term"`
		}
		if err := json.Unmarshal(line, &act); err != nil || len(act) != 1 {
			return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line")
		}
		for name, meta := range act {
			var src []byte
			if name == "index" || name == "create" {
				if !sc.Scan() {
					return 0, nil, badRequest("illegal_argument_exception", "The bulk request must be terminated by a newline [\\n]")
				}
				src = append([]byte(nil), sc.Bytes()...)
			} else if name != "delete" {
				return 0, nil, badRequest("illegal_argument_exception", "fakees: unsupported bulk action ["+name+"]")
			}
			idxName := meta.Index
			if idxName == "" {
				idxName = defaultIndex
			}
			dm := docMeta{id: meta.ID, ifSeqNo: -1, ifPrimaryTerm: -1}
			if meta.IfSeqNo != nil {
				dm.ifSeqNo = *meta.IfSeqNo
			}
			if meta.IfPrimaryTerm != nil {
				dm.ifPrimaryTerm = *meta.IfPrimaryTerm
			}
			var status int
			var res map[string]any
			var aerr *apiError
			ix := s.indices[idxName]
			switch {
			case ix == nil:
				aerr = indexNotFound(idxName)
			case name == "delete":
				status, res, aerr = ix.delete(dm)
				touched[ix] = true
			default:
				opType := "index"
				if name == "create" {
					opType = "create"
				}
				status, res, aerr = ix.index(dm, opType, src)
				touched[ix] = true
			}
			if aerr != nil {
				errorsSeen = true
				cause := aerr.body["error"].(map[string]any)
				delete(cause, "root_cause")
				res = map[string]any{"_index": idxName, "_id": meta.ID, "status": aerr.status, "error": cause}
			} else {
				res["status"] = status
			}
			items = append(items, map[string]any{name: res})
		}
	}
	for ix := range touched {
		ix.refreshFor(q)
	}
	return 200, map[string]any{"took": 1, "errors": errorsSeen, "items": items}, nil
}

// sortedIDs returns the keys of m in order, for deterministic iteration.
func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

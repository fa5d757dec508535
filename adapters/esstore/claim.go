package esstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// The portable claim on Elasticsearch relies on optimistic concurrency
// control: one search for candidates (with seq_no_primary_term, at most one
// page), then for each candidate one index API call that writes the
// document as the search read it with the claim's Set applied, carrying
// that read's if_seq_no and if_primary_term. The write succeeds only on the
// exact document version the search saw, which matched the criteria then
// and, being unchanged, still does; no script re-checks the criteria. Each
// write uses the store's refresh, so a claimed document is not seen as
// claimable by the next search.
//
// A version conflict (409 version_conflict_engine_exception: another writer
// changed the document after the search) ends the claim: the rows claimed
// before it are returned together with an error wrapping dao.ErrConflict
// and the *Error. A candidate deleted since the search is skipped: after a
// conflict, a real-time get (one more round trip) tells a deleted document
// from a changed one.

// candidate is what the candidate search read of one document: the
// version it saw (_seq_no, _primary_term) and that version's _source.
type candidate struct {
	seqNo, primaryTerm int64
	source             json.RawMessage
}

// claimWriteTimeout bounds how long a claim waits for the answer to a
// write it has sent, after the caller's context ended or not.
const claimWriteTimeout = 30 * time.Second

// ReadCandidates searches the candidates, one page at most, with their
// _source, _seq_no and _primary_term; each candidate's Version is that
// read (a candidate), which ClaimRow writes against. Criteria or ordering
// the query DSL cannot express (binary or object columns) are
// dao.ErrInvalidArgument before anything is sent.
func (s *esDriver[T]) ReadCandidates(ctx context.Context, q dao.Query) ([]driver.Candidate[T], error) {
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
		out[i].Version = candidate{*h.SeqNo, *h.PrimaryTerm, h.Source}
	}
	return out, nil
}

// ClaimRow writes the candidate row with set applied, conditioned on the
// version the search read (cand.Version). The criteria are not sent: a
// write that succeeds replaced that very version, which matched them. A
// Set value the index cannot hold is dao.ErrInvalidArgument before the
// write is sent. It returns an error wrapping dao.ErrConflict and the 409
// *Error when the document changed since the search, and (false, nil)
// when it was deleted since.
func (s *esDriver[T]) ClaimRow(ctx context.Context, cand *driver.Candidate[T], _ dao.Criteria, set dao.Set) (bool, error) {
	row := &cand.Row
	did, err := docID(s.model.ID(row))
	if err != nil {
		return false, err
	}
	c, ok := cand.Version.(candidate)
	if !ok {
		return false, fmt.Errorf("claim: no sequence number for candidate %s", did)
	}
	src, err := s.claimedSource(c.source, row, set)
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", did, err)
	}
	op := "claim " + did
	// Once sent, the write's outcome is waited for whatever becomes of
	// ctx: abandoning the request would leave a document claimed that no
	// caller received. claimWriteTimeout bounds the wait.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimWriteTimeout)
	defer cancel()
	_, body, esErr, err := s.do(uctx, op, esapi.IndexRequest{
		Index: s.index, DocumentID: url.PathEscape(did), Body: bytes.NewReader(src),
		IfSeqNo: ptr(int(c.seqNo)), IfPrimaryTerm: ptr(int(c.primaryTerm)),
		Refresh: string(s.refresh),
	})
	if err != nil && uctx.Err() != nil {
		return false, fmt.Errorf("%s: %w: no answer within %v, outcome unknown (%v)", op, dao.ErrUnavailable, claimWriteTimeout, err)
	}
	if err != nil {
		return false, err
	}
	if esErr != nil {
		if esErr.Status == 409 && s.deleted(uctx, did) {
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
	if res.Result != "updated" {
		return false, fmt.Errorf("%s: unexpected result %q", op, res.Result)
	}
	return true, nil
}

// claimedSource returns the _source the search read with the columns of
// set replaced by their post-claim values, computed from row as
// driver.Model.Apply computes the row the claim returns (an increment adds to
// the value read, which is the current one when the write succeeds). The
// other fields keep the bytes they were read with.
func (s *esDriver[T]) claimedSource(read json.RawMessage, row *T, set dao.Set) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(read, &fields); err != nil {
		return nil, fmt.Errorf("decode _source: %w", err)
	}
	after := *row
	if err := s.model.Apply(&after, set); err != nil {
		return nil, err
	}
	for _, name := range driver.SetColumns(set) {
		v, _ := s.model.Value(&after, name)
		ev, err := encodeValue(name, s.byName[name].kind, v)
		if err != nil {
			return nil, err
		}
		if fields[name], err = json.Marshal(ev); err != nil {
			return nil, fmt.Errorf("%w: field %q: %w", dao.ErrInvalidArgument, name, err)
		}
	}
	return json.Marshal(fields)
}

// deleted reports whether a real-time get finds document id missing from
// the index (which exists). Any other answer, or none, is false.
func (s *esDriver[T]) deleted(ctx context.Context, id string) bool {
	_, _, esErr, err := s.do(ctx, "claim: get "+id, esapi.GetRequest{
		Index: s.index, DocumentID: url.PathEscape(id), Source: []string{"false"},
	})
	return err == nil && esErr != nil && esErr.Status == 404 && esErr.Type == ""
}

package esstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
)

// Claim runs the portable default (dao.PortableClaim) with sequence-number
// guards: one search for candidates (with seq_no_primary_term, at most one
// page), then for each candidate one update API call carrying if_seq_no and
// if_primary_term and the fixed WriteScript, which re-checks req.Where on
// the current document and sets ctx.op = 'noop' when it no longer holds
// (the row is skipped). Each write uses the store's refresh, so a claimed
// document is not seen as claimable by the next search.
//
// A version conflict (409 version_conflict_engine_exception: another writer
// changed the document after the search) ends the claim: the rows claimed
// before it are returned together with an error wrapping dao.ErrConflict
// and the *Error. A candidate deleted since the search is skipped.
func (s *Store[T]) Claim(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	checked, err := s.model.CheckClaim(req)
	if err != nil {
		return nil, fmt.Errorf("esstore: claim: %w", err)
	}
	if _, err := s.guardProgram(checked.Where); err != nil {
		return nil, fmt.Errorf("esstore: claim: %w", err)
	}
	if _, err := s.sort(checked.OrderBy); err != nil {
		return nil, fmt.Errorf("esstore: claim: %w", err)
	}
	if _, _, err := s.scriptParams(checked.Set); err != nil {
		return nil, fmt.Errorf("esstore: claim: %w", err)
	}
	ops := &claimOps[T]{s: s, seq: map[string]seqPT{}}
	rows, err := dao.PortableClaim(ctx, s.model, ops, req)
	if err != nil {
		return rows, fmt.Errorf("esstore: %w", err)
	}
	return rows, nil
}

type seqPT struct{ seqNo, primaryTerm int64 }

// claimWriteTimeout bounds how long a claim waits for the answer to an
// update it has sent, after the caller's context ended or not.
const claimWriteTimeout = 30 * time.Second

// claimOps is dao.PortableOps for one claim: it remembers the _seq_no and
// _primary_term of every candidate it read.
type claimOps[T any] struct {
	s   *Store[T]
	seq map[string]seqPT
}

func (o *claimOps[T]) ReadCandidates(ctx context.Context, q dao.Query) ([]T, error) {
	hits, err := o.s.search(ctx, "claim: search", q, true, true, true)
	if err != nil {
		return nil, err
	}
	for _, h := range hits {
		if h.SeqNo == nil || h.PrimaryTerm == nil {
			return nil, fmt.Errorf("esstore: claim: hit %s without _seq_no", h.ID)
		}
		o.seq[h.ID] = seqPT{*h.SeqNo, *h.PrimaryTerm}
	}
	return o.s.decodeHits("claim", hits)
}

func (o *claimOps[T]) ClaimRow(ctx context.Context, row *T, where dao.Criteria, set dao.Set) (bool, error) {
	s := o.s
	did, err := docID(s.model.ID(row))
	if err != nil {
		return false, err
	}
	sp, ok := o.seq[did]
	if !ok {
		return false, fmt.Errorf("esstore: claim: no sequence number for candidate %s", did)
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
		return false, fmt.Errorf("esstore: %s: %w: no answer within %v, outcome unknown (%v)", op, dao.ErrUnavailable, claimWriteTimeout, err)
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
		return false, fmt.Errorf("esstore: %s: decode response: %w", op, err)
	}
	switch res.Result {
	case "updated":
		return true, nil
	case "noop":
		return false, nil
	}
	return false, fmt.Errorf("esstore: %s: unexpected result %q", op, res.Result)
}

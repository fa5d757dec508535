package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// The pages of what jobs wait for: a batch (its jobs by state and its
// callback) and the sequences a job holds (with the jobs waiting behind
// it). The workflow page is in workflowpage.go.

// Sequences listed by default and at most on the sequences page.
const (
	defaultSequencePage = 100
	maxSequencePage     = 500
)

// waitRoutes adds the workflow, batch and sequences pages and their JSON.
func (h *Handler) waitRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /workflow", dataPage(h, "workflow", h.readWorkflow, func(d workflowData) string { return "Workflow " + d.ID }))
	m.HandleFunc("GET /batch", dataPage(h, "batch", h.readBatch, func(d batchData) string { return "Batch " + d.ID }))
	m.HandleFunc("GET /sequences", h.sequencesPage)
	m.HandleFunc("GET /api/workflow", dataAPI(h, h.readWorkflow))
	m.HandleFunc("GET /api/batch", dataAPI(h, h.readBatch))
	m.HandleFunc("GET /api/sequences", dataAPI(h, h.readSequences))
}

// batchData is one batch: the JSON of api/batch and the data of the
// batch page.
type batchData struct {
	Table string `json:"table"`
	ID    string `json:"id"`
	// Total is the number of jobs inserted in the batch, as its callback
	// records it (0 when the callback was deleted).
	Total int `json:"total"`
	// Jobs is the number of the batch's jobs that exist, and Counts
	// those of each state, in lifecycle order (jobs.Client.Batch reads
	// them one state after another).
	Jobs   int64   `json:"jobs"`
	Counts []Count `json:"counts"`
	// Done is true once every job of the batch was final and its
	// callback was made to run.
	Done bool `json:"done"`
	// Callback is the batch's callback job, absent when it was deleted.
	Callback *jobadmin.Job `json:"callback,omitempty"`

	// The page's own fields: the links to the batch's jobs (all, and of
	// one state) and to the callback's page.
	List     string            `json:"-"`
	ByState  map[string]string `json:"-"`
	Callpage string            `json:"-"`
}

// readBatch reads the batch of q's t and id. Errors wrap
// dao.ErrInvalidArgument for a missing id, dao.ErrNotFound for an
// unknown table or a batch with neither jobs nor callback.
func (h *Handler) readBatch(ctx context.Context, q url.Values) (batchData, error) {
	s, err := h.jobTable(q.Get("t"))
	if err != nil {
		return batchData{}, err
	}
	id := strings.TrimSpace(q.Get("id"))
	if id == "" || len(id) > maxWorkflowID {
		return batchData{}, fmt.Errorf("%w: batch id %q: give the id of a batch (32 hex digits)", dao.ErrInvalidArgument, id)
	}
	info, err := s.c.Batch(ctx, id)
	if err != nil {
		return batchData{}, err
	}
	d := batchData{Table: s.name, ID: info.ID, Total: info.Total, ByState: map[string]string{},
		List: "jobs?" + url.Values{"t": {s.name}, "batch": {info.ID}}.Encode()}
	for _, st := range jobs.States() {
		n := info.Counts[st]
		d.Counts = append(d.Counts, Count{Status: string(st), N: n})
		d.Jobs += n
		d.ByState[string(st)] = "jobs?" + url.Values{"t": {s.name}, "batch": {info.ID}, "state": {string(st)}}.Encode()
	}
	if info.Callback != nil {
		cb := jobadmin.View(info.Callback)
		d.Callback = &cb
		d.Callpage = "job?" + url.Values{"t": {s.name}, "id": {strconv.FormatInt(cb.ID, 10)}}.Encode()
		if bc := info.Callback.BatchCounts(); bc != nil {
			d.Done = bc.Done
		}
	}
	return d, nil
}

// sequencesData is the sequences a job holds: the JSON of api/sequences
// and the data of the sequences page.
type sequencesData struct {
	Table string `json:"table"`
	// Key and Queue, when set, select one sequence, or the sequences
	// whose head is in one queue.
	Key   string `json:"key,omitempty"`
	Queue string `json:"queue,omitempty"`
	Limit int    `json:"limit"`
	// Sequences are the sequences, oldest head first.
	Sequences []sequenceRow `json:"sequences"`
	// More is true when Limit sequences were listed: more may exist.
	More bool `json:"more,omitempty"`

	// The page's own fields.
	Tables []string `json:"-"`
}

// sequenceRow is one sequence: its head job and the number of its jobs
// waiting behind it.
type sequenceRow struct {
	Key string `json:"key"`
	// Head is the job that holds the sequence, absent when none does
	// (a sequence named by key whose jobs all ended or wait for their
	// promotion).
	Head    *jobadmin.Job `json:"head,omitempty"`
	Waiting int64         `json:"waiting"`

	// The page's own fields: the links to the head's page and to the
	// sequence's jobs.
	HeadPage string `json:"-"`
	List     string `json:"-"`
}

// readSequences reads the sequences of q's t, selected by key and queue,
// at most limit of them (1 to maxSequencePage, default
// defaultSequencePage). Errors wrap dao.ErrInvalidArgument for a bad
// limit or queue, dao.ErrNotFound for an unknown table.
func (h *Handler) readSequences(ctx context.Context, q url.Values) (sequencesData, error) {
	s, err := h.jobTable(q.Get("t"))
	if err != nil {
		return sequencesData{}, err
	}
	d := sequencesData{Table: s.name, Key: q.Get("key"), Queue: strings.TrimSpace(q.Get("queue")), Limit: defaultSequencePage, Sequences: []sequenceRow{}}
	if v := q.Get("limit"); v != "" {
		if d.Limit, err = strconv.Atoi(v); err != nil || d.Limit < 1 || d.Limit > maxSequencePage {
			return sequencesData{}, fmt.Errorf("%w: limit %q: give 1 to %d", dao.ErrInvalidArgument, v, maxSequencePage)
		}
	}
	seqs, err := s.c.Sequences(ctx, jobs.SequenceParams{Key: d.Key, Queue: d.Queue, Limit: d.Limit})
	if err != nil {
		return sequencesData{}, err
	}
	for _, sq := range seqs {
		row := sequenceRow{Key: sq.Key, Waiting: sq.Waiting, List: "jobs?" + url.Values{"t": {s.name}, "sequence": {sq.Key}}.Encode()}
		if sq.Head != nil {
			v := jobadmin.View(sq.Head)
			row.Head = &v
			row.HeadPage = "job?" + url.Values{"t": {s.name}, "id": {strconv.FormatInt(v.ID, 10)}}.Encode()
		}
		d.Sequences = append(d.Sequences, row)
	}
	d.More = d.Key == "" && len(seqs) == d.Limit
	return d, nil
}

// sequencesPage lists the sequences a job holds (sequences?t=…), with
// their head and the jobs waiting behind it.
func (h *Handler) sequencesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	if len(h.jobSources()) == 0 {
		h.render(w, r, http.StatusOK, "sequences", page{Title: "Sequences", Nav: "jobs"})
		return
	}
	d, err := h.readSequences(ctx, r.URL.Query())
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	for _, js := range h.jobSources() {
		d.Tables = append(d.Tables, js.name)
	}
	h.render(w, r, http.StatusOK, "sequences", page{Title: "Sequences", Nav: "jobs", Data: d})
}

package ui

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/outbox"
)

// The console's pages: rendering, the overview, the schedule, outbox and
// leader pages, a row's page and the confirmation page.

// page is the data every template receives.
type page struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	Flash    string
	Now      time.Time
	Tables   []string // names of the row tables, for the menus
	Data     any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.CSRF = h.token(w, r)
	p.ReadOnly = h.cfg.ReadOnly
	if q := r.URL.Query(); p.Flash == "" && hmac.Equal([]byte(q.Get("sig")), []byte(h.sign("flash:"+q.Get("flash")))) {
		// Only a message this handler wrote is shown: a link of
		// another site cannot put its own words on the page.
		p.Flash = q.Get("flash")
	}
	if p.Now.IsZero() {
		p.Now = time.Now().UTC()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := h.pages[name].Execute(w, p); err != nil {
		h.cfg.Logger.Error("ui: render", "page", name, "err", err)
	}
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	h.render(w, r, status, "error", page{Title: "Error", Data: err.Error()})
}

func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.cfg.Timeout)
}

// overviews reads the overview of every row table.
func (h *Handler) overviews(ctx context.Context) []TableOverview {
	out := make([]TableOverview, 0, len(h.tables))
	for _, t := range h.tables {
		now, err := t.clock(ctx)
		if err != nil {
			out = append(out, TableOverview{Name: t.sourceName(), Kind: t.sourceKind(), Error: err.Error()})
			continue
		}
		o, err := t.overview(ctx, now, h.cfg.ExactBound)
		if err != nil {
			o.Error = err.Error()
		}
		out = append(out, o)
	}
	return out
}

// Overview returns the overview of every table the console shows, as the
// page and its JSON endpoint (api/overview) do: counts by status (exact,
// or an estimate beyond [Config].ExactBound on PostgreSQL), rows due now,
// the oldest due row's age, rows in flight and failures. A table that
// cannot be read has its Error set. The state of a Galera cluster, which
// the overview shows too, is [Handler.Cluster]'s.
func (h *Handler) Overview(ctx context.Context) []TableOverview {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	return h.overviews(ctx)
}

// overviewData is the overview page: the Galera cluster's state (nil
// off a Galera node) and every row table.
type overviewData struct {
	Cluster *ClusterState
	Tables  []TableOverview
}

func (h *Handler) overviewPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	d := overviewData{Cluster: h.cluster(ctx), Tables: h.overviews(ctx)}
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: d})
}

func (h *Handler) overviewAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	cluster := h.cluster(ctx)
	writeJSON(w, http.StatusOK, struct {
		At      time.Time       `json:"at"`
		Cluster *ClusterState   `json:"cluster,omitempty"`
		Tables  []TableOverview `json:"tables"`
	}{time.Now().UTC(), cluster, h.overviews(ctx)})
}

// schedulesData is the schedules page.
type schedulesData struct {
	Tables   []scheduleTableData
	Status   string
	Search   string
	Statuses []string
	Form     addForm
}

type scheduleTableData struct {
	Name  string
	Rows  []dispatch.Schedule
	More  bool // more schedules match than shown
	Scan  int  // a search stopped after reading this many schedules
	Error string
	Now   time.Time
}

// addForm is the add-a-schedule form, kept on an error.
type addForm struct {
	Table, Key, Kind, Cron, Zone, At, Payload string
	Error                                     string
}

func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request) {
	h.schedules(w, r, http.StatusOK, addForm{Kind: "cron"})
}

func (h *Handler) schedules(w http.ResponseWriter, r *http.Request, status int, form addForm) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	q := r.URL.Query()
	d := schedulesData{Status: q.Get("status"), Search: q.Get("q"), Form: form,
		Statuses: []string{string(dispatch.StatusActive), string(dispatch.StatusPaused), string(dispatch.StatusFired), string(dispatch.StatusFailed)}}
	for _, t := range h.tables {
		s, ok := t.(*scheduleSource)
		if !ok {
			continue
		}
		td := scheduleTableData{Name: s.sourceName()}
		if now, err := s.clock(ctx); err == nil {
			td.Now = now
		}
		l, err := s.list(ctx, scheduleFilter{Status: d.Status, Search: d.Search, Limit: 200})
		if err != nil {
			td.Error = err.Error()
		}
		td.Rows, td.More, td.Scan = l.Rows, l.More, l.Scanned
		d.Tables = append(d.Tables, td)
	}
	h.render(w, r, status, "schedules", page{Title: "Schedules", Nav: "schedules", Data: d})
}

type outboxData struct {
	Tables []outboxTableData
	Logs   []LogView
}

type outboxTableData struct {
	Overview  TableOverview
	Abandoned []outbox.Message
	Topics    []topicCount
	Error     string
}

type topicCount struct {
	Topic                     string
	Pending, Failed, Abandond int
}

func (h *Handler) outboxPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	var d outboxData
	for _, t := range h.tables {
		o, ok := t.(*outboxSource)
		if !ok {
			continue
		}
		var td outboxTableData
		now, err := o.clock(ctx)
		if err == nil {
			td.Overview, err = o.overview(ctx, now, h.cfg.ExactBound)
		}
		if err == nil {
			td.Abandoned, err = o.repo.Abandoned(ctx, 50)
		}
		if err == nil {
			td.Topics, err = o.topics(ctx)
		}
		td.Overview.Name = o.sourceName()
		if err != nil {
			td.Error = err.Error()
		}
		d.Tables = append(d.Tables, td)
	}
	d.Logs = h.logViews(ctx)
	h.render(w, r, http.StatusOK, "outbox", page{Title: "Outbox", Nav: "outbox", Data: d})
}

// topics counts the unpublished messages per topic, from the oldest 1000
// of them.
func (o *outboxSource) topics(ctx context.Context) ([]topicCount, error) {
	rows, err := o.unpublished(ctx, 1000, outbox.StatusPending, outbox.StatusFailed, outbox.StatusAbandoned)
	if err != nil {
		return nil, err
	}
	idx := map[string]int{}
	var out []topicCount
	for _, m := range rows {
		i, ok := idx[m.Topic]
		if !ok {
			i = len(out)
			idx[m.Topic] = i
			out = append(out, topicCount{Topic: m.Topic})
		}
		switch m.Status {
		case outbox.StatusPending:
			out[i].Pending++
		case outbox.StatusFailed:
			out[i].Failed++
		case outbox.StatusAbandoned:
			out[i].Abandond++
		}
	}
	return out, nil
}

type leaderTable struct {
	Name   string
	Leases []coord.Lease
	Error  string
}

func (h *Handler) leadersPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	var d []leaderTable
	for _, l := range h.leases {
		ls, err := l.leases.ListLeases(ctx)
		lt := leaderTable{Name: l.name, Leases: ls}
		if err != nil {
			lt.Error = err.Error()
		}
		d = append(d, lt)
	}
	h.render(w, r, http.StatusOK, "leaders", page{Title: "Leaders", Nav: "leaders", Data: d})
}

func (h *Handler) rowPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	q := r.URL.Query()
	t, ok := h.byName[q.Get("t")].(tableSource)
	if !ok {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no table %q", q.Get("t")))
		return
	}
	d, err := t.detail(ctx, q.Get("id"))
	switch {
	case errors.Is(err, dao.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, err)
		return
	case errors.Is(err, dao.ErrInvalidArgument):
		h.fail(w, r, http.StatusBadRequest, err)
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	h.render(w, r, http.StatusOK, "row", page{Title: "Row " + d.ID, Data: d})
}

// confirmData is a confirmation page: the action's fields, posted again
// with confirm=yes.
type confirmData struct {
	Question string
	Fields   []field
	Back     string
}

type field struct{ Name, Value string }

// confirmPage asks before a destructive action: delete a schedule,
// requeue abandoned messages, purge published messages, and every action
// on a job table (confirmJobChange).
func (h *Handler) confirmPage(w http.ResponseWriter, r *http.Request) {
	if h.cfg.ReadOnly {
		h.fail(w, r, http.StatusMethodNotAllowed, errors.New("the console is read-only"))
		return
	}
	q := r.URL.Query()
	op, t := q.Get("op"), q.Get("t")
	if s, ok := h.byName[t].(*jobSource); ok {
		h.confirmJobChange(w, r, s)
		return
	}
	d := confirmData{Fields: []field{{"op", op}, {"t", t}, {"confirm", "yes"}}}
	switch op {
	case "delete":
		d.Question = fmt.Sprintf("Delete schedule %q of table %s?", q.Get("key"), t)
		d.Fields = append(d.Fields, field{"key", q.Get("key")})
		d.Back = "schedules"
	case "requeue":
		if id := q.Get("id"); id != "" {
			d.Question = fmt.Sprintf("Requeue abandoned message %s of table %s?", id, t)
			d.Fields = append(d.Fields, field{"id", id})
		} else {
			n := q.Get("limit")
			d.Question = fmt.Sprintf("Requeue up to %s abandoned messages (oldest first) of table %s?", n, t)
			d.Fields = append(d.Fields, field{"limit", n})
		}
		d.Back = "outbox"
	case "purge":
		d.Question = fmt.Sprintf("Delete the published messages older than %s of table %s?", q.Get("age"), t)
		d.Fields = append(d.Fields, field{"age", q.Get("age")})
		d.Back = "outbox"
	default:
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("unknown action %q", op))
		return
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: "Confirm", Data: d})
}

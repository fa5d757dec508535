package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// Page sizes of the job list.
const (
	defaultJobPage = 50
	maxJobPage     = 500
)

// jobRoutes adds the job pages and their JSON, those of workflows,
// batches and sequences included. The job actions go through POST do and
// GET confirm, as every action does.
func (h *Handler) jobRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /jobs", h.jobsPage)
	m.HandleFunc("GET /job", dataPage(h, "job", h.readJob, func(d jobPageData) string { return fmt.Sprintf("Job %d", d.Job.ID) }))
	m.HandleFunc("GET /queues", h.queuesPage)
	m.HandleFunc("GET /api/jobs", h.jobsAPI)
	m.HandleFunc("GET /api/job", dataAPI(h, h.readJob))
	m.HandleFunc("GET /api/queues", h.queuesAPI)
	h.waitRoutes(m)
}

// jobSources returns the job tables, in the order of Config.Sources.
func (h *Handler) jobSources() []*jobSource {
	var out []*jobSource
	for _, s := range h.cfg.Sources {
		if j, ok := s.(*jobSource); ok {
			out = append(out, j)
		}
	}
	return out
}

// jobTable returns the job table named name, or the first one when name
// is "". Errors wrap dao.ErrNotFound.
func (h *Handler) jobTable(name string) (*jobSource, error) {
	if name == "" {
		if all := h.jobSources(); len(all) > 0 {
			return all[0], nil
		}
		return nil, fmt.Errorf("%w: no job table", dao.ErrNotFound)
	}
	if s, ok := h.byName[name].(*jobSource); ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w: no job table %q", dao.ErrNotFound, name)
}

// statusOf returns the HTTP status of err: 400 for bad input, 404 for
// what does not exist, 500 otherwise.
func statusOf(err error) int {
	switch {
	case errors.Is(err, dao.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, dao.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// writeJSON writes v as the JSON answer, with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// failJSON writes err as a JSON answer {"error": …} with its status.
func failJSON(w http.ResponseWriter, err error) {
	writeJSON(w, statusOf(err), struct {
		Error string `json:"error"`
	}{err.Error()})
}

// dataPage returns the handler of a page that shows one read: read
// takes the request's query and returns the page's data (an error's
// status from statusOf: 400 for a bad parameter, 404 for an unknown
// table or id), rendered with template name under title(data).
func dataPage[D any](h *Handler, name string, read func(context.Context, url.Values) (D, error), title func(D) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := h.ctx(r)
		defer cancel()
		d, err := read(ctx, r.URL.Query())
		if err != nil {
			h.fail(w, r, statusOf(err), err)
			return
		}
		h.render(w, r, http.StatusOK, name, page{Title: title(d), Nav: "jobs", Data: d})
	}
}

// dataAPI returns the handler of the JSON answer of a page read by read:
// the data, or {"error": …} with the error's status.
func dataAPI[D any](h *Handler, read func(context.Context, url.Values) (D, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := h.ctx(r)
		defer cancel()
		d, err := read(ctx, r.URL.Query())
		if err != nil {
			failJSON(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// jobList is a page of jobs: the JSON of api/jobs, and the data of the
// jobs page.
type jobList struct {
	Table  string   `json:"table"`
	States []string `json:"states,omitempty"`
	Queue  string   `json:"queue,omitempty"`
	Kind   string   `json:"kind,omitempty"`
	// Tags, Priority and Metadata select jobs carrying every tag, of one
	// priority, whose metadata contains the JSON object.
	Tags     []string `json:"tags,omitempty"`
	Priority int      `json:"priority,omitempty"`
	Metadata string   `json:"metadata,omitempty"`
	// Sequence and Batch select the jobs of one sequence (by key) and of
	// one batch (with its callback).
	Sequence string `json:"sequence,omitempty"`
	Batch    string `json:"batch,omitempty"`
	Before   int64  `json:"before,omitempty"`
	Limit    int    `json:"limit"`
	// Counts are the jobs of each state, of the queue selected (all
	// queues when none).
	Counts []Count        `json:"counts"`
	Jobs   []jobadmin.Job `json:"jobs"`
	// NextBefore, when not 0, is the before of the next (older) page.
	NextBefore int64 `json:"nextBefore,omitempty"`
	// Error is set on the page when the jobs could not be read.
	Error string `json:"-"`

	// The page's own fields.
	Tables    []string   `json:"-"`
	AllStates []string   `json:"-"`
	Tabs      []stateTab `json:"-"`
	State     string     `json:"-"` // the state selected, "" for all or several
	Here      string     `json:"-"` // this page, where actions come back to
	Older     string     `json:"-"`
	Newest    string     `json:"-"`
}

// stateTab links the list of one state (all states when State is "").
type stateTab struct {
	State string
	N     int64
	URL   string
	On    bool
}

// jobFilter reads the job list's parameters from q: t (the table), state
// (any number of them, repeated or comma-separated), queue, kind, tag
// (any number, repeated or separated by commas or spaces), priority,
// metadata (a JSON object the jobs' metadata contains), sequence (a
// sequence key), batch (a batch id), before (an id) and limit. Errors wrap dao.ErrInvalidArgument, or dao.ErrNotFound for
// an unknown table.
func (h *Handler) jobFilter(q url.Values) (*jobSource, jobList, error) {
	var l jobList
	s, err := h.jobTable(q.Get("t"))
	if err != nil {
		return nil, l, err
	}
	l.Table, l.Queue, l.Kind, l.Limit = s.name, strings.TrimSpace(q.Get("queue")), strings.TrimSpace(q.Get("kind")), defaultJobPage
	for _, st := range strings.Split(strings.Join(q["state"], ","), ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		if !slices.Contains(jobs.States(), jobs.State(st)) {
			return nil, l, fmt.Errorf("%w: state %q: want one of %s", dao.ErrInvalidArgument, st, strings.Join(stateNames(), ", "))
		}
		if !slices.Contains(l.States, st) {
			l.States = append(l.States, st)
		}
	}
	if l.Queue != "" {
		if err := jobs.CheckQueue(l.Queue); err != nil {
			return nil, l, err
		}
	}
	if l.Kind != "" {
		if err := jobs.CheckKind(l.Kind); err != nil {
			return nil, l, err
		}
	}
	for _, tag := range strings.FieldsFunc(strings.Join(q["tag"], ","), func(r rune) bool { return r == ',' || r == ' ' }) {
		if !slices.Contains(l.Tags, tag) {
			l.Tags = append(l.Tags, tag)
		}
	}
	if v := strings.TrimSpace(q.Get("priority")); v != "" {
		if l.Priority, err = strconv.Atoi(v); err != nil || l.Priority < 1 || l.Priority > jobs.MaxPriority {
			return nil, l, fmt.Errorf("%w: priority %q: give 1 to %d", dao.ErrInvalidArgument, v, jobs.MaxPriority)
		}
	}
	if v := strings.TrimSpace(q.Get("metadata")); v != "" {
		if !json.Valid([]byte(v)) || v[0] != '{' {
			return nil, l, fmt.Errorf("%w: metadata %q: give a JSON object", dao.ErrInvalidArgument, v)
		}
		l.Metadata = v
	}
	l.Sequence, l.Batch = q.Get("sequence"), strings.TrimSpace(q.Get("batch"))
	if v := q.Get("before"); v != "" {
		if l.Before, err = parseJobID(v); err != nil {
			return nil, l, fmt.Errorf("before: %w", err)
		}
	}
	if v := q.Get("limit"); v != "" {
		if l.Limit, err = strconv.Atoi(v); err != nil || l.Limit < 1 || l.Limit > maxJobPage {
			return nil, l, fmt.Errorf("%w: limit %q: give 1 to %d", dao.ErrInvalidArgument, v, maxJobPage)
		}
	}
	return s, l, nil
}

// stateNames returns the names of the job states, in lifecycle order.
func stateNames() []string {
	var out []string
	for _, s := range jobs.States() {
		out = append(out, string(s))
	}
	return out
}

// query returns the parameters that select l's jobs, with states.
func (l *jobList) query(states ...string) url.Values {
	v := url.Values{"t": {l.Table}}
	if len(states) > 0 {
		v["state"] = states
	}
	if l.Queue != "" {
		v.Set("queue", l.Queue)
	}
	if l.Kind != "" {
		v.Set("kind", l.Kind)
	}
	if len(l.Tags) > 0 {
		v.Set("tag", strings.Join(l.Tags, ","))
	}
	if l.Priority > 0 {
		v.Set("priority", strconv.Itoa(l.Priority))
	}
	if l.Metadata != "" {
		v.Set("metadata", l.Metadata)
	}
	if l.Sequence != "" {
		v.Set("sequence", l.Sequence)
	}
	if l.Batch != "" {
		v.Set("batch", l.Batch)
	}
	if l.Limit != defaultJobPage {
		v.Set("limit", strconv.Itoa(l.Limit))
	}
	return v
}

// list reads the counts and the page of jobs l selects.
func (s *jobSource) list(ctx context.Context, l *jobList) error {
	counts, err := s.c.Count(ctx, l.Queue)
	if err != nil {
		return err
	}
	l.Counts = make([]Count, 0, len(counts))
	for _, st := range jobs.States() {
		l.Counts = append(l.Counts, Count{Status: string(st), N: counts[st]})
	}
	p := jobs.ListParams{Queue: l.Queue, Kind: l.Kind, Tags: l.Tags, SequenceKey: l.Sequence, BatchID: l.Batch, BeforeID: l.Before, Limit: l.Limit + 1}
	if l.Priority > 0 {
		p.Priorities = []int{l.Priority}
	}
	if l.Metadata != "" {
		p.Metadata = json.RawMessage(l.Metadata)
	}
	for _, st := range l.States {
		p.States = append(p.States, jobs.State(st))
	}
	res, err := s.c.ListPage(ctx, p)
	if err != nil {
		return err
	}
	rows := res.Jobs
	switch {
	case len(rows) > l.Limit:
		rows = rows[:l.Limit]
		l.NextBefore = rows[len(rows)-1].ID
	case res.Cursor != nil:
		// The tags or metadata filter read its most jobs: go on after
		// the last one it read.
		l.NextBefore = res.Cursor.LastID()
	}
	l.Jobs = make([]jobadmin.Job, len(rows))
	for i := range rows {
		l.Jobs[i] = jobadmin.View(&rows[i])
	}
	return nil
}

// jobsPage lists the jobs of one table, newest first, by state, queue and
// kind, a page at a time.
func (h *Handler) jobsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	if len(h.jobSources()) == 0 {
		h.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Nav: "jobs"})
		return
	}
	s, l, err := h.jobFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	if err := s.list(ctx, &l); err != nil {
		l.Error = err.Error()
	}
	for _, js := range h.jobSources() {
		l.Tables = append(l.Tables, js.name)
	}
	l.AllStates = stateNames()
	if len(l.States) == 1 {
		l.State = l.States[0]
	}
	var all int64
	for _, c := range l.Counts {
		all += c.N
	}
	l.Tabs = append(l.Tabs, stateTab{N: all, URL: "jobs?" + l.query().Encode(), On: len(l.States) == 0})
	for _, c := range l.Counts {
		l.Tabs = append(l.Tabs, stateTab{State: c.Status, N: c.N, URL: "jobs?" + l.query(c.Status).Encode(), On: l.State == c.Status})
	}
	here := l.query(l.States...)
	if l.Before > 0 {
		l.Newest = "jobs?" + here.Encode()
		here.Set("before", strconv.FormatInt(l.Before, 10))
	}
	l.Here = "jobs?" + here.Encode()
	if l.NextBefore > 0 {
		older := l.query(l.States...)
		older.Set("before", strconv.FormatInt(l.NextBefore, 10))
		l.Older = "jobs?" + older.Encode()
	}
	h.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Nav: "jobs", Data: l})
}

// jobsAPI answers api/jobs: the jobs page as JSON.
func (h *Handler) jobsAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	s, l, err := h.jobFilter(r.URL.Query())
	if err == nil {
		err = s.list(ctx, &l)
	}
	if err != nil {
		failJSON(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// jobPageData is one job: the JSON of api/job and the data of the job
// page.
type jobPageData struct {
	Table string       `json:"table"`
	Job   jobadmin.Job `json:"job"`

	// The page's own fields: the args and metadata as indented text.
	Args     string `json:"-"`
	Metadata string `json:"-"`
	Output   string `json:"-"` // the output the job's work recorded
	Here     string `json:"-"`
	List     string `json:"-"` // the list of the job's table
}

// readJob reads the job of q's t and id.
func (h *Handler) readJob(ctx context.Context, q url.Values) (jobPageData, error) {
	s, err := h.jobTable(q.Get("t"))
	if err != nil {
		return jobPageData{}, err
	}
	id, err := parseJobID(q.Get("id"))
	if err != nil {
		return jobPageData{}, err
	}
	row, err := s.c.Get(ctx, id)
	if err != nil {
		return jobPageData{}, err
	}
	d := jobPageData{Table: s.name, Job: jobadmin.View(row), Args: jobadmin.Indent(row.EncodedArgs), Metadata: jobadmin.Indent(row.Metadata)}
	if out := row.Output(); out != nil {
		d.Output = jobadmin.Indent(string(out))
	}
	d.Here = "job?" + url.Values{"t": {s.name}, "id": {strconv.FormatInt(id, 10)}}.Encode()
	d.List = "jobs?" + url.Values{"t": {s.name}}.Encode()
	return d, nil
}

// queueTable is the queues of one job table, the kinds of its available
// jobs that no running client knows, and its limited queues.
type queueTable struct {
	Table        string        `json:"table"`
	Queues       []queueRow    `json:"queues"`
	UnknownKinds []unknownKind `json:"unknownKinds"`
	Error        string        `json:"error,omitempty"`
	// Limits are the limited queues (also those the queue table lacks);
	// LimitsError is why they could not be read.
	Limits      []jobadmin.Limit `json:"limits"`
	LimitsError string           `json:"limitsError,omitempty"`
}

// queueRow is one queue: its pause state, the kinds its running clients
// know and its jobs by state.
type queueRow struct {
	Name     string     `json:"name"`
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"pausedAt,omitempty"`
	Kinds    []string   `json:"kinds"`
	Counts   []Count    `json:"counts"`
	// Limit is the queue's limit and its use, nil when it has none.
	Limit *jobadmin.Limit `json:"limit,omitempty"`
}

// unknownKind is a kind of available jobs of a queue that no running
// client knows (jobs.Client.UnknownKinds).
type unknownKind struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"`
	Jobs  int64  `json:"jobs"`
}

// queues reads the queues of every job table with their counts.
func (h *Handler) queues(ctx context.Context) []queueTable {
	out := []queueTable{}
	for _, s := range h.jobSources() {
		qt := queueTable{Table: s.name, Queues: []queueRow{}, UnknownKinds: []unknownKind{}, Limits: []jobadmin.Limit{}}
		if ls, err := limitsOf(ctx, s.c); err != nil {
			qt.LimitsError = err.Error()
		} else {
			qt.Limits = ls
		}
		qs, err := s.c.Queues(ctx)
		for _, q := range qs {
			if err != nil {
				break
			}
			row := queueRow{Name: q.Name, Paused: q.Paused, PausedAt: q.PausedAt, Kinds: q.Kinds}
			for i := range qt.Limits {
				if qt.Limits[i].Queue == q.Name {
					row.Limit = &qt.Limits[i]
				}
			}
			if row.Kinds == nil {
				row.Kinds = []string{}
			}
			var counts map[jobs.State]int64
			if counts, err = s.c.Count(ctx, q.Name); err == nil {
				for _, st := range jobs.States() {
					row.Counts = append(row.Counts, Count{Status: string(st), N: counts[st]})
				}
			}
			qt.Queues = append(qt.Queues, row)
		}
		if err == nil {
			var ks []jobs.WaitingKind
			if ks, err = s.c.UnknownKinds(ctx); err == nil {
				for _, k := range ks {
					qt.UnknownKinds = append(qt.UnknownKinds, unknownKind{Queue: k.Queue, Kind: k.Kind, Jobs: k.Jobs})
				}
			}
		}
		switch {
		case errors.Is(err, jobs.ErrNoQueueStore):
			qt.Error = "This job table's client has no queue table (jobs.Config.QueueStore): queues cannot be listed, paused or resumed here."
		case err != nil:
			qt.Error = err.Error()
		}
		out = append(out, qt)
	}
	return out
}

// queuesPage lists the queues of every job table, with pause and resume.
func (h *Handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	h.render(w, r, http.StatusOK, "queues", page{Title: "Queues", Nav: "queues", Data: struct {
		Tables []queueTable
		States []string
	}{h.queues(ctx), stateNames()}})
}

// queuesAPI answers api/queues: the queues page as JSON.
func (h *Handler) queuesAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	writeJSON(w, http.StatusOK, struct {
		Tables []queueTable `json:"tables"`
	}{h.queues(ctx)})
}

// jobBack returns the page an action on s goes back to: raw when it is
// one of the job pages (jobs, job, queues) with its query, else the job
// list of s. It never leads off the console: a URL with a scheme or a
// host is refused.
func jobBack(s *jobSource, raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme == "" && u.Host == "" && u.Opaque == "" && u.User == nil &&
		(u.Path == "jobs" || u.Path == "job" || u.Path == "queues") {
		q := u.Query()
		q.Del("flash")
		q.Del("sig")
		return u.Path + "?" + q.Encode()
	}
	return "jobs?" + url.Values{"t": {s.name}}.Encode()
}

// jobChange is an action on a job table, read from a form or a query:
// retry, cancel or delete of jobs, pause or resume of a queue.
type jobChange struct {
	op    string
	queue string
	ids   []int64
	back  string
}

// parseJobChange reads and checks the action of v on s. Errors wrap
// dao.ErrInvalidArgument.
func parseJobChange(s *jobSource, v url.Values) (jobChange, error) {
	c := jobChange{op: v.Get("op"), queue: v.Get("queue"), back: jobBack(s, v.Get("back"))}
	switch c.op {
	case "pause-queue", "resume-queue":
		return c, jobs.CheckQueue(c.queue)
	}
	op, err := jobadmin.ParseOp(c.op)
	if err != nil {
		return c, err
	}
	c.ids, err = jobadmin.ParseIDs(v["id"])
	if err == nil && op == jobadmin.Delete && strings.HasPrefix(c.back, "job?") {
		// The deleted job's page would say it is not found.
		c.back = "jobs?" + url.Values{"t": {s.name}}.Encode()
	}
	return c, err
}

// question returns what the confirmation page of c asks.
func (c jobChange) question(table string) string {
	switch c.op {
	case "pause-queue":
		return fmt.Sprintf("Pause queue %q of table %s? Within a tick no client claims its jobs; running jobs go on.", c.queue, table)
	case "resume-queue":
		return fmt.Sprintf("Resume queue %q of table %s? Within a tick its clients claim its jobs again.", c.queue, table)
	}
	ids := make([]string, 0, min(len(c.ids), 20))
	for _, id := range c.ids[:min(len(c.ids), 20)] {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	list := strings.Join(ids, ", ")
	if len(c.ids) > 20 {
		list += fmt.Sprintf(" and %d more", len(c.ids)-20)
	}
	what := fmt.Sprintf("job %s", list)
	if len(c.ids) > 1 {
		what = fmt.Sprintf("%d jobs (%s)", len(c.ids), list)
	}
	switch jobadmin.Op(c.op) {
	case jobadmin.Retry:
		return fmt.Sprintf("Retry %s of table %s? A retried job becomes available and runs again, with one more attempt when it had used them all; a running job is left as it is.", what, table)
	case jobadmin.Cancel:
		return fmt.Sprintf("Cancel %s of table %s? A waiting job is cancelled and never runs; a running one is asked to stop, within a tick; a finished one is left as it is.", what, table)
	}
	return fmt.Sprintf("Delete %s of table %s? A running job is not deleted (cancel it first).", what, table)
}

// fields returns the form fields that post c, confirmed, to table.
func (c jobChange) fields(table string) []field {
	fs := []field{{"op", c.op}, {"t", table}, {"confirm", "yes"}, {"back", c.back}}
	if c.queue != "" {
		fs = append(fs, field{"queue", c.queue})
	}
	for _, id := range c.ids {
		fs = append(fs, field{"id", strconv.FormatInt(id, 10)})
	}
	return fs
}

// confirmJobChange asks before an action on job table s.
func (h *Handler) confirmJobChange(w http.ResponseWriter, r *http.Request, s *jobSource) {
	c, err := parseJobChange(s, r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: "Confirm", Data: confirmData{Question: c.question(s.name), Fields: c.fields(s.name), Back: c.back}})
}

// jobAction runs an action on job table s (POST do; the CSRF token was
// checked): after its confirmation, retry, cancel or delete the jobs
// posted (id, any number), or pause or resume a queue; then it goes back
// to the page named by back with a message.
func (h *Handler) jobAction(ctx context.Context, w http.ResponseWriter, r *http.Request, s *jobSource) {
	c, err := parseJobChange(s, r.PostForm)
	if err == nil && r.PostFormValue("confirm") != "yes" {
		q := url.Values{}
		for _, f := range c.fields(s.name) {
			if f.Name != "confirm" {
				q.Add(f.Name, f.Value)
			}
		}
		seeOther(w, "confirm?"+q.Encode())
		return
	}
	var msg string
	if err == nil {
		switch c.op {
		case "pause-queue":
			err, msg = s.c.PauseQueue(ctx, c.queue), fmt.Sprintf("Paused queue %s.", c.queue)
		case "resume-queue":
			err, msg = s.c.ResumeQueue(ctx, c.queue), fmt.Sprintf("Resumed queue %s.", c.queue)
		default:
			op := jobadmin.Op(c.op)
			out := jobadmin.Apply(ctx, s.c, op, c.ids)
			msg = jobadmin.Summary(op, out)
			if e := jobadmin.Err(out); e != nil {
				h.cfg.Logger.Warn("ui: job action failed", "op", c.op, "table", s.name, "err", e)
			}
		}
	}
	if err != nil {
		h.cfg.Logger.Warn("ui: action failed", "op", c.op, "table", s.name, "err", err)
		msg = "Error: " + err.Error()
	}
	u, _ := url.Parse(c.back)
	q := u.Query()
	q.Set("flash", msg)
	q.Set("sig", h.sign("flash:"+msg))
	seeOther(w, u.Path+"?"+q.Encode())
}

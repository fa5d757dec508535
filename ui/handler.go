package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/outbox"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultExactBound is the default [Config].ExactBound.
const DefaultExactBound = 2000

// Config configures [New].
type Config struct {
	// Sources are the tables shown, made by [Worker], [Schedules],
	// [Outbox], [Jobs] and [Leases]; at least one. Names must be unique.
	Sources []Source
	// ReadOnly serves no action: no forms are shown and every POST is
	// refused with 405.
	ReadOnly bool
	// Auth, when set, is asked about every request; a request it refuses
	// gets 401 with a Basic challenge. [TokenAuth] and [BasicAuth] make
	// one. Nil lets every request through: mount the handler behind your
	// own authentication, or bind it to loopback only and refuse requests
	// whose Host is not a loopback name (a site whose name resolves to
	// 127.0.0.1, DNS rebinding, would reach it as its own origin), as
	// `claimstore ui` does.
	Auth func(r *http.Request) bool
	// ExactBound is the number of rows of one status above which the
	// overview shows PostgreSQL's planner estimate (labelled as such)
	// instead of counting; default [DefaultExactBound]. Other backends
	// always count.
	ExactBound int64
	// Timeout bounds the database reads of one request; default 10 s.
	Timeout time.Duration
	// Logger receives the errors of actions; default slog.Default().
	Logger *slog.Logger
}

// Handler is the operator's console, an http.Handler. Mount it at the root
// of a server or under a prefix with http.StripPrefix (its links are
// relative). It is safe for concurrent use.
type Handler struct {
	cfg     Config
	tables  []tableSource
	byName  map[string]Source
	leases  []*leaseSource
	pages   map[string]*template.Template
	static  http.Handler
	key     []byte // signs CSRF tokens
	origins *http.CrossOriginProtection
	mux     *http.ServeMux
}

// New returns the console over cfg.Sources. Errors wrap
// [dao.ErrInvalidArgument] for no source, a nil source, a repeated name or
// a negative bound or timeout.
func New(cfg Config) (*Handler, error) {
	if len(cfg.Sources) == 0 {
		return nil, fmt.Errorf("ui: %w: no table to show", dao.ErrInvalidArgument)
	}
	if cfg.ExactBound < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("ui: %w: negative bound or timeout", dao.ErrInvalidArgument)
	}
	if cfg.ExactBound == 0 {
		cfg.ExactBound = DefaultExactBound
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, byName: map[string]Source{}, key: make([]byte, 32), origins: http.NewCrossOriginProtection()}
	for _, s := range cfg.Sources {
		if s == nil {
			return nil, fmt.Errorf("ui: %w: nil source", dao.ErrInvalidArgument)
		}
		if _, dup := h.byName[s.sourceName()]; dup {
			return nil, fmt.Errorf("ui: %w: two tables named %q", dao.ErrInvalidArgument, s.sourceName())
		}
		h.byName[s.sourceName()] = s
		switch s := s.(type) {
		case tableSource:
			h.tables = append(h.tables, s)
		case *leaseSource:
			h.leases = append(h.leases, s)
		default:
			return nil, fmt.Errorf("ui: %w: unknown source %T", dao.ErrInvalidArgument, s)
		}
	}
	if _, err := rand.Read(h.key); err != nil {
		return nil, fmt.Errorf("ui: key: %w", err)
	}
	if err := h.parse(); err != nil {
		return nil, err
	}
	sub, _ := fs.Sub(staticFS, "static")
	h.static = http.StripPrefix("/static/", http.FileServerFS(sub))
	h.routes()
	return h, nil
}

func (h *Handler) parse() error {
	funcs := template.FuncMap{
		"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"local": localTime,
		"age":   age,
		"until": func(t, now time.Time) string { return age(t.Sub(now).Seconds()) },
		"timep": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
	}
	h.pages = map[string]*template.Template{}
	for _, p := range []string{"overview", "schedules", "outbox", "leaders", "row", "confirm", "error", "jobs", "job", "queues"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return fmt.Errorf("ui: template %s: %w", p, err)
		}
		h.pages[p] = t
	}
	return nil
}

// localTime renders t in the time zone zone ("" is UTC).
func localTime(t time.Time, zone string) string {
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "" {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// age renders seconds as a short duration: "42s", "3m12s", "5h3m".
func age(sec float64) string {
	if sec <= 0 {
		return "0s"
	}
	return (time.Duration(sec) * time.Second).Round(time.Second).String()
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.overviewPage)
	m.HandleFunc("GET /schedules", h.schedulesPage)
	m.HandleFunc("GET /outbox", h.outboxPage)
	m.HandleFunc("GET /leaders", h.leadersPage)
	m.HandleFunc("GET /row", h.rowPage)
	m.HandleFunc("GET /confirm", h.confirmPage)
	m.HandleFunc("GET /api/overview", h.overviewAPI)
	h.jobRoutes(m)
	m.Handle("GET /static/", h.static)
	if !h.cfg.ReadOnly {
		m.HandleFunc("POST /do", h.action)
	}
	h.mux = m
}

// ServeHTTP serves the console: security headers on every answer, the
// authentication check, and on POST the cross-origin and CSRF checks.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	if h.cfg.Auth != nil && !h.cfg.Auth(r) {
		hd.Set("WWW-Authenticate", `Basic realm="claimstore console", charset="UTF-8"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if h.cfg.ReadOnly {
			http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
			return
		}
		if err := h.origins.Check(r); err != nil {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		if !h.validToken(r) {
			http.Error(w, "missing or invalid CSRF token", http.StatusForbidden)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// csrfCookie names the cookie that binds a browser to its CSRF token.
const csrfCookie = "claimstore_console"

// token returns the CSRF token of this browser, setting its cookie when
// it has none: the token is an HMAC of the cookie's random value, so a
// page of another site can neither read nor forge it.
func (h *Handler) token(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) != 64 {
		var b [32]byte
		_, _ = rand.Read(b[:])
		c = &http.Cookie{Name: csrfCookie, Value: hex.EncodeToString(b[:]), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
		http.SetCookie(w, c)
	}
	return h.sign(c.Value)
}

func (h *Handler) sign(v string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// validToken reports whether r carries the CSRF token of its cookie.
func (h *Handler) validToken(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	got := r.PostFormValue("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(h.sign(c.Value)))
}

// TokenAuth returns a [Config].Auth that accepts a request carrying token
// as "Authorization: Bearer <token>" or as the password of Basic
// authentication (any user name, so that a browser's login prompt works).
// The comparison takes constant time.
func TokenAuth(token string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if token == "" {
			return false
		}
		got := ""
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
			got = strings.TrimPrefix(a, "Bearer ")
		} else if _, p, ok := r.BasicAuth(); ok {
			got = p
		}
		return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
	}
}

// BasicAuth returns a [Config].Auth that accepts Basic authentication with
// user and password. The comparisons take constant time.
func BasicAuth(user, password string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		okU := subtle.ConstantTimeCompare([]byte(u), []byte(user)) == 1
		okP := subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1
		return ok && user != "" && okU && okP
	}
}

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
// cannot be read has its Error set.
func (h *Handler) Overview(ctx context.Context) []TableOverview {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	return h.overviews(ctx)
}

func (h *Handler) overviewPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: h.overviews(ctx)})
}

func (h *Handler) overviewAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		At     time.Time       `json:"at"`
		Tables []TableOverview `json:"tables"`
	}{time.Now().UTC(), h.overviews(ctx)})
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
			td.Abandoned, err = o.abandoned(ctx, 50)
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

// action runs one change (POST /do; the CSRF token was checked) and
// redirects to the page it came from with a message.
func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	op, name := r.PostFormValue("op"), r.PostFormValue("t")
	src, ok := h.byName[name]
	if !ok {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no table %q", name))
		return
	}
	var (
		msg  string
		err  error
		back = "schedules"
	)
	needConfirm := func() bool {
		if r.PostFormValue("confirm") == "yes" {
			return false
		}
		v := url.Values{}
		for k := range r.PostForm {
			if k != "csrf" {
				v.Set(k, r.PostFormValue(k))
			}
		}
		seeOther(w, "confirm?"+v.Encode())
		return true
	}
	switch s := src.(type) {
	case *jobSource:
		h.jobAction(ctx, w, r, s)
		return
	case *scheduleSource:
		key := r.PostFormValue("key")
		switch op {
		case "pause":
			err, msg = s.api.Pause(ctx, key), fmt.Sprintf("Paused %s.", key)
		case "resume":
			err, msg = s.api.Resume(ctx, key), fmt.Sprintf("Resumed %s.", key)
		case "fire":
			err, msg = s.fireNow(ctx, key), fmt.Sprintf("%s is due now.", key)
		case "delete":
			if needConfirm() {
				return
			}
			err, msg = s.api.Delete(ctx, key), fmt.Sprintf("Deleted %s.", key)
		case "add":
			form, err := h.addSchedule(ctx, s, r)
			if err != nil {
				form.Error = err.Error()
				h.schedules(w, r, http.StatusUnprocessableEntity, form)
				return
			}
			msg = fmt.Sprintf("Added %s.", form.Key)
		default:
			err = fmt.Errorf("%w: unknown action %q", dao.ErrInvalidArgument, op)
		}
	case *outboxSource:
		back = "outbox"
		switch op {
		case "requeue":
			if needConfirm() {
				return
			}
			var id int64
			limit := 1000
			if v := r.PostFormValue("id"); v != "" {
				if id, err = strconv.ParseInt(v, 10, 64); err != nil || id <= 0 {
					err = fmt.Errorf("%w: message id %q", dao.ErrInvalidArgument, v)
				}
			} else if v := r.PostFormValue("limit"); v != "" {
				if limit, err = strconv.Atoi(v); err != nil || limit <= 0 || limit > 100000 {
					err = fmt.Errorf("%w: limit %q: give 1 to 100000", dao.ErrInvalidArgument, v)
				}
			}
			if err == nil {
				var n int64
				n, err = s.requeue(ctx, id, limit)
				msg = fmt.Sprintf("Requeued %d abandoned message(s).", n)
			}
		case "purge":
			if needConfirm() {
				return
			}
			var d time.Duration
			if d, err = time.ParseDuration(r.PostFormValue("age")); err != nil || d < 0 {
				err = fmt.Errorf("%w: age %q: give a duration such as 24h or 30m", dao.ErrInvalidArgument, r.PostFormValue("age"))
			} else {
				var n int64
				n, err = s.purge(ctx, d)
				msg = fmt.Sprintf("Deleted %d published message(s) older than %s.", n, d)
			}
		default:
			err = fmt.Errorf("%w: unknown action %q", dao.ErrInvalidArgument, op)
		}
	default:
		err = fmt.Errorf("%w: table %q has no actions", dao.ErrInvalidArgument, name)
	}
	if err != nil {
		h.cfg.Logger.Warn("ui: action failed", "op", op, "table", name, "err", err)
		msg = "Error: " + err.Error()
	}
	seeOther(w, back+"?"+url.Values{"flash": {msg}, "sig": {h.sign("flash:" + msg)}}.Encode())
}

// seeOther redirects to the relative URL rel. Unlike http.Redirect it
// keeps rel relative, so that the browser resolves it under the prefix the
// handler is mounted at.
func seeOther(w http.ResponseWriter, rel string) {
	w.Header().Set("Location", rel)
	w.WriteHeader(http.StatusSeeOther)
}

// addSchedule adds the schedule of the add form; a bad cron expression,
// time zone or time is an error and writes nothing.
func (h *Handler) addSchedule(ctx context.Context, s *scheduleSource, r *http.Request) (addForm, error) {
	f := addForm{Table: s.sourceName(), Key: strings.TrimSpace(r.PostFormValue("key")), Kind: r.PostFormValue("kind"),
		Cron: strings.TrimSpace(r.PostFormValue("cron")), Zone: strings.TrimSpace(r.PostFormValue("zone")),
		At: strings.TrimSpace(r.PostFormValue("at")), Payload: r.PostFormValue("payload")}
	sp := dispatch.Spec{Key: f.Key, Payload: []byte(f.Payload)}
	switch f.Kind {
	case "cron":
		if f.Cron == "" {
			return f, fmt.Errorf("%w: a cron schedule needs a cron expression", dao.ErrInvalidArgument)
		}
		if err := dispatch.CheckCron(f.Cron, f.Zone); err != nil {
			return f, err
		}
		sp.Cron, sp.TimeZone = f.Cron, f.Zone
	case "once":
		loc := time.UTC
		if f.Zone != "" {
			l, err := time.LoadLocation(f.Zone)
			if err != nil {
				return f, fmt.Errorf("%w: time zone %q: %v", dao.ErrInvalidArgument, f.Zone, err)
			}
			loc = l
		}
		if f.At != "" {
			at, err := time.ParseInLocation("2006-01-02T15:04", f.At, loc)
			if err != nil {
				return f, fmt.Errorf("%w: time %q: use YYYY-MM-DDTHH:MM", dao.ErrInvalidArgument, f.At)
			}
			sp.At = at.UTC()
		}
	default:
		return f, fmt.Errorf("%w: kind %q: once or cron", dao.ErrInvalidArgument, f.Kind)
	}
	_, added, err := s.api.Add(ctx, sp)
	if err == nil && !added {
		err = fmt.Errorf("%w: a schedule with key %q exists", dao.ErrDuplicate, f.Key)
	}
	return f, err
}

package ui

import (
	"crypto/rand"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
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
	// DB, when set, is the database the console's tables are in. The
	// console asks it once whether it is a node of a MariaDB Galera
	// Cluster (dialects.DetectGalera: one round trip, SHOW GLOBAL
	// VARIABLES, on MySQL's dialector; none on the others), at the first
	// overview or [Handler.Cluster] call, and remembers the answer (a
	// detection that fails runs again at the next). On a Galera node the overview
	// and api/overview show the node's view of its cluster
	// ([ClusterState]; two round trips per refresh); on any other
	// database nothing more is sent. Nil shows no cluster state.
	DB *gorm.DB
}

// Handler is the operator's console, an http.Handler. Mount it at the root
// of a server or under a prefix with http.StripPrefix (its links are
// relative). It is safe for concurrent use.
type Handler struct {
	cfg     Config
	tables  []tableSource
	byName  map[string]Source
	leases  []*leaseSource
	logs    []*logSource
	pages   map[string]*template.Template
	static  http.Handler
	key     []byte // signs CSRF tokens
	origins *http.CrossOriginProtection
	mux     *http.ServeMux
	// clusterWatch reads cfg.DB's cluster state; nil without cfg.DB.
	clusterWatch *clusterWatch
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
	if cfg.DB != nil {
		h.clusterWatch = &clusterWatch{db: cfg.DB}
	}
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
		case *logSource:
			h.logs = append(h.logs, s)
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
		"utc":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"local":   localTime,
		"age":     age,
		"until":   func(t, now time.Time) string { return age(t.Sub(now).Seconds()) },
		"seconds": func(s float64) string { return age(s) },
		"join":    strings.Join,
		"priorities": func() []int {
			out := make([]int, jobs.MaxPriority)
			for i := range out {
				out[i] = i + 1
			}
			return out
		},
		"timep": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
	}
	h.pages = map[string]*template.Template{}
	for _, p := range []string{"overview", "schedules", "outbox", "leaders", "row", "confirm", "error", "jobs", "job", "queues", "workflow", "batch", "sequences"} {
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
	m.HandleFunc("GET /api/logs", h.logsAPI)
	h.jobRoutes(m)
	m.Handle("GET /static/", h.static)
	if !h.cfg.ReadOnly {
		m.HandleFunc("POST /do", h.action)
	}
	h.mux = m
}

package ui

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// LogLagLimit is the most records the console counts behind one cursor of
// an outbox log: a reader further behind shows as "at least" that many.
const LogLagLimit = 100000

// logDeadShown is how many dead letters the outbox page lists per log.
const logDeadShown = 50

// logSource is an outbox log (the outbox's log mode).
type logSource struct {
	name string
	lg   *outbox.Log
}

func (l *logSource) sourceName() string { return l.name }
func (l *logSource) sourceKind() string { return "log" }

// OutboxLog returns the [Source] of an outbox log (outbox.NewLog over
// sqlstore.NewLog); name is its name on the page. The outbox page shows
// each reader's cursor per partition with the records behind it (counted
// up to [LogLagLimit]) and the age of the oldest, and the first dead
// letters; api/logs gives the same as JSON. Errors wrap
// [dao.ErrInvalidArgument] for a nil log or an empty name.
func OutboxLog(name string, lg *outbox.Log) (Source, error) {
	if lg == nil || name == "" {
		return nil, fmt.Errorf("ui: outbox log: %w: a name and a log are required", dao.ErrInvalidArgument)
	}
	return &logSource{name: name, lg: lg}, nil
}

// LogView is one outbox log as the console shows it (and api/logs
// returns it).
type LogView struct {
	Name    string          `json:"name"`
	Cursors []LogCursorView `json:"cursors"`
	// DeadLetters are the first dead letters, in id order; MoreDead
	// says more follow.
	DeadLetters []outbox.LogDeadLetter `json:"deadLetters"`
	MoreDead    bool                   `json:"moreDeadLetters"`
	Error       string                 `json:"error,omitempty"`
}

// LogCursorView is one reader's cursor on one partition and its lag.
type LogCursorView struct {
	Reader    string `json:"reader"`
	Partition int    `json:"partition"`
	Term      int64  `json:"term"`
	// Behind is the records after the cursor; AtLeast says the count
	// stopped at [LogLagLimit].
	Behind  int64 `json:"behind"`
	AtLeast bool  `json:"atLeast,omitempty"`
	// OldestAge is how long the oldest record behind has waited, in
	// seconds (0 when none).
	OldestAge float64   `json:"oldestAgeSeconds"`
	Moved     time.Time `json:"cursorMovedAt"`
}

// view reads the log's cursors, lags and first dead letters; an error
// is kept in the view.
func (l *logSource) view(ctx context.Context) LogView {
	v := LogView{Name: l.name, Cursors: []LogCursorView{}, DeadLetters: []outbox.LogDeadLetter{}}
	st, err := l.lg.Status(ctx, LogLagLimit, logDeadShown)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	now := time.Now()
	for _, c := range st.Cursors {
		v.Cursors = append(v.Cursors, LogCursorView{Reader: c.Reader, Partition: c.Partition, Term: c.Term,
			Behind: c.Behind, AtLeast: c.AtLeast, OldestAge: c.Age(now).Seconds(), Moved: c.UpdatedAt})
	}
	v.DeadLetters = append(v.DeadLetters, st.DeadLetters...)
	v.MoreDead = st.MoreDead
	return v
}

// logViews reads every log the console shows.
func (h *Handler) logViews(ctx context.Context) []LogView {
	out := []LogView{}
	for _, l := range h.logs {
		out = append(out, l.view(ctx))
	}
	return out
}

// logsAPI serves api/logs: every outbox log's cursors, lags and first
// dead letters, as JSON.
func (h *Handler) logsAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	writeJSON(w, http.StatusOK, struct {
		At   time.Time `json:"at"`
		Logs []LogView `json:"logs"`
	}{time.Now().UTC(), h.logViews(ctx)})
}

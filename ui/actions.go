package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// The console's changes: one POST endpoint whose operations are looked up
// in a table by the kind of the table they change.

// actionFunc runs one operation on a table of the console and returns the
// message shown after the redirect.
type actionFunc[S any] func(ctx context.Context, r *http.Request, s S) (string, error)

// action is one operation of the console's POST endpoint.
type action[S any] struct {
	// confirm: the operation goes through the confirmation page first.
	confirm bool
	run     actionFunc[S]
}

// scheduleActions are the operations on a schedule table, by the form's
// op; "add" is apart, since its error shows the form again.
var scheduleActions = map[string]action[*scheduleSource]{
	"pause": {run: func(ctx context.Context, r *http.Request, s *scheduleSource) (string, error) {
		key := r.PostFormValue("key")
		return fmt.Sprintf("Paused %s.", key), s.api.Pause(ctx, key)
	}},
	"resume": {run: func(ctx context.Context, r *http.Request, s *scheduleSource) (string, error) {
		key := r.PostFormValue("key")
		return fmt.Sprintf("Resumed %s.", key), s.api.Resume(ctx, key)
	}},
	"fire": {run: func(ctx context.Context, r *http.Request, s *scheduleSource) (string, error) {
		key := r.PostFormValue("key")
		return fmt.Sprintf("%s is due now.", key), s.api.FireNow(ctx, key)
	}},
	"delete": {confirm: true, run: func(ctx context.Context, r *http.Request, s *scheduleSource) (string, error) {
		key := r.PostFormValue("key")
		return fmt.Sprintf("Deleted %s.", key), s.api.Delete(ctx, key)
	}},
}

// outboxActions are the operations on an outbox table, by the form's op.
var outboxActions = map[string]action[*outboxSource]{
	"requeue": {confirm: true, run: func(ctx context.Context, r *http.Request, s *outboxSource) (string, error) {
		var id int64
		limit := 1000
		if v := r.PostFormValue("id"); v != "" {
			var err error
			if id, err = strconv.ParseInt(v, 10, 64); err != nil || id <= 0 {
				return "", fmt.Errorf("%w: message id %q", dao.ErrInvalidArgument, v)
			}
		} else if v := r.PostFormValue("limit"); v != "" {
			var err error
			if limit, err = strconv.Atoi(v); err != nil || limit <= 0 || limit > 100000 {
				return "", fmt.Errorf("%w: limit %q: give 1 to 100000", dao.ErrInvalidArgument, v)
			}
		}
		n, err := s.requeue(ctx, id, limit)
		return fmt.Sprintf("Requeued %d abandoned message(s).", n), err
	}},
	"purge": {confirm: true, run: func(ctx context.Context, r *http.Request, s *outboxSource) (string, error) {
		d, err := time.ParseDuration(r.PostFormValue("age"))
		if err != nil || d < 0 {
			return "", fmt.Errorf("%w: age %q: give a duration such as 24h or 30m", dao.ErrInvalidArgument, r.PostFormValue("age"))
		}
		n, err := s.purge(ctx, d)
		return fmt.Sprintf("Deleted %d published message(s) older than %s.", n, d), err
	}},
}

// lookupAction returns the operation op of table, or an error wrapping
// dao.ErrInvalidArgument for an unknown one.
func lookupAction[S any](table map[string]action[S], op string) (action[S], error) {
	a, ok := table[op]
	if !ok {
		return a, fmt.Errorf("%w: unknown action %q", dao.ErrInvalidArgument, op)
	}
	return a, nil
}

// action runs one change (POST /do; the CSRF token was checked) and
// redirects to the page it came from with a message. An operation marked
// confirm without confirm=yes in the form redirects to the confirmation
// page instead, with the form's fields.
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
	needConfirm := func(confirm bool) bool {
		if !confirm || r.PostFormValue("confirm") == "yes" {
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
		if op == "add" {
			form, err := h.addSchedule(ctx, s, r)
			if err != nil {
				form.Error = err.Error()
				h.schedules(w, r, http.StatusUnprocessableEntity, form)
				return
			}
			msg = fmt.Sprintf("Added %s.", form.Key)
			break
		}
		var a action[*scheduleSource]
		if a, err = lookupAction(scheduleActions, op); err == nil {
			if needConfirm(a.confirm) {
				return
			}
			msg, err = a.run(ctx, r, s)
		}
	case *outboxSource:
		back = "outbox"
		var a action[*outboxSource]
		if a, err = lookupAction(outboxActions, op); err == nil {
			if needConfirm(a.confirm) {
				return
			}
			msg, err = a.run(ctx, r, s)
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
	t := dispatch.SpecText{Key: f.Key, TimeZone: f.Zone, Payload: f.Payload}
	switch f.Kind {
	case "cron":
		if f.Cron == "" {
			return f, fmt.Errorf("%w: a cron schedule needs a cron expression", dao.ErrInvalidArgument)
		}
		t.Cron = f.Cron
	case "once":
		t.At = f.At
	default:
		return f, fmt.Errorf("%w: kind %q: once or cron", dao.ErrInvalidArgument, f.Kind)
	}
	sp, err := dispatch.ParseSpec(t, time.Now())
	if err != nil {
		return f, err
	}
	_, added, err := s.api.Add(ctx, sp)
	if err == nil && !added {
		err = fmt.Errorf("%w: a schedule with key %q exists", dao.ErrDuplicate, f.Key)
	}
	return f, err
}

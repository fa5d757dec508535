package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/ui"
)

// jobList is the JSON of api/jobs.
type jobList struct {
	Table      string
	Counts     []ui.Count
	Jobs       []jobadmin.Job
	NextBefore int64
}

// getJSON reads the JSON at u into v and returns the status code.
func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	code, h, body := get(t, client(t), u)
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", u, ct)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v\n%s", u, err, body)
	}
	return code
}

// ids returns the ids of js.
func ids(js []jobadmin.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// TestJobPages: the job list by state, queue and kind with its pages, the
// job page and the queues, as pages and as JSON, on each backend.
func TestJobPages(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		srv := e.serve(t, ui.Config{})
		api := srv.URL + "/api/jobs?t=" + e.table
		var l jobList
		if code := getJSON(t, api, &l); code != http.StatusOK {
			t.Fatalf("api/jobs: %d", code)
		}
		all := []int64{e.mail, e.scheduled, e.completed, e.panicked, e.discarded}
		if got := ids(l.Jobs); !slices.Equal(got, all) || l.NextBefore != 0 || l.Table != e.table {
			t.Fatalf("all jobs: %v (next %d), want %v newest first", got, l.NextBefore, all)
		}
		want := map[string]int64{"pending": 0, "available": 1, "scheduled": 1, "running": 0, "retryable": 0, "completed": 1, "cancelled": 0, "discarded": 2}
		if len(l.Counts) != len(want) {
			t.Fatalf("counts %+v", l.Counts)
		}
		for _, c := range l.Counts {
			if c.N != want[c.Status] {
				t.Errorf("count of %s: %d, want %d", c.Status, c.N, want[c.Status])
			}
		}
		for _, tc := range []struct {
			q    string
			want []int64
			next int64
		}{
			{"state=discarded", []int64{e.panicked, e.discarded}, 0},
			{"state=discarded&state=completed", []int64{e.completed, e.panicked, e.discarded}, 0},
			{"state=discarded,completed", []int64{e.completed, e.panicked, e.discarded}, 0},
			{"queue=mail", []int64{e.mail}, 0},
			{"kind=ui_flaky", all, 0},
			{"kind=other", []int64{}, 0},
			{"queue=default&state=available", []int64{}, 0},
			{"limit=2", all[:2], e.scheduled},
			{"limit=2&before=" + itoa(e.scheduled), all[2:4], e.panicked},
			{"limit=2&before=" + itoa(e.panicked), all[4:], 0},
			{"tag=billing", []int64{e.discarded}, 0},
			{"tag=a,b", []int64{e.mail}, 0},
			{"tag=a&tag=billing", []int64{}, 0},
			{"priority=2", []int64{e.mail}, 0},
			{"metadata=" + url.QueryEscape(`{"source":`+strconv.Quote(xssScript)+`}`), []int64{e.discarded}, 0},
			{"metadata=" + url.QueryEscape(`{"source":"other"}`), []int64{}, 0},
		} {
			var l jobList
			if code := getJSON(t, api+"&"+tc.q, &l); code != http.StatusOK {
				t.Fatalf("api/jobs?%s: %d", tc.q, code)
			}
			if got := ids(l.Jobs); !slices.Equal(got, tc.want) || l.NextBefore != tc.next {
				t.Errorf("api/jobs?%s: %v, next before %d; want %v, %d", tc.q, got, l.NextBefore, tc.want, tc.next)
			}
		}
		for q, code := range map[string]int{
			"state=done": 400, "queue=bad+queue": 400, "kind=%3Cb%3E": 400, "limit=0": 400, "limit=501": 400, "before=x": 400,
			"priority=9": 400, "metadata=%5B1%5D": 400,
		} {
			var v struct{ Error string }
			if got := getJSON(t, api+"&"+q, &v); got != code || v.Error == "" {
				t.Errorf("api/jobs?%s: %d %q, want %d and an error", q, got, v.Error, code)
			}
			if got, _, _ := get(t, client(t), srv.URL+"/jobs?t="+e.table+"&"+q); got != code {
				t.Errorf("jobs?%s: %d, want %d", q, got, code)
			}
		}
		var v struct{ Error string }
		if code := getJSON(t, srv.URL+"/api/jobs?t=nope", &v); code != http.StatusNotFound {
			t.Errorf("api/jobs of an unknown table: %d", code)
		}

		// The list page: the first page links the older one, which
		// links back to the newest.
		_, _, page := get(t, client(t), srv.URL+"/jobs?limit=2")
		older := "jobs?before=" + itoa(e.scheduled) + "&amp;limit=2&amp;t=" + e.table
		if !strings.Contains(page, `href="`+older+`" id="older"`) || strings.Contains(page, `id="newest"`) {
			t.Errorf("first page of 2: no link to %s\n%s", older, page)
		}
		for _, id := range all[:2] {
			if !strings.Contains(page, `<tr data-id="`+itoa(id)+`">`) {
				t.Errorf("first page does not list job %d", id)
			}
		}
		_, _, page = get(t, client(t), srv.URL+"/"+strings.ReplaceAll(older, "&amp;", "&"))
		if !strings.Contains(page, `id="newest"`) || !strings.Contains(page, `<tr data-id="`+itoa(e.completed)+`">`) || strings.Contains(page, `<tr data-id="`+itoa(e.mail)+`">`) {
			t.Errorf("second page:\n%s", page)
		}

		// One job: its args, metadata, tags, attempts with their errors
		// and trace.
		var d struct {
			Table string
			Job   jobadmin.Job
		}
		if code := getJSON(t, srv.URL+"/api/job?t="+e.table+"&id="+itoa(e.discarded), &d); code != http.StatusOK {
			t.Fatalf("api/job: %d", code)
		}
		j := d.Job
		var args flakyArgs
		if err := json.Unmarshal(j.Args, &args); err != nil || args != (flakyArgs{N: 1, Fail: 1, Note: xssImg}) {
			t.Errorf("args %s (%v)", j.Args, err)
		}
		if j.State != jobs.StateDiscarded || j.Attempt != 1 || j.MaxAttempts != 1 || !slices.Equal(j.Tags, []string{"billing"}) ||
			len(j.Errors) != 1 || j.Errors[0].Attempt != 1 || j.Errors[0].Error != xssScript+" attempt 1 failed" || j.FinalizedAt == nil {
			t.Errorf("discarded job: %+v", j)
		}
		var meta struct{ Source string }
		if err := json.Unmarshal(j.Metadata, &meta); err != nil || meta.Source != xssScript {
			t.Errorf("metadata %s (%v)", j.Metadata, err)
		}
		if getJSON(t, srv.URL+"/api/job?t="+e.table+"&id="+itoa(e.panicked), &d); len(d.Job.Errors) != 1 ||
			!strings.Contains(d.Job.Errors[0].Error, xssImg) || !strings.Contains(d.Job.Errors[0].Trace, "goroutine") {
			t.Errorf("panicked job's errors: %+v", d.Job.Errors)
		}
		// The output the completed job's work recorded, as JSON and on
		// its page, escaped.
		if getJSON(t, srv.URL+"/api/job?t="+e.table+"&id="+itoa(e.completed), &d); string(d.Job.Output) != `{"note":`+jsonString(xssScript)+`}` {
			t.Errorf("completed job's output: %s", d.Job.Output)
		}
		if _, _, page := get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(e.completed)); !strings.Contains(page, `<pre id="job-output">`) || strings.Contains(page, xssScript) {
			t.Errorf("job page of a job with output: want the output, escaped\n%s", page)
		}
		code, _, page := get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(e.panicked))
		if code != http.StatusOK || !strings.Contains(page, `<pre class="trace">goroutine`) || !strings.Contains(page, `data-attempt="1"`) {
			t.Errorf("job page of the panicked job: %d\n%s", code, page)
		}
		for q, want := range map[string]int{"id=999999": 404, "id=x": 400, "id=-1": 400, "t=nope&id=1": 404} {
			if code, _, _ := get(t, client(t), srv.URL+"/job?"+q); code != want {
				t.Errorf("job?%s: %d, want %d", q, code, want)
			}
			var v struct{ Error string }
			if code := getJSON(t, srv.URL+"/api/job?"+q, &v); code != want || v.Error == "" {
				t.Errorf("api/job?%s: %d %q, want %d", q, code, v.Error, want)
			}
		}
		if code, _, page := get(t, client(t), srv.URL+"/row?t="+e.table+"&id="+itoa(e.mail)); code != http.StatusOK || !strings.Contains(page, `&#34;queue&#34;: &#34;mail&#34;`) {
			t.Errorf("row page of a job: %d\n%s", code, page)
		}

		// The overview counts the jobs by state.
		var o struct{ Tables []ui.TableOverview }
		getJSON(t, srv.URL+"/api/overview", &o)
		if len(o.Tables) != 1 || o.Tables[0].Kind != "jobs" || o.Tables[0].Error != "" || o.Tables[0].Total.N != 5 ||
			o.Tables[0].Due.N != 1 || o.Tables[0].Failures.N != 2 || o.Tables[0].Done.N != 1 {
			t.Errorf("overview: %+v", o.Tables)
		}

		// The queues of the queue table, with their counts: default,
		// which the seed's client ran, paused here.
		if err := e.c.PauseQueue(context.Background(), "default"); err != nil {
			t.Fatal(err)
		}
		var qs struct {
			Tables []struct {
				Table  string
				Queues []struct {
					Name   string
					Paused bool
					Kinds  []string
					Counts []ui.Count
				}
				UnknownKinds []struct {
					Queue, Kind string
					Jobs        int64
				}
				Error string
			}
		}
		getJSON(t, srv.URL+"/api/queues", &qs)
		if len(qs.Tables) != 1 || qs.Tables[0].Error != "" || len(qs.Tables[0].Queues) != 1 || qs.Tables[0].Queues[0].Name != "default" || !qs.Tables[0].Queues[0].Paused {
			t.Fatalf("queues: %+v", qs)
		}
		// The seed's client recorded its kind for queue default; no
		// client runs queue mail, so its job's kind waits unknown.
		if k := qs.Tables[0].Queues[0].Kinds; len(k) != 1 || k[0] != "ui_flaky" {
			t.Errorf("kinds known in queue default: %v, want [ui_flaky]", k)
		}
		if u := qs.Tables[0].UnknownKinds; len(u) != 1 || u[0].Queue != "mail" || u[0].Kind != "ui_flaky" || u[0].Jobs != 1 {
			t.Errorf("unknown kinds: %+v, want ui_flaky in queue mail, 1 job", u)
		}
		for _, c := range qs.Tables[0].Queues[0].Counts {
			if c.N != map[string]int64{"scheduled": 1, "completed": 1, "discarded": 2}[c.Status] {
				t.Errorf("queue default, %s: %d", c.Status, c.N)
			}
		}
		if _, _, page := get(t, client(t), srv.URL+"/queues"); !strings.Contains(page, `<tr data-queue="default">`) || !strings.Contains(page, `value="resume-queue"`) ||
			!strings.Contains(page, "Kinds waiting with no client that knows them") || !strings.Contains(page, `<tr data-queue="mail" data-kind="ui_flaky">`) {
			t.Errorf("queues page:\n%s", page)
		}
	})
}

// jsonString returns s as Go's JSON encoder writes it.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestJobActions: retry, cancel and delete of one job or many, and the
// pause and resume of a queue, each through its confirmation page, each
// checked in the table.
func TestJobActions(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		srv := e.serve(t, ui.Config{})
		c := client(t)
		_, _, page := get(t, c, srv.URL+"/jobs")
		do := doer(t, c, srv.URL, token(t, page), e.table)
		back := "job?t=" + url.QueryEscape(e.table) + "&id=" + itoa(e.discarded)

		// Retry the discarded job from its page: nothing before the
		// confirmation.
		code, loc := do(url.Values{"op": {"retry"}, "id": {itoa(e.discarded)}, "back": {back}})
		if code != http.StatusSeeOther || !strings.HasPrefix(loc, "confirm?") {
			t.Fatalf("retry without confirmation: %d %q", code, loc)
		}
		if s := e.get(t, e.discarded).State; s != jobs.StateDiscarded {
			t.Fatalf("retry before its confirmation: %s", s)
		}
		code, _, confirm := get(t, c, srv.URL+"/"+loc)
		if code != http.StatusOK || !strings.Contains(confirm, "Retry job "+itoa(e.discarded)+" of table "+e.table+"?") ||
			!strings.Contains(confirm, `name="confirm" value="yes"`) || !strings.Contains(confirm, `name="id" value="`+itoa(e.discarded)+`"`) {
			t.Fatalf("confirmation page %d:\n%s", code, confirm)
		}
		code, loc = do(url.Values{"op": {"retry"}, "id": {itoa(e.discarded)}, "back": {back}, "confirm": {"yes"}})
		if f := flashOf(t, c, srv.URL, loc); code != http.StatusSeeOther || !strings.HasPrefix(loc, "job?") || f != "Job "+itoa(e.discarded)+": retried, now available." {
			t.Fatalf("retry: %d %q, flash %q", code, loc, f)
		}
		if r := e.get(t, e.discarded); r.State != jobs.StateAvailable || r.MaxAttempts != 2 || r.FinalizedAt != nil {
			t.Fatalf("retried job: %s, max attempts %d, finalized %v", r.State, r.MaxAttempts, r.FinalizedAt)
		}

		// Many at once: delete the scheduled and the (now running) mail
		// job; the running one is refused and stays.
		e.hold(t, e.mail, "ui-test-worker")
		if s := e.get(t, e.mail).State; s != jobs.StateRunning {
			t.Fatalf("held job is %s", s)
		}
		many := url.Values{"op": {"delete"}, "id": {itoa(e.scheduled), itoa(e.mail)}, "back": {"jobs?t=" + e.table + "&state=scheduled"}}
		code, loc = do(many)
		if code != http.StatusSeeOther || !strings.HasPrefix(loc, "confirm?") || e.gone(t, e.scheduled) {
			t.Fatalf("delete without confirmation: %d %q", code, loc)
		}
		if _, _, confirm = get(t, c, srv.URL+"/"+loc); !strings.Contains(confirm, "Delete 2 jobs ("+itoa(e.scheduled)+", "+itoa(e.mail)+") of table "+e.table) {
			t.Fatalf("confirmation of two deletes:\n%s", confirm)
		}
		many.Set("confirm", "yes")
		code, loc = do(many)
		want := "Delete: 1 of 2 jobs deleted. job " + itoa(e.mail) + ": running, not deleted: cancel it first."
		if f := flashOf(t, c, srv.URL, loc); code != http.StatusSeeOther || !strings.HasPrefix(loc, "jobs?") || !strings.Contains(loc, "state=scheduled") || f != want {
			t.Fatalf("delete two: %d %q, flash %q, want %q", code, loc, f, want)
		}
		if !e.gone(t, e.scheduled) || e.gone(t, e.mail) {
			t.Fatalf("after deleting: scheduled gone %v, mail (running) gone %v", e.gone(t, e.scheduled), e.gone(t, e.mail))
		}

		// Cancel the running job and the completed one: the running one
		// gets a cancel request, the completed one is left as it is.
		code, loc = do(url.Values{"op": {"cancel"}, "id": {itoa(e.mail), itoa(e.completed)}, "confirm": {"yes"}})
		want = "Cancel: 1 of 2 jobs cancelled or asked to stop. job " + itoa(e.completed) + ": completed, left as it is."
		if f := flashOf(t, c, srv.URL, loc); code != http.StatusSeeOther || f != want {
			t.Fatalf("cancel two: %d, flash %q, want %q", code, f, want)
		}
		if r := e.get(t, e.mail); r.State != jobs.StateRunning || r.CancelRequestedAt == nil {
			t.Fatalf("cancelled running job: %s, cancel requested %v", r.State, r.CancelRequestedAt)
		}
		if r := e.get(t, e.completed); r.State != jobs.StateCompleted || r.CancelRequestedAt != nil {
			t.Fatalf("cancelled completed job: %s, cancel requested %v", r.State, r.CancelRequestedAt)
		}
		// Cancel the retried (available) job: cancelled at once.
		do(url.Values{"op": {"cancel"}, "id": {itoa(e.discarded)}, "confirm": {"yes"}})
		if r := e.get(t, e.discarded); r.State != jobs.StateCancelled || r.FinalizedAt == nil {
			t.Fatalf("cancelled available job: %s", r.State)
		}

		// Bad requests change nothing and need no confirmation.
		for _, v := range []url.Values{
			{"op": {"retry"}},
			{"op": {"retry"}, "id": {"x"}},
			{"op": {"purge"}, "id": {itoa(e.panicked)}},
			{"op": {"pause-queue"}, "queue": {"bad queue"}},
		} {
			code, loc := do(v)
			if f := flashOf(t, c, srv.URL, loc); code != http.StatusSeeOther || !strings.HasPrefix(f, "Error: ") {
				t.Errorf("%v: %d %q, flash %q", v, code, loc, f)
			}
			if code, _, _ := get(t, c, srv.URL+"/confirm?"+v.Encode()+"&t="+url.QueryEscape(e.table)); code != http.StatusBadRequest {
				t.Errorf("confirmation page of %v: %d", v, code)
			}
		}
		if r := e.get(t, e.panicked); r.State != jobs.StateDiscarded {
			t.Fatalf("a refused action changed job %d: %s", e.panicked, r.State)
		}
		// An action goes back only to a page of the console.
		for _, b := range []string{"https://evil.example/jobs", "//evil.example/jobs", "/jobs", "row?t=x", "javascript:alert(1)"} {
			if _, loc := do(url.Values{"op": {"retry"}, "id": {itoa(e.panicked)}, "back": {b}, "confirm": {"yes"}}); !strings.HasPrefix(loc, "jobs?") || strings.Contains(loc, "evil") {
				t.Errorf("back %q: redirected to %q", b, loc)
			}
		}

		// Pause queue mail by its name (it is not in the queue table
		// yet), then resume it, for every client.
		paused := func() bool { return e.paused(t, "mail") }
		pause := url.Values{"op": {"pause-queue"}, "queue": {"mail"}, "back": {"queues"}}
		if code, loc := do(pause); code != http.StatusSeeOther || !strings.HasPrefix(loc, "confirm?") || paused() {
			t.Fatalf("pause without confirmation: %d %q, paused %v", code, loc, paused())
		}
		pause.Set("confirm", "yes")
		if code, loc := do(pause); code != http.StatusSeeOther || flashOf(t, c, srv.URL, loc) != "Paused queue mail." || !paused() {
			t.Fatalf("pause: %d %q, paused %v", code, loc, paused())
		}
		if _, _, page := get(t, c, srv.URL+"/queues"); !strings.Contains(page, `<tr data-queue="mail">`) || !strings.Contains(page, `value="resume-queue"`) {
			t.Errorf("queues page after the pause:\n%s", page)
		}
		if _, loc := do(url.Values{"op": {"resume-queue"}, "queue": {"mail"}, "confirm": {"yes"}}); flashOf(t, c, srv.URL, loc) != "Resumed queue mail." || paused() {
			t.Fatalf("resume: paused %v", paused())
		}
	})
}

// TestJobValuesAreText: args, metadata, errors and a panic's value that
// hold markup are shown as their text on every job page.
func TestJobValuesAreText(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		srv := e.serve(t, ui.Config{})
		for _, p := range []string{
			"/jobs", "/jobs?state=discarded", "/job?id=" + itoa(e.discarded), "/job?id=" + itoa(e.panicked), "/job?id=" + itoa(e.mail),
			"/row?t=" + e.table + "&id=" + itoa(e.discarded),
		} {
			code, _, page := get(t, client(t), srv.URL+p)
			if code != http.StatusOK {
				t.Fatalf("%s: %d", p, code)
			}
			if strings.Contains(page, "<script>window") || strings.Contains(page, "<img src=x") {
				t.Fatalf("%s writes a stored value as HTML", p)
			}
		}
		_, _, page := get(t, client(t), srv.URL+"/job?id="+itoa(e.discarded))
		for what, want := range map[string]string{
			"args":     `<pre id="job-args">{` + "\n" + `  &#34;n&#34;: 1,` + "\n" + `  &#34;fail&#34;: 1,` + "\n" + `  &#34;note&#34;: &#34;&lt;img src=x onerror=\&#34;window.__xss=&#39;img&#39;\&#34;&gt;&#34;`,
			"metadata": `&#34;source&#34;: &#34;&lt;script&gt;window.__xss=&#39;script&#39;&lt;/script&gt;&#34;`,
			"error":    `<pre class="lasterror attempt-error">&lt;script&gt;window.__xss=&#39;script&#39;&lt;/script&gt; attempt 1 failed</pre>`,
			"tag":      `<span class="tag">billing</span>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("the job page does not show the %s as text (%s):\n%s", what, want, page)
			}
		}
		if _, _, page := get(t, client(t), srv.URL+"/jobs?state=discarded"); !strings.Contains(page, `<td class="lasterror">&lt;script&gt;window.__xss=`) ||
			!strings.Contains(page, `<td class="lasterror">jobs: work panicked: &lt;img src=x`) {
			t.Errorf("the list does not show the last errors as text:\n%s", page)
		}
	})
}

// TestJobPostNeedsToken: a job action without this browser's CSRF token
// is refused and changes nothing; a read-only console offers no job
// action and refuses them.
func TestJobPostNeedsToken(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		srv := e.serve(t, ui.Config{})
		c := client(t)
		get(t, c, srv.URL+"/jobs")
		form := url.Values{"op": {"retry"}, "t": {e.table}, "id": {itoa(e.discarded)}, "confirm": {"yes"}}
		for _, tok := range []string{"", strings.Repeat("0", 64)} {
			if tok != "" {
				form.Set("csrf", tok)
			}
			if code, body := post(t, c, srv.URL+"/do", form); code != http.StatusForbidden {
				t.Fatalf("POST with token %q: %d %s", tok, code, body)
			}
		}
		other := client(t)
		_, _, otherPage := get(t, other, srv.URL+"/jobs")
		form.Set("csrf", token(t, otherPage))
		if code, _ := post(t, c, srv.URL+"/do", form); code != http.StatusForbidden {
			t.Fatalf("POST with another browser's token: %d", code)
		}
		if s := e.get(t, e.discarded).State; s != jobs.StateDiscarded {
			t.Fatalf("refused POSTs changed the job: %s", s)
		}

		ro := e.serve(t, ui.Config{ReadOnly: true})
		for _, p := range []string{"/jobs", "/job?id=" + itoa(e.discarded), "/queues"} {
			if _, _, page := get(t, c, ro.URL+p); strings.Contains(page, `action="do"`) || strings.Contains(page, `name="op"`) || strings.Contains(page, `type="checkbox"`) {
				t.Errorf("read-only %s offers an action:\n%s", p, page)
			}
		}
		if code, _ := post(t, c, ro.URL+"/do", form); code != http.StatusMethodNotAllowed {
			t.Errorf("read-only POST: %d", code)
		}
		if code, _, _ := get(t, c, ro.URL+"/confirm?op=retry&t="+e.table+"&id="+itoa(e.discarded)); code != http.StatusMethodNotAllowed {
			t.Errorf("read-only confirmation page: %d", code)
		}
		if s := e.get(t, e.discarded).State; s != jobs.StateDiscarded {
			t.Fatalf("a read-only console changed the job: %s", s)
		}
	})
}

func TestJobsSourceNeedsNameAndClient(t *testing.T) {
	c, err := jobs.NewClient(jobs.Config{Store: nil})
	if err == nil {
		t.Fatal("a client without a store")
	}
	if _, err := ui.Jobs("jobs", c); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil client: %v", err)
	}
	e := seedJobs(t, "sqlite", jobBackends[0].Open(t))
	if _, err := ui.Jobs("", e.c); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("no name: %v", err)
	}
}

// TestJobPagesWaits: the job list by sequence and by batch, and the job
// page's links to them, with a sequence key that would be markup,
// escaped, on each backend.
func TestJobPagesWaits(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		ctx := context.Background()
		srv := e.serve(t, ui.Config{})
		key := xssScript
		seq := func(n int) jobs.InsertParams {
			return jobs.InsertParams{Args: flakyArgs{N: n}, Opts: &jobs.InsertOpts{Queue: "waits", Sequence: jobs.SequenceOpts{Key: key}}}
		}
		res, err := e.c.InsertMany(ctx, []jobs.InsertParams{seq(1), seq(2)})
		if err != nil {
			t.Fatal(err)
		}
		head, next := res[0].Job.ID, res[1].Job.ID
		b, err := e.c.InsertBatch(ctx, []jobs.InsertParams{{Args: flakyArgs{N: 3}, Opts: &jobs.InsertOpts{Queue: "waits"}}}, jobs.BatchOpts{Callback: flakyArgs{N: 4}, CallbackOpts: &jobs.InsertOpts{Queue: "waits"}})
		if err != nil {
			t.Fatal(err)
		}
		api := srv.URL + "/api/jobs?t=" + e.table
		for q, want := range map[string][]int64{
			"sequence=" + url.QueryEscape(key): {next, head},
			"sequence=other":                   {},
			"batch=" + b.ID:                    {b.Callback.ID, b.Jobs[0].Job.ID},
			"batch=" + b.ID + "&state=pending": {b.Callback.ID},
		} {
			var l jobList
			if code := getJSON(t, api+"&"+q, &l); code != http.StatusOK {
				t.Fatalf("api/jobs?%s: %d", q, code)
			}
			if got := ids(l.Jobs); !slices.Equal(got, want) {
				t.Errorf("api/jobs?%s: %v, want %v", q, got, want)
			}
		}
		var d struct{ Job jobadmin.Job }
		if getJSON(t, srv.URL+"/api/job?t="+e.table+"&id="+itoa(head), &d); d.Job.SequenceKey != key || !d.Job.SequenceHead {
			t.Errorf("api/job of the sequence's head: sequence %q, head %v", d.Job.SequenceKey, d.Job.SequenceHead)
		}
		// The key, percent-encoded in the link (hex digits in either case)
		// and escaped in the text.
		_, _, page := get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(head))
		if strings.Contains(page, xssScript) || !strings.Contains(strings.ToLower(page), strings.ToLower(`href="jobs?t=`+e.table+`&amp;sequence=`+url.QueryEscape(key)+`"`)) || !strings.Contains(page, "(holds it)") {
			t.Errorf("job page of the sequence's head: want a link to the sequence, escaped\n%s", page)
		}
		_, _, page = get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(b.Callback.ID))
		if !strings.Contains(page, `href="jobs?t=`+e.table+`&amp;batch=`+b.ID+`"`) || !strings.Contains(page, "(its callback)") {
			t.Errorf("job page of the batch's callback: want a link to the batch\n%s", page)
		}
		_, _, page = get(t, client(t), srv.URL+"/jobs?t="+e.table+"&batch="+b.ID)
		if !strings.Contains(page, `name="batch" value="`+b.ID+`"`) || !strings.Contains(page, `<tr data-id="`+itoa(b.Callback.ID)+`">`) {
			t.Errorf("jobs page of the batch: want the filter filled and the callback listed\n%s", page)
		}
	})
}

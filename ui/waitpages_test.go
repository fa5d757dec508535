package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/ui"
)

// treeLineRE matches a task's line of the workflow page: its name,
// whether it repeats a task drawn above, and its state (the first state
// after the line's start is its own: its dependents come after it).
var treeLineRE = regexp.MustCompile(`(?s)<li[^>]*? data-task="([^"]+)"( data-repeat="true")?>.*?data-status="([^"]+)"`)

// workflowJSON is the JSON of api/workflow.
type workflowJSON struct {
	Table string
	ID    string
	Tasks []struct {
		Name, State string
		JobID       int64
		Attempt     int
		Deps        []string
	}
	Tree []struct {
		Name   string
		Depth  int
		Repeat bool
	}
	Counts []ui.Count
	Error  string
}

// TestWorkflowPage: a workflow with a diamond (d after b and c) and a
// cancelled branch (x cancelled by the operator, y after it cancelled by
// the promotion) is drawn as a tree in walk order, every task with its
// state, d in full under b and repeated under c; its JSON lists the
// tasks, the tree and the counts; a task's job page links its workflow;
// a missing id is 400, an unknown one 404, on each backend.
func TestWorkflowPage(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		ctx := context.Background()
		srv := e.serve(t, ui.Config{})
		task := func(name string, n int, deps ...string) jobs.WorkflowTask {
			return jobs.WorkflowTask{Name: name, Args: flakyArgs{N: n}, Opts: &jobs.InsertOpts{Queue: "flow", MaxAttempts: 3}, Deps: deps}
		}
		names := []string{"a", "b", "c", "d", "x", "y"}
		res, err := e.c.InsertWorkflow(ctx, jobs.Workflow{Tasks: []jobs.WorkflowTask{
			task("a", 1), task("b", 2, "a"), task("c", 3, "a"), task("d", 4, "b", "c"), task("x", 5, "a"), task("y", 6, "x"),
		}})
		if err != nil {
			t.Fatal(err)
		}
		id := map[string]int64{}
		for i, n := range names {
			id[n] = res.Tasks[i].Job.ID
		}
		// a runs its first attempt; x is cancelled while it waits, and
		// y, which depends on it, by the promotion that follows.
		e.hold(t, id["a"], "ui-test-worker")
		if _, err := e.c.Cancel(ctx, id["x"]); err != nil {
			t.Fatal(err)
		}
		if s := e.get(t, id["y"]).State; s != jobs.StateCancelled {
			t.Fatalf("y after its dependency x was cancelled: %s", s)
		}

		q := "t=" + url.QueryEscape(e.table) + "&id=" + res.ID
		code, hd, page := get(t, client(t), srv.URL+"/workflow?"+q)
		if code != http.StatusOK {
			t.Fatalf("workflow page: %d\n%s", code, page)
		}
		if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Count(page, "<script") != 1 || !strings.Contains(page, `<script src="static/console.js" defer></script>`) {
			t.Errorf("workflow page: CSP %q, want the console's script only\n%s", csp, page)
		}
		// Each line with its depth: the lists open before it, from the
		// tree's own list on.
		tree := page[strings.Index(page, `id="workflow-tree"`):]
		var got []string
		for _, m := range treeLineRE.FindAllStringSubmatchIndex(tree, -1) {
			depth := strings.Count(tree[:m[0]], "<ul") - strings.Count(tree[:m[0]], "</ul>")
			line := fmt.Sprintf("%d %s %s", depth, tree[m[2]:m[3]], tree[m[6]:m[7]])
			if m[4] >= 0 {
				line += " (again)"
			}
			got = append(got, line)
		}
		want := []string{"0 a running", "1 b pending", "2 d pending", "1 c pending", "2 d pending (again)", "1 x cancelled", "2 y cancelled"}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("workflow tree: %q\nwant %q\n%s", got, want, page)
		}
		for n, frag := range map[string]string{
			"a": `attempt 1 of 3</span>`,
			"d": `also after c`,
		} {
			if !strings.Contains(page, frag) {
				t.Errorf("task %s: the page lacks %q", n, frag)
			}
		}
		for _, n := range names {
			link := fmt.Sprintf(`href="job?id=%d&amp;t=%s">job %d</a>`, id[n], e.table, id[n])
			if strings.Count(page, link) != 1 {
				t.Errorf("task %s: want one link %s", n, link)
			}
		}
		if !strings.Contains(page, `<a href="#task-d" class="taskname">d</a>`) {
			t.Errorf("the repeated d does not lead to its full line")
		}

		var wf workflowJSON
		if code := getJSON(t, srv.URL+"/api/workflow?"+q, &wf); code != http.StatusOK || wf.ID != res.ID || wf.Table != e.table {
			t.Fatalf("api/workflow: %d %+v", code, wf)
		}
		if len(wf.Tasks) != len(names) {
			t.Fatalf("api/workflow tasks: %+v", wf.Tasks)
		}
		for i, n := range names {
			if wf.Tasks[i].Name != n || wf.Tasks[i].JobID != id[n] {
				t.Errorf("api/workflow task %d: %+v, want %s job %d", i, wf.Tasks[i], n, id[n])
			}
		}
		if d := wf.Tasks[3]; d.State != "pending" || strings.Join(d.Deps, ",") != "b,c" || wf.Tasks[0].Attempt != 1 || wf.Tasks[0].State != "running" {
			t.Errorf("api/workflow: d %+v, a %+v", d, wf.Tasks[0])
		}
		var lines []string
		for _, l := range wf.Tree {
			lines = append(lines, fmt.Sprintf("%s/%d/%v", l.Name, l.Depth, l.Repeat))
		}
		if s := strings.Join(lines, " "); s != "a/0/false b/1/false d/2/false c/1/false d/2/true x/1/false y/2/false" {
			t.Errorf("api/workflow tree: %s", s)
		}
		for _, c := range wf.Counts {
			if c.N != map[string]int64{"running": 1, "pending": 3, "cancelled": 2}[c.Status] {
				t.Errorf("api/workflow count of %s: %d", c.Status, c.N)
			}
		}

		// The job page of a task links its workflow; the job JSON names
		// it.
		_, _, page = get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(id["d"]))
		if !strings.Contains(page, `href="workflow?t=`+e.table+`&amp;id=`+res.ID+`"`) || !strings.Contains(page, `task <code>d</code>`) {
			t.Errorf("job page of task d: no link to its workflow\n%s", page)
		}
		var jd struct{ Job jobadmin.Job }
		if getJSON(t, srv.URL+"/api/job?t="+e.table+"&id="+itoa(id["d"]), &jd); jd.Job.WorkflowID != res.ID || jd.Job.WorkflowTask != "d" {
			t.Errorf("api/job of task d: workflow %q, task %q", jd.Job.WorkflowID, jd.Job.WorkflowTask)
		}
		if _, _, page = get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(e.mail)); !strings.Contains(page, `<dd id="job-workflow"><span class="muted">none</span>`) {
			t.Errorf("job page of a job of no workflow:\n%s", page)
		}

		for bad, want := range map[string]int{
			"id=":                                 400,
			"id=" + strings.Repeat("f", 65):       400,
			"id=no-such-workflow":                 404,
			"id=0123456789abcdef0123456789abcdef": 404,
			"t=nope&id=" + res.ID:                 404,
			"id=%3Cscript%3E":                     404,
		} {
			checkRefused(t, srv.URL, "workflow", bad, want)
		}
	})
}

// batchJSON is the JSON of api/batch.
type batchJSON struct {
	Table    string
	ID       string
	Total    int
	Jobs     int64
	Counts   []ui.Count
	Done     bool
	Callback *jobadmin.Job
}

// TestBatchPage: a batch of three jobs, one running, one cancelled, one
// available, is counted so on its page and in its JSON, with its
// callback pending and the links to its jobs; once every job ended the
// callback is available and the batch ended; a missing id is 400, an
// unknown one 404, on each backend.
func TestBatchPage(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		ctx := context.Background()
		srv := e.serve(t, ui.Config{})
		job := func(n int) jobs.InsertParams {
			return jobs.InsertParams{Args: flakyArgs{N: n}, Opts: &jobs.InsertOpts{Queue: "batch"}}
		}
		b, err := e.c.InsertBatch(ctx, []jobs.InsertParams{job(1), job(2), job(3)}, jobs.BatchOpts{Callback: flakyArgs{N: 4}, CallbackOpts: &jobs.InsertOpts{Queue: "batch"}})
		if err != nil {
			t.Fatal(err)
		}
		running, cancelled, available, cb := b.Jobs[0].Job.ID, b.Jobs[1].Job.ID, b.Jobs[2].Job.ID, b.Callback.ID
		e.hold(t, running, "ui-test-worker")
		if _, err := e.c.Cancel(ctx, cancelled); err != nil {
			t.Fatal(err)
		}
		q := "t=" + url.QueryEscape(e.table) + "&id=" + b.ID
		check := func(want map[string]int64, cbState jobs.State, done bool) {
			t.Helper()
			var d batchJSON
			if code := getJSON(t, srv.URL+"/api/batch?"+q, &d); code != http.StatusOK || d.ID != b.ID || d.Table != e.table || d.Total != 3 || d.Jobs != 3 || d.Done != done {
				t.Fatalf("api/batch: %d %+v", code, d)
			}
			if d.Callback == nil || d.Callback.ID != cb || d.Callback.State != cbState {
				t.Errorf("api/batch callback: %+v, want job %d %s", d.Callback, cb, cbState)
			}
			code, _, page := get(t, client(t), srv.URL+"/batch?"+q)
			if code != http.StatusOK {
				t.Fatalf("batch page: %d\n%s", code, page)
			}
			if len(d.Counts) != len(jobs.States()) {
				t.Errorf("api/batch counts: %+v", d.Counts)
			}
			for _, c := range d.Counts {
				if c.N != want[c.Status] {
					t.Errorf("api/batch count of %s: %d, want %d", c.Status, c.N, want[c.Status])
				}
				cell := fmt.Sprintf(`data-count="%s"><a href="jobs?batch=%s&amp;state=%s&amp;t=%s">%d</a></td>`, c.Status, b.ID, c.Status, e.table, want[c.Status])
				if !strings.Contains(page, cell) {
					t.Errorf("batch page: no cell %s\n%s", cell, page)
				}
			}
			for _, frag := range []string{
				fmt.Sprintf(`<a href="job?id=%d&amp;t=%s">job %d</a> <span class="status" data-status="%s">%s</span>`, cb, e.table, cb, cbState, cbState),
				fmt.Sprintf(`<a href="jobs?batch=%s&amp;t=%s" id="batch-list">`, b.ID, e.table),
				`<dd id="batch-jobs">3 of 3 inserted</dd>`,
			} {
				if !strings.Contains(page, frag) {
					t.Errorf("batch page lacks %s\n%s", frag, page)
				}
			}
		}
		check(map[string]int64{"running": 1, "cancelled": 1, "available": 1}, jobs.StatePending, false)

		// The other two end: the batch ends and its callback may run.
		if _, err := e.c.Cancel(ctx, available); err != nil {
			t.Fatal(err)
		}
		// The running job's lease ends, as a stopped worker's does.
		if n, err := e.store.Update(ctx, dao.Eq(jobs.ColID, running), dao.Set{jobs.ColLeaseUntil: time.Now().UTC().Add(-time.Minute)}); err != nil || n != 1 {
			t.Fatalf("end the lease of job %d: %d, %v", running, n, err)
		}
		if _, err := e.c.Cancel(ctx, running); err != nil {
			t.Fatal(err)
		}
		check(map[string]int64{"cancelled": 3}, jobs.StateAvailable, true)

		// The job page of a batch's job and the list of the batch link
		// the batch page.
		batchLink := `href="batch?t=` + e.table + `&amp;id=` + b.ID + `"`
		if _, _, page := get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(cb)); !strings.Contains(page, batchLink) {
			t.Errorf("job page of the callback: no link to the batch page\n%s", page)
		}
		if _, _, page := get(t, client(t), srv.URL+"/jobs?t="+e.table+"&batch="+b.ID); !strings.Contains(page, batchLink) {
			t.Errorf("jobs of the batch: no link to the batch page\n%s", page)
		}

		for bad, want := range map[string]int{"id=": 400, "id=+": 400, "id=no-such-batch": 404, "t=nope&id=" + b.ID: 404} {
			checkRefused(t, srv.URL, "batch", bad, want)
		}
	})
}

// sequencesJSON is the JSON of api/sequences.
type sequencesJSON struct {
	Table     string
	Limit     int
	More      bool
	Sequences []struct {
		Key     string
		Head    *jobadmin.Job
		Waiting int64
	}
}

// TestSequencesPage: two sequences, one (its key markup) with two jobs
// waiting behind its head, one with its head alone, are listed oldest
// head first with their heads, states and waiting jobs, the key escaped
// and linked to its jobs; the jobs page links the page; filters by key,
// queue and limit, and bad ones, on each backend.
func TestSequencesPage(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		ctx := context.Background()
		srv := e.serve(t, ui.Config{})
		seq := func(key, queue string, n int) jobs.InsertParams {
			return jobs.InsertParams{Args: flakyArgs{N: n}, Opts: &jobs.InsertOpts{Queue: queue, Sequence: jobs.SequenceOpts{Key: key}}}
		}
		res, err := e.c.InsertMany(ctx, []jobs.InsertParams{seq(xssScript, "seqs", 1), seq(xssScript, "seqs", 2), seq(xssScript, "seqs", 3)})
		if err != nil {
			t.Fatal(err)
		}
		head := res[0].Job.ID
		one, err := e.c.Insert(ctx, flakyArgs{N: 4}, &jobs.InsertOpts{Queue: "other", Sequence: jobs.SequenceOpts{Key: "alone"}})
		if err != nil {
			t.Fatal(err)
		}
		e.hold(t, one.Job.ID, "ui-test-worker")

		api := srv.URL + "/api/sequences?t=" + url.QueryEscape(e.table)
		var d sequencesJSON
		if code := getJSON(t, api, &d); code != http.StatusOK || d.Table != e.table || d.Limit != 100 || d.More || len(d.Sequences) != 2 {
			t.Fatalf("api/sequences: %d %+v", code, d)
		}
		if s := d.Sequences[0]; s.Key != xssScript || s.Head == nil || s.Head.ID != head || s.Head.State != jobs.StateAvailable || s.Waiting != 2 {
			t.Errorf("first sequence: %+v", s)
		}
		if s := d.Sequences[1]; s.Key != "alone" || s.Head == nil || s.Head.ID != one.Job.ID || s.Head.State != jobs.StateRunning || s.Waiting != 0 {
			t.Errorf("second sequence: %+v", s)
		}
		for q, want := range map[string][]string{
			"queue=seqs":                        {xssScript},
			"queue=other":                       {"alone"},
			"queue=none":                        {},
			"key=" + url.QueryEscape(xssScript): {xssScript},
			"limit=1":                           {xssScript},
		} {
			var d sequencesJSON
			if code := getJSON(t, api+"&"+q, &d); code != http.StatusOK {
				t.Fatalf("api/sequences?%s: %d", q, code)
			}
			var got []string
			for _, s := range d.Sequences {
				got = append(got, s.Key)
			}
			if strings.Join(got, "|") != strings.Join(want, "|") || d.More != (q == "limit=1") {
				t.Errorf("api/sequences?%s: %q (more %v), want %q", q, got, d.More, want)
			}
		}

		code, _, page := get(t, client(t), srv.URL+"/sequences?t="+url.QueryEscape(e.table))
		if code != http.StatusOK || strings.Contains(page, xssScript) {
			t.Fatalf("sequences page: %d, or the key written as HTML\n%s", code, page)
		}
		rows := regexp.MustCompile(`(?s)<tr data-key="([^"]*)">.*?</tr>`).FindAllStringSubmatch(page, -1)
		if len(rows) != 2 {
			t.Fatalf("sequences page: %d rows\n%s", len(rows), page)
		}
		first := rows[0][0]
		for _, frag := range []string{
			`<code>&lt;script&gt;`,
			fmt.Sprintf(`<a href="job?id=%d&amp;t=%s">%d</a>`, head, e.table, head),
			`<td class="status" data-status="available">available</td>`,
			`<td class="num waiting">2</td>`,
		} {
			if !strings.Contains(first, frag) {
				t.Errorf("the first sequence's row lacks %s\n%s", frag, first)
			}
		}
		list := `href="jobs?sequence=` + url.QueryEscape(xssScript) + `&amp;t=` + e.table + `"`
		if !strings.Contains(strings.ToLower(first), strings.ToLower(list)) {
			t.Errorf("the first sequence's row does not link its jobs (%s)\n%s", list, first)
		}
		if second := rows[1][0]; !strings.Contains(second, `data-status="running"`) || !strings.Contains(second, `<td class="num waiting">0</td>`) {
			t.Errorf("the second sequence's row:\n%s", second)
		}
		if _, _, page := get(t, client(t), srv.URL+"/jobs?t="+e.table); !strings.Contains(page, `<a href="sequences?t=`+e.table+`" id="sequences-link">`) {
			t.Errorf("the jobs page does not link the sequences\n%s", page)
		}
		if _, _, page := get(t, client(t), srv.URL+"/job?t="+e.table+"&id="+itoa(head)); !strings.Contains(strings.ToLower(page), strings.ToLower(`href="sequences?t=`+e.table+`&amp;key=`+url.QueryEscape(xssScript)+`"`)) {
			t.Errorf("the job page of the head does not link its sequence\n%s", page)
		}

		for q, want := range map[string]int{"limit=0": 400, "limit=501": 400, "limit=x": 400, "queue=bad+queue": 400, "t=nope": 404} {
			if !strings.HasPrefix(q, "t=") {
				q += "&t=" + url.QueryEscape(e.table)
			}
			checkRefused(t, srv.URL, "sequences", q, want)
		}
	})
}

// checkRefused checks that page?query and api/page?query of the console
// at base answer status want: the page with the error page (its error
// paragraph, no markup of the query), the API with {"error": …}.
func checkRefused(t *testing.T, base, page, query string, want int) {
	t.Helper()
	code, _, body := get(t, client(t), base+"/"+page+"?"+query)
	if code != want || !strings.Contains(body, `<p class="error" id="error">`) || strings.Contains(body, "<script>") {
		t.Errorf("%s?%s: %d, want %d and the error page\n%s", page, query, code, want, body)
	}
	var v struct{ Error string }
	if code := getJSON(t, base+"/api/"+page+"?"+query, &v); code != want || v.Error == "" {
		t.Errorf("api/%s?%s: %d %q, want %d", page, query, code, v.Error, want)
	}
}

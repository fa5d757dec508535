package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
)

// testJobList inserts jobs of several queues, kinds, priorities, tags,
// metadata and scheduled times (many sharing one time) and pages through
// random listings of them, comparing each with what the same selection
// and order give over all the jobs read at once: every job selected is
// listed once, in order, across pages of every size, whatever the filters.
func testJobList(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := newJobClient(t, st)
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	base := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	queues := []string{"q1", "q2", "q3"}
	tags := []string{"red", "green", "blue"}
	var params []jobs.InsertParams
	for i := range 60 {
		o := &jobs.InsertOpts{
			Queue:       queues[rnd.IntN(len(queues))],
			Priority:    1 + rnd.IntN(3),
			ScheduledAt: base.Add(time.Duration(rnd.IntN(4)) * time.Minute), // many ties
		}
		for _, tag := range tags {
			if rnd.IntN(2) == 0 {
				o.Tags = append(o.Tags, tag)
			}
		}
		if rnd.IntN(3) > 0 {
			o.Metadata = json.RawMessage(fmt.Sprintf(`{"tenant":%d,"flags":{"vip":%v},"list":[%d,%d]}`, rnd.IntN(3), rnd.IntN(2) == 0, rnd.IntN(3), rnd.IntN(3)))
		}
		var args jobs.Args = NoteArgs{N: i}
		if rnd.IntN(3) == 0 {
			args = timeoutArgs{}
		}
		params = append(params, jobs.InsertParams{Args: args, Opts: o})
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	all, err := c.List(ctx, jobs.ListParams{Limit: jobs.MaxListLimit})
	if err != nil || len(all) != len(params) {
		t.Fatalf("list of every job: %d jobs, %v; want %d", len(all), err, len(params))
	}
	kinds := []string{NoteArgs{}.Kind(), timeoutArgs{}.Kind()}
	for round := range 40 {
		var p jobs.ListParams
		if rnd.IntN(2) == 0 {
			p.Queues = pick(rnd, queues)
		}
		if rnd.IntN(3) == 0 {
			p.Kinds = pick(rnd, kinds)
		}
		if rnd.IntN(3) == 0 {
			p.Priorities = []int{1 + rnd.IntN(3)}
		}
		if rnd.IntN(3) == 0 {
			p.Tags = pick(rnd, tags)
		}
		if rnd.IntN(3) == 0 {
			p.Metadata = json.RawMessage([]string{`{"tenant":1}`, `{"flags":{"vip":true}}`, `{"list":[2]}`, `{"tenant":0,"list":[0,1]}`}[rnd.IntN(4)])
		}
		if rnd.IntN(4) == 0 {
			p.MinID, p.MaxID = all[len(all)-1].ID+int64(rnd.IntN(20)), all[0].ID-int64(rnd.IntN(20))
		}
		if rnd.IntN(2) == 0 {
			p.OrderBy = jobs.ListByScheduledAt
		}
		p.Ascending = rnd.IntN(2) == 0
		want := oracleList(all, p)
		p.Limit = 1 + rnd.IntN(9)
		var got []int64
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("round %d: more pages than jobs with %+v", round, p)
			}
			res, err := c.ListPage(ctx, p)
			if err != nil {
				t.Fatalf("round %d: list %+v: %v", round, p, err)
			}
			if len(res.Jobs) > p.Limit {
				t.Fatalf("round %d: a page of %d jobs with limit %d", round, len(res.Jobs), p.Limit)
			}
			for _, r := range res.Jobs {
				got = append(got, r.ID)
			}
			if res.Cursor == nil {
				break
			}
			p.After = res.Cursor
			if pages%2 == 1 {
				// Every other page goes through the cursor's text form,
				// as a web page's link or a command line carries it.
				text, err := res.Cursor.MarshalText()
				if err != nil {
					t.Fatal(err)
				}
				p.After = new(jobs.ListCursor)
				if err := p.After.UnmarshalText(text); err != nil {
					t.Fatalf("cursor %s: %v", text, err)
				}
			}
		}
		if !slices.Equal(got, want) {
			p.After = nil
			t.Fatalf("round %d: listing %+v returned %v, want %v", round, p, got, want)
		}
	}
	// Bad input.
	for name, p := range map[string]jobs.ListParams{
		"state":    {States: []jobs.State{"nope"}},
		"order":    {OrderBy: "nope"},
		"limit":    {Limit: jobs.MaxListLimit + 1},
		"metadata": {Metadata: json.RawMessage(`[1]`)},
	} {
		if _, err := c.ListPage(ctx, p); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("list with a bad %s: %v, want dao.ErrInvalidArgument", name, err)
		}
	}
	if err := new(jobs.ListCursor).UnmarshalText([]byte("not-a-cursor")); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("a cursor's text that is not one: %v, want dao.ErrInvalidArgument", err)
	}
	page, err := c.ListPage(ctx, jobs.ListParams{Limit: 1})
	if err != nil || page.Cursor == nil {
		t.Fatalf("first page: %+v %v", page, err)
	}
	if _, err := c.ListPage(ctx, jobs.ListParams{OrderBy: jobs.ListByScheduledAt, After: page.Cursor}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("a cursor of the id order in a listing by scheduled time: %v, want dao.ErrInvalidArgument", err)
	}

	// UpdateMetadata merges keys, a null removes one.
	target := all[0]
	if target.Metadata == "" {
		target = all[1]
	}
	r, err := c.UpdateMetadata(ctx, target.ID, json.RawMessage(`{"tenant": null, "note": "checked"}`))
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	if err := json.Unmarshal([]byte(r.Metadata), &md); err != nil || md["note"] != "checked" || md["tenant"] != nil {
		t.Errorf("metadata after the update: %q (%v)", r.Metadata, err)
	}
	if _, err := c.UpdateMetadata(ctx, target.ID, json.RawMessage(`"x"`)); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("update with a patch that is not an object: %v", err)
	}
	if _, err := c.UpdateMetadata(ctx, 1<<40, json.RawMessage(`{}`)); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("update of a missing job: %v", err)
	}

	// DeleteMany deletes what it selects and nothing else.
	sel := jobs.ListParams{Queues: []string{"q1"}, Tags: []string{"red"}}
	doomed := oracleList(all, sel)
	n, err := c.DeleteMany(ctx, sel)
	if err != nil || n != int64(len(doomed)) {
		t.Fatalf("delete many: %d, %v; want %d", n, err, len(doomed))
	}
	left, err := st.Jobs.Count(ctx, dao.Criteria{})
	if err != nil || left != int64(len(all)-len(doomed)) {
		t.Errorf("%d jobs left (%v), want %d", left, err, len(all)-len(doomed))
	}
	if rest, _ := c.List(ctx, sel); len(rest) != 0 {
		t.Errorf("%d jobs left that the deletion selected", len(rest))
	}
}

// pick returns a random non-empty subset of vs.
func pick(rnd *rand.Rand, vs []string) []string {
	var out []string
	for len(out) == 0 {
		for _, v := range vs {
			if rnd.IntN(2) == 0 {
				out = append(out, v)
			}
		}
	}
	return out
}

// oracleList returns the ids of the jobs of all that p selects, in p's
// order: the listing computed in the test from every job.
func oracleList(all []jobs.Row, p jobs.ListParams) []int64 {
	var sel []jobs.Row
	for _, r := range all {
		switch {
		case len(p.Queues) > 0 && !slices.Contains(p.Queues, r.Queue),
			len(p.Kinds) > 0 && !slices.Contains(p.Kinds, r.Kind),
			len(p.Priorities) > 0 && !slices.Contains(p.Priorities, r.Priority),
			p.MinID > 0 && r.ID < p.MinID,
			p.MaxID > 0 && r.ID > p.MaxID:
			continue
		}
		tags := r.TagList()
		if slices.ContainsFunc(p.Tags, func(t string) bool { return !slices.Contains(tags, t) }) {
			continue
		}
		if p.Metadata != nil && !containsJSON(r.Metadata, string(p.Metadata)) {
			continue
		}
		sel = append(sel, r)
	}
	slices.SortFunc(sel, func(a, b jobs.Row) int {
		c := 0
		if p.OrderBy == jobs.ListByScheduledAt {
			c = a.ScheduledAt.Compare(b.ScheduledAt)
		}
		if c == 0 {
			c = cmp.Compare(a.ID, b.ID)
		}
		if !p.Ascending {
			c = -c
		}
		return c
	})
	ids := make([]int64, len(sel))
	for i, r := range sel {
		ids[i] = r.ID
	}
	return ids
}

// containsJSON reports whether the JSON object have contains want, for
// the objects of testJobList: each key of want present in have, objects
// compared within, arrays by membership of each element.
func containsJSON(have, want string) bool {
	if have == "" {
		return false
	}
	var h, w map[string]any
	if json.Unmarshal([]byte(have), &h) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	for k, wv := range w {
		hv, ok := h[k]
		if !ok {
			return false
		}
		switch wv := wv.(type) {
		case map[string]any:
			hm, ok := hv.(map[string]any)
			if !ok {
				return false
			}
			for k2, v2 := range wv {
				if hm[k2] != v2 {
					return false
				}
			}
		case []any:
			ha, ok := hv.([]any)
			if !ok {
				return false
			}
			for _, e := range wv {
				if !slices.Contains(ha, e) {
					return false
				}
			}
		default:
			if hv != wv {
				return false
			}
		}
	}
	return true
}

// outputArgs is the args of the output check's jobs: Mode selects what
// the work does with its output and its transaction.
type outputArgs struct {
	Mode string `json:"mode"`
}

func (outputArgs) Kind() string { return "conformance_output" }

// testJobOutput checks RecordOutput: the output is written with the
// job's outcome into its metadata, beside the metadata it had, and read
// back by Row.Output; an output too large or a call outside a job's work
// is refused and records nothing.
func testJobOutput(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	refused := make(chan error, 2)
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		err := jobs.AddWorker(ws, jobs.WorkFunc[outputArgs](func(ctx context.Context, j *jobs.Job[outputArgs]) error {
			switch j.Args.Mode {
			case "big":
				refused <- jobs.RecordOutput(ctx, strings.Repeat("x", jobs.MaxMetadataSize))
			case "fail":
				if err := jobs.RecordOutput(ctx, map[string]int{"attempt": j.Attempt}); err != nil {
					return err
				}
				if j.Attempt == 1 {
					return errors.New("first attempt fails")
				}
			default:
				_ = jobs.RecordOutput(ctx, "overwritten")
				return jobs.RecordOutput(ctx, map[string]any{"sum": 3, "items": []string{"a"}})
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	if err := jobs.RecordOutput(ctx, 1); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("RecordOutput outside a job's work: %v, want dao.ErrInvalidArgument", err)
	}
	plain := insert(t, c.Client, outputArgs{}, &jobs.InsertOpts{Metadata: json.RawMessage(`{"tenant":7}`)})
	big := insert(t, c.Client, outputArgs{Mode: "big"}, nil)
	retried := insert(t, c.Client, outputArgs{Mode: "fail"}, nil)
	got := waitJob(t, c.Client, plain.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if out := string(got.Output()); out != `{"items":["a"],"sum":3}` {
		t.Errorf("recorded output %s", out)
	}
	var md map[string]any
	if err := json.Unmarshal([]byte(got.Metadata), &md); err != nil || md["tenant"] != float64(7) {
		t.Errorf("metadata after the output: %s (%v); want the inserted keys kept", got.Metadata, err)
	}
	got = waitJob(t, c.Client, big.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if err := recvErr(t, refused); !errors.Is(err, dao.ErrInvalidArgument) || got.Output() != nil {
		t.Errorf("output over the metadata limit: %v, stored %d bytes", err, len(got.Output()))
	}
	got = waitJob(t, c.Client, retried.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if out := string(got.Output()); out != `{"attempt":2}` {
		t.Errorf("output of a job completed on its second attempt: %s, want the second attempt's", out)
	}
}

// testJobCompleteTx checks CompleteTx: a job completed in the work's own
// transaction is completed when it commits, with its output, and its
// outcome is not written again; a rolled-back completion leaves the job
// to run again when its lease ends; a job whose lease was lost is refused
// with dispatch.ErrLeaseLost.
func testJobCompleteTx(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Begin == nil {
		h.skipOrFail(t, CheckJobsTx, "JobStores.Begin")
	}
	results := make(chan error, 10)
	var c *jobClient
	c = startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.Lease = time.Second
		err := jobs.AddWorker(ws, jobs.WorkFunc[outputArgs](func(ctx context.Context, j *jobs.Job[outputArgs]) error {
			if j.Args.Mode == "stolen" {
				if _, err := st.Jobs.Update(ctx, dao.Eq(jobs.ColID, j.ID), dao.Set{jobs.ColLeaseOwner: "another-worker#1"}); err != nil {
					return err
				}
			}
			if err := jobs.RecordOutput(ctx, j.Attempt); err != nil {
				return err
			}
			tx, commit, rollback := st.Begin(t)
			_, err := c.CompleteTx(ctx, tx, j.Row)
			results <- err
			if err != nil {
				_ = rollback()
				return nil
			}
			if j.Args.Mode == "rollback" && j.Attempt == 1 {
				return rollback()
			}
			return commit()
		}))
		if err != nil {
			t.Fatal(err)
		}
	})
	events, unsubscribe, err := c.Subscribe(jobs.EventJobCompleted)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	committed := insert(t, c.Client, outputArgs{}, nil)
	got := waitJob(t, c.Client, committed.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if err := recvErr(t, results); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	// The client knows the job ended: its completion event comes, with
	// the output, although the client wrote no outcome.
	select {
	case ev := <-events:
		if ev.Job.ID != committed.ID || ev.Job.State != jobs.StateCompleted || string(ev.Job.Output()) != "1" {
			t.Errorf("completion event of the job completed in a transaction: %+v", *ev.Job)
		}
	case <-time.After(10 * time.Second):
		t.Error("no completion event for the job completed in its work's transaction")
	}
	if got.Attempt != 1 || got.LeaseOwner != "" || got.FinalizedAt == nil || string(got.Output()) != "1" || got.Errors != "" {
		t.Errorf("job completed in the work's transaction: %+v", *got)
	}
	rolledBack := insert(t, c.Client, outputArgs{Mode: "rollback"}, nil)
	got = waitJob(t, c.Client, rolledBack.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if got.Attempt != 2 || string(got.Output()) != "2" {
		t.Errorf("job whose completion rolled back: attempt %d, output %s; want it run again as attempt 2", got.Attempt, got.Output())
	}
	recvErr(t, results)
	recvErr(t, results)
	stolen := insert(t, c.Client, outputArgs{Mode: "stolen"}, nil)
	if err := recvErr(t, results); !errors.Is(err, dispatch.ErrLeaseLost) {
		t.Errorf("CompleteTx of a job whose lease was taken: %v, want dispatch.ErrLeaseLost", err)
	}
	if r, err := c.Get(context.Background(), stolen.ID); err != nil || r.State == jobs.StateCompleted {
		t.Errorf("job whose lease was taken: %+v, %v; want it not completed", r, err)
	}
}

// recvErr receives from ch, failing t after 30 s.
func recvErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("no result from the work function within 30 s")
		return nil
	}
}

// accountArgs is the args of the unique-fields check: only Account
// makes a job unique.
type accountArgs struct {
	Account int    `json:"account" jobs:"unique"`
	Note    string `json:"note"`
}

func (accountArgs) Kind() string { return "conformance_account" }

// testJobUniqueFields checks a unique key by args of an args type that
// tags some fields `jobs:"unique"`: jobs differing in other fields are
// duplicates, in a tagged field are not.
func testJobUniqueFields(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := newJobClient(t, st)
	ctx := context.Background()
	opts := &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}}
	first, err := c.Insert(ctx, accountArgs{Account: 1, Note: "a"}, opts)
	if err != nil || first.UniqueSkippedAsDuplicate {
		t.Fatalf("first insert: %+v, %v", first, err)
	}
	again, err := c.Insert(ctx, accountArgs{Account: 1, Note: "b"}, opts)
	if err != nil || !again.UniqueSkippedAsDuplicate || again.Job.ID != first.Job.ID {
		t.Errorf("insert differing in an untagged field: %+v, %v; want the first job as a duplicate", again, err)
	}
	other, err := c.Insert(ctx, accountArgs{Account: 2, Note: "a"}, opts)
	if err != nil || other.UniqueSkippedAsDuplicate {
		t.Errorf("insert differing in the tagged field: %+v, %v; want a new job", other, err)
	}
	if n, err := st.Jobs.Count(ctx, dao.Eq(jobs.ColKind, accountArgs{}.Kind())); err != nil || n != 2 {
		t.Errorf("%d jobs (%v), want 2", n, err)
	}
}

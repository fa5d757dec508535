package ui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/ui"
)

// TestBrowserJobs drives the job pages in Chromium on each backend: a
// discarded job retried from its page, and one selected in the list, are
// available again, then run and complete once a client runs their queue;
// the stored markup in args, metadata, errors and a panic's value never
// runs.
func TestBrowserJobs(t *testing.T) {
	for _, b := range jobBackends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := browser(t)
			e := seedJobs(t, b.Name, b.Open(t))
			srv := e.serve(t, ui.Config{})
			base := srv.URL
			text := func(sel string) string { return strings.TrimSpace(value(t, ctx, chromedp.Text(chromedp.CSS(sel)))) }
			noScriptRan := func(page string) {
				t.Helper()
				if value(t, ctx, chromedp.Evaluate[bool](`window.__xss !== undefined`)) {
					t.Fatalf("%s ran a stored value as script", page)
				}
				if n := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src])").length`)); n != 0 {
					t.Fatalf("%s has %d img or inline script elements", page, n)
				}
			}

			t.Run("OverviewCountsJobs", func(t *testing.T) {
				run(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#chart")))
				for state, want := range map[string]string{"discarded": "2", "available": "1", "completed": "1", "running": "0"} {
					if shown := text(countCell(e.table, state)); shown != want {
						t.Errorf("overview: %s shows %q, want %s", state, shown, want)
					}
				}
			})

			t.Run("RetryDiscardedJobFromItsPage", func(t *testing.T) {
				list := base + "/jobs?state=discarded"
				link := fmt.Sprintf(`tr[data-id="%d"] a`, e.discarded)
				run(t, ctx, chromedp.Navigate(list), chromedp.WaitVisible(chromedp.CSS(link)), chromedp.Sleep(300*time.Millisecond))
				noScriptRan(list)
				screenshot(t, ctx, "jobs-"+b.Name)
				run(t, ctx, chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.ID("job-retry")), chromedp.Sleep(300*time.Millisecond))
				noScriptRan("the job page")
				if shown := text("#job-args"); !strings.Contains(shown, strings.ReplaceAll(xssImg, `"`, `\"`)) {
					t.Fatalf("the job page shows the args as %q", shown)
				}
				if shown := text(".attempt-error"); shown != xssScript+" attempt 1 failed" {
					t.Fatalf("the job page shows the attempt's error as %q", shown)
				}
				screenshot(t, ctx, "job-"+b.Name)
				run(t, ctx, chromedp.Click(chromedp.ID("job-retry")), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
				if s := e.get(t, e.discarded).State; s != jobs.StateDiscarded {
					t.Fatalf("the confirmation page changed the job: %s", s)
				}
				run(t, ctx, chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("flash")))
				if flash := text("#flash"); flash != fmt.Sprintf("Job %d: retried, now available.", e.discarded) {
					t.Fatalf("flash %q", flash)
				}
				if shown := text("#job-state"); shown != "available" {
					t.Fatalf("the job page shows %q after the retry", shown)
				}
				if r := e.get(t, e.discarded); r.State != jobs.StateAvailable || r.Attempt != 1 || r.MaxAttempts != 2 {
					t.Fatalf("after the retry the database says %s, attempt %d of %d", r.State, r.Attempt, r.MaxAttempts)
				}
			})

			t.Run("RetrySelectedInTheList", func(t *testing.T) {
				box := fmt.Sprintf(`tr[data-id="%d"] input[name="id"]`, e.panicked)
				run(t, ctx, chromedp.Navigate(base+"/jobs?state=discarded"), chromedp.WaitVisible(chromedp.CSS(box)))
				if n := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#jobs-form tbody tr[data-id]").length`)); n != 1 {
					t.Fatalf("%d discarded jobs listed after one was retried, want 1", n)
				}
				run(t, ctx, chromedp.Click(chromedp.CSS(box)), chromedp.Click(chromedp.ID("retry-selected")), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
				run(t, ctx, chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("flash")))
				if flash := text("#flash"); flash != fmt.Sprintf("Job %d: retried, now available.", e.panicked) {
					t.Fatalf("flash %q", flash)
				}
				if loc := value(t, ctx, chromedp.Location()); !strings.Contains(loc, "/jobs?") || !strings.Contains(loc, "state=discarded") {
					t.Fatalf("after the action the browser is at %s, not back at the list", loc)
				}
				if r := e.get(t, e.panicked); r.State != jobs.StateAvailable {
					t.Fatalf("after the retry the database says %s", r.State)
				}
			})

			t.Run("PauseAndResumeQueue", func(t *testing.T) {
				form := "#pause-" + e.table
				run(t, ctx, chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(chromedp.CSS(form)),
					chromedp.SendKeys(chromedp.CSS(form+` input[name="queue"]`), "mail"),
					chromedp.Click(chromedp.CSS(form+" button")), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
					chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("flash")))
				if flash := text("#flash"); flash != "Paused queue mail." || !e.paused(t, "mail") {
					t.Fatalf("flash %q, paused in the database: %v", flash, e.paused(t, "mail"))
				}
				if shown := text(`tr[data-queue="mail"] td.status`); !strings.HasPrefix(shown, "paused since ") {
					t.Fatalf("the queues page shows mail as %q", shown)
				}
				screenshot(t, ctx, "queues-"+b.Name)
				run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-queue="mail"] button.resume`)), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
					chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("flash")))
				if e.paused(t, "mail") || text(`tr[data-queue="mail"] td.status`) != "active" {
					t.Fatalf("after resume: paused in the database %v, shown %q", e.paused(t, "mail"), text(`tr[data-queue="mail"] td.status`))
				}
			})

			t.Run("RetriedJobsRun", func(t *testing.T) {
				e.run(t)
				for _, id := range []int64{e.discarded, e.panicked} {
					if r := e.wait(t, id, jobs.StateCompleted); r.Attempt != 2 {
						t.Errorf("job %d completed on attempt %d, want 2", id, r.Attempt)
					}
				}
				run(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/job?id=%d", base, e.discarded)), chromedp.WaitVisible(chromedp.ID("job-state")))
				if shown := text("#job-state"); shown != "completed" {
					t.Fatalf("the job page shows %q once the job ran", shown)
				}
			})
		})
	}
}

package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/ui"
)

// installChromium is how to get the browser the tests drive.
const installChromium = "apt-get update && apt-get install -y chromium"

// chromiumPath returns the Chromium executable, or skips t with the
// install command (fails it when CLAIMSTORE_REQUIRE names chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH; to run the browser tests: " + installChromium
	if testdb.Required("chromium") {
		t.Fatalf("%s (required by %s)", msg, testdb.EnvRequire)
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless Chromium for t and returns a tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // the tests may run as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTime)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// value runs a that returns a value.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// screenshot saves a PNG of the page to docs/images/ui-<name>.png when
// CLAIMSTORE_UI_SCREENSHOTS is set (the pictures of docs/ui.md; quality
// 100 makes Chromium write PNG, below it JPEG).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("CLAIMSTORE_UI_SCREENSHOTS") == "" {
		return
	}
	png := value(t, ctx, chromedp.FullScreenshot(100))
	p := filepath.Join("..", "docs", "images", "ui-"+name+".png")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

// countCell reads the count shown for status in the card of table.
func countCell(table, status string) string {
	return fmt.Sprintf(`section.card[data-table=%q] td[data-count=%q]`, table, status)
}

func TestBrowser(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := browser(t)
			e := seed(t, b.name, b.open(t))
			// Mounted under a prefix: the links, the script's reads and
			// the redirects are relative.
			base := e.mount(t, ui.Config{})
			text := func(sel string) string { return strings.TrimSpace(value(t, ctx, chromedp.Text(chromedp.CSS(sel)))) }

			t.Run("CountsEqualTheTable", func(t *testing.T) {
				run(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#chart")))
				for _, tc := range []struct{ table, status string }{
					{e.outboxT, "pending"}, {e.outboxT, "published"}, {e.outboxT, "abandoned"}, {e.outboxT, "failed"},
					{e.schedT, "active"}, {e.schedT, "paused"},
				} {
					shown := text(countCell(tc.table, tc.status))
					if want := strconv.FormatInt(e.count(t, tc.table, tc.status), 10); shown != want {
						t.Errorf("%s %s: page shows %q, table has %s", tc.table, tc.status, shown, want)
					}
				}
				// The script polls every 2 s: rows published now show
				// without a reload.
				rows, err := e.repo.Unprocessed(context.Background(), 2)
				if err != nil || len(rows) != 2 {
					t.Fatalf("unprocessed: %d, %v", len(rows), err)
				}
				if _, err := e.messages.Update(context.Background(), dao.In("id", rows[0].ID, rows[1].ID),
					dao.Set{"status": "published", "published_at": time.Now().UTC()}); err != nil {
					t.Fatal(err)
				}
				want := strconv.FormatInt(e.count(t, e.outboxT, "pending"), 10)
				run(t, ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).textContent.trim() === %q`, countCell(e.outboxT, "pending"), want),
					chromedp.WithPollingTimeout(15*time.Second)))
				run(t, ctx, chromedp.Poll[chromedp.Void](`(document.querySelector("#chart polyline.due") || {points: []}).points.length >= 3`, chromedp.WithPollingTimeout(20*time.Second)))
				screenshot(t, ctx, "overview-"+b.name)
			})

			t.Run("PauseThroughThePage", func(t *testing.T) {
				sel := `tr[data-key="nightly"] button.pause`
				run(t, ctx, chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(chromedp.CSS(sel)))
				screenshot(t, ctx, "schedules-"+b.name)
				run(t, ctx, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS("#flash")))
				if got := e.status(t, "nightly"); got != "paused" {
					t.Fatalf("after clicking Pause the database says %s", got)
				}
				if shown := text(`tr[data-key="nightly"] td.status`); shown != "paused" {
					t.Fatalf("the page shows %q", shown)
				}
			})

			t.Run("RequeueAbandoned", func(t *testing.T) {
				pending := e.count(t, e.outboxT, "pending")
				all := chromedp.ID("requeue-all-" + e.outboxT)
				run(t, ctx, chromedp.Navigate(base+"/outbox"), chromedp.WaitVisible(all))
				screenshot(t, ctx, "outbox-"+b.name)
				run(t, ctx, chromedp.Click(all), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
				if n := e.count(t, e.outboxT, "abandoned"); n != 2 {
					t.Fatalf("the confirmation page changed something: %d abandoned", n)
				}
				run(t, ctx, chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("flash")))
				if n := e.count(t, e.outboxT, "abandoned"); n != 0 {
					t.Fatalf("%d abandoned after requeue", n)
				}
				if n := e.count(t, e.outboxT, "pending"); n != pending+2 {
					t.Fatalf("pending %d, want %d", n, pending+2)
				}
				if flash := text("#flash"); !strings.Contains(flash, "Requeued 2") {
					t.Fatalf("flash %q", flash)
				}
			})

			t.Run("StoredErrorIsText", func(t *testing.T) {
				s, err := e.sc.Get(context.Background(), "broken")
				if err != nil {
					t.Fatal(err)
				}
				for _, page := range []string{"/schedules", "/row?t=" + e.schedT + "&id=" + itoa(s.ID)} {
					run(t, ctx, chromedp.Navigate(base+page), chromedp.WaitReady(chromedp.CSS("body")),
						chromedp.Sleep(300*time.Millisecond)) // an onerror would have fired
					if value(t, ctx, chromedp.Evaluate[bool](`window.__xss !== undefined`)) {
						t.Fatalf("%s ran the stored error as script", page)
					}
					if shown := text(`[data-key="broken"] .lasterror, #last-error`); !strings.Contains(shown, xssImg) {
						t.Fatalf("%s shows %q, not the stored error as text", page, shown)
					}
					if n := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src])").length`)); n != 0 {
						t.Fatalf("%s has %d img or inline script elements", page, n)
					}
				}
				screenshot(t, ctx, "row-"+b.name)

				// A message whose last error is a <script> and whose
				// payload is an <img onerror>: its row page shows both
				// as text.
				var id int64
				if err := e.db.Table(e.outboxT).Select("id").Where("last_error = ?", xssScript).Scan(&id).Error; err != nil || id == 0 {
					t.Fatalf("message with a script error: %d, %v", id, err)
				}
				if _, err := e.messages.Update(context.Background(), dao.Eq("id", id), dao.Set{"payload": []byte(xssImg)}); err != nil {
					t.Fatal(err)
				}
				page := "/row?t=" + e.outboxT + "&id=" + itoa(id)
				run(t, ctx, chromedp.Navigate(base+page), chromedp.WaitReady(chromedp.CSS("body")), chromedp.Sleep(300*time.Millisecond))
				if value(t, ctx, chromedp.Evaluate[bool](`window.__xss !== undefined`)) {
					t.Fatalf("%s ran the stored error or the payload as script", page)
				}
				if shown := text("#last-error"); shown != xssScript {
					t.Fatalf("%s shows the last error as %q", page, shown)
				}
				if shown := text("#row-json"); !strings.Contains(shown, strings.ReplaceAll(xssImg, `"`, `\"`)) {
					t.Fatalf("%s shows the payload as %q", page, shown)
				}
				if n := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src])").length`)); n != 0 {
					t.Fatalf("%s has %d img or inline script elements", page, n)
				}
			})

			t.Run("CrossSitePostIsRefused", func(t *testing.T) {
				// A page of another site posts the pause form to the
				// console without the token.
				evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/do">
<input name="op" value="pause"><input name="t" value="%s"><input name="key" value="broken"></form>
<script>document.getElementById("f").submit()</script>`, base, e.schedT)
				}))
				defer evil.Close()
				evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
				run(t, ctx, chromedp.Navigate(evilURL),
					chromedp.Poll[chromedp.Void](fmt.Sprintf(`location.href.startsWith(%q) && document.readyState === "complete"`, base), chromedp.WithPollingTimeout(10*time.Second)))
				code := value(t, ctx, chromedp.Evaluate[int](`performance.getEntriesByType("navigation")[0].responseStatus`))
				if loc, body := value(t, ctx, chromedp.Location()), text("body"); code != http.StatusForbidden {
					t.Fatalf("cross-site POST answered %d at %s (%q), want 403", code, loc, body)
				}
				if s := e.status(t, "broken"); s != "active" {
					t.Fatalf("the cross-site POST changed the schedule: %s", s)
				}
			})
		})
	}
}

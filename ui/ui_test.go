package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/ui"
)

func forEach(t *testing.T, f func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, seed(t, b.name, b.open(t))) })
	}
}

// client returns an HTTP client with a cookie jar that follows no
// redirect.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location") + string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func token(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	return m[1]
}

func TestSecurityHeaders(t *testing.T) {
	e := seed(t, "sqlite", backends[1].open(t))
	srv := e.serve(t, ui.Config{})
	for _, p := range []string{"/", "/schedules", "/outbox", "/leaders", "/api/overview", "/static/console.js"} {
		code, h, _ := get(t, client(t), srv.URL+p)
		if code != http.StatusOK {
			t.Fatalf("%s: status %d", p, code)
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", p, h.Get("X-Content-Type-Options"))
		}
	}
}

func TestPostNeedsToken(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		srv := e.serve(t, ui.Config{})
		c := client(t)
		_, _, page := get(t, c, srv.URL+"/schedules")
		form := url.Values{"op": {"pause"}, "t": {e.schedT}, "key": {"nightly"}}
		if code, body := post(t, c, srv.URL+"/do", form); code != http.StatusForbidden {
			t.Fatalf("POST without token: %d %s", code, body)
		}
		form.Set("csrf", strings.Repeat("0", 64))
		if code, body := post(t, c, srv.URL+"/do", form); code != http.StatusForbidden {
			t.Fatalf("POST with a wrong token: %d %s", code, body)
		}
		if got := e.status(t, "nightly"); got != "active" {
			t.Fatalf("refused POSTs changed the schedule: %s", got)
		}
		// The token of another browser (another cookie) is refused too.
		other := client(t)
		_, _, otherPage := get(t, other, srv.URL+"/schedules")
		form.Set("csrf", token(t, otherPage))
		if code, _ := post(t, c, srv.URL+"/do", form); code != http.StatusForbidden {
			t.Fatalf("POST with another browser's token: %d", code)
		}
		form.Set("csrf", token(t, page))
		if code, loc := post(t, c, srv.URL+"/do", form); code != http.StatusSeeOther || !strings.HasPrefix(loc, "schedules?") {
			t.Fatalf("POST with the token: %d, redirect %q (relative, for a handler under a prefix)", code, loc)
		}
		if got := e.status(t, "nightly"); got != "paused" {
			t.Fatalf("after pause: %s", got)
		}
	})
}

func TestReadOnlyServesNoAction(t *testing.T) {
	e := seed(t, "sqlite", backends[1].open(t))
	srv := e.serve(t, ui.Config{ReadOnly: true})
	c := client(t)
	_, _, page := get(t, c, srv.URL+"/schedules")
	if strings.Contains(page, `action="do"`) || strings.Contains(page, "Pause") {
		t.Fatal("a read-only page shows an action form")
	}
	_, _, ob := get(t, c, srv.URL+"/outbox")
	if strings.Contains(ob, "Requeue") || strings.Contains(ob, "Purge") {
		t.Fatal("a read-only outbox page offers requeue or purge")
	}
	form := url.Values{"op": {"pause"}, "t": {e.schedT}, "key": {"nightly"}, "csrf": {strings.Repeat("0", 64)}}
	if code, _ := post(t, c, srv.URL+"/do", form); code != http.StatusMethodNotAllowed {
		t.Fatalf("read-only POST: %d", code)
	}
	if code, _, _ := get(t, c, srv.URL+"/confirm?op=purge&t="+e.outboxT+"&age=1h"); code != http.StatusMethodNotAllowed {
		t.Fatalf("read-only confirm page: %d", code)
	}
	if got := e.status(t, "nightly"); got != "active" {
		t.Fatalf("read-only console changed a schedule: %s", got)
	}
}

func TestValuesAreEscaped(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		srv := e.serve(t, ui.Config{})
		c := client(t)
		for _, p := range []string{"/schedules", "/outbox"} {
			_, _, page := get(t, c, srv.URL+p)
			if strings.Contains(page, "<img src=x") || strings.Contains(page, "<script>window") {
				t.Fatalf("%s writes a stored error as HTML", p)
			}
			if !strings.Contains(page, "&lt;img src=x onerror=") {
				t.Fatalf("%s does not show the stored error as text", p)
			}
		}
	})
}

func TestAddSchedule(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		srv := e.serve(t, ui.Config{})
		c := client(t)
		_, _, page := get(t, c, srv.URL+"/schedules")
		form := url.Values{"csrf": {token(t, page)}, "op": {"add"}, "t": {e.schedT}, "key": {"bad"}, "kind": {"cron"}, "cron": {"61 * * * *"}}
		code, body := post(t, c, srv.URL+"/do", form)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="add-error"`) {
			t.Fatalf("bad cron: %d, inline error shown: %v", code, strings.Contains(body, `id="add-error"`))
		}
		form.Set("cron", "0 * * * *")
		form.Set("zone", "Mars/Olympus")
		if code, body = post(t, c, srv.URL+"/do", form); code != http.StatusUnprocessableEntity || !strings.Contains(body, "Mars/Olympus") {
			t.Fatalf("bad zone: %d", code)
		}
		if _, err := e.sc.Get(context.Background(), "bad"); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("a refused add wrote a schedule: %v", err)
		}
		form.Set("zone", "America/New_York")
		form.Set("key", "hourly-ny")
		if code, body = post(t, c, srv.URL+"/do", form); code != http.StatusSeeOther {
			t.Fatalf("good add: %d %s", code, body)
		}
		s, err := e.sc.Get(context.Background(), "hourly-ny")
		if err != nil || s.Cron != "0 * * * *" || s.TimeZone != "America/New_York" {
			t.Fatalf("added: %+v, %v", s, err)
		}
	})
}

func TestOverviewCounts(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		srv := e.serve(t, ui.Config{})
		_, _, body := get(t, client(t), srv.URL+"/api/overview")
		var got struct{ Tables []ui.TableOverview }
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Tables) != 2 {
			t.Fatalf("%d tables", len(got.Tables))
		}
		for _, o := range got.Tables {
			if o.Error != "" {
				t.Fatalf("%s: %s", o.Name, o.Error)
			}
			for _, c := range o.Counts {
				if want := e.count(t, o.Name, c.Status); c.N != want || c.Estimate || c.AtLeast {
					t.Errorf("%s %s: shown %+v, table has %d", o.Name, c.Status, c, want)
				}
			}
		}
		ob := got.Tables[1]
		if ob.Due.N != 8 || ob.Failures.N != 3 {
			t.Errorf("outbox: due %+v (want 8), failures %+v (want 3)", ob.Due, ob.Failures)
		}
	})
}

// TestEstimateIsLabelled: on PostgreSQL, a status with more rows than the
// exact bound is shown as the planner's estimate, labelled.
func TestEstimateIsLabelled(t *testing.T) {
	e := seed(t, "postgres", backends[0].open(t))
	if err := e.db.Exec("ANALYZE " + e.outboxT).Error; err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Config{Sources: e.sources, ExactBound: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range h.Overview(context.Background()) {
		if o.Name != e.outboxT {
			continue
		}
		for _, c := range o.Counts {
			switch c.Status {
			case "pending":
				if !c.Estimate || c.N < 5 || !strings.Contains(c.String(), "estimate") {
					t.Errorf("pending (7 rows, bound 5): %+v %q", c, c.String())
				}
			case "published", "abandoned":
				if c.Estimate || c.N != e.count(t, e.outboxT, c.Status) {
					t.Errorf("%s under the bound: %+v", c.Status, c)
				}
			}
		}
		if !o.Total.Estimate {
			t.Errorf("total of an estimate not labelled: %+v", o.Total)
		}
		return
	}
	t.Fatal("no outbox overview")
}

func TestRowDetail(t *testing.T) {
	e := seed(t, "sqlite", backends[1].open(t))
	srv := e.serve(t, ui.Config{})
	s, err := e.sc.Get(context.Background(), "broken")
	if err != nil {
		t.Fatal(err)
	}
	code, _, page := get(t, client(t), srv.URL+"/row?t="+e.schedT+"&id="+itoa(s.ID))
	if code != http.StatusOK || !strings.Contains(page, "&#34;schedule_key&#34;: &#34;broken&#34;") || !strings.Contains(page, "&lt;img src=x") {
		t.Fatalf("row page: %d\n%s", code, page)
	}
	if code, _, _ := get(t, client(t), srv.URL+"/row?t="+e.schedT+"&id=999999"); code != http.StatusNotFound {
		t.Fatalf("missing row: %d", code)
	}
	if code, _, _ := get(t, client(t), srv.URL+"/row?t="+e.schedT+"&id=x"); code != http.StatusBadRequest {
		t.Fatalf("bad id: %d", code)
	}
}

func TestAuth(t *testing.T) {
	e := seed(t, "sqlite", backends[1].open(t))
	srv := e.serve(t, ui.Config{Auth: ui.TokenAuth("s3cret-token")})
	if code, h, _ := get(t, client(t), srv.URL+"/"); code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("no credentials: %d", code)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.SetBasicAuth("anyone", "s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token as password: %d", resp.StatusCode)
	}
	req.SetBasicAuth("anyone", "wrong")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := ui.New(ui.Config{}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("no source: %v", err)
	}
	if _, err := ui.Schedules("x", nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("nil store: %v", err)
	}
	e := seed(t, "sqlite", backends[1].open(t))
	if _, err := ui.New(ui.Config{Sources: append(e.sources, e.sources[0])}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("repeated table: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestInFlight: a message being published and a schedule being fired are
// shown with their lease owner and lease end.
func TestInFlight(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		until := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
		if _, err := e.messages.Update(ctx, dao.And(dao.Eq("status", "pending"), dao.Eq("message_id", "m-0")),
			dao.Set{"status": "processing", "locked_by": "relay-7", "locked_until": until}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.schedules.Update(ctx, dao.Eq(dispatch.ColKey, "broken"),
			dao.Set{dispatch.ColNextFireAt: time.Now().UTC().Add(-time.Minute), dispatch.ColLeaseOwner: "worker-3#9", dispatch.ColLeaseUntil: until}); err != nil {
			t.Fatal(err)
		}
		h, err := ui.New(ui.Config{Sources: e.sources})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{e.outboxT: "relay-7", e.schedT: "worker-3#9"}
		for _, o := range h.Overview(ctx) {
			if o.Error != "" {
				t.Fatalf("%s: %s", o.Name, o.Error)
			}
			if len(o.InFlight) != 1 || o.InFlight[0].Owner != want[o.Name] || !o.InFlight[0].Until.Equal(until) {
				t.Errorf("%s: in flight %+v, want one row of %s until %s", o.Name, o.InFlight, want[o.Name], until)
			}
		}
	})
}

// TestFlashIsSigned: a link of another site cannot write a message on the
// console's page.
func TestFlashIsSigned(t *testing.T) {
	e := seed(t, "sqlite", backends[1].open(t))
	srv := e.serve(t, ui.Config{})
	c := client(t)
	if _, _, page := get(t, c, srv.URL+"/schedules?flash=Call+555-0100+now"); strings.Contains(page, "555-0100") {
		t.Fatal("an unsigned flash message is shown")
	}
	_, _, page := get(t, c, srv.URL+"/schedules")
	form := url.Values{"op": {"pause"}, "t": {e.schedT}, "key": {"nightly"}, "csrf": {token(t, page)}}
	code, loc := post(t, c, srv.URL+"/do", form)
	if code != http.StatusSeeOther {
		t.Fatalf("pause: %d", code)
	}
	if _, _, page = get(t, c, srv.URL+"/"+loc); !strings.Contains(page, "Paused nightly.") {
		t.Fatalf("the console's own message is not shown (redirect %s)", loc)
	}
}

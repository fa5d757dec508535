package ui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/ui"
)

// flashOf follows the redirect of an action (loc, relative to the
// console's root) and returns the message the page shows.
func flashOf(t *testing.T, c *http.Client, base, loc string) string {
	t.Helper()
	_, _, page := get(t, c, base+"/"+loc)
	i := strings.Index(page, `id="flash">`)
	if i < 0 {
		return ""
	}
	page = page[i+len(`id="flash">`):]
	return page[:strings.Index(page, "<")]
}

// TestScheduleActions: resume, fire now, delete (after its confirmation)
// and add a once schedule, through the console's forms, each checked in
// the table.
func TestScheduleActions(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		srv := e.serve(t, ui.Config{})
		c := client(t)
		_, _, page := get(t, c, srv.URL+"/schedules")
		tok := token(t, page)
		do := doer(t, c, srv.URL, tok, e.schedT)

		if code, _ := do(url.Values{"op": {"resume"}, "key": {"held"}}); code != http.StatusSeeOther {
			t.Fatalf("resume: %d", code)
		}
		if s := e.status(t, "held"); s != "active" {
			t.Fatalf("after resume: %s", s)
		}

		before, err := e.sc.Get(ctx, "reminder")
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := do(url.Values{"op": {"fire"}, "key": {"reminder"}}); code != http.StatusSeeOther {
			t.Fatalf("fire: %d", code)
		}
		after, err := e.sc.Get(ctx, "reminder")
		if err != nil {
			t.Fatal(err)
		}
		if !before.NextFireAt.After(time.Now().Add(time.Hour)) || after.NextFireAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("fire now: next fire %s, then %s; want it due now", before.NextFireAt, after.NextFireAt)
		}
		// A paused schedule is not fired: the page says so, the row
		// stays as it was.
		if err := e.sc.Pause(ctx, "nightly"); err != nil {
			t.Fatal(err)
		}
		paused, _ := e.sc.Get(ctx, "nightly")
		code, loc := do(url.Values{"op": {"fire"}, "key": {"nightly"}})
		if f := flashOf(t, c, srv.URL, loc); code != http.StatusSeeOther || !strings.Contains(f, "paused: resume it first") || strings.Contains(f, "fired or failed") {
			t.Fatalf("fire a paused schedule: %d, %q", code, flashOf(t, c, srv.URL, loc))
		}
		if s, _ := e.sc.Get(ctx, "nightly"); s.Status != dispatch.StatusPaused || !s.NextFireAt.Equal(paused.NextFireAt) {
			t.Fatalf("a refused fire changed the schedule: %s %s", s.Status, s.NextFireAt)
		}

		// Delete asks first: the POST without confirm=yes is sent to
		// the confirmation page and deletes nothing.
		code, loc = do(url.Values{"op": {"delete"}, "key": {"broken"}})
		if code != http.StatusSeeOther || !strings.HasPrefix(loc, "confirm?") {
			t.Fatalf("delete without confirmation: %d %q", code, loc)
		}
		if _, err := e.sc.Get(ctx, "broken"); err != nil {
			t.Fatalf("delete before its confirmation: %v", err)
		}
		code, _, confirm := get(t, c, srv.URL+"/"+loc)
		if code != http.StatusOK || !strings.Contains(confirm, "Delete schedule &#34;broken&#34;") || !strings.Contains(confirm, `name="confirm" value="yes"`) {
			t.Fatalf("confirmation page %d:\n%s", code, confirm)
		}
		if code, _ := do(url.Values{"op": {"delete"}, "key": {"broken"}, "confirm": {"yes"}}); code != http.StatusSeeOther {
			t.Fatalf("confirmed delete: %d", code)
		}
		if _, err := e.sc.Get(ctx, "broken"); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("after a confirmed delete: %v", err)
		}

		// A once schedule at a local time of its zone.
		if code, body := do(url.Values{"op": {"add"}, "key": {"once-tokyo"}, "kind": {"once"}, "zone": {"Asia/Tokyo"}, "at": {"2031-05-06T07:08"}}); code != http.StatusSeeOther {
			t.Fatalf("add once: %d %s", code, body)
		}
		s, err := e.sc.Get(ctx, "once-tokyo")
		if want := time.Date(2031, 5, 5, 22, 8, 0, 0, time.UTC); err != nil || s.Kind != dispatch.KindOnce || !s.NextFireAt.Equal(want) {
			t.Fatalf("once schedule: %+v, %v; want due at %s", s, err, want)
		}
		for _, bad := range []url.Values{
			{"op": {"add"}, "key": {"once-bad-zone"}, "kind": {"once"}, "zone": {"Nowhere/Atlantis"}, "at": {"2031-05-06T07:08"}},
			{"op": {"add"}, "key": {"once-bad-time"}, "kind": {"once"}, "at": {"6 May 2031"}},
			// A zone the once schedule would ignore, refused as the CLI
			// refuses --tz without a local --at.
			{"op": {"add"}, "key": {"once-zone-now"}, "kind": {"once"}, "zone": {"Asia/Tokyo"}},
			{"op": {"add"}, "key": {"once-tokyo"}, "kind": {"once"}}, // exists
		} {
			if code, body := do(bad); code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="add-error"`) {
				t.Errorf("add %v: %d, inline error shown: %v", bad, code, strings.Contains(body, `id="add-error"`))
			}
		}
		for _, key := range []string{"once-bad-zone", "once-bad-time", "once-zone-now"} {
			if _, err := e.sc.Get(ctx, key); !errors.Is(err, dao.ErrNotFound) {
				t.Errorf("a refused add wrote %s: %v", key, err)
			}
		}
	})
}

// TestOutboxActionsNeedConfirmation: requeue one, requeue with a bound
// and purge each go through a confirmation page, change nothing before
// it, and change exactly what they say after it.
func TestOutboxActionsNeedConfirmation(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		srv := e.serve(t, ui.Config{})
		c := client(t)
		// The outbox page's forms lead to confirmation pages; the token
		// of this browser is on any page with a form that posts.
		_, _, page := get(t, c, srv.URL+"/schedules")
		tok := token(t, page)
		do := doer(t, c, srv.URL, tok, e.outboxT)
		counts := func() string {
			return fmt.Sprintf("pending %d abandoned %d published %d failed %d",
				e.count(t, e.outboxT, "pending"), e.count(t, e.outboxT, "abandoned"), e.count(t, e.outboxT, "published"), e.count(t, e.outboxT, "failed"))
		}
		abandoned, err := e.repo.Abandoned(ctx, 10)
		if err != nil || len(abandoned) != 2 {
			t.Fatalf("abandoned: %d, %v", len(abandoned), err)
		}
		start := counts()

		// Nothing moves before the confirmation.
		for _, v := range []url.Values{
			{"op": {"requeue"}, "id": {itoa(abandoned[1].ID)}},
			{"op": {"requeue"}, "limit": {"1"}},
			{"op": {"purge"}, "age": {"24h"}},
		} {
			code, loc := do(v)
			if code != http.StatusSeeOther || !strings.HasPrefix(loc, "confirm?") {
				t.Fatalf("%v without confirmation: %d %q", v, code, loc)
			}
			if code, _, _ := get(t, c, srv.URL+"/"+loc); code != http.StatusOK {
				t.Fatalf("confirmation page of %v: %d", v, code)
			}
		}
		if got := counts(); got != start {
			t.Fatalf("unconfirmed actions changed the table: %s, was %s", got, start)
		}

		// Requeue one: that message only.
		code, loc := do(url.Values{"op": {"requeue"}, "id": {itoa(abandoned[1].ID)}, "confirm": {"yes"}})
		if code != http.StatusSeeOther || !strings.Contains(flashOf(t, c, srv.URL, loc), "Requeued 1 ") {
			t.Fatalf("requeue one: %d %q", code, flashOf(t, c, srv.URL, loc))
		}
		if m, err := e.messages.Get(ctx, abandoned[1].ID); err != nil || m.Status != "pending" {
			t.Fatalf("requeued message: %+v, %v", m, err)
		}
		if m, err := e.messages.Get(ctx, abandoned[0].ID); err != nil || m.Status != "abandoned" {
			t.Fatalf("the other abandoned message: %+v, %v", m, err)
		}
		// Requeue a message that is not abandoned: nothing moves.
		if _, loc = do(url.Values{"op": {"requeue"}, "id": {itoa(abandoned[1].ID)}, "confirm": {"yes"}}); !strings.Contains(flashOf(t, c, srv.URL, loc), "Requeued 0 ") {
			t.Fatalf("requeue of a pending message: %q", flashOf(t, c, srv.URL, loc))
		}

		// Requeue all, with a bound out of range: refused, nothing moves.
		for _, limit := range []string{"0", "100001", "x"} {
			if _, loc = do(url.Values{"op": {"requeue"}, "limit": {limit}, "confirm": {"yes"}}); !strings.HasPrefix(flashOf(t, c, srv.URL, loc), "Error:") {
				t.Fatalf("requeue limit %s: %q", limit, flashOf(t, c, srv.URL, loc))
			}
		}
		if n := e.count(t, e.outboxT, "abandoned"); n != 1 {
			t.Fatalf("a refused requeue moved messages: %d abandoned", n)
		}
		// Add two abandoned messages; a bound of 2 moves the oldest two.
		if _, err := e.messages.Update(ctx, dao.In("status", "pending"), dao.Set{"status": "abandoned"}); err != nil {
			t.Fatal(err)
		}
		if n := e.count(t, e.outboxT, "abandoned"); n != 9 {
			t.Fatalf("abandoned %d, want 9", n)
		}
		oldest, err := e.repo.Abandoned(ctx, 2)
		if err != nil || len(oldest) != 2 {
			t.Fatalf("oldest abandoned: %d, %v", len(oldest), err)
		}
		if _, loc = do(url.Values{"op": {"requeue"}, "limit": {"2"}, "confirm": {"yes"}}); !strings.Contains(flashOf(t, c, srv.URL, loc), "Requeued 2 ") {
			t.Fatalf("requeue up to 2: %q", flashOf(t, c, srv.URL, loc))
		}
		if n := e.count(t, e.outboxT, "abandoned"); n != 7 {
			t.Fatalf("after requeue up to 2: %d abandoned, want 7", n)
		}
		for _, o := range oldest {
			if m, err := e.messages.Get(ctx, o.ID); err != nil || m.Status != "pending" {
				t.Fatalf("the oldest abandoned messages were not requeued first: %d is %s, %v", o.ID, m.Status, err)
			}
		}

		// Purge: published messages older than the age only (the seed's
		// are 48 h old).
		if _, loc = do(url.Values{"op": {"purge"}, "age": {"72h"}, "confirm": {"yes"}}); !strings.Contains(flashOf(t, c, srv.URL, loc), "Deleted 0 ") {
			t.Fatalf("purge 72h: %q", flashOf(t, c, srv.URL, loc))
		}
		if _, loc = do(url.Values{"op": {"purge"}, "age": {"-1h"}, "confirm": {"yes"}}); !strings.HasPrefix(flashOf(t, c, srv.URL, loc), "Error:") {
			t.Fatalf("purge -1h: %q", flashOf(t, c, srv.URL, loc))
		}
		if n := e.count(t, e.outboxT, "published"); n != 3 {
			t.Fatalf("published %d after purges that delete nothing", n)
		}
		before := counts()
		if _, loc = do(url.Values{"op": {"purge"}, "age": {"24h"}, "confirm": {"yes"}}); !strings.Contains(flashOf(t, c, srv.URL, loc), "Deleted 3 ") {
			t.Fatalf("purge 24h: %q", flashOf(t, c, srv.URL, loc))
		}
		if got, want := counts(), strings.Replace(before, "published 3", "published 0", 1); got != want {
			t.Fatalf("after purge: %s, want %s", got, want)
		}
	})
}

// TestPayloadIsText: a payload holding markup is shown on the row's page
// as the text it is, escaped as HTML only.
func TestPayloadIsText(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		rows, err := e.repo.Unprocessed(ctx, 1)
		if err != nil || len(rows) != 1 {
			t.Fatalf("unprocessed: %d, %v", len(rows), err)
		}
		if _, err := e.messages.Update(ctx, dao.Eq("id", rows[0].ID), dao.Set{"payload": []byte(xssScript + xssImg)}); err != nil {
			t.Fatal(err)
		}
		srv := e.serve(t, ui.Config{})
		code, _, page := get(t, client(t), srv.URL+"/row?t="+e.outboxT+"&id="+itoa(rows[0].ID))
		if code != http.StatusOK {
			t.Fatalf("row page: %d", code)
		}
		if strings.Contains(page, "<script>window") || strings.Contains(page, "<img src=x") {
			t.Fatal("the payload is written as HTML")
		}
		if !strings.Contains(page, "&lt;script&gt;window.__xss=") || !strings.Contains(page, "&lt;img src=x onerror=") {
			t.Fatalf("the payload is not shown as its text:\n%s", page)
		}
	})
}

// doer returns a function that posts a form to the console at base's
// /do with the CSRF token tok for table, and returns the status code and
// body.
func doer(t *testing.T, c *http.Client, base, tok, table string) func(url.Values) (int, string) {
	return func(v url.Values) (int, string) {
		t.Helper()
		v.Set("csrf", tok)
		v.Set("t", table)
		return post(t, c, base+"/do", v)
	}
}

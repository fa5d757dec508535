package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"github.com/google/uuid"
)

// testModelKinds checks column kinds taken from Go types: typed enums,
// UUID keys, columns with explicit SQL types, in criteria, Set values,
// Get, Find, Update and Delete.
func testModelKinds(t *testing.T, ms ModelStores) {
	t.Run("Ticket", func(t *testing.T) {
		c := ticketCase(ms.Ticket)
		checkKinds(t, c, func(r *Ticket) []any { return []any{r.ID, &r.ID, uint64(r.ID)} })
		checkTicketShapes(t, ms.Ticket)
	})
	t.Run("UUIDTicket", func(t *testing.T) {
		checkKinds(t, uuidCase(ms.UUIDTicket), func(r *UUIDTicket) []any {
			// The key as uuid.UUID, as a pointer, as its canonical text.
			return []any{r.ID, &r.ID, r.ID.String()}
		})
		s := ms.UUIDTicket(t)
		if _, err := s.Get(context.Background(), uuid.New()); !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("Get(a new uuid.UUID) = %v; want ErrNotFound", err)
		}
		for _, bad := range []any{"not-a-uuid", 42} {
			if _, err := s.Get(context.Background(), bad); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("Get(%T %v) on a uuid.UUID key = %v; want ErrInvalidArgument", bad, bad, err)
			}
		}
	})
	t.Run("V7Ticket", func(t *testing.T) {
		checkKinds(t, v7Case(ms.V7Ticket), func(r *V7Ticket) []any { return []any{r.ID, &r.ID} })
	})
}

// kindRows seeds the rows checkKinds reads: queues q0 and q1 alternate,
// priorities 0..4 in turn, and the statuses queued, running, done in
// turn.
func kindRows[T any](t *testing.T, s dao.Store[T], c modelCase[T]) []*T {
	t.Helper()
	statuses := []TicketStatus{TicketQueued, TicketRunning, TicketDone}
	rows := make([]*T, 12)
	for i := range rows {
		rows[i] = c.make(i, ticketFields{queue: fmt.Sprintf("q%d", i%2), status: statuses[i%3], priority: int16(i % 5)})
	}
	if err := s.Create(context.Background(), rows...); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return rows
}

// checkKinds runs the kind checks shared by every ticket model; keyForms
// returns a row's primary key in each Go form a caller may pass.
func checkKinds[T any](t *testing.T, c modelCase[T], keyForms func(*T) []any) {
	ctx := context.Background()
	s := c.open(t)
	rows := kindRows(t, s, c)
	count := func(where dao.Criteria) int64 {
		t.Helper()
		n, err := s.Count(ctx, where)
		if err != nil {
			t.Fatalf("Count(%v): %v", where, err)
		}
		return n
	}
	want := func(pred func(f ticketFields) bool) int64 {
		var n int64
		for _, r := range rows {
			if pred(c.fields(r)) {
				n++
			}
		}
		return n
	}

	// The typed enum, a plain string and a pointer select the same rows.
	running := TicketRunning
	for _, v := range []any{TicketRunning, "running", &running} {
		if got, w := count(dao.Eq("status", v)), want(func(f ticketFields) bool { return f.status == TicketRunning }); got != w {
			t.Errorf("Count(status = %T %v) = %d, want %d", v, v, got, w)
		}
	}
	if got, w := count(dao.In("status", TicketQueued, "done")), want(func(f ticketFields) bool { return f.status != TicketRunning }); got != w {
		t.Errorf("Count(status in (queued, done)) = %d, want %d", got, w)
	}
	// varchar and smallint tagged columns compare and order.
	where := dao.And(dao.Eq("queue", "q1"), dao.Lt("priority", int16(3)))
	if got, w := count(where), want(func(f ticketFields) bool { return f.queue == "q1" && f.priority < 3 }); got != w {
		t.Errorf("Count(%v) = %d, want %d", where, got, w)
	}
	found, err := s.Find(ctx, dao.Query{Where: dao.Ge("priority", 1), OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("queue")}})
	if err != nil {
		t.Fatalf("Find ordered by priority: %v", err)
	}
	if int64(len(found)) != want(func(f ticketFields) bool { return f.priority >= 1 }) {
		t.Errorf("Find(priority >= 1) returned %d rows", len(found))
	}
	for i := 1; i < len(found); i++ {
		a, b := c.fields(&found[i-1]), c.fields(&found[i])
		if a.priority < b.priority || (a.priority == b.priority && a.queue > b.queue) {
			t.Errorf("Find ordered by priority desc, queue: row %d (%d, %s) before row %d (%d, %s)", i-1, a.priority, a.queue, i, b.priority, b.queue)
		}
	}

	// Keys in every Go form: Get, Eq, In.
	for _, form := range keyForms(rows[2]) {
		got, err := s.Get(ctx, form)
		if err != nil || fmt.Sprint(c.key(&got)) != fmt.Sprint(c.key(rows[2])) {
			t.Errorf("Get(%T %v) = key %v, %v; want %v", form, form, c.key(&got), err, c.key(rows[2]))
		}
		if n := count(dao.Eq("id", form)); n != 1 {
			t.Errorf("Count(id = %T %v) = %d, want 1", form, form, n)
		}
	}
	k3, k4 := keyForms(rows[3]), keyForms(rows[4])
	in, err := s.Find(ctx, dao.Query{Where: dao.In("id", k3[0], k4[len(k4)-1])})
	if err != nil || len(in) != 2 {
		t.Errorf("Find(id in (row 3, row 4)) = %d rows, %v; want 2", len(in), err)
	}

	// Update and Delete by key, with typed Set values.
	key := keyForms(rows[5])[0]
	n, err := s.Update(ctx, dao.Eq("id", key), dao.Set{"status": TicketDone, "owner": "kinds", "priority": int16(4)})
	if err != nil || n != 1 {
		t.Fatalf("Update(id = %v) = %d, %v; want 1", key, n, err)
	}
	got, err := s.Get(ctx, key)
	if f := c.fields(&got); err != nil || f.status != TicketDone || f.owner == nil || *f.owner != "kinds" || f.priority != 4 {
		t.Errorf("Get(%v) after Update = %+v, %v; want status done, owner kinds, priority 4", key, f, err)
	}
	if n, err := s.Delete(ctx, dao.Eq("id", key), 1); err != nil || n != 1 {
		t.Errorf("Delete(id = %v) = %d, %v; want 1", key, n, err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("Get(%v) after Delete: %v; want ErrNotFound", key, err)
	}
	if n := count(dao.Criteria{}); n != int64(len(rows)-1) {
		t.Errorf("Count() after one Delete = %d, want %d", n, len(rows)-1)
	}

	// Values the field's type refuses.
	for _, bad := range []dao.Criteria{dao.Eq("status", 7), dao.Eq("priority", "high"), dao.In("queue", "q0", 3.5)} {
		if _, err := s.Count(ctx, bad); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Count(%v) = %v; want ErrInvalidArgument", bad, err)
		}
	}
}

// checkTicketShapes checks the embedded struct with a prefix and the
// serializer:json field of [Ticket].
func checkTicketShapes(t *testing.T, open func(t *testing.T) dao.Store[Ticket]) {
	ctx := context.Background()
	s := open(t)
	rows := kindRows(t, s, ticketCase(open))
	// Embedded prefixed columns in criteria and Set.
	if n, err := s.Count(ctx, dao.Eq("audit_by", "maker-4")); err != nil || n != 1 {
		t.Errorf("Count(audit_by = maker-4) = %d, %v; want 1", n, err)
	}
	if n, err := s.Update(ctx, dao.Eq("audit_by", "maker-4"), dao.Set{"audit_by": "auditor", "audit_note": "seen"}); err != nil || n != 1 {
		t.Errorf("Update(audit_by = maker-4) = %d, %v; want 1", n, err)
	}
	got, err := s.Get(ctx, rows[4].ID)
	if err != nil || got.Audit != (Audit{By: "auditor", Note: "seen"}) {
		t.Errorf("Get(%d).Audit = %+v, %v; want auditor, seen", rows[4].ID, got.Audit, err)
	}
	// The serializer:json field is read and written, never compared.
	if !slices.Equal(got.Labels, []string{"l", "4"}) {
		t.Errorf("Get(%d).Labels = %q, want [l 4]", rows[4].ID, got.Labels)
	}
	if n, err := s.Update(ctx, dao.Eq("id", rows[4].ID), dao.Set{"labels": []string{"x", "y"}}); err != nil || n != 1 {
		t.Errorf("Update(labels) = %d, %v; want 1", n, err)
	}
	if got, err := s.Get(ctx, rows[4].ID); err != nil || !slices.Equal(got.Labels, []string{"x", "y"}) {
		t.Errorf("Get(%d).Labels after Update = %q, %v; want [x y]", rows[4].ID, got.Labels, err)
	}
	claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("id", rows[4].ID), Set: dao.Set{"labels": []string{"z"}, "status": TicketRunning}, Limit: 1})
	if err != nil || len(claimed) != 1 || !slices.Equal(claimed[0].Labels, []string{"z"}) || claimed[0].Status != TicketRunning {
		t.Errorf("Claim setting labels = %+v, %v; want one row with labels [z], status running", claimed, err)
	}
	for name, call := range map[string]func() error{
		"Eq(labels)": func() error { _, err := s.Count(ctx, dao.Eq("labels", `["l","1"]`)); return err },
		"In(labels)": func() error { _, err := s.Find(ctx, dao.Query{Where: dao.In("labels", []string{"l"})}); return err },
		"order by":   func() error { _, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("labels")}}); return err },
		"Set string": func() error { _, err := s.Update(ctx, dao.Criteria{}, dao.Set{"labels": `["a"]`}); return err },
		"claim where": func() error {
			_, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.NotNull("id"), Set: dao.Set{"owner": "x"}, OrderBy: []dao.Order{dao.Desc("labels")}, Limit: 1})
			return err
		},
	} {
		if err := call(); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s on the serializer:json field: %v; want ErrInvalidArgument", name, err)
		}
	}
}

package dao_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// softJob is an everyday GORM model: gorm.Model brings soft delete and
// automatic timestamps.
type softJob struct {
	gorm.Model
	Status string  `gorm:"size:16"`
	Owner  *string `gorm:"size:64"`
}

// flagDeleted has the shape of gorm.io/plugin/soft_delete's DeletedAt (an
// unsigned integer whose type supplies GORM's query, update and delete
// clauses), without its clauses: the store recognizes the shape, not the
// package.
type flagDeleted uint

func (flagDeleted) QueryClauses(*schema.Field) []clause.Interface  { return nil }
func (flagDeleted) UpdateClauses(*schema.Field) []clause.Interface { return nil }
func (flagDeleted) DeleteClauses(*schema.Field) []clause.Interface { return nil }

// milliDeleted is the plugin's unix-time shape, as an int64.
type milliDeleted int64

func (milliDeleted) QueryClauses(*schema.Field) []clause.Interface  { return nil }
func (milliDeleted) DeleteClauses(*schema.Field) []clause.Interface { return nil }

// unixJob keeps its times as unix integers, in GORM's tag forms.
type unixJob struct {
	ID        int64
	Status    string
	CreatedAt int64       // seconds, by GORM's field-name convention
	UpdatedMs int64       `gorm:"autoUpdateTime:milli"`
	BornNs    uint64      `gorm:"autoCreateTime:nano"`
	Deleted   flagDeleted `gorm:"softDelete:flag"`
}

type milliJob struct {
	ID        int64
	Status    string
	DeletedAt milliDeleted `gorm:"softDelete:milli"`
}

// stepClock returns a clock that starts at t0 and advances by one second
// and a few nanoseconds at every reading, and a function reporting the
// last reading.
func stepClock(t0 time.Time) (func() time.Time, func() time.Time) {
	cur := t0
	next := func() time.Time { cur = cur.Add(time.Second + 1234567); return cur }
	return next, func() time.Time { return cur }
}

func seedSoft(t *testing.T, s dao.Store[softJob], n int) []*softJob {
	t.Helper()
	rows := make([]*softJob, n)
	for i := range rows {
		rows[i] = &softJob{Status: "pending"}
	}
	if err := s.Create(context.Background(), rows...); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return rows
}

func ids(rows []softJob) []uint {
	out := make([]uint, len(rows))
	for i := range rows {
		out[i] = rows[i].ID
	}
	return out
}

func TestSoftDelete(t *testing.T) {
	for _, strategy := range []dao.Strategy{dao.StrategyFastPath, dao.StrategyPortable} {
		t.Run(strategy.String(), func(t *testing.T) {
			ctx := context.Background()
			clock, last := stepClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			s, err := memstore.New[softJob](memstore.WithStrategy(strategy), memstore.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			seedSoft(t, s, 6)

			n, err := s.Delete(ctx, dao.Eq("status", "pending"), 2)
			if err != nil || n != 2 {
				t.Fatalf("Delete(limit 2) = %d, %v; want 2", n, err)
			}
			deletedAt := last().UTC().Truncate(time.Millisecond)
			if _, err := s.Get(ctx, uint(1)); !errors.Is(err, dao.ErrNotFound) {
				t.Errorf("Get(soft-deleted 1) error = %v, want ErrNotFound", err)
			}
			live, err := s.Find(ctx, dao.Query{})
			if err != nil || !slices.Equal(ids(live), []uint{3, 4, 5, 6}) {
				t.Errorf("Find = %v, %v; want ids 3..6 (the smallest two soft-deleted)", ids(live), err)
			}
			if c, err := s.Count(ctx, dao.Criteria{}); err != nil || c != 4 {
				t.Errorf("Count = %d, %v; want 4", c, err)
			}
			if u, err := s.Update(ctx, dao.Eq("status", "pending"), dao.Set{"status": "ready"}); err != nil || u != 4 {
				t.Errorf("Update = %d, %v; want 4 live rows", u, err)
			}
			got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "claimed"}, Limit: 10})
			if err != nil || !slices.Equal(ids(got), []uint{3, 4, 5, 6}) {
				t.Errorf("Claim = %v, %v; want ids 3..6", ids(got), err)
			}
			// Deleting again counts only live rows: idempotent.
			if n, err := s.Delete(ctx, dao.In("id", uint(1), uint(2)), 10); err != nil || n != 0 {
				t.Errorf("Delete(already deleted) = %d, %v; want 0", n, err)
			}

			all := s.Unscoped()
			if c, err := all.Count(ctx, dao.Criteria{}); err != nil || c != 6 {
				t.Errorf("Unscoped().Count = %d, %v; want 6", c, err)
			}
			gone, err := all.Find(ctx, dao.Query{Where: dao.NotNull("deleted_at")})
			if err != nil || !slices.Equal(ids(gone), []uint{1, 2}) {
				t.Fatalf("Unscoped().Find(deleted) = %v, %v; want 1, 2", ids(gone), err)
			}
			for _, r := range gone {
				if !r.DeletedAt.Valid || !r.DeletedAt.Time.Equal(deletedAt) || r.Status != "pending" {
					t.Errorf("soft-deleted row %d = %+v, want deleted_at %v and status untouched", r.ID, r.DeletedAt, deletedAt)
				}
			}
			if r, err := all.Get(ctx, uint(1)); err != nil || r.ID != 1 {
				t.Errorf("Unscoped().Get(1) = %v, %v", r.ID, err)
			}
			if n, err := all.Delete(ctx, dao.NotNull("deleted_at"), 1); err != nil || n != 1 {
				t.Errorf("Unscoped().Delete(limit 1) = %d, %v; want 1", n, err)
			}
			if c, err := all.Count(ctx, dao.Criteria{}); err != nil || c != 5 {
				t.Errorf("Unscoped().Count after a hard delete = %d, %v; want 5", c, err)
			}
			if _, err := all.Get(ctx, uint(1)); !errors.Is(err, dao.ErrNotFound) {
				t.Errorf("Unscoped().Get(hard-deleted 1) error = %v, want ErrNotFound", err)
			}
			// Unscoped sees deleted rows for Update and Claim too.
			if u, err := all.Update(ctx, dao.Eq("id", uint(2)), dao.Set{"deleted_at": nil}); err != nil || u != 1 {
				t.Errorf("Unscoped().Update(undelete 2) = %d, %v; want 1", u, err)
			}
			if _, err := s.Get(ctx, uint(2)); err != nil {
				t.Errorf("Get(undeleted 2): %v", err)
			}
		})
	}
}

func TestTimestamps(t *testing.T) {
	for _, strategy := range []dao.Strategy{dao.StrategyFastPath, dao.StrategyPortable} {
		t.Run(strategy.String(), func(t *testing.T) {
			ctx := context.Background()
			clock, last := stepClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600)))
			s, err := memstore.New[softJob](memstore.WithStrategy(strategy), memstore.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			given := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			a, b := &softJob{Status: "pending"}, &softJob{Status: "pending", Model: gorm.Model{CreatedAt: given}}
			if err := s.Create(ctx, a, b); err != nil {
				t.Fatal(err)
			}
			created := last().UTC().Truncate(time.Millisecond)
			if !a.CreatedAt.Equal(created) || !a.UpdatedAt.Equal(created) || a.CreatedAt.Location() != time.UTC {
				t.Errorf("Create set created_at %v, updated_at %v; want both %v (application clock, UTC, milliseconds)", a.CreatedAt, a.UpdatedAt, created)
			}
			if !b.CreatedAt.Equal(given) || !b.UpdatedAt.Equal(created) {
				t.Errorf("Create of a row with created_at set: %v, %v; want %v kept, updated_at %v", b.CreatedAt, b.UpdatedAt, given, created)
			}

			if _, err := s.Update(ctx, dao.Eq("id", a.ID), dao.Set{"status": "ready"}); err != nil {
				t.Fatal(err)
			}
			updated := last().UTC().Truncate(time.Millisecond)
			got, err := s.Get(ctx, a.ID)
			if err != nil || !got.UpdatedAt.Equal(updated) || !got.CreatedAt.Equal(created) {
				t.Errorf("after Update: created_at %v, updated_at %v, %v; want %v, %v", got.CreatedAt, got.UpdatedAt, err, created, updated)
			}

			claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "claimed"}, Limit: 1})
			if err != nil || len(claimed) != 1 {
				t.Fatalf("Claim = %v, %v", claimed, err)
			}
			bumped := last().UTC().Truncate(time.Millisecond)
			stored, err := s.Get(ctx, a.ID)
			if err != nil || !claimed[0].UpdatedAt.Equal(bumped) || !stored.UpdatedAt.Equal(claimed[0].UpdatedAt) {
				t.Errorf("Claim returned updated_at %v, stored %v (%v); want both %v", claimed[0].UpdatedAt, stored.UpdatedAt, err, bumped)
			}

			// A Set that writes updated_at itself is left as it is.
			mine := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			claimed, err = s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("id", b.ID), Set: dao.Set{"status": "claimed", "updated_at": mine}, Limit: 1})
			if err != nil || len(claimed) != 1 || !claimed[0].UpdatedAt.Equal(mine) {
				t.Errorf("Claim with updated_at in Set = %v, %v; want updated_at %v", claimed, err, mine)
			}
			if got, err := s.Get(ctx, b.ID); err != nil || !got.UpdatedAt.Equal(mine) {
				t.Errorf("stored updated_at = %v, %v; want %v", got.UpdatedAt, err, mine)
			}
		})
	}
}

func TestUnixTimestampsAndFlagSoftDelete(t *testing.T) {
	ctx := context.Background()
	clock, last := stepClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := memstore.New[unixJob](memstore.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	j := &unixJob{Status: "pending"}
	k := &unixJob{Status: "pending"}
	if err := s.Create(ctx, j, k); err != nil {
		t.Fatal(err)
	}
	now := last()
	if j.CreatedAt != now.Unix() || j.UpdatedMs != now.UnixMilli() || j.BornNs != uint64(now.UnixNano()) {
		t.Errorf("Create: created_at %d, updated_ms %d, born_ns %d; want %d, %d, %d",
			j.CreatedAt, j.UpdatedMs, j.BornNs, now.Unix(), now.UnixMilli(), now.UnixNano())
	}
	if _, err := s.Update(ctx, dao.Eq("id", j.ID), dao.Set{"status": "ready"}); err != nil {
		t.Fatal(err)
	}
	now = last()
	if got, err := s.Get(ctx, j.ID); err != nil || got.UpdatedMs != now.UnixMilli() || got.CreatedAt == now.Unix() {
		t.Errorf("Update: updated_ms %d, created_at %d, %v; want %d and created_at kept", got.UpdatedMs, got.CreatedAt, err, now.UnixMilli())
	}
	if n, err := s.Delete(ctx, dao.Eq("id", j.ID), 5); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if _, err := s.Get(ctx, j.ID); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("Get(flag-deleted) error = %v, want ErrNotFound", err)
	}
	if c, err := s.Count(ctx, dao.Criteria{}); err != nil || c != 1 {
		t.Errorf("Count = %d, %v; want 1", c, err)
	}
	if got, err := s.Unscoped().Get(ctx, j.ID); err != nil || got.Deleted != 1 {
		t.Errorf("Unscoped().Get = %+v, %v; want deleted flag 1", got, err)
	}

	m, err := memstore.New[milliJob](memstore.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	r := &milliJob{Status: "pending"}
	if err := m.Create(ctx, r, &milliJob{Status: "pending"}); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Delete(ctx, dao.Eq("id", r.ID), 5); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	now = last()
	if got, err := m.Unscoped().Get(ctx, r.ID); err != nil || int64(got.DeletedAt) != now.UnixMilli() {
		t.Errorf("Unscoped().Get = %+v, %v; want deleted_at %d (unix milliseconds)", got, err, now.UnixMilli())
	}
	if got, err := m.Find(ctx, dao.Query{}); err != nil || len(got) != 1 || got[0].ID == r.ID {
		t.Errorf("Find = %+v, %v; want the live row only", got, err)
	}
}

// A model without a soft-delete field keeps the hard delete.
func TestDeleteWithoutSoftDeleteRemovesRows(t *testing.T) {
	type plain struct {
		ID     int64
		Status string
	}
	ctx := context.Background()
	s, err := memstore.New[plain]()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &plain{Status: "a"}, &plain{Status: "b"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Delete(ctx, dao.Criteria{}, 1); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if c, err := s.Unscoped().Count(ctx, dao.Criteria{}); err != nil || c != 1 {
		t.Errorf("Unscoped().Count = %d, %v; want 1", c, err)
	}
}

// Two soft-delete fields are refused when the store is built.
func TestTwoSoftDeleteFieldsRefused(t *testing.T) {
	type twice struct {
		gorm.Model
		Gone flagDeleted `gorm:"softDelete:flag"`
	}
	if _, err := memstore.New[twice](); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("New of a model with two soft-delete fields: %v, want ErrInvalidArgument", err)
	}
}

package hooktest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm"
)

var (
	mu    sync.Mutex
	fired []string
)

func record(hook string) {
	mu.Lock()
	fired = append(fired, hook)
	mu.Unlock()
}

// take returns the hooks fired since the last call, in order.
func take() []string {
	mu.Lock()
	defer mu.Unlock()
	out := fired
	fired = nil
	return out
}

// Job is a model whose GORM hooks (gorm.io/gorm/callbacks/interfaces.go:
// BeforeSave, BeforeCreate, AfterCreate, AfterSave, BeforeUpdate,
// AfterUpdate, BeforeDelete, AfterDelete, AfterFind) record that they
// ran. BeforeCreate also sets Note, so a test can see that its change was
// written.
type Job struct {
	ID       int64  `gorm:"primaryKey"`
	Status   string `gorm:"size:32"`
	Priority int64
	Note     string `gorm:"size:64"`
}

// NoteSetByBeforeCreate is the Note that BeforeCreate writes.
const NoteSetByBeforeCreate = "set by BeforeCreate"

// BeforeSave records the hook.
func (*Job) BeforeSave(*gorm.DB) error { record("BeforeSave"); return nil }

// BeforeCreate records the hook and sets Note to [NoteSetByBeforeCreate].
func (j *Job) BeforeCreate(*gorm.DB) error {
	record("BeforeCreate")
	j.Note = NoteSetByBeforeCreate
	return nil
}

// AfterCreate records the hook.
func (*Job) AfterCreate(*gorm.DB) error { record("AfterCreate"); return nil }

// AfterSave records the hook.
func (*Job) AfterSave(*gorm.DB) error { record("AfterSave"); return nil }

// BeforeUpdate records the hook.
func (*Job) BeforeUpdate(*gorm.DB) error { record("BeforeUpdate"); return nil }

// AfterUpdate records the hook.
func (*Job) AfterUpdate(*gorm.DB) error { record("AfterUpdate"); return nil }

// BeforeDelete records the hook.
func (*Job) BeforeDelete(*gorm.DB) error { record("BeforeDelete"); return nil }

// AfterDelete records the hook.
func (*Job) AfterDelete(*gorm.DB) error { record("AfterDelete"); return nil }

// AfterFind records the hook.
func (*Job) AfterFind(*gorm.DB) error { record("AfterFind"); return nil }

// Operations, in the order [Run] runs them.
var Operations = []string{"Create", "Get", "Find", "Count", "Update", "Claim", "Delete"}

// CreateHooks returns the hooks GORM's Create runs for n items written
// by one INSERT, in its order: BeforeSave and BeforeCreate of each item,
// the INSERT, then AfterCreate and AfterSave of each item
// (gorm.io/gorm/callbacks/create.go, BeforeCreate and AfterCreate).
func CreateHooks(n int) []string {
	var out []string
	for range n {
		out = append(out, "BeforeSave", "BeforeCreate")
	}
	for range n {
		out = append(out, "AfterCreate", "AfterSave")
	}
	return out
}

// Run runs each of [Operations] once on s, an empty store of Job, and
// returns the hooks each one fired, and the Note of the created row as
// read back by Get. Each operation must succeed on two ready rows (Claim
// claims one, Delete deletes one); a failure fails t at once. The hooks
// record into one process-wide log: tests that call Run must not run in
// parallel with each other.
func Run(t testing.TB, s dao.Store[Job]) (hooks map[string][]string, storedNote string) {
	t.Helper()
	ctx := context.Background()
	take()
	hooks = map[string][]string{}
	items := []*Job{{Status: "ready", Priority: 1}, {Status: "ready", Priority: 2}}
	must := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		hooks[op] = take()
	}
	must("Create", s.Create(ctx, items...))
	got, err := s.Get(ctx, items[0].ID)
	storedNote = got.Note
	must("Get", err)
	rows, err := s.Find(ctx, dao.Query{Where: dao.Eq("status", "ready")})
	if err == nil && len(rows) != 2 {
		t.Fatalf("Find: %d rows; want 2", len(rows))
	}
	must("Find", err)
	_, err = s.Count(ctx, dao.Eq("status", "ready"))
	must("Count", err)
	n, err := s.Update(ctx, dao.Eq("id", items[0].ID), dao.Set{"priority": int64(5)})
	if err == nil && n != 1 {
		t.Fatalf("Update: %d rows; want 1", n)
	}
	must("Update", err)
	claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "running"}, Limit: 1})
	if err == nil && len(claimed) != 1 {
		t.Fatalf("Claim: %d rows; want 1", len(claimed))
	}
	must("Claim", err)
	n, err = s.Delete(ctx, dao.Eq("status", "running"), 1)
	if err == nil && n != 1 {
		t.Fatalf("Delete: %d rows; want 1", n)
	}
	must("Delete", err)
	return hooks, storedNote
}

// Check fails t unless hooks, from [Run], holds exactly want for each of
// [Operations] (an operation missing from want fires no hook).
func Check(t testing.TB, hooks map[string][]string, want map[string][]string) {
	t.Helper()
	for _, op := range Operations {
		if !slices.Equal(hooks[op], want[op]) {
			t.Errorf("%s ran hooks %v; want %v", op, hooks[op], want[op])
		}
	}
}

// ErrRefused is the error [Refused]'s BeforeCreate returns.
var ErrRefused = errors.New("refused by BeforeCreate")

// Refused is a model whose BeforeCreate returns [ErrRefused].
type Refused struct {
	ID     int64  `gorm:"primaryKey"`
	Status string `gorm:"size:32"`
}

// BeforeCreate returns [ErrRefused].
func (*Refused) BeforeCreate(*gorm.DB) error { return ErrRefused }

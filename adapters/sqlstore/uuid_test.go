package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/google/uuid"
	"gorm.io/gorm"
)

// uuidRow has a primary key and a reference in the database's own UUID
// column type (PostgreSQL uuid; MariaDB UUID, 10.7 and later).
type uuidRow struct {
	ID     uuid.UUID `gorm:"primaryKey;type:uuid"`
	Parent string    `gorm:"type:uuid;not null"`
	Status string    `gorm:"size:16;not null"`
}

// TestUUIDColumn runs criteria, ordering, Set, Get, Update, Delete and
// Claim on `type:uuid` columns, with keys given as uuid.UUID, as canonical
// text and as upper-case text.
func TestUUIDColumn(t *testing.T) {
	for _, b := range []backend{{"postgres", testdb.Postgres}, {"mariadb", testdb.MySQL}} {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			if b.name == "mariadb" {
				var version string
				if err := db.Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(version, "MariaDB") {
					t.Skipf("server %s is MySQL, which has no UUID column type", version)
				}
			}
			checkUUIDColumn(t, db, b.name == "postgres")
		})
	}
}

// checkUUIDColumn checks db; textOrder is true when the database orders
// UUID columns as their canonical text (PostgreSQL compares the 16 bytes
// in order, which is the text's order). MariaDB orders them by its storage
// form, which for versions other than 6 to 8 is not the text's order, so
// ordering and range criteria on a MariaDB UUID column differ from the
// other backends; equality and In agree everywhere.
func checkUUIDColumn(t *testing.T, db *gorm.DB, textOrder bool) {
	ctx := context.Background()
	s, err := sqlstore.New[uuidRow](db, sqlstore.WithTable(testdb.Table(t, db, "claimstore_uuid")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	parent := uuid.Must(uuid.NewV7())
	rows := make([]*uuidRow, 6)
	for i := range rows {
		rows[i] = &uuidRow{ID: uuid.Must(uuid.NewV7()), Parent: parent.String(), Status: "queued"}
		if i%2 == 1 {
			rows[i].ID = uuid.New()
		}
	}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	for _, key := range []any{rows[1].ID, rows[1].ID.String(), strings.ToUpper(rows[1].ID.String())} {
		got, err := s.Get(ctx, key)
		if err != nil || got.ID != rows[1].ID || got.Parent != parent.String() {
			t.Errorf("Get(%T %v) = %+v, %v; want row 1", key, key, got, err)
		}
	}
	if n, err := s.Count(ctx, dao.Eq("parent", strings.ToUpper(parent.String()))); err != nil || n != 6 {
		t.Errorf("Count(parent = upper-case text) = %d, %v; want 6", n, err)
	}
	if n, err := s.Count(ctx, dao.In("id", rows[0].ID, rows[3].ID.String())); err != nil || n != 2 {
		t.Errorf("Count(id in two keys) = %d, %v; want 2", n, err)
	}
	// Ordered by the UUID column: where the database orders UUIDs as
	// their text, the canonical text's order, as the memory store and
	// Elasticsearch order it; else the same rows.
	found, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Desc("id")}})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(rows))
	for i, r := range rows {
		want[i] = r.ID.String()
	}
	slices.Sort(want)
	slices.Reverse(want)
	got := make([]string, len(found))
	for i, r := range found {
		got[i] = r.ID.String()
	}
	if textOrder {
		if !slices.Equal(got, want) {
			t.Errorf("Find ordered by id desc = %v, want %v", got, want)
		}
		if n, err := s.Count(ctx, dao.Gt("id", rows[0].ID)); err != nil || n != int64(slices.Index(want, rows[0].ID.String())) {
			t.Errorf("Count(id > row 0) = %d, %v; want %d", n, err, slices.Index(want, rows[0].ID.String()))
		}
	} else {
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Find ordered by id desc returned %v, want the rows %v", got, want)
		}
	}
	other := uuid.New()
	if n, err := s.Update(ctx, dao.Eq("id", rows[2].ID), dao.Set{"parent": other}); err != nil || n != 1 {
		t.Errorf("Update(parent = uuid.UUID) = %d, %v; want 1", n, err)
	}
	claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("parent", other), Set: dao.Set{"status": "running", "parent": parent}, Limit: 5})
	if err != nil || len(claimed) != 1 || claimed[0].ID != rows[2].ID || claimed[0].Parent != parent.String() || claimed[0].Status != "running" {
		t.Errorf("Claim(parent = other) = %+v, %v; want row 2, running, parent back", claimed, err)
	}
	if n, err := s.Delete(ctx, dao.Eq("id", rows[2].ID.String()), 1); err != nil || n != 1 {
		t.Errorf("Delete(id = text) = %d, %v; want 1", n, err)
	}
	for _, bad := range []dao.Criteria{dao.Eq("parent", "not-a-uuid"), dao.Eq("parent", 7), dao.LtField("parent", "status")} {
		if _, err := s.Count(ctx, bad); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Count(%v) = %v; want ErrInvalidArgument", bad, err)
		}
	}
	if err := s.Create(ctx, &uuidRow{ID: uuid.New(), Parent: "nope", Status: "x"}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Create with parent %q = %v; want ErrInvalidArgument", "nope", err)
	}
}

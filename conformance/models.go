package conformance

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/google/uuid"
	"gorm.io/gorm"
)

// TicketStatus is the typed string enum of the models section: a named
// string type with a [driver.Valuer], as models often declare their status
// columns. Criteria and Set values may be given as TicketStatus or as a
// plain string.
type TicketStatus string

// The ticket statuses the models section writes.
const (
	TicketQueued  TicketStatus = "queued"
	TicketRunning TicketStatus = "running"
	TicketDone    TicketStatus = "done"
)

// Value returns s as a string; an empty status is stored as "queued".
func (s TicketStatus) Value() (driver.Value, error) {
	if s == "" {
		return string(TicketQueued), nil
	}
	return string(s), nil
}

// Scan reads a status from a string or []byte column value.
func (s *TicketStatus) Scan(v any) error {
	switch x := v.(type) {
	case string:
		*s = TicketStatus(x)
	case []byte:
		*s = TicketStatus(x)
	case nil:
		*s = ""
	default:
		return fmt.Errorf("conformance: scan %T into TicketStatus", v)
	}
	return nil
}

// Audit is the struct [Ticket] embeds with the column prefix audit_
// (columns audit_by and audit_note).
type Audit struct {
	By   string `gorm:"size:64"`
	Note string `gorm:"size:128"`
}

// Ticket is the models section's everyday GORM model: it embeds
// gorm.Model (uint key, CreatedAt and UpdatedAt set automatically,
// soft delete through DeletedAt), has columns with explicit SQL types
// (varchar, smallint), a typed enum, a nullable lease, an embedded struct
// with a column prefix and a JSON-serialized field.
type Ticket struct {
	gorm.Model
	Queue      string       `gorm:"type:varchar(64);not null;index:,composite:ticket_claim,priority:1"`
	Status     TicketStatus `gorm:"type:varchar(16);not null;index:,composite:ticket_claim,priority:2"`
	Priority   int16        `gorm:"type:smallint;not null"`
	Owner      *string      `gorm:"size:64"`
	LeaseUntil *time.Time
	Audit      Audit    `gorm:"embedded;embeddedPrefix:audit_"`
	Labels     []string `gorm:"serializer:json;type:text"`
}

// UUIDTicket is a model whose primary key is a uuid.UUID, filled by the
// caller before Create (github.com/google/uuid).
type UUIDTicket struct {
	ID         uuid.UUID    `gorm:"primaryKey;size:36"`
	Queue      string       `gorm:"type:varchar(64);not null"`
	Status     TicketStatus `gorm:"type:varchar(16);not null"`
	Priority   int16        `gorm:"type:smallint;not null"`
	Owner      *string      `gorm:"size:64"`
	LeaseUntil *time.Time
}

// V7Ticket is a model whose primary key is a string holding a version 7
// UUID (time-ordered), filled by the caller before Create.
type V7Ticket struct {
	ID         string       `gorm:"primaryKey;type:varchar(36)"`
	Queue      string       `gorm:"type:varchar(64);not null"`
	Status     TicketStatus `gorm:"type:varchar(16);not null"`
	Priority   int16        `gorm:"type:smallint;not null"`
	Owner      *string      `gorm:"size:64"`
	LeaseUntil *time.Time
}

// SoftJob is the model of the lifecycle checks: gorm.Model (uint key,
// CreatedAt and UpdatedAt set automatically, soft delete through
// DeletedAt) and columns of plain Go types, so its checks depend on soft
// delete and timestamps alone.
type SoftJob struct {
	gorm.Model
	Queue string  `gorm:"size:64;not null"`
	Owner *string `gorm:"size:64"`
}

// ModelStores opens the stores of the models section. Each function
// returns a store over a fresh, empty table (index, in-memory store) of
// its model, created by the harness and removed when t finishes; each may
// call t.Fatal or t.Skip.
type ModelStores struct {
	// Ticket opens a store of [Ticket].
	Ticket func(t *testing.T) dao.Store[Ticket]
	// PrefixedTicket opens a store of [Ticket] whose table name comes from
	// a naming strategy with a table prefix (GORM's
	// schema.NamingStrategy{TablePrefix: …}) instead of an explicit
	// table name, where the backend has table names.
	PrefixedTicket func(t *testing.T) dao.Store[Ticket]
	// TablePrefix is the prefix of PrefixedTicket's naming strategy, or
	// "" when it varies per store. When set, and a store tells its table
	// name (a TableName() string method, as dao.Table has), the suite
	// checks that the name starts with it.
	TablePrefix string
	// UUIDTicket opens a store of [UUIDTicket].
	UUIDTicket func(t *testing.T) dao.Store[UUIDTicket]
	// V7Ticket opens a store of [V7Ticket].
	V7Ticket func(t *testing.T) dao.Store[V7Ticket]
	// SoftJob opens a store of [SoftJob].
	SoftJob func(t *testing.T) dao.Store[SoftJob]
}

// CheckModels names the models section, which needs [Harness.Models].
const CheckModels = "Models"

// testModels runs the models section: every operation on everyday GORM
// models, on the backend of h.
func testModels(t *testing.T, h Harness) {
	if h.Models == nil {
		h.lacks(t, CheckModels, "Models", "the models section (gorm.Model, UUID keys, typed enums, soft delete, timestamps, naming)")
	}
	ms := *h.Models
	if ms.Ticket == nil || ms.PrefixedTicket == nil || ms.UUIDTicket == nil || ms.V7Ticket == nil || ms.SoftJob == nil {
		t.Fatalf("Harness.Models = %+v: every store function is required", ms)
	}
	t.Run("Naming", func(t *testing.T) { testModelNaming(t, ms) })
	t.Run("Kinds", func(t *testing.T) { testModelKinds(t, ms) })
	t.Run("Claim", func(t *testing.T) { testModelClaims(t, ms, h.workers()) })
	t.Run("Lifecycle", func(t *testing.T) { testModelLifecycle(t, ms) })
}

// testModelNaming checks that a store of PrefixedTicket carries its
// naming strategy's prefix in its table name, where the store tells it,
// and that rows written there are read back.
func testModelNaming(t *testing.T, ms ModelStores) {
	s := ms.PrefixedTicket(t)
	named, ok := s.(dao.TableNamer)
	switch {
	case !ok:
		t.Logf("the store (%T) does not tell its table name; the prefix is not checked", s)
	case ms.TablePrefix == "":
		if !strings.HasSuffix(named.TableName(), "tickets") {
			t.Errorf("PrefixedTicket's table is %q; want the model's table name, tickets, after a prefix", named.TableName())
		}
	case !strings.HasPrefix(named.TableName(), ms.TablePrefix) || !strings.HasSuffix(named.TableName(), "tickets"):
		t.Errorf("PrefixedTicket's table is %q; want %q followed by tickets", named.TableName(), ms.TablePrefix)
	}
	rows := seedModel(t, s, ticketCase(ms.PrefixedTicket), 3)
	got, err := s.Get(context.Background(), rows[1].ID)
	if err != nil || got.ID != rows[1].ID || got.Audit.By != "maker-1" || got.Status != TicketQueued {
		t.Errorf("Get(%d) = %+v, %v; want the row created", rows[1].ID, got, err)
	}
}

// ticketFields is the columns every ticket model shares, as the generic
// checks of the section read and write them.
type ticketFields struct {
	queue    string
	status   TicketStatus
	priority int16
	owner    *string
}

// modelCase is one model of the section, with what the generic checks
// need to make rows and read them.
type modelCase[T any] struct {
	open   func(t *testing.T) dao.Store[T]
	make   func(i int, f ticketFields) *T
	key    func(row *T) any
	fields func(row *T) ticketFields
}

func ticketCase(open func(t *testing.T) dao.Store[Ticket]) modelCase[Ticket] {
	return modelCase[Ticket]{
		open: open,
		make: func(i int, f ticketFields) *Ticket {
			return &Ticket{Queue: f.queue, Status: f.status, Priority: f.priority, Owner: f.owner,
				Audit: Audit{By: fmt.Sprintf("maker-%d", i)}, Labels: []string{"l", fmt.Sprint(i)}}
		},
		key: func(r *Ticket) any { return r.ID },
		fields: func(r *Ticket) ticketFields {
			return ticketFields{r.Queue, r.Status, r.Priority, r.Owner}
		},
	}
}

func uuidCase(open func(t *testing.T) dao.Store[UUIDTicket]) modelCase[UUIDTicket] {
	return modelCase[UUIDTicket]{
		open: open,
		make: func(i int, f ticketFields) *UUIDTicket {
			return &UUIDTicket{ID: uuid.New(), Queue: f.queue, Status: f.status, Priority: f.priority, Owner: f.owner}
		},
		key: func(r *UUIDTicket) any { return r.ID },
		fields: func(r *UUIDTicket) ticketFields {
			return ticketFields{r.Queue, r.Status, r.Priority, r.Owner}
		},
	}
}

func v7Case(open func(t *testing.T) dao.Store[V7Ticket]) modelCase[V7Ticket] {
	return modelCase[V7Ticket]{
		open: open,
		make: func(i int, f ticketFields) *V7Ticket {
			return &V7Ticket{ID: uuid.Must(uuid.NewV7()).String(), Queue: f.queue, Status: f.status, Priority: f.priority, Owner: f.owner}
		},
		key: func(r *V7Ticket) any { return r.ID },
		fields: func(r *V7Ticket) ticketFields {
			return ticketFields{r.Queue, r.Status, r.Priority, r.Owner}
		},
	}
}

// seedModel creates n rows of c in s, in queue "q", status queued,
// priorities 0..4, and returns them as created.
func seedModel[T any](t *testing.T, s dao.Store[T], c modelCase[T], n int) []*T {
	t.Helper()
	rows := make([]*T, n)
	for i := range rows {
		rows[i] = c.make(i, ticketFields{queue: "q", status: TicketQueued, priority: int16(i % 5)})
	}
	for start := 0; start < n; start += createBatch {
		end := min(start+createBatch, n)
		if err := s.Create(context.Background(), rows[start:end]...); err != nil {
			t.Fatalf("Create rows %d..%d: %v", start, end-1, err)
		}
	}
	return rows
}

// testModelClaims runs, on every model, workers concurrent claimers
// until no queued row is left, and counts every claimed key: each seeded
// row must be claimed exactly once.
func testModelClaims(t *testing.T, ms ModelStores, workers int) {
	t.Run("Ticket", func(t *testing.T) { checkModelClaims(t, ticketCase(ms.Ticket), workers) })
	t.Run("PrefixedTicket", func(t *testing.T) { checkModelClaims(t, ticketCase(ms.PrefixedTicket), workers) })
	t.Run("UUIDTicket", func(t *testing.T) { checkModelClaims(t, uuidCase(ms.UUIDTicket), workers) })
	t.Run("V7Ticket", func(t *testing.T) { checkModelClaims(t, v7Case(ms.V7Ticket), workers) })
}

func checkModelClaims[T any](t *testing.T, c modelCase[T], workers int) {
	s := c.open(t)
	n := 200
	if testing.Short() {
		n = 60
	}
	rows := seedModel(t, s, c, n)
	var (
		mu      sync.Mutex
		claimed = map[any]int{}
		errs    []error
		wg      sync.WaitGroup
	)
	until := baseTime().Add(time.Hour)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for {
				got, err := s.Claim(context.Background(), dao.ClaimRequest{
					Where:   dao.And(dao.Eq("queue", "q"), dao.Eq("status", TicketQueued)),
					Set:     dao.Set{"status": TicketRunning, "owner": owner, "lease_until": until},
					Limit:   7,
					OrderBy: []dao.Order{dao.Asc("priority")},
				})
				if err != nil && !dao.IsRetryable(err) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if err == nil && len(got) == 0 {
					return
				}
				mu.Lock()
				for i := range got {
					f := c.fields(&got[i])
					if f.status != TicketRunning || f.owner == nil || *f.owner != owner {
						errs = append(errs, fmt.Errorf("claimed row %v returned with status %q, owner %v; want %q, %q",
							c.key(&got[i]), f.status, f.owner, TicketRunning, owner))
					}
					claimed[fmt.Sprint(c.key(&got[i]))]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	duplicated, lost := 0, 0
	for _, r := range rows {
		switch k := fmt.Sprint(c.key(r)); claimed[k] {
		case 1:
		case 0:
			lost++
		default:
			duplicated++
			t.Errorf("row %s claimed %d times", k, claimed[k])
		}
	}
	t.Logf("%d rows, %d workers: %d claimed, %d duplicated, %d never claimed", n, workers, len(claimed), duplicated, lost)
	if lost > 0 || len(claimed) != n {
		t.Errorf("%d of %d rows never claimed (%d distinct keys claimed)", lost, n, len(claimed))
	}
	left, err := s.Count(context.Background(), dao.Eq("status", TicketQueued))
	if err != nil || left != 0 {
		t.Errorf("Count(status = queued) after the claims = %d, %v; want 0", left, err)
	}
}

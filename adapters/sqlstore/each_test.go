package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// updates returns the UPDATE statements recorded since the last call: by
// arrays (unnest) and others, and forgets them.
func (l *statementLog) updates() (arrays, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.sql {
		if strings.HasPrefix(q, "UPDATE") {
			if strings.Contains(q, "unnest(") {
				arrays++
			} else {
				other++
			}
		}
	}
	l.sql = nil
	return arrays, other
}

// TestPostgresUpdateEachByArraysWritesWhatRowByRowWrites is differential:
// on two tables seeded alike, UpdateEach writes random values (NULLs,
// bytes, named types, a Valuer, times, text with quotes) to random rows,
// some fenced out, once by arrays (one UPDATE) and once row by row
// (a driver that refuses slices as bound values), and the tables must end
// equal, with the same keys reported; soft-deleted rows are left alone.
func TestPostgresUpdateEachByArraysWritesWhatRowByRowWrites(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	var log, strictLog statementLog
	db := openArrays(t, &log, false, now)
	strict := openArrays(t, &strictLog, true, now)
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			a, _ := migratedStore[arrayRow](t, db, "eacharrays")
			b, _ := migratedStore[arrayRow](t, strict, "eachrows")
			items := randomArrayRows(rng, 40, "r")
			itemsB := make([]*arrayRow, len(items))
			for i, it := range items {
				cp := *it
				itemsB[i] = &cp
			}
			if err := a.Create(ctx, items...); err != nil {
				t.Fatal(err)
			}
			if err := b.Create(ctx, itemsB...); err != nil {
				t.Fatal(err)
			}
			// Soft-delete one row in both: UpdateEach must skip it.
			for _, s := range []*dao.Table[arrayRow]{a, b} {
				if _, err := s.Delete(ctx, dao.Eq("id", items[3].ID), 1); err != nil {
					t.Fatal(err)
				}
			}
			var rows []dao.RowSet
			for i, it := range items {
				if rng.IntN(3) == 0 {
					continue
				}
				fence := it.Name
				if i%7 == 0 {
					fence = "someone else" // fenced out
				}
				var note any = fmt.Sprintf("n'%d\"", rng.IntN(100))
				if rng.IntN(3) == 0 {
					note = nil
				}
				stamp := any(now.Add(time.Duration(rng.IntN(1000)) * time.Second))
				if rng.IntN(4) == 0 {
					stamp = nil
				}
				rows = append(rows, dao.RowSet{Match: []any{it.ID, fence}, Set: dao.Set{
					"note": note, "blob": []byte{byte(i), 0, 255}, "count": rng.IntN(50), "ratio": rng.Float64(),
					"flag": rng.IntN(2) == 0, "mood": arrayMood("m" + fmt.Sprint(i%3)), "label": sql.NullString{String: "l", Valid: i%2 == 0},
					"stamp": stamp,
				}})
			}
			common := dao.Set{"code": "abcde"}
			log.updates()
			ka, err := a.UpdateEach(ctx, []string{"id", "name"}, dao.Ne("count", -1000), common, rows)
			if err != nil {
				t.Fatal(err)
			}
			if arrays, other := log.updates(); arrays != 1 || other != 0 {
				t.Errorf("%d array UPDATEs and %d others for %d rows, want one by arrays", arrays, other, len(rows))
			}
			kb, err := b.UpdateEach(ctx, []string{"id", "name"}, dao.Ne("count", -1000), common, rows)
			if err != nil {
				t.Fatal(err)
			}
			if arrays, other := strictLog.updates(); arrays != 0 || other == 0 {
				t.Errorf("row by row: %d array UPDATEs and %d others", arrays, other)
			}
			sortKeys := func(ks []any) []string {
				out := make([]string, len(ks))
				for i, k := range ks {
					out[i] = fmt.Sprint(k)
				}
				slices.Sort(out)
				return out
			}
			if ga, gb := sortKeys(ka), sortKeys(kb); !slices.Equal(ga, gb) {
				t.Errorf("keys by arrays %v, row by row %v", ga, gb)
			}
			t.Logf("%d rows asked, %d written", len(rows), len(ka))
			ra, err := a.Unscoped().Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("id")}})
			if err != nil {
				t.Fatal(err)
			}
			rb, err := b.Unscoped().Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("id")}})
			if err != nil {
				t.Fatal(err)
			}
			if len(ra) != len(rb) {
				t.Fatalf("%d rows against %d", len(ra), len(rb))
			}
			for i := range ra {
				x, y := ra[i], rb[i]
				// The tables were written at other moments.
				x.CreatedAt, y.CreatedAt, x.UpdatedAt, y.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
				x.DeletedAt.Time, y.DeletedAt.Time = time.Time{}, time.Time{}
				if !reflect.DeepEqual(x, y) {
					t.Errorf("row %d:\n arrays     %+v\n row by row %+v", ra[i].ID, x, y)
				}
			}
		})
	}
}

// Package difftest is a randomized differential test of [dao.Store]
// implementations against the in-memory store (adapters/memstore) as the
// oracle. It generates tables of NULL-heavy rows and sequences of Find,
// Count, Update, Delete and Claim calls with random criteria trees (every
// operator, field-to-field comparisons, nested And and Or of zero to three
// operands, single-operand wrappers among them), random orderings and
// limits, runs each call on both stores and compares the results and then
// the whole table. A mismatch is shrunk to a minimal case (fewer calls,
// fewer rows, smaller criteria) that the failure message prints as Go
// code, with the seed that reproduces it.
//
// The adapters' TestDifferential tests run it (adapters/sqlstore on every
// SQL backend and claim path, adapters/esstore on the fake server), for
// example with another seed and more cases:
//
//	CLAIMSTORE_DIFF_SEED=7 CLAIMSTORE_DIFF_ITERATIONS=3000 go test -run TestDifferential ./adapters/sqlstore/
//
// The generator stays away from differences between backends that are not
// defects: strings are short lowercase ASCII without trailing spaces
// (MariaDB's default collation ignores case and accents and pads with
// spaces), times are whole seconds in UTC, and floats are exactly
// representable.
package difftest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
)

// Row is the model of the test: an id, a not-null integer, and nullable
// columns of every comparable kind. Column names: id, a, b, n, f, s, t,
// at, bt, ok.
type Row struct {
	ID int64    `gorm:"primaryKey;autoIncrement:false"`
	A  *int64   // nullable integer
	B  *int64   // nullable integer
	N  int64    `gorm:"not null"`
	F  *float64 // nullable float, exactly representable values only
	S  *string  `gorm:"size:16"`
	T  *string  `gorm:"size:16"`
	At *time.Time
	Bt *time.Time
	Ok *bool
}

// Environment variables that change the run.
const (
	// EnvSeed sets the seed (an integer); the default is [DefaultSeed].
	EnvSeed = "CLAIMSTORE_DIFF_SEED"
	// EnvIterations sets the number of generated cases per target.
	EnvIterations = "CLAIMSTORE_DIFF_ITERATIONS"
)

// DefaultSeed is the seed CI runs with.
const DefaultSeed = 1

// Config sizes a run.
type Config struct {
	// Seed seeds the generator; case i of a run uses the stream (Seed, i).
	Seed uint64
	// Iterations is the number of cases (a table and a call sequence).
	Iterations int
	// MaxRows and MaxOps bound the rows of a table and the calls of a
	// sequence.
	MaxRows, MaxOps int
}

// ConfigFromEnv returns the configuration of a run with iterations cases,
// overridden by [EnvSeed] and [EnvIterations]. A malformed value fails t.
func ConfigFromEnv(t testing.TB, iterations int) Config {
	t.Helper()
	c := Config{Seed: DefaultSeed, Iterations: iterations, MaxRows: 14, MaxOps: 10}
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, v, err)
		}
		c.Seed = n
	}
	if v := os.Getenv(EnvIterations); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a count", EnvIterations, v)
		}
		c.Iterations = n
	}
	return c
}

// Target is the store under test.
type Target struct {
	// Store is the store, over a table of its own.
	Store dao.Store[Row]
	// Reset removes every row of the table. Nil deletes them with
	// Store.Delete and match-all criteria.
	Reset func(ctx context.Context) error
	// Explain, when not nil, returns what the backend runs for op (such
	// as the SQL text), for the failure message.
	Explain func(op Op) string
}

// OpKind is a store call.
type OpKind int

// The calls of a sequence.
const (
	OpFind OpKind = iota
	OpCount
	OpUpdate
	OpDelete
	OpClaim
)

var kindNames = [...]string{"Find", "Count", "Update", "Delete", "Claim"}

// String returns the name of the store method, such as "Find".
func (k OpKind) String() string { return kindNames[k] }

// Op is one call: Where for every kind, OrderBy and Limit for Find and
// Claim, Limit for Delete, Set for Update and Claim.
type Op struct {
	Kind    OpKind
	Where   dao.Criteria
	OrderBy []dao.Order
	Limit   int
	Set     dao.Set
}

// Case is a table and a sequence of calls on it.
type Case struct {
	Rows []Row
	Ops  []Op
}

// Failure is a mismatch between the store and the oracle.
type Failure struct {
	Step int // index of the call in Case.Ops
	What string
}

// Error describes the mismatch and the call it happened at.
func (f *Failure) Error() string { return fmt.Sprintf("call %d: %s", f.Step, f.What) }

// Run generates cfg.Iterations cases, runs each on tg and on a fresh
// memory store, and fails t at the first mismatch with the seed and the
// shrunk case. It logs the number of cases and calls it ran.
func Run(t *testing.T, tg Target, cfg Config) {
	t.Helper()
	ctx := context.Background()
	if tg.Reset == nil {
		tg.Reset = func(ctx context.Context) error {
			_, err := tg.Store.Delete(ctx, dao.Criteria{}, 1<<30)
			return err
		}
	}
	var st stats
	for i := 0; i < cfg.Iterations; i++ {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		c := Generate(rng, cfg.MaxRows, cfg.MaxOps)
		f, err := runCase(ctx, tg, c, &st)
		if err != nil {
			t.Fatalf("seed %d case %d: %v", cfg.Seed, i, err)
		}
		if f == nil {
			continue
		}
		min, mf, tries := shrink(ctx, tg, c, f)
		t.Fatalf("store and memory oracle differ (seed %d, case %d; rerun with %s=%d %s=%d)\n"+
			"original case: %d rows, %d calls, failing at call %d: %s\n"+
			"shrunk in %d runs to %d rows, %d calls, failing at call %d: %s\n%s",
			cfg.Seed, i, EnvSeed, cfg.Seed, EnvIterations, i+1,
			len(c.Rows), len(c.Ops), f.Step, f.What,
			tries, len(min.Rows), len(min.Ops), mf.Step, mf.What, Format(min, tg.Explain))
	}
	t.Logf("seed %d: %d cases, %d rows, %d calls (%d refused as invalid by both), %d rows returned, counted or written; no difference from the memory oracle",
		cfg.Seed, cfg.Iterations, st.rows, st.calls, st.refused, st.hits)
}

// stats counts what a run exercised.
type stats struct {
	rows, calls, refused, hits int
}

// runCase loads c.Rows into tg and a fresh memory store and runs c.Ops on
// both. It returns the first mismatch, or an error when the case could not
// be set up.
func runCase(ctx context.Context, tg Target, c Case, st *stats) (*Failure, error) {
	if st == nil {
		st = &stats{}
	}
	st.rows += len(c.Rows)
	mem, err := memstore.New[Row]()
	if err != nil {
		return nil, err
	}
	if err := tg.Reset(ctx); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	if len(c.Rows) > 0 {
		a, b := copies(c.Rows), copies(c.Rows)
		if err := mem.Create(ctx, a...); err != nil {
			return nil, fmt.Errorf("memory create: %w", err)
		}
		if err := tg.Store.Create(ctx, b...); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
	}
	if d := diffTables(ctx, tg.Store, mem); d != "" {
		return &Failure{Step: -1, What: "after Create: " + d}, nil
	}
	for i, op := range c.Ops {
		st.calls++
		if d := runOp(ctx, tg.Store, mem, op, st); d != "" {
			return &Failure{Step: i, What: d}, nil
		}
		if d := diffTables(ctx, tg.Store, mem); d != "" {
			return &Failure{Step: i, What: "table after the call: " + d}, nil
		}
	}
	return nil, nil
}

func copies(rows []Row) []*Row {
	out := make([]*Row, len(rows))
	for i := range rows {
		r := rows[i]
		out[i] = &r
	}
	return out
}

// sameErr compares the outcome class of two errors: both nil, both invalid
// arguments, or both other errors.
func sameErr(got, want error) string {
	switch {
	case got == nil && want == nil:
		return ""
	case got != nil && want != nil && errors.Is(got, dao.ErrInvalidArgument) == errors.Is(want, dao.ErrInvalidArgument):
		return ""
	}
	return fmt.Sprintf("error %v, oracle error %v", got, want)
}

// runOp runs op on both stores and describes how the results differ.
func runOp(ctx context.Context, s, mem dao.Store[Row], op Op, st *stats) string {
	switch op.Kind {
	case OpFind:
		q := dao.Query{Where: op.Where, OrderBy: op.OrderBy, Limit: op.Limit}
		got, err := s.Find(ctx, q)
		want, werr := mem.Find(ctx, q)
		if d := sameErr(err, werr); d != "" || err != nil {
			st.refused += boolInt(d == "")
			return d
		}
		st.hits += len(want)
		return diffRows(got, want)
	case OpCount:
		got, err := s.Count(ctx, op.Where)
		want, werr := mem.Count(ctx, op.Where)
		if d := sameErr(err, werr); d != "" || err != nil {
			st.refused += boolInt(d == "")
			return d
		}
		st.hits += int(want)
		if got != want {
			return fmt.Sprintf("count %d, oracle %d", got, want)
		}
	case OpUpdate:
		got, err := s.Update(ctx, op.Where, op.Set)
		want, werr := mem.Update(ctx, op.Where, op.Set)
		if d := sameErr(err, werr); d != "" || err != nil {
			st.refused += boolInt(d == "")
			return d
		}
		st.hits += int(want)
		if got != want {
			return fmt.Sprintf("updated %d rows, oracle %d", got, want)
		}
	case OpDelete:
		got, err := s.Delete(ctx, op.Where, op.Limit)
		want, werr := mem.Delete(ctx, op.Where, op.Limit)
		if d := sameErr(err, werr); d != "" || err != nil {
			st.refused += boolInt(d == "")
			return d
		}
		st.hits += int(want)
		if got != want {
			return fmt.Sprintf("deleted %d rows, oracle %d", got, want)
		}
	case OpClaim:
		req := dao.ClaimRequest{Where: op.Where, OrderBy: op.OrderBy, Limit: op.Limit, Set: op.Set}
		got, err := s.Claim(ctx, req)
		want, werr := mem.Claim(ctx, req)
		if d := sameErr(err, werr); d != "" || err != nil {
			st.refused += boolInt(d == "")
			return d
		}
		st.hits += len(want)
		return diffRows(got, want)
	}
	return ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// diffTables compares every row of s and mem.
func diffTables(ctx context.Context, s, mem dao.Store[Row]) string {
	all := dao.Query{OrderBy: []dao.Order{dao.Asc("id")}}
	got, err := s.Find(ctx, all)
	if err != nil {
		return fmt.Sprintf("read the table: %v", err)
	}
	want, err := mem.Find(ctx, all)
	if err != nil {
		return fmt.Sprintf("read the oracle: %v", err)
	}
	return diffRows(got, want)
}

// diffRows compares two ordered results row by row.
func diffRows(got, want []Row) string {
	var d []string
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			d = append(d, fmt.Sprintf("[%d] missing, oracle has %s", i, FormatRow(want[i])))
		case i >= len(want):
			d = append(d, fmt.Sprintf("[%d] %s, oracle has no row", i, FormatRow(got[i])))
		case !equalRow(got[i], want[i]):
			d = append(d, fmt.Sprintf("[%d] %s, oracle %s", i, FormatRow(got[i]), FormatRow(want[i])))
		}
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("rows (ids %v, oracle %v): %s", rowIDs(got), rowIDs(want), strings.Join(d, "; "))
}

func rowIDs(rows []Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func eqPtr[V comparable](a, b *V) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func eqTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func equalRow(a, b Row) bool {
	return a.ID == b.ID && eqPtr(a.A, b.A) && eqPtr(a.B, b.B) && a.N == b.N && eqPtr(a.F, b.F) &&
		eqPtr(a.S, b.S) && eqPtr(a.T, b.T) && eqTime(a.At, b.At) && eqTime(a.Bt, b.Bt) && eqPtr(a.Ok, b.Ok)
}

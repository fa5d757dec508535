package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
)

// scanJobs reads every row of rows into Jobs and closes rows.
func scanJobs(rows *sql.Rows, capacity int) ([]Job, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var j Job
	dest := jobTargets(cols, &j)
	out := make([]Job, 0, capacity)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return out, err
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	return out, rows.Close()
}

// SQLClaim returns a [ClaimFunc] that runs one claim statement per call on
// db with database/sql: stmts[w] is worker w's statement (a fast-path
// claim returning the claimed rows).
func SQLClaim(db *sql.DB, stmts []dialects.Statement) ClaimFunc {
	return func(ctx context.Context, w, limit int) ([]Job, error) {
		st := stmts[w]
		rows, err := db.QueryContext(ctx, st.SQL, st.Args...)
		if err != nil {
			return nil, rawRetryable(err)
		}
		out, err := scanJobs(rows, limit)
		return out, rawRetryable(err)
	}
}

// SelectUpdate is a claim made of a candidate SELECT and one guarded
// UPDATE per candidate: the shape of the portable default, written against
// database/sql with no library.
type SelectUpdate struct {
	// Select reads the candidates; its arguments are fixed.
	Select dialects.Statement
	// Update claims one row; UpdateArgs(w, id) returns its arguments.
	Update     string
	UpdateArgs func(w int, id int64) []any
}

// Claim returns a [ClaimFunc] that reads up to the limit of candidates with
// su.Select, runs su.Update for each, keeps the rows whose update affected
// one row and returns them with the claim applied in memory (status
// claimed, locked by the worker, attempts incremented).
func (su SelectUpdate) Claim(db *sql.DB) ClaimFunc {
	return func(ctx context.Context, w, limit int) ([]Job, error) {
		rows, err := db.QueryContext(ctx, su.Select.SQL, su.Select.Args...)
		if err != nil {
			return nil, rawRetryable(err)
		}
		cands, err := scanJobs(rows, limit)
		if err != nil {
			return nil, rawRetryable(err)
		}
		claimed := cands[:0]
		for _, j := range cands {
			res, err := db.ExecContext(ctx, su.Update, su.UpdateArgs(w, j.ID)...)
			if err != nil {
				return claimed, rawRetryable(err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return claimed, err
			}
			if n != 1 {
				continue
			}
			j.Status, j.LockedBy, j.Attempts = StatusClaimed, WorkerName(w), j.Attempts+1
			claimed = append(claimed, j)
		}
		return claimed, nil
	}
}

// libraryPortable returns the portable default with the statements the
// library renders (dialects.Renderer.Select and GuardedUpdate) for table,
// rendered once: the worker and row arguments are substituted per call.
func (s *sqlRun) libraryPortable(table string) (SelectUpdate, error) {
	req, err := s.checkedClaim(0, s.cfg.Batch)
	if err != nil {
		return SelectUpdate{}, err
	}
	t := s.libTable(table)
	sel, err := s.r.Select(t, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		return SelectUpdate{}, err
	}
	const idMark, workerMark = int64(math.MinInt64), "\x00worker\x00"
	req.Set["locked_by"] = workerMark
	upd, err := s.r.GuardedUpdate(t, idMark, req.Where, req.Set)
	if err != nil {
		return SelectUpdate{}, err
	}
	idAt := slices.Index(upd.Args, any(idMark))
	workerAt := slices.Index(upd.Args, any(workerMark))
	if idAt < 0 || workerAt < 0 {
		return SelectUpdate{}, fmt.Errorf("bench: guarded update arguments %v: id or worker not found", upd.Args)
	}
	return SelectUpdate{
		Select: sel,
		Update: upd.SQL,
		UpdateArgs: func(w int, id int64) []any {
			args := slices.Clone(upd.Args)
			args[idAt], args[workerAt] = id, WorkerName(w)
			return args
		},
	}, nil
}

// naive returns the hand-written SELECT-then-UPDATE-per-row claim for
// table: what an application without the library would write.
func (s *sqlRun) naive(table string) SelectUpdate {
	q := s.r.QuoteTable(table)
	sel := "SELECT id, status, locked_by, attempts, payload FROM " + q + " WHERE status = ? ORDER BY id LIMIT ?"
	upd := "UPDATE " + q + " SET status = ?, locked_by = ?, attempts = attempts + 1 WHERE id = ? AND status = ?"
	if s.dialect == dialects.Postgres {
		sel = "SELECT id, status, locked_by, attempts, payload FROM " + q + " WHERE status = $1 ORDER BY id LIMIT $2"
		upd = "UPDATE " + q + " SET status = $1, locked_by = $2, attempts = attempts + 1 WHERE id = $3 AND status = $4"
	}
	return SelectUpdate{
		Select: dialects.Statement{SQL: sel, Args: []any{StatusPending, s.cfg.Batch}},
		Update: upd,
		UpdateArgs: func(w int, id int64) []any {
			return []any{StatusClaimed, WorkerName(w), id, StatusPending}
		},
	}
}

// sqlRunner opens a counted database/sql pool sized for the workers and
// returns a runner whose claim function build makes on it.
func (s *sqlRun) sqlRunner(ctx context.Context, build func(db *sql.DB) (ClaimFunc, error)) (runner, error) {
	db, count, err := openCountedSQL(ctx, s.cfg.Backend, s.dsn)
	if err != nil {
		return runner{}, err
	}
	sizePool(db, s.cfg.Workers)
	claim, err := build(db)
	if err != nil {
		db.Close()
		return runner{}, err
	}
	return runner{Claim: claim, RoundTrips: count, Release: func() { db.Close() }}, nil
}

// rawSQL measures database/sql with no library running the statements
// the library runs on this dialect: the fast-path statement on PostgreSQL,
// the portable default's SELECT and guarded UPDATEs elsewhere.
func (s *sqlRun) rawSQL() spec {
	v := Variant{Name: VariantRawSQL}
	// Where the library claims with one statement by default, the raw
	// baseline runs that statement; elsewhere the portable default's.
	oneStatement := slices.Contains(dialects.DefaultFastPath(), s.dialect)
	switch {
	case s.dialect == dialects.Postgres:
		v.Path = "database/sql (pgx stdlib) QueryContext of the same statement text (dialects.Renderer.Claim), Scan into Job"
		v.Promised = "1"
	case oneStatement:
		v.Path = "database/sql QueryContext of the same statement text (dialects.Renderer.Claim), Scan into Job"
		v.Promised = "1"
	default:
		v.Path = "database/sql, the library's statement texts (dialects.Renderer.Select, GuardedUpdate): SELECT, then UPDATE per row"
		v.Promised = "1 + N"
	}
	return s.sqlSpec(v, "bench_sql", func(ctx context.Context, t *table) (runner, error) {
		return s.sqlRunner(ctx, func(db *sql.DB) (ClaimFunc, error) {
			if oneStatement {
				stmts, err := s.claimStatements(t.name)
				if err != nil {
					return nil, err
				}
				return SQLClaim(db, stmts), nil
			}
			su, err := s.libraryPortable(t.name)
			if err != nil {
				return nil, err
			}
			return su.Claim(db), nil
		})
	})
}

// naiveSpec measures the hand-written SELECT, then guarded UPDATE per row,
// with database/sql.
func (s *sqlRun) naiveSpec() spec {
	v := Variant{
		Name:     VariantNaive,
		Path:     "database/sql, hand-written: SELECT … WHERE status = 'pending' ORDER BY id LIMIT n, then UPDATE … WHERE id = ? AND status = 'pending' per row",
		Promised: "1 + N",
	}
	return s.sqlSpec(v, "bench_naive", func(ctx context.Context, t *table) (runner, error) {
		return s.sqlRunner(ctx, func(db *sql.DB) (ClaimFunc, error) { return s.naive(t.name).Claim(db), nil })
	})
}

// LockedClaim is the MySQL and MariaDB fast path written against
// database/sql with no library: in one READ COMMITTED transaction, the
// locking candidate read Lock (SELECT … FOR UPDATE SKIP LOCKED), one UPDATE
// of the rows it locked rendered by Update for their ids, and COMMIT.
type LockedClaim struct {
	// Lock reads and locks the candidates; its arguments are fixed.
	Lock dialects.Statement
	// Update renders the UPDATE … WHERE id IN (…) of worker w for ids.
	Update func(w int, ids []any) (dialects.Statement, error)
}

// Claim returns a [ClaimFunc] running lc on db. The rows are returned with
// the claim applied in memory once the transaction has committed.
func (lc LockedClaim) Claim(db *sql.DB) ClaimFunc {
	return func(ctx context.Context, w, limit int) (_ []Job, err error) {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, rawRetryable(err)
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		rows, err := tx.QueryContext(ctx, lc.Lock.SQL, lc.Lock.Args...)
		if err != nil {
			return nil, rawRetryable(err)
		}
		jobs, err := scanJobs(rows, limit)
		if err != nil {
			return nil, rawRetryable(err)
		}
		if len(jobs) > 0 {
			ids := make([]any, len(jobs))
			for i := range jobs {
				ids[i] = jobs[i].ID
			}
			up, err := lc.Update(w, ids)
			if err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, up.SQL, up.Args...); err != nil {
				return nil, rawRetryable(err)
			}
		}
		if err := tx.Commit(); err != nil {
			return nil, rawRetryable(err)
		}
		for i := range jobs {
			jobs[i].Status, jobs[i].LockedBy, jobs[i].Attempts = StatusClaimed, WorkerName(w), jobs[i].Attempts+1
		}
		return jobs, nil
	}
}

// rawSQLFast measures database/sql with no library running the statements
// of the opt-in MySQL/MariaDB fast path (dialects.Renderer.LockCandidates
// and UpdateByIDs) in a READ COMMITTED transaction.
func (s *sqlRun) rawSQLFast() spec {
	v := Variant{
		Name:     VariantRawSQLFast,
		Path:     "database/sql, the library's fast-path statement texts (dialects.Renderer.LockCandidates, UpdateByIDs) in a READ COMMITTED transaction",
		Promised: "4",
	}
	return s.sqlSpec(v, "bench_sqlf", func(ctx context.Context, t *table) (runner, error) {
		return s.sqlRunner(ctx, func(db *sql.DB) (ClaimFunc, error) {
			req, err := s.checkedClaim(0, s.cfg.Batch)
			if err != nil {
				return nil, err
			}
			tb := s.libTable(t.name)
			lock, err := s.r.LockCandidates(tb, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
			if err != nil {
				return nil, err
			}
			sets := make([]dao.Set, s.cfg.Workers)
			for w := range sets {
				r, err := s.checkedClaim(w, s.cfg.Batch)
				if err != nil {
					return nil, err
				}
				sets[w] = r.Set
			}
			lc := LockedClaim{Lock: lock, Update: func(w int, ids []any) (dialects.Statement, error) {
				return s.r.UpdateByIDs(tb, ids, sets[w])
			}}
			return lc.Claim(db), nil
		})
	})
}

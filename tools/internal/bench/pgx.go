package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/claimstore/claimstore/dialects"
)

// QueryCounter is a pgx QueryTracer that counts queries: TraceQueryStart
// runs once at the start of every Query, QueryRow and Exec of a connection,
// so the count is the number of statements sent, each one round trip in
// pgx's default exec mode once its prepared statement is cached on the
// connection. The zero value is ready; it is safe for concurrent use.
type QueryCounter struct{ n atomic.Int64 }

// TraceQueryStart counts the query and returns ctx unchanged.
func (c *QueryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (c *QueryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Load returns the number of queries counted so far.
func (c *QueryCounter) Load() int64 { return c.n.Load() }

// NewPgxPool opens a pgx pool on dsn with at most maxConns connections
// whose every query is counted by counter (when not nil), and pings it.
func NewPgxPool(ctx context.Context, dsn string, maxConns int, counter *QueryCounter) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: pgx config: %w", err)
	}
	pc.MaxConns = int32(maxConns)
	if counter != nil {
		pc.ConnConfig.Tracer = counter
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("bench: pgx pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: pgx ping: %w", err)
	}
	return pool, nil
}

// PgxClaim returns a [ClaimFunc] that runs the claim statements on pool
// with no library in between: stmts[w] is worker w's statement (text and
// arguments) and the rows are scanned into Job with rows.Scan.
func PgxClaim(pool *pgxpool.Pool, stmts []dialects.Statement) ClaimFunc {
	return func(ctx context.Context, w, _ int) ([]Job, error) {
		st := stmts[w]
		rows, err := pool.Query(ctx, st.SQL, st.Args...)
		if err != nil {
			return nil, rawRetryable(err)
		}
		defer rows.Close()
		fds := rows.FieldDescriptions()
		cols := make([]string, len(fds))
		for i := range fds {
			cols[i] = fds[i].Name
		}
		var j Job
		dest := jobTargets(cols, &j)
		var out []Job
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return out, err
			}
			out = append(out, j)
		}
		return out, rawRetryable(rows.Err())
	}
}

// rawPgx measures pgx (pgxpool, no database/sql, no GORM) executing the
// claim statement text that dialects renders for PostgreSQL, the text the
// library sends.
func (s *sqlRun) rawPgx() spec {
	v := Variant{
		Name:     VariantRawPgx,
		Path:     "pgxpool.Query of the same statement text (dialects.Renderer.Claim), rows.Scan into Job",
		Promised: "1",
	}
	return s.sqlSpec(v, "bench_pgx", s.pgxRunner)
}

// pgxRunner opens a counted pgx pool and returns the raw pgx claim of t.
func (s *sqlRun) pgxRunner(ctx context.Context, t *table) (runner, error) {
	stmts, err := s.claimStatements(t.name)
	if err != nil {
		return runner{}, err
	}
	var counter QueryCounter
	pool, err := NewPgxPool(ctx, s.dsn, s.cfg.Workers, &counter)
	if err != nil {
		return runner{}, err
	}
	return runner{Claim: PgxClaim(pool, stmts), RoundTrips: counter.Load, Release: pool.Close}, nil
}

// claimStatements renders the fast-path claim of every worker for table.
func (s *sqlRun) claimStatements(table string) ([]dialects.Statement, error) {
	stmts := make([]dialects.Statement, s.cfg.Workers)
	for w := range stmts {
		req, err := s.checkedClaim(w, s.cfg.Batch)
		if err != nil {
			return nil, err
		}
		if stmts[w], err = s.r.Claim(s.libTable(table), req); err != nil {
			return nil, err
		}
	}
	return stmts, nil
}

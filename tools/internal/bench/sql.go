package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/claimstore/claimstore/dao/driver"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	cmddsn "github.com/claimstore/claimstore/internal/cmd/dsn"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/ncruces/go-sqlite3"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Names of the variants a run can measure.
const (
	VariantLibrary         = "library"
	VariantLibraryPortable = "library portable"
	VariantLibraryFast     = "library fast path"
	VariantRawSQLFast      = "raw database/sql fast path"
	VariantRawPgx          = "raw pgx"
	VariantRawSQL          = "raw database/sql"
	VariantNaive           = "naive"
)

// CommandDSN returns the DSN a command opens for backend, given its --dsn
// value dsn: [DefaultDSN] when dsn is empty (with its cleanup); for
// SQLite, a bare file path (no "file:" prefix, no query) as
// sqlstore.SQLiteDSN(path), with the recommended settings; any other dsn
// as it is, with a cleanup that does nothing. Errors are DefaultDSN's.
func CommandDSN(backend, dsn string) (string, func() error, error) {
	if dsn == "" {
		return DefaultDSN(backend)
	}
	return cmddsn.Normalize(backend, dsn), func() error { return nil }, nil
}

// DefaultDSN returns the DSN a run uses when none is given: for postgres
// and mysql/mariadb the local test servers of package testdb
// (CLAIMSTORE_POSTGRES_DSN and CLAIMSTORE_MYSQL_DSN override them), for
// sqlite a fresh database file in a new temporary directory, which cleanup
// removes. cleanup is never nil. An unknown backend is an error wrapping
// [dao.ErrInvalidArgument].
func DefaultDSN(backend string) (dsn string, cleanup func() error, err error) {
	cleanup = func() error { return nil }
	switch backend {
	case "postgres":
		return testdb.PostgresDSN(), cleanup, nil
	case "mysql", "mariadb":
		return testdb.MySQLDSN(), cleanup, nil
	case "sqlite":
		dir, err := os.MkdirTemp("", "claimstore-bench-")
		if err != nil {
			return "", cleanup, fmt.Errorf("bench: sqlite temp dir: %w", err)
		}
		return sqlstore.SQLiteDSN(filepath.Join(dir, "bench.db")), func() error { return os.RemoveAll(dir) }, nil
	}
	return "", cleanup, fmt.Errorf("bench: %w: no default DSN for backend %q", dao.ErrInvalidArgument, backend)
}

// sqlRun is the state every variant of one run on an SQL backend shares.
type sqlRun struct {
	cfg     Config
	dsn     string
	admin   *gorm.DB // not counted: DDL, loading, pending-row checks
	dialect dialects.Name
	r       dialects.Renderer
	model   *driver.Model[Job]
	probe   *dao.Table[Job] // checks requests as the library does
	rep     *Report
}

func runSQL(ctx context.Context, cfg Config) (rep *Report, err error) {
	dsn := cfg.DSN
	if dsn == "" {
		var cleanup func() error
		if dsn, cleanup, err = DefaultDSN(cfg.Backend); err != nil {
			return nil, err
		}
		defer func() {
			if cfg.Keep {
				return
			}
			if cerr := cleanup(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	s, err := openSQLRun(ctx, cfg, dsn)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if cfg.Keep && cfg.DSN == "" && cfg.Backend == "sqlite" {
		s.rep.Notes = append(s.rep.Notes, "tables kept in "+dsn)
	}

	specs := s.specs(cfg.selection())
	if len(specs) == 0 {
		return s.rep, fmt.Errorf("bench: %w: none of the selected variants (%s) runs on %s", dao.ErrInvalidArgument, strings.Join(cfg.selection().list(), ", "), s.dialect)
	}
	err = runSpecs(ctx, cfg, s.rep, specs)
	return s.rep, err
}

// specs returns the specs of the selected variants the run's dialect has,
// in [VariantNames] order, each compared with its raw baseline, and notes
// in the report the variants selected by name that it lacks.
func (s *sqlRun) specs(sel selection) []spec {
	pg := s.dialect == dialects.Postgres
	var specs []spec
	note := func(n string) {
		if n != "" {
			s.rep.Notes = append(s.rep.Notes, n)
		}
	}
	if sel.has(SelectLibrary) {
		specs = append(specs, s.library(VariantLibrary))
	}
	if sel.has(SelectRaw) && pg {
		specs = append(specs, s.rawPgx())
	}
	if sel.has(SelectRawSQL) || sel.has(SelectRaw) && !pg {
		specs = append(specs, s.rawSQL())
	}
	if sel.has(SelectPortable) {
		if slices.Contains(dialects.DefaultFastPath(), s.dialect) {
			specs = append(specs, s.library(VariantLibraryPortable))
		} else {
			note(sel.unavailable(SelectPortable, string(s.dialect), "claims on the portable default already: see "+VariantLibrary))
		}
	}
	if sel.has(SelectNaive) {
		specs = append(specs, s.naiveSpec())
	}
	base := VariantRawSQL
	if pg {
		base = VariantRawPgx
	}
	for i := range specs {
		if specs[i].v.Name != base {
			specs[i].v.Baseline = base
		}
	}
	for _, n := range []string{SelectFast, SelectRawFast} {
		switch {
		case !sel.has(n):
		case !s.optInFastPath():
			note(sel.unavailable(n, string(s.dialect), "has no opt-in fast path (where the fast path is the default, "+VariantLibrary+" measures it)"))
		case n == SelectFast:
			lib := s.library(VariantLibraryFast)
			lib.v.Baseline = VariantRawSQLFast
			specs = append(specs, lib)
		default:
			specs = append(specs, s.rawSQLFast())
		}
	}
	return specs
}

// openSQLRun opens the uncounted handle of a run on dsn, detects the
// dialect and reads the server version into a new report. close releases
// the handle.
func openSQLRun(ctx context.Context, cfg Config, dsn string) (*sqlRun, error) {
	admin, err := sqlstore.Open(ctx, cfg.Backend, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	s := &sqlRun{cfg: cfg, dsn: dsn, admin: admin}
	probe, err := sqlstore.New[Job](admin)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	if !probe.As(&s.dialect) {
		s.close()
		return nil, fmt.Errorf("bench: the store gives no dialect")
	}
	s.model, s.probe = probe.Model(), probe
	if s.r, err = dialects.NewRenderer(s.dialect); err != nil {
		s.close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	s.rep = cfg.newReport(string(s.dialect))
	if s.rep.Server, err = s.serverVersion(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// close closes the run's uncounted handle.
func (s *sqlRun) close() {
	if sqlDB, err := s.admin.DB(); err == nil {
		sqlDB.Close()
	}
}

// serverVersion asks the server for its version.
func (s *sqlRun) serverVersion(ctx context.Context) (string, error) {
	return ServerVersion(ctx, s.admin, s.dialect)
}

// ServerVersion asks the database behind db, of the given dialect, for
// its version: "PostgreSQL 15.20 (…)", MySQL's or MariaDB's VERSION(),
// "SQLite 3.54.1". It returns "" for a dialect it cannot ask (SQL Server),
// and the query's error wrapped.
func ServerVersion(ctx context.Context, db *gorm.DB, dialect dialects.Name) (string, error) {
	q := map[dialects.Name]string{
		dialects.Postgres: "SHOW server_version",
		dialects.MySQL:    "SELECT VERSION()",
		dialects.MariaDB:  "SELECT VERSION()",
		dialects.SQLite:   "SELECT sqlite_version()",
	}[dialect]
	if q == "" {
		return "", nil
	}
	var v string
	if err := db.WithContext(ctx).Raw(q).Scan(&v).Error; err != nil {
		return "", fmt.Errorf("bench: server version: %w", err)
	}
	switch dialect {
	case dialects.SQLite:
		v = "SQLite " + v
	case dialects.Postgres:
		v = "PostgreSQL " + v
	}
	return v, nil
}

// table is one freshly created and loaded table.
type table struct {
	name  string
	store *dao.Table[Job] // on the uncounted admin handle
}

// prepare creates a fresh table prefix_<random> with the library's
// migration (so every variant's table has the same shape and indexes),
// loads cfg.Rows rows, and refreshes the planner statistics (see analyze).
func (s *sqlRun) prepare(ctx context.Context, prefix string) (*table, error) {
	name, err := tableName(prefix)
	if err != nil {
		return nil, err
	}
	store, err := sqlstore.New[Job](s.admin, sqlstore.WithTable(name))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	t := &table{name: name, store: store} // returned with every error, so the caller drops it
	if err := store.Migrate(ctx); err != nil {
		return t, fmt.Errorf("bench: %w", err)
	}
	if err := s.admin.WithContext(ctx).Exec(EligibilityIndex(s.dialect, s.r, name)).Error; err != nil {
		return t, fmt.Errorf("bench: index on %s: %w", name, err)
	}
	if err := Load(ctx, s.cfg.Rows, s.cfg.LoadBatch, StoreInserter(store)); err != nil {
		return t, err
	}
	if err := s.analyze(ctx, name); err != nil {
		return t, err
	}
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, "loaded %d rows into %s\n", s.cfg.Rows, name)
	}
	return t, nil
}

// analyze refreshes the planner statistics of a freshly loaded table on
// PostgreSQL (ANALYZE) and MySQL/MariaDB (ANALYZE TABLE), so every variant
// starts from the same statistics. SQLite is left without statistics:
// sqlite_stat1 taken while every row is pending says that status = ?
// matches the whole table, and the planner then scans the table in rowid
// order and filters (EXPLAIN QUERY PLAN: "SCAN"), reading every row claimed
// so far on every claim; without statistics it assumes an equality on an
// indexed column is selective and uses the (status, id) index (SQLite
// manual, "The SQLite Query Optimizer Overview", "ANALYZE").
func (s *sqlRun) analyze(ctx context.Context, name string) error {
	var stmt string
	switch s.dialect {
	case dialects.Postgres:
		stmt = "ANALYZE ?"
	case dialects.MySQL, dialects.MariaDB:
		stmt = "ANALYZE TABLE ?"
	default:
		return nil
	}
	if err := s.admin.WithContext(ctx).Exec(stmt, clause.Table{Name: name}).Error; err != nil {
		return fmt.Errorf("bench: analyze %s: %w", name, err)
	}
	return nil
}

// EligibilityIndex returns the CREATE INDEX statement for the index that
// serves the claim's candidate query (status = 'pending' ORDER BY id LIMIT
// n) on a Job table called table, as the performance rules of the design
// ask: on PostgreSQL a partial index on id over the pending rows, which
// holds only claimable rows and which a claim changing the status leaves
// (PostgreSQL manual, "Partial Indexes"); elsewhere a composite index on
// (status, id). Without it, PostgreSQL with statistics taken before the
// burn walks the primary key from the smallest id and filters out every
// row claimed so far, so each claim costs more than the last. The table
// name is generated by the benchmark and quoted.
func EligibilityIndex(d dialects.Name, r dialects.Renderer, table string) string {
	if d == dialects.Postgres {
		return "CREATE INDEX " + r.Quote(table+"_pending") + " ON " + r.QuoteTable(table) + " (id) WHERE status = 'pending'"
	}
	return "CREATE INDEX " + r.Quote(table+"_claim") + " ON " + r.QuoteTable(table) + " (status, id)"
}

// drop removes t unless the run keeps its tables.
func (s *sqlRun) drop(t *table) error {
	if t == nil || s.cfg.Keep {
		return nil
	}
	if err := s.admin.Migrator().DropTable(t.name); err != nil {
		return fmt.Errorf("bench: drop %s: %w", t.name, err)
	}
	return nil
}

// runner is what a variant's setup returns: its claim function on one
// table, how to count its round trips and how to release what it opened.
type runner struct {
	// Claim performs one claim.
	Claim ClaimFunc
	// RoundTrips returns the running round-trip total; nil when the
	// variant cannot be counted.
	RoundTrips func() int64
	// Release closes the pools the setup opened; nil when none.
	Release func()
	// Path and Promised fill the variant's fields of the same names when
	// not empty.
	Path, Promised string
}

// sqlSpec returns the spec of a variant that runs on a fresh table
// prefix_<random>: each run prepares the table, builds the variant's
// runner on it with setup and burns the table down.
func (s *sqlRun) sqlSpec(v Variant, prefix string, setup func(ctx context.Context, t *table) (runner, error)) spec {
	return spec{v: v, run: func(ctx context.Context, progress io.Writer) (_ Variant, _ BurnResult, err error) {
		t, err := s.prepare(ctx, prefix)
		defer func() {
			if derr := s.drop(t); derr != nil && err == nil {
				err = derr
			}
		}()
		if err != nil {
			return v, BurnResult{}, err
		}
		run, err := setup(ctx, t)
		if err != nil {
			return v, BurnResult{}, fmt.Errorf("bench: %s: %w", v.Name, err)
		}
		if run.Release != nil {
			defer run.Release()
		}
		if run.Path != "" {
			v.Path = run.Path
		}
		if run.Promised != "" {
			v.Promised = run.Promised
		}
		res, err := Burn(ctx, BurnConfig{
			Label: v.Name, Rows: s.cfg.Rows, Workers: s.cfg.Workers, Batch: s.cfg.Batch,
			Claim:      run.Claim,
			Pending:    StorePending(t.store),
			Remaining:  StoreRemaining(t.store),
			RoundTrips: run.RoundTrips,
			Progress:   progress, ProgressEvery: s.cfg.ProgressEvery, Stall: s.cfg.Stall, Budget: s.cfg.Budget,
		})
		return v, res, err
	}}
}

// library measures Store.Claim: on the store's default path for
// VariantLibrary, on the portable default for VariantLibraryPortable.
func (s *sqlRun) library(name string) spec {
	prefix := "bench_lib"
	var opts []sqlstore.Option
	switch name {
	case VariantLibraryPortable:
		prefix, opts = "bench_libp", []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}
	case VariantLibraryFast:
		prefix, opts = "bench_libf", []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyFastPath)}
	}
	return s.sqlSpec(Variant{Name: name}, prefix, func(ctx context.Context, t *table) (runner, error) {
		return s.libraryRunner(ctx, t, opts...)
	})
}

// optInFastPath reports whether the run's dialect has a fast path that is
// off by default and made of the locking read and UPDATE that rawSQLFast
// runs (MySQL and MariaDB): the baseline then also measures it. SQLite's
// one-statement fast path is its default (library; BenchmarkSQLiteClaim
// compares it with the raw statement and the portable default).
func (s *sqlRun) optInFastPath() bool {
	return (s.dialect == dialects.MySQL || s.dialect == dialects.MariaDB) &&
		dialects.HasFastPath(s.dialect) && !slices.Contains(dialects.DefaultFastPath(), s.dialect)
}

// libraryRunner opens a counted GORM handle and a store on t over it,
// built with opts.
func (s *sqlRun) libraryRunner(ctx context.Context, t *table, opts ...sqlstore.Option) (runner, error) {
	opts = append([]sqlstore.Option{sqlstore.WithTable(t.name)}, opts...)
	db, count, err := openCountedGorm(ctx, s.cfg.Backend, s.dsn)
	if err != nil {
		return runner{}, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return runner{}, err
	}
	sizePool(sqlDB, s.cfg.Workers)
	store, err := sqlstore.New[Job](db, opts...)
	if err != nil {
		sqlDB.Close()
		return runner{}, err
	}
	caps := store.Capabilities()
	return runner{
		Claim: StoreClaimFunc(store), RoundTrips: count, Release: func() { sqlDB.Close() },
		Path: s.describeLibrary(caps), Promised: caps.ClaimRoundTrips.String(),
	}, nil
}

// describeLibrary says what the library's claim does on this dialect.
func (s *sqlRun) describeLibrary(c dao.Capabilities) string {
	switch {
	case c.Strategy == dao.StrategyFastPath && s.dialect == dialects.Postgres:
		return "fast path: one statement (WITH … AS MATERIALIZED (SELECT … FOR UPDATE SKIP LOCKED), … UPDATE … RETURNING) SELECT … ORDER BY), Store.Claim on the GORM handle's connection, run with pgx natively"
	case c.Strategy == dao.StrategyFastPath && s.dialect == dialects.SQLite:
		return "fast path: one statement (WITH … AS MATERIALIZED (SELECT id, row_number() … LIMIT n) UPDATE … WHERE id IN (…) RETURNING *, rank), rows sorted by rank; Store.Claim over GORM/database/sql"
	case c.Strategy == dao.StrategyFastPath:
		return "fast path (opt-in): READ COMMITTED transaction: SELECT … FOR UPDATE SKIP LOCKED, UPDATE … WHERE id IN (…), COMMIT; Store.Claim over GORM/database/sql"
	}
	return "portable default: SELECT candidates, then UPDATE … WHERE id = ? AND <criteria> per row; Store.Claim over GORM/database/sql"
}

// sizePool gives a database/sql pool as many open and idle connections as
// there are workers, as the pgx pool of the raw baseline gets: with
// database/sql's default of two idle connections, most claims of eight
// workers would open a new connection.
func sizePool(db *sql.DB, workers int) {
	db.SetMaxOpenConns(workers)
	db.SetMaxIdleConns(workers)
}

// checkedClaim returns the benchmark's claim request for worker w, checked
// by the model as the library checks it, so that a statement rendered from
// it is the one the library renders.
func (s *sqlRun) checkedClaim(w, limit int) (dao.ClaimRequest, error) {
	return s.probe.CheckClaim(ClaimRequest(w, limit))
}

// libTable returns the dialects.Table the library renders statements for
// when its table is name.
func (s *sqlRun) libTable(name string) dialects.Table {
	return dialects.Table{Name: name, PrimaryKey: s.model.PrimaryKey(), Nullable: map[string]bool{}}
}

// rawRetryable wraps err with dao.ErrBusy or dao.ErrConflict when it is a
// lock or serialization error a retry can cure, so the burner retries raw
// variants as it retries the library: PostgreSQL 40001, 40P01 and 55P03,
// MySQL/MariaDB 1213 (deadlock) and 1205 (lock wait timeout), SQLite
// SQLITE_BUSY and SQLITE_LOCKED. Other errors are returned as they are.
func rawRetryable(err error) error {
	var pgErr *pgconn.PgError
	var myErr *gomysql.MySQLError
	var liteCode sqlite3.ExtendedErrorCode
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03"),
		errors.As(err, &myErr) && (myErr.Number == 1213 || myErr.Number == 1205):
		return fmt.Errorf("%w: %w", dao.ErrConflict, err)
	case errors.As(err, &liteCode) && (liteCode.Code() == sqlite3.BUSY || liteCode.Code() == sqlite3.LOCKED):
		return fmt.Errorf("%w: %w", dao.ErrBusy, err)
	}
	return err
}

// jobTargets returns scan destinations into j for the result columns cols;
// a column Job has no field for (such as a copy of an ordering column a
// claim statement returns beside the row) is scanned and dropped.
func jobTargets(cols []string, j *Job) []any {
	dest := make([]any, len(cols))
	for i, c := range cols {
		switch c {
		case "id":
			dest[i] = &j.ID
		case "status":
			dest[i] = &j.Status
		case "locked_by":
			dest[i] = &j.LockedBy
		case "attempts":
			dest[i] = &j.Attempts
		case "payload":
			dest[i] = &j.Payload
		default:
			dest[i] = new(any)
		}
	}
	return dest
}

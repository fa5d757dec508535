package sqlstore

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/ncruces/go-sqlite3/gormlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlserver"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Config returns the GORM configuration [Open] uses: GORM's logger
// silenced (the store returns every error instead of printing it) and no
// default transaction around single writes, since one statement is atomic
// on its own and BEGIN/COMMIT would add two round trips to every write.
func Config() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
	}
}

// Open opens a GORM handle on dsn for backend ("postgres", "mysql",
// "mariadb", "sqlite" or "sqlserver"; see dialects.Parse for aliases),
// pings the server with ctx, and returns the handle with [Config]:
//
//   - postgres: gorm.io/driver/postgres over pgx (jackc/pgx/v5 stdlib);
//     dsn is a pgx connection string or URL.
//   - mysql, mariadb: gorm.io/driver/mysql over go-sql-driver/mysql; dsn
//     is a go-sql-driver DSN. parseTime=true is added when absent, so
//     DATETIME columns scan into time.Time, and interpolateParams=true when
//     absent, so a statement with arguments is one round trip (text
//     protocol with client-side escaping) instead of three exchanges
//     (prepare, execute, close) of the binary protocol. Interpolation is
//     unsafe with the multibyte character sets big5, gbk, sjis and cp932
//     (go-sql-driver documentation, "interpolateParams"); keep the default
//     utf8mb4. clientFoundRows=true is added when absent, so an UPDATE
//     reports the rows it matched, not only those it changed: Update then
//     returns the matched count in one statement, and a guarded claim
//     update of a row whose values it leaves unchanged still counts (the
//     store is correct without the flag too, at the cost of extra queries
//     in those cases; see [Store.Update]).
//   - sqlite: github.com/ncruces/go-sqlite3/gormlite over the
//     github.com/ncruces/go-sqlite3 driver, SQLite translated to Go
//     without cgo, so nothing but Go is needed; build dsn with
//     [SQLiteDSN]. A "file:" URI without _timefmt gets
//     _timefmt=[SQLiteTimeLayout], so stored times sort as text (the
//     driver's own default, RFC 3339 with "Z", does not). An in-memory
//     database (":memory:" or mode=memory) is limited to one open
//     connection, since each connection would see its own database.
//   - sqlserver: gorm.io/driver/sqlserver over microsoft/go-mssqldb.
//
// Errors: an unknown backend or a malformed MySQL DSN is
// [dao.ErrInvalidArgument]; a server that cannot be reached is
// [dao.ErrUnavailable]; other failures are mapped like every database
// error. On error nothing stays open.
func Open(ctx context.Context, backend string, dsn string) (*gorm.DB, error) {
	name, err := dialects.Parse(backend)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open: %w", err)
	}
	var d gorm.Dialector
	switch name {
	case dialects.Postgres:
		d = postgres.Open(dsn)
	case dialects.MySQL, dialects.MariaDB:
		full, err := MySQLDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: open: %w", err)
		}
		d = mysql.Open(full)
	case dialects.SQLite:
		d = gormlite.Open(sqliteTimeDefault(dsn))
	case dialects.SQLServer:
		d = sqlserver.Open(dsn)
	}
	cfg := Config()
	if name == dialects.SQLite {
		// SQLite stores times as text: keep GORM's timestamps in UTC.
		cfg.NowFunc = func() time.Time { return time.Now().UTC() }
	}
	db, err := gorm.Open(d, cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open %s: %w", name, mapError(err))
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open %s: %w", name, mapError(err))
	}
	if name == dialects.SQLite && (strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "mode=memory")) {
		sqlDB.SetMaxOpenConns(1)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("sqlstore: open %s: ping: %w", name, mapError(err))
	}
	return db, nil
}

// MySQLDSN returns dsn (a go-sql-driver/mysql DSN) with parseTime=true,
// interpolateParams=true and clientFoundRows=true added unless dsn sets
// them; see [Open] for why. A DSN the driver cannot parse is
// [dao.ErrInvalidArgument].
func MySQLDSN(dsn string) (string, error) {
	if _, err := gomysql.ParseDSN(dsn); err != nil {
		return "", fmt.Errorf("%w: mysql dsn: %w", dao.ErrInvalidArgument, err)
	}
	var query string
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 {
		if j := strings.IndexByte(dsn[i:], '?'); j >= 0 {
			query = dsn[i+j+1:]
		}
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("%w: mysql dsn parameters: %w", dao.ErrInvalidArgument, err)
	}
	out := dsn
	for _, p := range []string{"parseTime", "interpolateParams", "clientFoundRows"} {
		if _, ok := params[p]; ok {
			continue
		}
		sep := "&"
		if !strings.Contains(out[strings.LastIndexByte(out, '/')+1:], "?") {
			sep = "?"
		}
		out += sep + p + "=true"
	}
	return out, nil
}

// SQLiteDSN returns a DSN for the database file at path with the settings
// concurrent claimers need, and a 5 s busy timeout; see [SQLiteDSNTimeout].
func SQLiteDSN(path string) string { return SQLiteDSNTimeout(path, 5*time.Second) }

// SQLiteTimeLayout is the text layout (time.Format) in which the SQLite
// DSNs of this package make the driver store time.Time values, and from
// which it reads them back into time.Time in DATETIME columns. The store
// binds times in UTC (see dialects), so every stored time reads
// "YYYY-MM-DD HH:MM:SS[.fraction]+00:00" and text comparison and ORDER BY
// follow time order: '+' sorts before '.' and the digits, so a time
// without a fraction sorts before the same second with one. SQLite's date
// and time functions accept the layout ("Date And Time Functions", time
// values formats 2 to 4 with a [+-]HH:MM suffix). Files written by
// earlier versions of this package hold the same text.
const SQLiteTimeLayout = "2006-01-02 15:04:05.999999999-07:00"

// SQLiteDSNTimeout returns a DSN for the pure-Go driver
// github.com/ncruces/go-sqlite3/driver (GORM dialector
// github.com/ncruces/go-sqlite3/gormlite) for the database file at path
// with, on every connection the pool opens:
//
//   - busy_timeout(busyTimeout, in milliseconds, at least 1), set first: a
//     writer that finds the database locked waits up to this long before
//     failing with SQLITE_BUSY (dao.ErrBusy) instead of failing at once
//     (SQLite manual, "PRAGMA busy_timeout", "sqlite3_busy_timeout()").
//     The driver also ends the wait early when the statement's context
//     ends.
//   - journal_mode(WAL): readers do not block the writer and the writer
//     does not block readers, so candidate reads proceed while another
//     claimer writes (SQLite manual, "Write-Ahead Logging").
//   - synchronous(NORMAL): in WAL mode commits stay durable against an
//     application crash and the database stays consistent after a power
//     loss, without an fsync per commit ("PRAGMA synchronous").
//   - _txlock=immediate: transactions begin with BEGIN IMMEDIATE and take
//     the write lock up front. A deferred transaction that reads and then
//     writes can fail with SQLITE_BUSY immediately, without waiting, when
//     another connection wrote in between; BEGIN IMMEDIATE waits under the
//     busy timeout instead ("BEGIN TRANSACTION": DEFERRED, IMMEDIATE and
//     EXCLUSIVE transactions).
//   - _timefmt=[SQLiteTimeLayout]: times are stored as text in that
//     layout and read back from it.
//
// path is percent-escaped where the URI filename syntax needs it.
func SQLiteDSNTimeout(path string, busyTimeout time.Duration) string {
	ms := busyTimeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?_pragma=busy_timeout(" + strconv.FormatInt(ms, 10) +
		")&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate&_timefmt=" +
		url.QueryEscape(SQLiteTimeLayout)
}

// sqliteTimeDefault returns dsn with _timefmt=[SQLiteTimeLayout] added when
// dsn is a "file:" URI that does not set _timefmt; other DSNs (a plain
// file name, ":memory:") are returned as they are, since a query string
// added to them would become part of the file name.
func sqliteTimeDefault(dsn string) string {
	if !strings.HasPrefix(dsn, "file:") {
		return dsn
	}
	query := ""
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		query = dsn[i+1:]
	}
	if params, err := url.ParseQuery(query); err == nil && params.Has("_timefmt") {
		return dsn
	}
	sep := "&"
	if !strings.Contains(dsn, "?") {
		sep = "?"
	}
	return dsn + sep + "_timefmt=" + url.QueryEscape(SQLiteTimeLayout)
}

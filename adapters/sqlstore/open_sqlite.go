package sqlstore

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

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

// SQLiteTimeDefault returns dsn with _timefmt=[SQLiteTimeLayout] added when
// dsn is a "file:" URI that does not set _timefmt; other DSNs (a plain
// file name, ":memory:") are returned as they are, since a query string
// added to them would become part of the file name.
func SQLiteTimeDefault(dsn string) string {
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

// SQLiteBusyTimeoutDefault returns dsn with _pragma=busy_timeout(5000)
// added as its first parameter when dsn is a "file:" URI that sets some
// PRAGMA but not busy_timeout. The driver gives a connection a one-minute
// busy timeout only when the DSN sets no PRAGMA at all; a DSN that sets
// others (journal_mode, foreign_keys…) would leave it at zero, and then a
// writer that finds the database locked fails with SQLITE_BUSY at once.
// The busy timeout goes first because the driver runs the PRAGMAs in
// order and later ones may already wait for a lock (driver documentation,
// "Setting PRAGMAs"). Other DSNs, and one that sets busy_timeout (to any
// value, zero included), are returned as they are.
func SQLiteBusyTimeoutDefault(dsn string) string {
	i := strings.IndexByte(dsn, '?')
	if !strings.HasPrefix(dsn, "file:") || i < 0 {
		return dsn
	}
	params, err := url.ParseQuery(dsn[i+1:])
	if err != nil || !params.Has("_pragma") {
		return dsn
	}
	for _, p := range params["_pragma"] {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), "busy_timeout") {
			return dsn
		}
	}
	return dsn[:i+1] + "_pragma=busy_timeout(5000)&" + dsn[i+1:]
}

// SQLiteDefaults returns dsn, a database file's path or a "file:" URI,
// with the settings of [SQLiteDSN] added where dsn does not set them
// itself, so that every way of naming the file opens it the same way:
//
//   - _pragma=busy_timeout(5000), placed before the other PRAGMAs (after
//     an encryption key PRAGMA, which must come first);
//   - _pragma=journal_mode(WAL) and _pragma=synchronous(NORMAL), except
//     for an in-memory database (":memory:" or mode=memory), which has no
//     write-ahead log;
//   - _txlock=immediate;
//   - _timefmt=[SQLiteTimeLayout].
//
// A PRAGMA or parameter dsn sets, to any value, is kept as it is and
// wins. A plain path becomes a "file:" URI of the same file, its "%",
// "?" and "#" escaped. The DSN "" (a private temporary database),
// ":memory:" and a URI whose query cannot be parsed are returned as they
// are. Without these settings the driver opens a file with a rollback
// journal (readers wait for writers), a one-minute busy timeout and
// deferred transactions, which the store's claim and its documented
// bounds do not assume.
func SQLiteDefaults(dsn string) string {
	if dsn == "" || dsn == ":memory:" {
		return dsn
	}
	base, query := dsn, ""
	if strings.HasPrefix(dsn, "file:") {
		base, query, _ = strings.Cut(dsn, "?")
	} else {
		base = "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(dsn)
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		return dsn
	}
	memory := strings.Contains(base, ":memory:") || params.Get("mode") == "memory"
	sets := func(name string) bool {
		for _, p := range params["_pragma"] {
			if pragmaName(p) == name {
				return true
			}
		}
		return false
	}
	// PRAGMAs in the order the driver runs them: the key first, then the
	// busy timeout, then the caller's others, then the added defaults.
	var pragmas []string
	rest := params["_pragma"]
	for len(rest) > 0 && strings.HasSuffix(pragmaName(rest[0]), "key") {
		pragmas, rest = append(pragmas, rest[0]), rest[1:]
	}
	if !sets("busy_timeout") {
		pragmas = append(pragmas, "busy_timeout(5000)")
	}
	pragmas = append(pragmas, rest...)
	if !memory && !sets("journal_mode") {
		pragmas = append(pragmas, "journal_mode(WAL)")
	}
	if !memory && !sets("synchronous") {
		pragmas = append(pragmas, "synchronous(NORMAL)")
	}
	if !params.Has("_txlock") {
		params.Set("_txlock", "immediate")
	}
	if !params.Has("_timefmt") {
		params.Set("_timefmt", SQLiteTimeLayout)
	}
	var b strings.Builder
	b.WriteString(base)
	sep := byte('?')
	for _, p := range pragmas {
		b.WriteByte(sep)
		sep = '&'
		b.WriteString("_pragma=")
		b.WriteString(url.QueryEscape(p))
	}
	delete(params, "_pragma")
	if enc := params.Encode(); enc != "" {
		b.WriteByte(sep)
		b.WriteString(enc)
	}
	return b.String()
}

// pragmaName returns the lower-case name of a PRAGMA as a _pragma
// parameter gives it: "busy_timeout(5000)" and "busy_timeout = 5000" are
// both "busy_timeout"; a schema prefix ("main.journal_mode") is dropped.
func pragmaName(p string) string {
	name := strings.ToLower(strings.TrimSpace(p))
	if i := strings.IndexAny(name, "(= "); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

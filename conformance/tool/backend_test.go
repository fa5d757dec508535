package tool_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/elastic/go-elasticsearch/v8"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Environment variables of the tool.
const (
	envDB    = "CLAIMSTORE_CONFORMANCE_DB"
	envDSN   = "CLAIMSTORE_CONFORMANCE_DSN"
	envChild = "CLAIMSTORE_CONFORMANCE_CHILD" // set in the child process that runs the suite
	// envStrategy selects the claim strategy of the SQL stores under test:
	// "default" (or unset), "portable" or "fastpath".
	envStrategy = "CLAIMSTORE_CONFORMANCE_STRATEGY"
)

const (
	sqlServerHowTo = "start one with: docker compose up -d sqlserver, then set CLAIMSTORE_SQLSERVER_DSN=sqlserver://sa:Claimstore-Passw0rd@127.0.0.1:1433?database=master" +
		" (or pass DSN=... to make conformance)"
	elasticHowTo = "start one with: docker compose up -d elasticsearch, then pass DSN=http://127.0.0.1:9200 to make conformance" +
		" (or set CLAIMSTORE_ELASTICSEARCH_URL); the in-process fake server is internal to adapters/esstore" +
		" and runs in its own tests: go test ./adapters/esstore/"
)

// backend is the database under test.
type backend struct {
	requested string // CLAIMSTORE_CONFORMANCE_DB
	dsn       string // resolved DSN ("" for memory)
	harness   conformance.Harness
	sql       dialects.Name     // SQL backends: the dialect sqlstore detected; "" otherwise
	opts      []sqlstore.Option // SQL backends: the options of every store (the strategy)
}

// strategyOptions returns the sqlstore options that CLAIMSTORE_CONFORMANCE_STRATEGY
// asks for: none for "" or "default", dao.StrategyPortable for "portable",
// dao.StrategyFastPath for "fastpath" (also "fast-path", "fast"). Another
// value fails t.
func strategyOptions(t *testing.T) []sqlstore.Option {
	t.Helper()
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(envStrategy))); v {
	case "", "default":
		return nil
	case "portable":
		return []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}
	case "fastpath", "fast-path", "fast":
		return []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyFastPath)}
	default:
		t.Fatalf("%s=%q: want default, portable or fastpath", envStrategy, v)
		return nil
	}
}

// openBackend opens the database CLAIMSTORE_CONFORMANCE_DB names and
// returns a harness whose stores live in fresh tables or indexes of it.
// A database that cannot be opened fails t with what to do about it: the
// user asked for this backend, so it is never skipped.
func openBackend(t *testing.T, name string) *backend {
	t.Helper()
	b := &backend{requested: name, dsn: os.Getenv(envDSN)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch name {
	case "memory":
		b.harness = conformance.Harness{
			NewStore: memStore[conformance.Job],
			Models: &conformance.ModelStores{
				Ticket: memStore[conformance.Ticket],
				PrefixedTicket: func(t *testing.T) dao.Store[conformance.Ticket] {
					s, err := memstore.New[conformance.Ticket](memstore.WithNamer(schema.NamingStrategy{TablePrefix: "claimstore_p_"}))
					if err != nil {
						t.Fatal(err)
					}
					return s
				},
				TablePrefix: "claimstore_p_",
				UUIDTicket:  memStore[conformance.UUIDTicket],
				V7Ticket:    memStore[conformance.V7Ticket],
				SoftJob:     memStore[conformance.SoftJob],
			},
			Leases: func(t *testing.T) coord.LeaseStore { return memstore.NewLeases() },
			// The holder runs in this process: no connection to kill.
			Skip: []string{conformance.CheckLockHolderKilled},
		}
		return b
	case "elasticsearch":
		if b.dsn == "" {
			b.dsn = os.Getenv("CLAIMSTORE_ELASTICSEARCH_URL")
		}
		if b.dsn == "" {
			t.Fatalf("elasticsearch needs a server URL: %s", elasticHowTo)
		}
		client, err := elasticsearch.NewClient(elasticsearch.Config{
			Addresses:    []string{b.dsn},
			DisableRetry: true,
			Transport:    &http.Transport{MaxIdleConnsPerHost: 64},
		})
		if err != nil {
			t.Fatalf("elasticsearch client for %s: %v", b.dsn, err)
		}
		res, err := client.Info(client.Info.WithContext(ctx))
		if err == nil {
			res.Body.Close()
			if res.IsError() {
				err = fmt.Errorf("GET / answered %s", res.Status())
			}
		}
		if err != nil {
			t.Fatalf("Elasticsearch at %s unreachable: %v; %s", b.dsn, err, elasticHowTo)
		}
		b.harness = conformance.Harness{
			NewStore: func(t *testing.T) dao.Store[conformance.Job] { return esStore[conformance.Job](t, client) },
			Models: &conformance.ModelStores{
				Ticket: func(t *testing.T) dao.Store[conformance.Ticket] { return esStore[conformance.Ticket](t, client) },
				PrefixedTicket: func(t *testing.T) dao.Store[conformance.Ticket] {
					prefix := fmt.Sprintf("claimstore-conf-%d-", time.Now().UnixNano())
					return esStore[conformance.Ticket](t, client, esstore.WithIndex(""), esstore.WithNamer(schema.NamingStrategy{TablePrefix: prefix}))
				},
				UUIDTicket: func(t *testing.T) dao.Store[conformance.UUIDTicket] {
					return esStore[conformance.UUIDTicket](t, client)
				},
				V7Ticket: func(t *testing.T) dao.Store[conformance.V7Ticket] { return esStore[conformance.V7Ticket](t, client) },
				SoftJob:  func(t *testing.T) dao.Store[conformance.SoftJob] { return esStore[conformance.SoftJob](t, client) },
			},
			Leases: func(t *testing.T) coord.LeaseStore { return esLeases(t, client) },
			// A lease has no connection to kill; it expires instead.
			Skip: []string{conformance.CheckLockHolderKilled},
		}
		return b
	case "sqlite":
		// A path or a "file:" URI is opened as given: sqlstore.Open
		// gives both the settings of SQLiteDSN that they do not set.
		if b.dsn == "" {
			b.dsn = sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "conformance.db"))
		}
	case "postgres":
		if b.dsn == "" {
			b.dsn = testdb.PostgresDSN()
		}
	case "cockroach", "cockroachdb", "crdb", "yugabyte", "yugabytedb", "ysql":
		if b.dsn == "" {
			b.dsn = distributedDSN(name)
		}
	case "mysql", "mariadb":
		if b.dsn == "" {
			b.dsn = testdb.MySQLDSN()
		}
	case "sqlserver":
		if b.dsn == "" {
			b.dsn = os.Getenv("CLAIMSTORE_SQLSERVER_DSN")
		}
		if b.dsn == "" {
			t.Fatalf("sqlserver needs a DSN: %s", sqlServerHowTo)
		}
	default:
		t.Fatalf("%s=%q: want one of postgres, mysql, mariadb, sqlite, sqlserver, cockroach, yugabyte, elasticsearch, memory", envDB, name)
	}
	db, err := sqlstore.Open(ctx, name, b.dsn)
	if err != nil {
		how := "check DSN"
		switch name {
		case "sqlserver":
			how = sqlServerHowTo
		case "cockroach", "cockroachdb", "crdb", "yugabyte", "yugabytedb", "ysql":
			how = distributedHowTo
		}
		t.Fatalf("open %s: %v; %s", name, err, how)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	b.opts = strategyOptions(t)
	probe, err := sqlstore.New[conformance.Job](db, b.opts...)
	if err != nil {
		t.Fatalf("sqlstore.New on %s (%s=%q): %v", name, envStrategy, os.Getenv(envStrategy), err)
	}
	if !probe.As(&b.sql) {
		t.Fatal("a SQL store gives its dialect to As")
	}
	// A distributed SQL database is asked for by name: a DSN reaching
	// another server (PostgreSQL on the compose port of another service)
	// would test the wrong thing.
	if want, _ := dialects.Parse(name); (want == dialects.CockroachDB || want == dialects.YugabyteDB) && b.sql != want {
		t.Fatalf("%s=%s, but the server at %s is %s (detected from SELECT version())", envDB, name, b.dsn, b.sql)
	}
	b.harness = conformance.Harness{
		NewStore: func(t *testing.T) dao.Store[conformance.Job] {
			return sqlStore(t, db, testdb.Table(t, db, "claimstore_conf"), b.opts...)
		},
		HoldLock: func(t *testing.T, s dao.Store[conformance.Job], id int64) func() {
			return holdLock(t, db, s.(*dao.Table[conformance.Job]), id)
		},
		Models: sqlstoretest.Models(db, b.opts...),
		Leases: func(t *testing.T) coord.LeaseStore { return sqlstoretest.Leases(t, db) },
	}
	switch b.sql {
	case dialects.Postgres, dialects.YugabyteDB, dialects.MySQL, dialects.MariaDB:
		// YugabyteDB has PostgreSQL's pg_terminate_backend.
		b.harness.KillLockHolder = func(t *testing.T, tx any) { sqlstoretest.KillSession(t, db, tx) }
	default:
		// SQLite's holder runs in this process; no SQL Server session
		// killer is written yet; CockroachDB has no pg_terminate_backend
		// (its CANCEL SESSION is not written here).
		b.harness.Skip = append(b.harness.Skip, conformance.CheckLockHolderKilled)
	}
	return b
}

// Defaults of the distributed SQL databases: the ports and users of their
// docker-compose.yml services.
const (
	cockroachDSN     = "postgres://root@127.0.0.1:26257/defaultdb?sslmode=disable"
	yugabyteDSN      = "postgres://yugabyte@127.0.0.1:5433/yugabyte?sslmode=disable"
	distributedHowTo = "start it with: docker compose up -d --wait cockroachdb (or yugabytedb), which enables READ COMMITTED; " +
		"these two are verified by users with compose, not in this repository's CI (docs/distributed-sql.md)"
)

// distributedDSN returns the DSN of the distributed SQL database name
// ("cockroach" or "yugabyte", or an alias dialects.Parse accepts) when
// CLAIMSTORE_CONFORMANCE_DSN is unset: CLAIMSTORE_COCKROACH_DSN or
// CLAIMSTORE_YUGABYTE_DSN when set, else the compose service's address.
// Another name returns "".
func distributedDSN(name string) string {
	n, err := dialects.Parse(name)
	if err != nil {
		return ""
	}
	switch n {
	case dialects.CockroachDB:
		return cmp.Or(os.Getenv("CLAIMSTORE_COCKROACH_DSN"), cockroachDSN)
	case dialects.YugabyteDB:
		return cmp.Or(os.Getenv("CLAIMSTORE_YUGABYTE_DSN"), yugabyteDSN)
	}
	return ""
}

// TestDistributedDSN: make conformance DB=cockroach and DB=yugabyte reach
// the compose services unless told otherwise.
func TestDistributedDSN(t *testing.T) {
	t.Setenv("CLAIMSTORE_COCKROACH_DSN", "")
	t.Setenv("CLAIMSTORE_YUGABYTE_DSN", "")
	for name, want := range map[string]string{
		"cockroach": cockroachDSN, "cockroachdb": cockroachDSN, "crdb": cockroachDSN,
		"yugabyte": yugabyteDSN, "yugabytedb": yugabyteDSN, "postgres": "", "nosuch": "",
	} {
		if got := distributedDSN(name); got != want {
			t.Errorf("distributedDSN(%q) = %q, want %q", name, got, want)
		}
	}
	t.Setenv("CLAIMSTORE_COCKROACH_DSN", "postgres://u@h:1/db")
	if got := distributedDSN("cockroach"); got != "postgres://u@h:1/db" {
		t.Errorf("CLAIMSTORE_COCKROACH_DSN ignored: %q", got)
	}
}

// sqlStore returns a store over the fresh table of db, migrated, built
// with opts.
func sqlStore(t testing.TB, db *gorm.DB, table string, opts ...sqlstore.Option) *dao.Table[conformance.Job] {
	t.Helper()
	s, err := sqlstore.New[conformance.Job](db, append(opts[:len(opts):len(opts)], sqlstore.WithTable(table))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate %s: %v", table, err)
	}
	return s
}

// memStore returns a new, empty memory store of T.
func memStore[T any](t *testing.T) dao.Store[T] {
	s, err := memstore.New[T]()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// esStore returns a store of T over a fresh index, dropped when t ends.
// Options in opts apply after the fresh index name (WithIndex("") and a
// WithNamer name the index after the model instead).
func esStore[T any](t *testing.T, client *elasticsearch.Client, opts ...esstore.Option) *dao.Table[T] {
	t.Helper()
	index := fmt.Sprintf("claimstore-conf-%d", time.Now().UnixNano())
	opts = append([]esstore.Option{esstore.WithIndex(index), esstore.WithRefresh(esstore.RefreshTrue)}, opts...)
	s, err := esstore.New[T](client, opts...)
	if err != nil {
		t.Fatalf("esstore.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate index %s: %v", index, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := esstore.Drop(ctx, s); err != nil {
			t.Errorf("drop index %s: %v", index, err)
		}
	})
	return s
}

// holdLock takes, on a connection of db the claim does not use, the lock a
// competing writer would hold, until release (sqlstoretest.HoldLock): on
// SQLite the database write lock (BEGIN IMMEDIATE), on PostgreSQL, MySQL
// and MariaDB a row lock on row id (SELECT … FOR UPDATE in an open
// transaction), on SQL Server an update lock on it (SELECT … WITH
// (UPDLOCK, ROWLOCK) in an open transaction). The suite asks for it only
// for a fast-path store or one whose lost race is ErrBusy.
func holdLock(t *testing.T, db *gorm.DB, s *dao.Table[conformance.Job], id int64) (release func()) {
	t.Helper()
	var table dialects.Table
	if !s.As(&table) {
		t.Fatal("a SQL store gives its table to As")
	}
	return testdb.HoldLock(t, db, table.Name, id)
}

// TestStrategyOptions: CLAIMSTORE_CONFORMANCE_STRATEGY selects the claim
// strategy of the stores under test.
func TestStrategyOptions(t *testing.T) {
	db, err := sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "strategy.db")))
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	for value, want := range map[string]dao.Strategy{
		"": dao.StrategyFastPath, "default": dao.StrategyFastPath, "portable": dao.StrategyPortable,
		"fastpath": dao.StrategyFastPath, " FastPath ": dao.StrategyFastPath, "fast-path": dao.StrategyFastPath,
	} {
		t.Setenv(envStrategy, value)
		s := sqlStore(t, db, testdb.Table(t, db, "claimstore_strategy"), strategyOptions(t)...)
		if got := s.Capabilities().Strategy; got != want {
			t.Errorf("%s=%q: SQLite store claims with %v, want %v", envStrategy, value, got, want)
		}
	}
}

// esLeases returns a lease store over a fresh index of client, deleted
// when t ends.
func esLeases(t *testing.T, client *elasticsearch.Client) *esstore.Leases {
	t.Helper()
	index := fmt.Sprintf("claimstore-leases-%d", time.Now().UnixNano())
	l, err := esstore.NewLeases(client, index)
	if err != nil {
		t.Fatalf("esstore.NewLeases: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Migrate(ctx); err != nil {
		t.Fatalf("migrate index %s: %v", index, err)
	}
	t.Cleanup(func() {
		res, err := client.Indices.Delete([]string{index})
		if err == nil {
			res.Body.Close()
		}
		if err != nil || res.IsError() {
			t.Errorf("delete index %s: %v %v", index, err, res)
		}
	})
	return l
}

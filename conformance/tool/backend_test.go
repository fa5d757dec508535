package tool_test

import (
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
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testdb"
	"github.com/elastic/go-elasticsearch/v8"
	"gorm.io/gorm"
)

// Environment variables of the tool.
const (
	envDB    = "CLAIMSTORE_CONFORMANCE_DB"
	envDSN   = "CLAIMSTORE_CONFORMANCE_DSN"
	envChild = "CLAIMSTORE_CONFORMANCE_CHILD" // set in the child process that runs the suite
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
	sql       dialects.Name // SQL backends: the dialect sqlstore detected; "" otherwise
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
				Ticket:         memStore[conformance.Ticket],
				PrefixedTicket: memStore[conformance.Ticket],
				UUIDTicket:     memStore[conformance.UUIDTicket],
				V7Ticket:       memStore[conformance.V7Ticket],
				SoftJob:        memStore[conformance.SoftJob],
			},
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
				Ticket:         func(t *testing.T) dao.Store[conformance.Ticket] { return esStore[conformance.Ticket](t, client) },
				PrefixedTicket: func(t *testing.T) dao.Store[conformance.Ticket] { return esStore[conformance.Ticket](t, client) },
				UUIDTicket: func(t *testing.T) dao.Store[conformance.UUIDTicket] {
					return esStore[conformance.UUIDTicket](t, client)
				},
				V7Ticket: func(t *testing.T) dao.Store[conformance.V7Ticket] { return esStore[conformance.V7Ticket](t, client) },
				SoftJob:  func(t *testing.T) dao.Store[conformance.SoftJob] { return esStore[conformance.SoftJob](t, client) },
			},
		}
		return b
	case "sqlite":
		switch {
		case b.dsn == "":
			b.dsn = sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "conformance.db"))
		case !strings.Contains(b.dsn, "?") && !strings.HasPrefix(b.dsn, "file:"):
			b.dsn = sqlstore.SQLiteDSN(b.dsn)
		}
	case "postgres":
		if b.dsn == "" {
			b.dsn = testdb.PostgresDSN()
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
		t.Fatalf("%s=%q: want one of postgres, mysql, mariadb, sqlite, sqlserver, elasticsearch, memory", envDB, name)
	}
	db, err := sqlstore.Open(ctx, name, b.dsn)
	if err != nil {
		how := "check DSN"
		if name == "sqlserver" {
			how = sqlServerHowTo
		}
		t.Fatalf("open %s: %v; %s", name, err, how)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	probe, err := sqlstore.New[conformance.Job](db)
	if err != nil {
		t.Fatalf("sqlstore.New on %s: %v", name, err)
	}
	if !probe.As(&b.sql) {
		t.Fatal("a SQL store gives its dialect to As")
	}
	b.harness = conformance.Harness{
		NewStore: func(t *testing.T) dao.Store[conformance.Job] {
			return sqlStore(t, db, testdb.Table(t, db, "claimstore_conf"))
		},
		HoldLock: func(t *testing.T, s dao.Store[conformance.Job], id int64) func() {
			return holdLock(t, db, s.(*dao.Table[conformance.Job]), id)
		},
		Models: sqlstoretest.Models(db),
	}
	return b
}

// sqlStore returns a store over the fresh table of db, migrated.
func sqlStore(t testing.TB, db *gorm.DB, table string) *dao.Table[conformance.Job] {
	t.Helper()
	s, err := sqlstore.New[conformance.Job](db, sqlstore.WithTable(table))
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
func esStore[T any](t *testing.T, client *elasticsearch.Client) *dao.Table[T] {
	t.Helper()
	index := fmt.Sprintf("claimstore-conf-%d", time.Now().UnixNano())
	s, err := esstore.New[T](client, esstore.WithIndex(index), esstore.WithRefresh(esstore.RefreshTrue))
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
// competing writer would hold, until release: on SQLite the database write
// lock (BEGIN IMMEDIATE), on PostgreSQL, MySQL and MariaDB a row lock on
// row id (SELECT … FOR UPDATE in an open transaction). The suite asks for
// it only for a fast-path store or one whose lost race is ErrBusy, which
// a SQL Server store never is.
func holdLock(t *testing.T, db *gorm.DB, s *dao.Table[conformance.Job], id int64) (release func()) {
	t.Helper()
	var table dialects.Table
	if !s.As(&table) {
		t.Fatal("a SQL store gives its table to As")
	}
	if b := s.Capabilities().Backend; b == string(dialects.SQLServer) {
		t.Skip("no held-lock test for SQL Server: its claim is the portable default, whose lost race CandidateStage forces")
	}
	return testdb.HoldLock(t, db, table.Name, id)
}

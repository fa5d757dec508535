package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// PostgresDatabase creates a fresh database named prefix_<random hex> on
// the PostgreSQL server of [PostgresDSN] (CREATE DATABASE, PostgreSQL
// manual "SQL Commands: CREATE DATABASE") and returns a handle on it whose
// pool holds at most maxConns connections (<= 0: 2). When t ends the
// handle is closed and the database dropped (DROP DATABASE … WITH (FORCE),
// PostgreSQL 13 or later). The server must be reachable with a URL DSN
// (postgres://…); otherwise the test is skipped, or fails when
// CLAIMSTORE_REQUIRE names postgres. The name is made here from random
// bytes, never from input, and quoted as an identifier.
func PostgresDatabase(t testing.TB, prefix string, maxConns int) *gorm.DB {
	t.Helper()
	if maxConns <= 0 {
		maxConns = 2
	}
	u, err := url.Parse(PostgresDSN())
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		Unreachable(t, "postgres", fmt.Errorf("%s is not a postgres:// URL, which a test needs to name another database", EnvPostgres))
	}
	admin := Postgres(t)
	if sqlDB, err := admin.DB(); err == nil {
		sqlDB.SetMaxOpenConns(1)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + "_" + hex.EncodeToString(b[:])
	quoted := `"` + name + `"` // prefix is a constant of the test, the rest hex digits
	if err := admin.Exec("CREATE DATABASE " + quoted).Error; err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	// Registered after admin's close, so it runs before it; and before
	// the new handle's close, so it runs after that one.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.WithContext(ctx).Exec("DROP DATABASE IF EXISTS " + quoted + " WITH (FORCE)").Error; err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	db, err := gorm.Open(postgres.Open(u.String()), Config())
	if err != nil {
		t.Fatalf("open database %s: %v", name, err)
	}
	CloseAtCleanup(t, db)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	return db
}

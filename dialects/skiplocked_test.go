package dialects_test

import (
	"slices"
	"testing"

	"github.com/claimstore/claimstore/dialects"
)

// TestSkipLocked checks the server versions whose locking read runs SKIP
// LOCKED: MySQL 8.0.1 and later, MariaDB 10.6 and later.
func TestSkipLocked(t *testing.T) {
	for _, c := range []struct {
		n       dialects.Name
		version string
		want    bool
	}{
		{dialects.MySQL, "8.0.36", true},
		{dialects.MySQL, "8.0.1", true},
		{dialects.MySQL, "8.0.0-dmr", false},
		{dialects.MySQL, "5.7.44-log", false},
		{dialects.MySQL, "8.4", true},
		{dialects.MySQL, "9.1.0", true},
		{dialects.MariaDB, "10.11.19-MariaDB-0+deb12u1", true},
		{dialects.MariaDB, "10.6.0-MariaDB", true},
		{dialects.MariaDB, "10.5.23-MariaDB", false},
		{dialects.MariaDB, "11.4.2-MariaDB-ubu2404", true},
		{dialects.MariaDB, "", false},
		{dialects.MariaDB, "MariaDB", false},
		{dialects.Postgres, "", true},
		{dialects.SQLite, "", true},
	} {
		if got := dialects.SkipLocked(c.n, c.version); got != c.want {
			t.Errorf("SkipLocked(%s, %q) = %v, want %v", c.n, c.version, got, c.want)
		}
	}
}

// TestLibraryTableFastPath checks the library tables' allow-list: the
// default one plus MySQL and MariaDB, and a fresh copy each call.
func TestLibraryTableFastPath(t *testing.T) {
	got := dialects.LibraryTableFastPath()
	for _, n := range []dialects.Name{dialects.Postgres, dialects.SQLite, dialects.MySQL, dialects.MariaDB} {
		if !dialects.FastPathAllowed(n, got) {
			t.Errorf("%s is not allowed on a library table", n)
		}
	}
	for _, n := range []dialects.Name{dialects.SQLServer, dialects.CockroachDB, dialects.YugabyteDB} {
		if slices.Contains(got, n) {
			t.Errorf("%s is on the library tables' allow-list", n)
		}
	}
	got[0] = "changed"
	if dialects.LibraryTableFastPath()[0] == "changed" {
		t.Error("LibraryTableFastPath returned a shared slice")
	}
}

package dialects

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// isolationGoldenText states a dialect's isolation requirement, or that it
// has none.
func isolationGoldenText(n Name) string {
	iso, ok := RequiredIsolation(n)
	if !ok {
		return "-- none: the claim sets what it needs itself\n"
	}
	return fmt.Sprintf("level: %s\nsetting: %s\nenable: %s\nprobe: %s\notherwise: %s\nsource: %s\n",
		iso.Level, iso.Setting, iso.Enable, iso.Probe, iso.Otherwise, iso.Source)
}

// TestGoldenIsolation compares each dialect's isolation requirement with
// testdata/<dialect>/isolation.golden; with -update it writes the files.
func TestGoldenIsolation(t *testing.T) {
	for _, n := range All() {
		path := filepath.Join("testdata", string(n), "isolation.golden")
		t.Run(string(n), func(t *testing.T) {
			got := isolationGoldenText(n)
			checkGolden(t, path, got)
		})
	}
}

// TestFromVersion reads the dialect from version strings in the formats
// the servers report for SELECT version().
func TestFromVersion(t *testing.T) {
	cases := []struct {
		family  Name
		version string
		want    Name
	}{
		{Postgres, "PostgreSQL 16.4 (Debian 16.4-1.pgdg120+1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit", Postgres},
		{Postgres, "PostgreSQL 15.8 on aarch64-unknown-linux-gnu, compiled by gcc, 64-bit", Postgres},
		{Postgres, "CockroachDB CCL v23.2.4 (x86_64-pc-linux-gnu, built 2024/04/08 18:11:02, go1.21.8 X:nocoverageredesign)", CockroachDB},
		{Postgres, "CockroachDB CCL v24.1.0 (x86_64-pc-linux-gnu, built 2024/05/15 21:28:29, go1.22.2 X:nocoverageredesign)", CockroachDB},
		{Postgres, "CockroachDB OSS v22.2.19 (x86_64-pc-linux-gnu, built 2024/02/26 00:00:00, go1.19.13)", CockroachDB},
		{Postgres, "PostgreSQL 11.2-YB-2.20.2.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6, 64-bit", YugabyteDB},
		{Postgres, "PostgreSQL 15.2-YB-2.25.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit", YugabyteDB},
		{Postgres, "PostgreSQL 11.2-YB-2024.1.0.0-b0 on x86_64-pc-linux-gnu", YugabyteDB},
		// "-YB-" elsewhere than in the version number is not YugabyteDB.
		{Postgres, "PostgreSQL 16.4 on x86_64-pc-linux-gnu, compiled by gcc-YB-fork, 64-bit", Postgres},
		{Postgres, "", Postgres},
		{MySQL, "8.4.2", MySQL},
		{MySQL, "11.4.2-MariaDB-ubu2404", MariaDB},
		{MySQL, "10.11.6-MariaDB-0+deb12u1", MariaDB},
		// A family without version-dependent dialects is kept.
		{SQLite, "3.46.0", SQLite},
	}
	for _, c := range cases {
		if got := FromVersion(c.family, c.version); got != c.want {
			t.Errorf("FromVersion(%s, %q) = %s, want %s", c.family, c.version, got, c.want)
		}
	}
}

// TestFamily: the distributed SQL dialects run on the PostgreSQL driver.
func TestFamily(t *testing.T) {
	for n, want := range map[Name]Name{Postgres: Postgres, CockroachDB: Postgres, YugabyteDB: Postgres,
		MySQL: MySQL, MariaDB: MySQL, SQLite: SQLite, SQLServer: SQLServer} {
		if got := Family(n); got != want {
			t.Errorf("Family(%s) = %s, want %s", n, got, want)
		}
	}
	for in, want := range map[string]Name{"cockroach": CockroachDB, "CockroachDB": CockroachDB, "crdb": CockroachDB,
		"yugabyte": YugabyteDB, "YugabyteDB": YugabyteDB, "ysql": YugabyteDB} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// TestCheckIsolation: the decision a store takes at New from the level a
// READ COMMITTED transaction really runs at.
func TestCheckIsolation(t *testing.T) {
	cases := []struct {
		n         Name
		effective string
		refused   bool
		names     string // the setting the refusal must name
	}{
		{CockroachDB, "read committed", false, ""},
		{CockroachDB, " READ COMMITTED\n", false, ""},
		{CockroachDB, "serializable", true, "sql.txn.read_committed_isolation.enabled"},
		{YugabyteDB, "read committed", false, ""},
		{YugabyteDB, "repeatable read", true, "yb_enable_read_committed_isolation"},
		{YugabyteDB, "serializable", true, "yb_enable_read_committed_isolation"},
		// No requirement: nothing to refuse.
		{Postgres, "serializable", false, ""},
		{MySQL, "", false, ""},
	}
	for _, c := range cases {
		err := CheckIsolation(c.n, c.effective)
		if c.refused != (err != nil) {
			t.Errorf("CheckIsolation(%s, %q) = %v, refused want %v", c.n, c.effective, err, c.refused)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("CheckIsolation(%s, %q) = %v, want ErrInvalidArgument", c.n, c.effective, err)
		}
		if !strings.Contains(err.Error(), c.names) {
			t.Errorf("CheckIsolation(%s, %q) = %v, does not name %s", c.n, c.effective, err, c.names)
		}
	}
	for _, n := range All() {
		_, ok := RequiredIsolation(n)
		if want := n == CockroachDB || n == YugabyteDB; ok != want {
			t.Errorf("RequiredIsolation(%s) present = %v, want %v", n, ok, want)
		}
	}
}

// TestDistributedClaims pins what the distributed SQL dialects' claims
// share with PostgreSQL's and where YugabyteDB's differs.
func TestDistributedClaims(t *testing.T) {
	req := dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "running"}, OrderBy: []dao.Order{dao.Asc("id")}, Limit: 3}
	render := func(n Name) string {
		st, err := mustRenderer(t, n).Claim(gJobs, req)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		return st.SQL
	}
	pg, crdb, yb := render(Postgres), render(CockroachDB), render(YugabyteDB)
	if crdb != pg {
		t.Errorf("CockroachDB claim differs from PostgreSQL's:\n%s\n%s", crdb, pg)
	}
	if strings.Contains(yb, "MATERIALIZED") || strings.Replace(pg, "AS MATERIALIZED (", "AS (", 1) != yb {
		t.Errorf("YugabyteDB claim is not PostgreSQL's without MATERIALIZED:\n%s", yb)
	}
	for _, n := range []Name{CockroachDB, YugabyteDB} {
		if !HasFastPath(n) || FastPathAllowed(n, DefaultFastPath()) {
			t.Errorf("%s: HasFastPath %v, on the default allow-list %v; want an opt-in fast path", n, HasFastPath(n), FastPathAllowed(n, DefaultFastPath()))
		}
	}
}

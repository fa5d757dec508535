package dialects

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// lockGoldenKeys are the representative try-lock keys: short, non-ASCII,
// quotes of every dialect, exactly at and just past the 64-byte name of
// MySQL, the longest key, and refused keys.
var lockGoldenKeys = []string{
	"cycle", "relay:orders", "zoné/ü", `it's "odd" ` + "`]",
	strings.Repeat("a", 64-len("claimstore:")), strings.Repeat("a", 64-len("claimstore:")+1),
	strings.Repeat("k", 255), "", "nul\x00", "bad\xff", strings.Repeat("k", 256),
}

// lockGoldenUnique are the representative unique indexes.
var lockGoldenUnique = []struct {
	name  string
	table Table
	u     UniqueWhere
}{
	{"queued", Table{Name: "jobs"}, UniqueWhere{Index: "uq_jobs_dedup_key_queued", Key: "dedup_key", Status: "status", Value: "queued", Column: "dedup_key_queued", ColumnType: "varchar(191)"}},
	{"odd-identifiers", Table{Name: "app.odd\"`]t"}, UniqueWhere{Index: "i\"`]x", Key: "k\"`]", Status: "s\"`]", Value: "in-queue:1", Column: "g\"`]", ColumnType: "bigint unsigned"}},
	{"refused/quote-in-value", Table{Name: "jobs"}, UniqueWhere{Index: "i", Key: "k", Status: "s", Value: "x' OR '1'='1", Column: "g", ColumnType: "int"}},
	{"refused/empty-value", Table{Name: "jobs"}, UniqueWhere{Index: "i", Key: "k", Status: "s", Value: "", Column: "g", ColumnType: "int"}},
	{"refused/type", Table{Name: "jobs"}, UniqueWhere{Index: "i", Key: "k", Status: "s", Value: "queued", Column: "g", ColumnType: "int); DROP TABLE jobs; --"}},
	{"refused/no-index-name", Table{Name: "jobs"}, UniqueWhere{Key: "k", Status: "s", Value: "queued", Column: "g", ColumnType: "int"}},
}

func lockGoldenText(r Renderer, kind string) string {
	var b strings.Builder
	write := func(name string, sts []Statement, err error) {
		fmt.Fprintf(&b, "-- %s\n", name)
		if err != nil {
			fmt.Fprintf(&b, "-- error: %v\n\n", err)
			return
		}
		for _, st := range sts {
			fmt.Fprintf(&b, "%s\n-- args: %s\n", st.SQL, formatArgs(st.Args))
		}
		b.WriteString("\n")
	}
	one := func(st Statement, err error) []Statement { return []Statement{st} }
	switch kind {
	case "try-lock", "release-lock":
		for _, k := range lockGoldenKeys {
			name := fmt.Sprintf("%q", k)
			if len(name) > 40 {
				name = fmt.Sprintf("%d bytes", len(k))
			}
			var st Statement
			var err error
			if kind == "try-lock" {
				st, err = r.TryLock(k)
			} else {
				st, err = r.ReleaseLock(k)
			}
			write(name, one(st, err), err)
		}
	case "lock-table":
		st, err := r.LockTable()
		write("lock-table", one(st, err), err)
	case "unique-where":
		for _, c := range lockGoldenUnique {
			sts, err := r.UniqueWhere(c.table, c.u)
			write(c.name, sts, err)
		}
	}
	return b.String()
}

// TestGoldenLock compares the try-lock and unique-index statements of
// every dialect with testdata/<dialect>/<kind>.golden (rewritten with
// -update, as TestGolden's).
func TestGoldenLock(t *testing.T) {
	for _, kind := range []string{"try-lock", "release-lock", "lock-table", "unique-where"} {
		for _, n := range All() {
			path := filepath.Join("testdata", string(n), kind+".golden")
			t.Run(string(n)+"/"+kind, func(t *testing.T) {
				got := lockGoldenText(mustRenderer(t, n), kind)
				checkGolden(t, path, got)
			})
		}
	}
}

// TestLockDataEveryDialect checks that every dialect but CockroachDB and
// YugabyteDB has a try-lock, that every dialect has a unique index, and
// that exactly MySQL and MariaDB hold session locks.
func TestLockDataEveryDialect(t *testing.T) {
	for _, n := range All() {
		r := mustRenderer(t, n)
		// CockroachDB and YugabyteDB have no try-lock: it is unsupported.
		_, err := r.TryLock("k")
		if noLock := n == CockroachDB || n == YugabyteDB; noLock != errors.Is(err, errors.ErrUnsupported) || (!noLock && err != nil) {
			t.Errorf("%s: TryLock: %v", n, err)
		}
		if _, err := r.UniqueWhere(Table{Name: "t"}, UniqueWhere{Index: "i", Key: "k", Status: "s", Value: "v", Column: "c", ColumnType: "int"}); err != nil {
			t.Errorf("%s: UniqueWhere: %v", n, err)
		}
		if want := n == MySQL || n == MariaDB; r.SessionLock() != want {
			t.Errorf("%s: SessionLock() = %v, want %v", n, r.SessionLock(), want)
		}
	}
	if _, err := (Renderer{}).TryLock("k"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("zero Renderer: %v, want ErrInvalidArgument", err)
	}
}

// TestLockKeyMapping pins the mapping of keys to each backend's key space:
// it must never change, or programs of different versions would not
// exclude each other.
func TestLockKeyMapping(t *testing.T) {
	if LockClassID != 1668050291 {
		t.Errorf("LockClassID = %d", LockClassID)
	}
	// FNV-1a 32 of "" is the offset basis 0x811c9dc5; of "a" 0xe40c292c.
	for key, want := range map[string]uint32{"": 0x811c9dc5, "a": 0xe40c292c} {
		if got := uint32(LockHash(key)); got != want {
			t.Errorf("LockHash(%q) = %#x, want %#x", key, got, want)
		}
	}
	short := strings.Repeat("a", 53)
	if got := LockName(short, 64); got != "claimstore:"+short || len(got) != 64 {
		t.Errorf("LockName(53 bytes) = %q", got)
	}
	long := LockName(short+"b", 64)
	if !strings.HasPrefix(long, "claimstore#") || len(long) != 54 || long == LockName(short+"c", 64) {
		t.Errorf("LockName(54 bytes) = %q: want the hashed form, one per key", long)
	}
}

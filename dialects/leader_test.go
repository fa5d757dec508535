package dialects

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// leaseGoldenCases are the lease statements of every dialect, with
// representative and refused arguments.
var leaseGoldenCases = []struct {
	name   string
	render func(Renderer) (Statement, error)
}{
	{"create", func(r Renderer) (Statement, error) { return r.LeaseCreateTable(DefaultLeaseTable) }},
	{"create/qualified-odd-table", func(r Renderer) (Statement, error) { return r.LeaseCreateTable("app.le\"`]ases") }},
	{"acquire", func(r Renderer) (Statement, error) {
		return r.LeaseAcquire(DefaultLeaseTable, "cron", "host-1", 15*time.Second)
	}},
	{"release", func(r Renderer) (Statement, error) { return r.LeaseRelease(DefaultLeaseTable, "cron", "host-1", 7) }},
	{"get", func(r Renderer) (Statement, error) { return r.LeaseGet(DefaultLeaseTable, "cron") }},
	{"list", func(r Renderer) (Statement, error) { return r.LeaseList(DefaultLeaseTable) }},
	{"refused/empty-table", func(r Renderer) (Statement, error) { return r.LeaseGet("", "cron") }},
	{"refused/empty-name", func(r Renderer) (Statement, error) { return r.LeaseAcquire(DefaultLeaseTable, "", "h", time.Second) }},
	{"refused/empty-holder", func(r Renderer) (Statement, error) { return r.LeaseRelease(DefaultLeaseTable, "cron", "", 1) }},
	{"refused/ttl-sub-millisecond", func(r Renderer) (Statement, error) {
		return r.LeaseAcquire(DefaultLeaseTable, "cron", "h", 1500*time.Microsecond)
	}},
	{"refused/ttl-zero", func(r Renderer) (Statement, error) { return r.LeaseAcquire(DefaultLeaseTable, "cron", "h", 0) }},
	{"refused/name-too-long", func(r Renderer) (Statement, error) { return r.LeaseGet(DefaultLeaseTable, strings.Repeat("n", 192)) }},
}

// TestGoldenLeader compares the lease statements of every dialect with
// testdata/<dialect>/leader.golden; -update rewrites the files.
func TestGoldenLeader(t *testing.T) {
	for _, n := range All() {
		path := filepath.Join("testdata", string(n), "leader.golden")
		t.Run(string(n), func(t *testing.T) {
			r := mustRenderer(t, n)
			var b strings.Builder
			fmt.Fprintf(&b, "-- read back after acquire: %v\n\n", r.LeaseReadBack())
			for _, c := range leaseGoldenCases {
				fmt.Fprintf(&b, "-- %s\n", c.name)
				st, err := c.render(r)
				if err != nil {
					if !errors.Is(err, dao.ErrInvalidArgument) {
						t.Errorf("%s: error %v does not wrap ErrInvalidArgument", c.name, err)
					}
					fmt.Fprintf(&b, "-- error: %v\n\n", err)
					continue
				}
				fmt.Fprintf(&b, "%s\n-- args: %s\n\n", st.SQL, formatArgs(st.Args))
			}
			got := b.String()
			checkGolden(t, path, got)
		})
	}
}

// TestLeaseZeroRenderer checks that the zero Renderer renders no lease
// statement.
func TestLeaseZeroRenderer(t *testing.T) {
	var r Renderer
	if _, err := r.LeaseGet(DefaultLeaseTable, "x"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("zero Renderer LeaseGet: err = %v, want ErrInvalidArgument", err)
	}
	if r.LeaseReadBack() {
		t.Error("zero Renderer LeaseReadBack = true")
	}
	for _, n := range All() {
		if leaseTable[n] == nil {
			t.Errorf("dialect %s has no lease statements", n)
		}
	}
}

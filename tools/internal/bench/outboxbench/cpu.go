package outboxbench

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/tools/internal/bench"
)

// withApplicationName returns the PostgreSQL DSN dsn (a URL or key=value
// pairs; empty means the local test server) with application_name set, so
// that the run's backends can be found in pg_stat_activity.
func withApplicationName(dsn, name string) string {
	if dsn == "" {
		dsn, _, _ = bench.DefaultDSN("postgres")
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name
}

// procCPU returns the user plus system CPU time of process pid ("self" for
// this one) from /proc/<pid>/stat, in which times are in units of 1/100 s
// (USER_HZ); false where /proc is not available.
func procCPU(pid string) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, true
}

// backendCPU returns the CPU time used so far by the PostgreSQL backends
// serving this run's connections (application_name app) on db, read from
// /proc: it works when the server runs on this machine and this process
// may read its /proc entries; false otherwise, and on other databases.
// Background processes (WAL writer, checkpointer, autovacuum) are not
// included.
func backendCPU(ctx context.Context, db *gorm.DB, app string) (time.Duration, bool) {
	if db == nil || db.Dialector.Name() != "postgres" {
		return 0, false
	}
	var pids []int
	if err := db.WithContext(ctx).Raw("SELECT pid FROM pg_stat_activity WHERE application_name = ?", app).Scan(&pids).Error; err != nil || len(pids) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, pid := range pids {
		d, ok := procCPU(strconv.Itoa(pid))
		if !ok {
			return 0, false
		}
		total += d
	}
	return total, true
}

// cpuMeter reads the CPU time of this process and of the run's PostgreSQL
// backends at the start and the end of a measurement.
type cpuMeter struct {
	db                 *gorm.DB
	app                string
	client0, server0   time.Duration
	clientOK, serverOK bool
}

// start takes the first reading.
func (m *cpuMeter) start(ctx context.Context) {
	m.client0, m.clientOK = procCPU("self")
	m.server0, m.serverOK = backendCPU(ctx, m.db, m.app)
}

// stop takes the second reading and sets r's CPU figures when both
// readings of both sides succeeded.
func (m *cpuMeter) stop(ctx context.Context, r *Result) {
	c1, ok1 := procCPU("self")
	s1, ok2 := backendCPU(ctx, m.db, m.app)
	if r.CPUKnown = m.clientOK && ok1 && m.serverOK && ok2; r.CPUKnown {
		r.ClientCPU, r.ServerCPU = c1-m.client0, s1-m.server0
	}
}

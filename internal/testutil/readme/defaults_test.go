package readme_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/ui"
)

// docValue writes v as docs/defaults.md does: durations in the largest
// whole unit of ms, s, min and h ("30 s", "200 ms", "15 min", "24 h"),
// other values with fmt's %v.
func docValue(v any) string {
	d, ok := v.(time.Duration)
	if !ok {
		return fmt.Sprint(v)
	}
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d >= time.Second && d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	default:
		return fmt.Sprintf("%d ms", d/time.Millisecond)
	}
}

// docs/defaults.md gives each named default the value the code has: the
// row that names the constant shows its value, as a whole number.
func TestDefaultsTable(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/defaults.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	for _, c := range []struct {
		name  string
		value any
	}{
		{"sqlstore.DefaultClaimTimeout", sqlstore.DefaultClaimTimeout},
		{"sqlstore.DefaultLockWaitLimit", sqlstore.DefaultLockWaitLimit},
		{"sqlstore.OpenIdleConns", sqlstore.OpenIdleConns},
		{"sqlstore.OpenConnMaxIdleTime", sqlstore.OpenConnMaxIdleTime},
		{"driver.DefaultTimePrecision", driver.DefaultTimePrecision},
		{"esstore.DefaultPageSize", "10,000"},
		{"esstore.DefaultLockLease", esstore.DefaultLockLease},
		{"esstore.DefaultLeaseIndex", esstore.DefaultLeaseIndex},
		{"coord.DefaultLeaderLease", coord.DefaultLeaderLease},
		{"dialects.DefaultLeaseTable", dialects.DefaultLeaseTable},
		{"outbox.DefaultTable", outbox.DefaultTable},
		{"outbox.DefaultLease", outbox.DefaultLease},
		{"outbox.DefaultBatchSize", outbox.DefaultBatchSize},
		{"outbox.DefaultPollInterval", outbox.DefaultPollInterval},
		{"outbox.DefaultMaxPollInterval", outbox.DefaultMaxPollInterval},
		{"outbox.DefaultWindow", outbox.DefaultWindow},
		{"outbox.MaxWindow", outbox.MaxWindow},
		{"outbox.DefaultDrainTimeout", outbox.DefaultDrainTimeout},
		{"outbox.DefaultWriteTimeout", outbox.DefaultWriteTimeout},
		{"dispatch.DefaultConcurrency", dispatch.DefaultConcurrency},
		{"dispatch.DefaultLease", dispatch.DefaultLease},
		{"dispatch.DefaultPollInterval", dispatch.DefaultPollInterval},
		{"dispatch.DefaultOutcomeDelay", dispatch.DefaultOutcomeDelay},
		{"dispatch.DefaultDrainTimeout", dispatch.DefaultDrainTimeout},
		{"dispatch.DefaultWriteTimeout", dispatch.DefaultWriteTimeout},
		{"dispatch.DefaultScheduleTable", dispatch.DefaultScheduleTable},
		{"dispatch.DefaultMaxFailures", dispatch.DefaultMaxFailures},
		{"dispatch.DefaultBackoffBase", dispatch.DefaultBackoffBase},
		{"dispatch.DefaultBackoffMax", dispatch.DefaultBackoffMax},
		{"dispatch.DefaultMisfireGrace", dispatch.DefaultMisfireGrace},
		{"dispatch.DefaultMaintenanceEvery", dispatch.DefaultMaintenanceEvery},
		{"dispatch.DefaultRescueAfter", dispatch.DefaultRescueAfter},
		{"dispatch.DefaultMaintenanceBatch", dispatch.DefaultMaintenanceBatch},
		{"ui.DefaultExactBound", ui.DefaultExactBound},
		{"jobs.DefaultTable", jobs.DefaultTable},
		{"jobs.DefaultQueueTable", jobs.DefaultQueueTable},
		{"jobs.DefaultQueue", jobs.DefaultQueue},
		{"jobs.DefaultMaxAttempts", jobs.DefaultMaxAttempts},
		{"jobs.DefaultPriority", jobs.DefaultPriority},
		{"jobs.DefaultMaxArgsSize", jobs.DefaultMaxArgsSize},
		{"jobs.DefaultMaxWorkers", jobs.DefaultMaxWorkers},
		{"jobs.DefaultTimeout", jobs.DefaultTimeout},
		{"jobs.ScheduleAhead", jobs.ScheduleAhead},
		{"jobs.DefaultSignalInterval", jobs.DefaultSignalInterval},
		{"jobs.DefaultRescueInterval", jobs.DefaultRescueInterval},
		{"jobs.DefaultRetentionInterval", jobs.DefaultRetentionInterval},
		{"jobs.DefaultCompletedRetention", jobs.DefaultCompletedRetention},
		{"jobs.DefaultCancelledRetention", jobs.DefaultCancelledRetention},
		{"jobs.DefaultDiscardedRetention", jobs.DefaultDiscardedRetention},
		{"jobs.MaintenanceBatch", jobs.MaintenanceBatch},
		{"jobs.Fillfactor", jobs.Fillfactor},
		{"jobs.MaxListLimit", jobs.MaxListLimit},
	} {
		want := docValue(c.value)
		found := false
		for _, l := range lines {
			if strings.Contains(l, "`"+c.name+"`") {
				found = true
				if !regexp.MustCompile(`(^|[^0-9])` + regexp.QuoteMeta(want) + `([^0-9]|$)`).MatchString(l) {
					t.Errorf("docs/defaults.md: the row of %s does not say %q:\n%s", c.name, want, l)
				}
			}
		}
		if !found {
			t.Errorf("docs/defaults.md has no row for %s (%s)", c.name, want)
		}
	}
	// The policies built by functions, as the table states them.
	p := outbox.DefaultRetryPolicy()
	if got := fmt.Sprintf("%v doubling to %v, %d %% jitter, %d retries", docValue(p.BaseDelay), docValue(p.MaxDelay), int(p.Jitter*100), p.MaxRetries); !strings.Contains(string(doc), got) || p.Multiplier != 2 {
		t.Errorf("docs/defaults.md does not state outbox.DefaultRetryPolicy() as %q (multiplier %v)", got, p.Multiplier)
	}
	// The job backoff: attempt⁴ s (capped at 30 days), within ±10 %.
	for a, want := range map[int]time.Duration{1: time.Second, 3: 81 * time.Second, 10: 10000 * time.Second, 100: 30 * 24 * time.Hour} {
		if got := jobs.DefaultBackoff(a); got < want*9/10 || got > want*11/10 {
			t.Errorf("jobs.DefaultBackoff(%d) = %v, want %v ±10 %% as docs/defaults.md says", a, got, want)
		}
	}
	if !strings.Contains(string(doc), "attempt⁴ s, ±10 % jitter, at most 30 days") {
		t.Error("docs/defaults.md does not state jobs.DefaultBackoff")
	}
}

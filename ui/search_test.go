package ui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/ui"
)

// TestScheduleSearchAndFilter: the search finds a key wherever it is in
// key order, the status filter keeps one status, and a list cut at the
// page's length says so.
func TestScheduleSearchAndFilter(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		specs := make([]dispatch.Spec, 1500)
		for i := range specs {
			specs[i] = dispatch.Spec{Key: fmt.Sprintf("bulk-%04d", i), Cron: "@daily"}
		}
		if _, err := e.sc.AddMany(ctx, specs); err != nil {
			t.Fatal(err)
		}
		srv := e.serve(t, ui.Config{})
		c := client(t)
		_, _, page := get(t, c, srv.URL+"/schedules?q=1499")
		if !strings.Contains(page, `data-key="bulk-1499"`) || strings.Contains(page, `data-key="bulk-1498"`) {
			t.Errorf("search 1499 does not show exactly bulk-1499")
		}
		_, _, page = get(t, c, srv.URL+"/schedules?q=NIGHT")
		if !strings.Contains(page, `data-key="nightly"`) || strings.Contains(page, `data-key="bulk-`) {
			t.Errorf("search NIGHT does not show exactly nightly")
		}
		_, _, page = get(t, c, srv.URL+"/schedules?status=paused")
		if !strings.Contains(page, `data-key="held"`) || strings.Contains(page, `data-key="nightly"`) {
			t.Errorf("filter paused does not show exactly held")
		}
		_, _, page = get(t, c, srv.URL+"/schedules")
		if n := strings.Count(page, `<tr data-key=`); n != 200 || !strings.Contains(page, `class="muted more"`) {
			t.Errorf("1504 schedules: %d rows shown, note of the cut shown: %v", n, strings.Contains(page, `class="muted more"`))
		}
		_, _, page = get(t, c, srv.URL+"/schedules?q=bulk-00")
		if n := strings.Count(page, `<tr data-key=`); n != 100 || strings.Contains(page, `class="muted more"`) || strings.Contains(page, `class="muted scan"`) {
			t.Errorf("search bulk-00: %d rows shown (want 100, no note)", n)
		}
		// A search that stops at its bound says where.
		defer ui.SetSearchScan(1000)()
		_, _, page = get(t, c, srv.URL+"/schedules?q=1499")
		if strings.Contains(page, `data-key="bulk-1499"`) || !strings.Contains(page, "read the first 1000 schedules") {
			t.Errorf("a search stopped at 1000 schedules does not say so")
		}
	})
}

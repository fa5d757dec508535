package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestRunCountsEveryMessageOnce runs one small round of every phase on
// the local PostgreSQL: each phase must hand every message exactly once,
// the report must carry both ratios, and no table of the run may remain.
func TestRunCountsEveryMessageOnce(t *testing.T) {
	db := testdb.Postgres(t) // skips, or fails when required, without a server
	tables := func() []string {
		var names []string
		if err := db.Raw(`SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'wmbench\_%' OR table_name LIKE 'watermill\_%wmbench\_%' ORDER BY 1`).Scan(&names).Error; err != nil {
			t.Fatal(err)
		}
		return names
	}
	before := tables()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := Config{DSN: testdb.PostgresDSN(), Rows: 300, Subscribers: 3, Batch: 20, Rounds: 1, Timeout: time.Minute}
	var out bytes.Buffer
	results, err := Run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(results) != 9 {
		t.Fatalf("%d results, want 9:\n%s", len(results), out.String())
	}
	for _, r := range results {
		if r.Messages != cfg.Rows || r.Wall <= 0 {
			t.Errorf("%+v", r)
		}
	}
	Report(&out, cfg, results)
	for _, want := range []string{"publish: claimstore / watermill-sql = ", "consume, 3 subscribers: claimstore / watermill-sql's best configuration = ",
		"log mode: publish / watermill-sql's = "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if after := tables(); len(after) != len(before) {
		t.Errorf("tables left behind: %v (before: %v)", after, before)
	}
}

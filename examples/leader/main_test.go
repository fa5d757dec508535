package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestMain runs the candidate when the test binary is started as one.
func TestMain(m *testing.M) {
	if c, ok := candidateConfig(); ok {
		runCandidate(c)
		return
	}
	os.Exit(m.Run())
}

// The example on an SQLite file: three elections in strictly increasing
// terms, by three different candidates.
func TestRunSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; skipped with -short")
	}
	var out bytes.Buffer
	cfg := config{backend: "sqlite", ttl: time.Second}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	var last int64
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(candidate-\d): elected, term (\d+)$`).FindAllStringSubmatch(out.String(), -1) {
		term, _ := strconv.ParseInt(m[2], 10, 64)
		if term <= last {
			t.Errorf("term %d after term %d", term, last)
		}
		last, ids[m[1]] = term, true
	}
	if len(ids) != 3 || last < 3 {
		t.Errorf("elected %v up to term %d; want three candidates, terms 1 to 3", ids, last)
	}
}

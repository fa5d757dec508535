package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The example on an SQLite file: every task is done exactly once and none
// is left.
func TestRunSQLite(t *testing.T) {
	var out bytes.Buffer
	cfg := config{backend: "sqlite", tasks: 40, workers: 3, batch: 4, lease: 30 * time.Second}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	total := 0
	for _, m := range regexp.MustCompile(`: (\d+) tasks done`).FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	if total != cfg.tasks {
		t.Errorf("workers marked %d tasks done, want %d", total, cfg.tasks)
	}
	if !bytes.Contains(out.Bytes(), []byte("tasks left: 0\n")) {
		t.Errorf("tasks are left:\n%s", out.String())
	}
}

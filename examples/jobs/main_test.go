package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The example on an SQLite file for 5 s with an every-second periodic
// job: the second sign-up finds the first one's welcome job; the welcome
// mail fails once and is sent on its second attempt, its first attempt's
// error kept; the periodic job runs at least twice.
func TestRunSQLite(t *testing.T) {
	var out bytes.Buffer
	cfg := config{backend: "sqlite", runFor: 5 * time.Second, cron: "* * * * * *"}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Log(text)
	for want, n := range map[string]int{
		"(duplicate: false)": 1,
		"(duplicate: true)":  1,
		"welcome mail to ada@example.com: attempt 1 fails":   1,
		"welcome mail to ada@example.com: sent on attempt 2": 1,
		"attempt 1 error: mail server busy":                  1,
	} {
		if got := strings.Count(text, want); got != n {
			t.Errorf("%q printed %d times, want %d", want, got, n)
		}
	}
	if reports := len(regexp.MustCompile(`(?m)^report: job \d+ ran$`).FindAllString(text, -1)); reports < 2 {
		t.Errorf("the periodic job ran %d times in 5 s, want at least 2", reports)
	}
}

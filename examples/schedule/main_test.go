package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example on an SQLite file for 3.5 s with an every-second cron
// schedule: the second Add of each key finds the first; the once schedule
// fires exactly once; the cron schedule fires at least twice, never twice
// for one occurrence; the drain line counts every printed fire.
func TestRunSQLite(t *testing.T) {
	var out bytes.Buffer
	cfg := config{backend: "sqlite", runFor: 3500 * time.Millisecond, cron: "* * * * * *", delay: 300 * time.Millisecond}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	text := out.String()
	for _, want := range []string{
		"added once " + onceKey, "added cron " + cronKey,
		"exists once " + onceKey, "exists cron " + cronKey,
	} {
		if strings.Count(text, want+":") != 1 {
			t.Errorf("want one line %q", want)
		}
	}
	fires := regexp.MustCompile(`(?m)^fire (\S+) \((once|cron)\) due (\S+),`).FindAllStringSubmatch(text, -1)
	once, cronDue := 0, map[string]bool{}
	for _, f := range fires {
		switch f[1] {
		case onceKey:
			once++
		case cronKey:
			if cronDue[f[3]] {
				t.Errorf("cron occurrence due %s fired twice", f[3])
			}
			cronDue[f[3]] = true
		default:
			t.Errorf("fire of unknown key %q", f[1])
		}
	}
	if once != 1 {
		t.Errorf("once schedule fired %d times, want 1", once)
	}
	if len(cronDue) < 2 {
		t.Errorf("cron schedule fired %d times in %v, want at least 2", len(cronDue), cfg.runFor)
	}
	m := regexp.MustCompile(`(?m)^drained: (\d+) fires`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no drain line")
	}
	if n, _ := strconv.Atoi(m[1]); n != len(fires) {
		t.Errorf("drain line counts %d fires, %d were printed", n, len(fires))
	}
}

// With no time limit the worker runs until its context ends (as on
// SIGTERM through dispatch.ShutdownContext), then drains and returns.
func TestRunUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	cfg := config{backend: "sqlite", cron: "* * * * * *"}
	began := time.Now()
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("run returned %v after its context ended", d)
	}
	if !strings.Contains(out.String(), "\ndrained: ") {
		t.Errorf("no drain line:\n%s", out.String())
	}
}

// Bad flag values are refused before anything is opened.
func TestRunBadFlags(t *testing.T) {
	for _, cfg := range []config{
		{backend: "sqlite", cron: "not cron"},
		{backend: "sqlite", cron: "* * * * *", runFor: -time.Second},
		{backend: "oracle", cron: "* * * * *"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), cfg, &out); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
		if out.Len() != 0 {
			t.Errorf("%+v: printed %q", cfg, out.String())
		}
	}
}

package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/internal/testdb"
	"github.com/claimstore/claimstore/outbox/natsembed"
)

func checkVerdict(t *testing.T, out string, n string) {
	t.Helper()
	for _, want := range []string{
		"table:  " + n + " published, 0 abandoned, 0 pending, 0 failed, 0 processing",
		"stream: " + n + " messages, " + n + " distinct message ids, 0 duplicates, 0 lost",
		"msg/s end to end", "verdict: OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoDefaultEmbedded(t *testing.T) {
	out, errOut, err := execCLI(context.Background(), "--backend", "sqlite", "--dsn", "", "--log-level", "warn",
		"demo", "--messages", "300", "--relays", "3", "--workers", "2", "--batch", "20", "--writers", "2", "--per-tx", "3",
		"--nats-url", "", "--table", "", "--quiet=false")
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out, errOut)
	}
	checkVerdict(t, out, "300")
	if !strings.Contains(out, "(embedded)") || !strings.Contains(errOut, "written") {
		t.Errorf("no embedded server or no progress:\n%s\n%s", out, errOut)
	}
	// The SQLite file is named, and gone after the run.
	m := regexp.MustCompile(`(?m)^database file: (\S+) \(removed after the run; --keep keeps it\)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no database file line:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the run: %v", m[1], err)
	}
	if !regexp.MustCompile(`(?m)^busy:   \d+ writes found the database locked`).MatchString(out) {
		t.Errorf("no busy retry count in the verdict:\n%s", out)
	}
}

func TestDemoBackendsAndExternalNATS(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for _, b := range []struct{ backend, dsn string }{
		{"memory", ""}, {"postgres", testdb.PostgresDSN()}, {"mariadb", testdb.MySQLDSN()},
	} {
		t.Run(b.backend, func(t *testing.T) {
			switch b.backend {
			case "postgres":
				testdb.Postgres(t)
			case "mariadb":
				testdb.MySQL(t)
			}
			out, errOut, err := execCLI(context.Background(), "--backend", b.backend, "--dsn", b.dsn, "--log-level", "warn",
				"demo", "--messages", "200", "--relays", "2", "--workers", "2", "--batch", "25", "--writers", "2", "--per-tx", "1",
				"--nats-url", srv.URL(), "--table", "", "--quiet")
			if err != nil {
				t.Fatalf("demo: %v\n%s\n%s", err, out, errOut)
			}
			checkVerdict(t, out, "200")
			if strings.Contains(out, "(embedded)") {
				t.Errorf("used the embedded server despite --nats-url:\n%s", out)
			}
		})
	}
}

func TestDemoBadFlags(t *testing.T) {
	if _, _, err := execCLI(context.Background(), "--backend", "sqlite", "--dsn", "", "demo", "--messages", "0", "--nats-url", "", "--table", ""); err == nil {
		t.Fatal("demo with --messages 0 succeeded")
	}
	if _, _, err := execCLI(context.Background(), "--backend", "sqlite", "--dsn", "", "demo", "--messages", "10", "--table", "no such;table", "--nats-url", ""); err == nil {
		t.Fatal("demo with a bad table name succeeded")
	}
}

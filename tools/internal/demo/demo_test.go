package demo_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/tools/internal/demo"
)

// options returns a small run's options on backend and dsn, with the
// relays' warnings in the test's output.
func options(t *testing.T, backend, dsn string, messages int) demo.Options {
	return demo.Options{
		Backend: backend, DSN: dsn, Messages: messages, Relays: 2, Workers: 2, Batch: 25, Lease: 10 * time.Second,
		Writers: 2, PerTx: 1, Timeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

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

func TestDefaultEmbedded(t *testing.T) {
	o := options(t, "sqlite", "", 300)
	o.Relays, o.Batch, o.PerTx = 3, 20, 3
	var out, progress bytes.Buffer
	o.Progress = &progress
	if err := demo.Run(context.Background(), &out, o); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), progress.String())
	}
	checkVerdict(t, out.String(), "300")
	if !strings.Contains(out.String(), "(embedded)") || !strings.Contains(progress.String(), "written") {
		t.Errorf("no embedded server or no progress:\n%s\n%s", out.String(), progress.String())
	}
	// The SQLite file is named, and gone after the run.
	m := regexp.MustCompile(`(?m)^database file: (\S+) \(removed after the run; --keep keeps it\)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no database file line:\n%s", out.String())
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the run: %v", m[1], err)
	}
	if !regexp.MustCompile(`(?m)^busy:   \d+ writes found the database locked`).MatchString(out.String()) {
		t.Errorf("no busy retry count in the verdict:\n%s", out.String())
	}
}

func TestBackendsAndExternalNATS(t *testing.T) {
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
			o := options(t, b.backend, b.dsn, 200)
			o.NATSURL = srv.URL()
			var out bytes.Buffer
			if err := demo.Run(context.Background(), &out, o); err != nil {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			checkVerdict(t, out.String(), "200")
			if strings.Contains(out.String(), "(embedded)") {
				t.Errorf("used the embedded server despite NATSURL:\n%s", out.String())
			}
		})
	}
}

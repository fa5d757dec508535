package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

func TestUIRefusesPublicAddressWithoutAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	_, _, err := execFresh(t, "ui", "--backend", "sqlite", "--dsn", path, "--addr", "0.0.0.0:0")
	if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--auth file:PATH") || !strings.Contains(err.Error(), "--auth env:") {
		t.Fatalf("err = %v; want a refusal that says how to pass --auth", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused command opened the database: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		if !loopback(addr) {
			t.Errorf("%s is loopback", addr)
		}
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "192.168.1.2:80", "[::]:80", "example.com:80"} {
		if loopback(addr) {
			t.Errorf("%s is not loopback", addr)
		}
	}
}

func TestUIAuthIsNeverOnTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	basic := filepath.Join(dir, "basic")
	if err := os.WriteFile(basic, []byte("ops:correct-horse\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := readAuth("file:" + basic)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth("ops", "correct-horse")
	if !auth(req) {
		t.Fatal("basic credentials from a file refused")
	}
	t.Setenv("UI_TEST_TOKEN", "0123456789abcdef")
	if auth, err = readAuth("env:UI_TEST_TOKEN"); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer 0123456789abcdef")
	if !auth(req) {
		t.Fatal("token from the environment refused")
	}
	for _, bad := range []string{"0123456789abcdef", "token:0123456789abcdef", "env:UI_TEST_UNSET", "file:" + filepath.Join(dir, "none")} {
		if _, err := readAuth(bad); err == nil {
			t.Errorf("--auth %q accepted", bad)
		}
	}
}

// TestUIServesFoundTables runs `claimstore ui` on an SQLite file holding a
// schedule table, an outbox table and a lease table, and reads the pages.
func TestUIServesFoundTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	if err := dispatch.MigrateSchedules(ctx, db, ""); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, "shop_outbox"); err != nil {
		t.Fatal(err)
	}
	leases, err := sqlstore.NewLeases(db, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := leases.AcquireLease(ctx, "relay", "host-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE unrelated (id INTEGER PRIMARY KEY, status TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	logStore, err := sqlstore.NewLog(db, "shop_log")
	if err != nil {
		t.Fatal(err)
	}
	if err := logStore.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := logStore.OpenCursor(ctx, "relay-group", 0, 1); err != nil {
		t.Fatal(err)
	}

	g := Globals{Backend: "sqlite", DSN: path}

	for _, readOnly := range []bool{false, true} {
		runCtx, cancel := context.WithCancel(ctx)
		addrs := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			done <- runUI(runCtx, g, uiOptions{addr: "127.0.0.1:0", readOnly: readOnly, pool: 2}, func(a string) { addrs <- a })
		}()
		var addr string
		select {
		case addr = <-addrs:
		case err := <-done:
			cancel()
			t.Fatalf("ui: %v", err)
		}
		read := func(p string) string {
			resp, err := http.Get("http://" + addr + p)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
			return string(b)
		}
		if page := read("/"); !strings.Contains(page, dispatch.DefaultScheduleTable) || !strings.Contains(page, "shop_outbox") || strings.Contains(page, "unrelated") {
			t.Errorf("overview does not show exactly the schedule and outbox tables:\n%s", page)
		}
		if page := read("/outbox"); !strings.Contains(page, `data-log="shop_log"`) || !strings.Contains(page, `data-reader="relay-group"`) ||
			strings.Contains(page, `data-log="shop_log_dead"`) {
			t.Errorf("outbox page does not show the log shop_log with its cursor:\n%s", page)
		}
		if page := read("/leaders"); !strings.Contains(page, "host-a") {
			t.Errorf("leaders page does not show the lease holder")
		}
		if page := read("/schedules"); strings.Contains(page, `action="do"`) != !readOnly {
			t.Errorf("read-only %v: the schedules page shows forms: %v", readOnly, !readOnly)
		}
		// Without --auth only loopback host names are served: a page of
		// another site whose name was made to resolve to 127.0.0.1 (DNS
		// rebinding) would otherwise read the console, its CSRF token
		// included, as its own origin.
		_, port, _ := net.SplitHostPort(addr)
		for host, want := range map[string]int{
			"evil.example:" + port: http.StatusForbidden, "evil.example": http.StatusForbidden, "127.0.0.1.nip.io:" + port: http.StatusForbidden,
			"localhost:" + port: http.StatusOK, "127.0.0.1:" + port: http.StatusOK, "LOCALHOST:" + port: http.StatusOK,
		} {
			req, _ := http.NewRequest("GET", "http://"+addr+"/schedules", nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
			}
			if want == http.StatusForbidden && strings.Contains(string(b), `name="csrf"`) {
				t.Errorf("Host %s: the answer holds a CSRF token", host)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("ui ended with %v", err)
		}
	}
}

// TestUIAuthFileReadableByOthersIsRefused: as ssh does with a private key,
// --auth file:PATH refuses a credentials file that its group or other
// users can read or write, and says how to fix it.
func TestUIAuthFileReadableByOthersIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe who can read a file on Windows")
	}
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := readAuth("file:" + path)
		if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "chmod 600 "+path) || !strings.Contains(err.Error(), mode.String()[1:]) {
			t.Errorf("mode %v: err = %v; want ErrInvalidArgument naming the mode and saying chmod 600 %s", mode, err, path)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := readAuth("file:" + path); err != nil {
			t.Errorf("mode %v: %v; want the file accepted", mode, err)
		}
	}
	// The command refuses before it opens the database.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "app.db")
	_, _, err := execFresh(t, "ui", "--backend", "sqlite", "--dsn", db, "--addr", "0.0.0.0:0", "--auth", "file:"+path)
	if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("ui with a world-readable --auth file: %v; want the refusal", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused command opened the database: %v", err)
	}
}

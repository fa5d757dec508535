package outbox_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// TestLogReaderWarnsOfIdleChurn: a relay of 16 partitions over a pool
// that keeps one idle connection closes and reopens connections on every
// batch; the reader says so once, at WARN, with the fix. Over a pool that
// keeps enough idle connections it says nothing.
func TestLogReaderWarnsOfIdleChurn(t *testing.T) {
	for _, c := range []struct {
		idle int
		warn bool
	}{{1, true}, {20, false}} {
		db := testdb.Postgres(t)
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.SetMaxIdleConns(c.idle)
		lg, err := outbox.NewLog(sqlstoretest.Log(t, db), 16)
		if err != nil {
			t.Fatal(err)
		}
		var logs syncbuf.Buffer
		r, err := outbox.NewLogRelay(lg, &recorder{}, outbox.LogRelayConfig{LogReaderConfig: outbox.LogReaderConfig{
			Reader: "relay", Leases: sqlstoretest.Leases(t, db), Lease: 900 * time.Millisecond, PollInterval: 5 * time.Millisecond,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = r.Run(ctx) })
		const churn = "closes and reopens connections for want of idle slots"
		// Warned, or long enough to have warned: the idle poll of 16
		// partitions closes some 25 connections a second over one idle
		// slot, and none over 20.
		wait := 3 * time.Second
		if c.warn {
			wait = 30 * time.Second
		}
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) && !strings.Contains(logs.String(), churn) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		closed := sqlDB.Stats().MaxIdleClosed
		if got := strings.Count(logs.String(), churn); got != map[bool]int{true: 1, false: 0}[c.warn] {
			t.Errorf("idle %d: %d churn warnings (%d connections closed for want of idle slots); logs:\n%s", c.idle, got, closed, logs.String())
		}
		t.Logf("idle %d: %d connections closed for want of idle slots", c.idle, closed)
	}
}

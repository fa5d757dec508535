package jobs_test

import (
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// TestDeprecatedConfigFields: a Config that sets only a deprecated field
// (Tick, ID) runs with it as the field that replaces it (PollInterval,
// WorkerID), and the new field wins when both are set. SignalInterval,
// the change signal's period that was called PollInterval, is not
// touched by either.
func TestDeprecatedConfigFields(t *testing.T) {
	store, _ := memstore.New[jobs.Row]()
	for _, c := range []struct {
		name       string
		cfg        jobs.Config
		wantPoll   time.Duration
		wantWorker string
	}{
		{"old only", jobs.Config{Tick: 70 * time.Millisecond, ID: "old-id"}, 70 * time.Millisecond, "old-id"},
		{"both", jobs.Config{Tick: 70 * time.Millisecond, PollInterval: 90 * time.Millisecond, ID: "old-id", WorkerID: "new-id"}, 90 * time.Millisecond, "new-id"},
		{"new only", jobs.Config{PollInterval: 90 * time.Millisecond, WorkerID: "new-id"}, 90 * time.Millisecond, "new-id"},
	} {
		cfg := c.cfg
		cfg.Store = store
		client, err := jobs.NewClient(cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := jobs.ConfigOf(client)
		if got.PollInterval != c.wantPoll || got.WorkerID != c.wantWorker || got.SignalInterval != 0 {
			t.Errorf("%s: PollInterval %v, WorkerID %q, SignalInterval %v; want %v, %q, 0", c.name, got.PollInterval, got.WorkerID, got.SignalInterval, c.wantPoll, c.wantWorker)
		}
	}
	if old := jobs.DefaultPollInterval; old != jobs.DefaultSignalInterval {
		t.Errorf("DefaultPollInterval %v, want DefaultSignalInterval %v", old, jobs.DefaultSignalInterval)
	}
}

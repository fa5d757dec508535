package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// Of two concurrent Runs of one client, one runs until its context ends
// and the other fails at once with jobs.ErrAlreadyRunning, not
// jobs.ErrRunning (a running job).
func TestRunTwiceAlreadyRunning(t *testing.T) {
	store, _ := memstore.New[jobs.Row]()
	c, err := jobs.NewClient(jobs.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- c.Run(ctx) }()
	}
	err = <-done
	if !errors.Is(err, jobs.ErrAlreadyRunning) || errors.Is(err, jobs.ErrRunning) || err.Error() != "jobs: client already running" {
		t.Errorf("second Run: %v, want jobs.ErrAlreadyRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first Run: %v", err)
	}
}

package dispatch_test

import (
	"errors"
	"testing"

	"github.com/claimstore/claimstore/dispatch"
)

// The deprecated ErrRunning is ErrAlreadyRunning: errors.Is finds either.
func TestErrRunningIsErrAlreadyRunning(t *testing.T) {
	old := dispatch.ErrRunning
	if old != dispatch.ErrAlreadyRunning || !errors.Is(old, dispatch.ErrAlreadyRunning) || old.Error() != "dispatch: worker already running" {
		t.Fatalf("ErrRunning = %v, ErrAlreadyRunning = %v", old, dispatch.ErrAlreadyRunning)
	}
}

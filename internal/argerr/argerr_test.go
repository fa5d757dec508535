package argerr

import (
	"errors"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

func TestErrorf(t *testing.T) {
	err := Errorf("batch %d, poll %v", 3, "1s")
	if !errors.Is(err, dao.ErrInvalidArgument) || err.Error() != "invalid argument: batch 3, poll 1s" {
		t.Fatalf("Errorf = %v", err)
	}
	if err := Errorf("store: %v", dao.ErrBusy); errors.Is(err, dao.ErrBusy) || err.Error() != "invalid argument: store: database busy" {
		t.Fatalf("Errorf with an error among args = %v", err)
	}
}

package watermill

import (
	"testing"
	"time"

	"github.com/claimstore/claimstore/outbox"
)

// TestDeliveryColumnsCoverTheOutbox: the fan-out gives every outbox
// column but the key a source, so a column added to the outbox fails here
// until the fan-out knows how to fill it.
func TestDeliveryColumnsCoverTheOutbox(t *testing.T) {
	cols, err := deliveryColumns("w1", 30*time.Second, 5)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, c := range cols {
		have[c.Name] = true
	}
	for _, name := range outbox.Columns() {
		if name != outbox.ColID && !have[name] {
			t.Errorf("outbox column %q has no source in the fan-out", name)
		}
	}
	if have[outbox.ColID] {
		t.Errorf("the fan-out writes the key %q", outbox.ColID)
	}
}

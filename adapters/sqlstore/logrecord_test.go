package sqlstore_test

import (
	"errors"
	"math"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// A partition beyond the partition column (INTEGER) is refused with the
// record's other checks, before anything of an append is sent, not by the
// statement of the chunk that holds it (a long append outside a
// transaction would have committed its earlier chunks).
func TestCheckLogRecordRefusesPartitionOverInteger(t *testing.T) {
	rec := driver.LogRecord{Partition: math.MaxInt32, MessageID: "m", Topic: "t"}
	if err := sqlstore.CheckLogRecord(&rec); err != nil {
		t.Fatalf("partition %d: %v", rec.Partition, err)
	}
	for _, p := range []int{-1, math.MaxInt32 + 1} {
		rec.Partition = p
		if err := sqlstore.CheckLogRecord(&rec); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("partition %d: %v, want dao.ErrInvalidArgument", p, err)
		}
	}
}

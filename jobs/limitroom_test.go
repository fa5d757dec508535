package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// TestLimitRoomLeft checks, on the memory store, SQLite, PostgreSQL and
// MariaDB, that the claims of a queue with a global Max of 5 take the
// room left and no more: asked 3, 1, 3 and 1 they take 3, 1, 1 and
// none.
func TestLimitRoomLeft(t *testing.T) { eachLimitStore(t, "room_jobs", testLimitRoomLeft) }

func testLimitRoomLeft(t *testing.T, js dao.Store[jobs.Row]) {
	ctx := context.Background()
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	// A queue name of its own: the memory store's limit state is kept
	// per process, by table and queue.
	queue := "room_" + t.Name()[len("TestLimitRoomLeft/"):]
	claim, err := jobs.NewLimiter(c, queue, jobs.Limit{Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := c.Insert(ctx, benchArgs{Seq: int64(i)}, &jobs.InsertOpts{Queue: queue}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, step := range [][2]int{{3, 3}, {1, 1}, {3, 1}, {1, 0}} {
		rows, err := claim(ctx, now, limitedReq(queue, "w", now, step[0]))
		if err != nil || len(rows) != step[1] {
			t.Fatalf("claim %d, of %d under a Max of 5: %d rows, %v; want %d", i+1, step[0], len(rows), err, step[1])
		}
	}
}

package coord_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
)

// Cursor is a register that leader-only work writes; LeaderTerm records
// the term of the last fenced write.
type Cursor struct {
	ID         string `gorm:"primaryKey"`
	Position   int64
	LeaderTerm *int64
}

// A term travels on its own: term 4 creates the register, a message
// carrying term 3 (written by an earlier leader) can neither create nor
// change it, and errors.Is(err, coord.ErrFenced) is the one check.
func ExampleFencedUpsert() {
	ctx := context.Background()
	cursors, _ := memstore.New[Cursor]()

	current := coord.Fence{Name: "indexer", Term: 4} // e.g. leader.Token()
	created, err := coord.FencedUpsert(ctx, cursors, current, "leader_term",
		&Cursor{ID: "orders", Position: 100}, dao.Set{"position": int64(100)})
	fmt.Println("term 4 created the register:", created, err)

	stale := coord.Fence{Name: "indexer", Term: 3} // read from an old message
	_, err = coord.FencedUpsert(ctx, cursors, stale, "leader_term",
		&Cursor{ID: "orders", Position: 50}, dao.Set{"position": int64(50)})
	fmt.Println("term 3 fenced off:", errors.Is(err, coord.ErrFenced))

	n, err := coord.FencedUpdate(ctx, cursors, current, "leader_term",
		dao.Eq("id", "orders"), dao.Set{"position": int64(120)})
	fmt.Println("term 4 updated", n, "row", err)

	c, _ := cursors.Get(ctx, "orders")
	fmt.Println("position", c.Position, "term", *c.LeaderTerm)
	// Output:
	// term 4 created the register: true <nil>
	// term 3 fenced off: true
	// term 4 updated 1 row <nil>
	// position 120 term 4
}

package coord_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm"
)

// Report is the row the example's unit of work writes.
type Report struct {
	ID    int64  `gorm:"primaryKey"`
	Cycle string `gorm:"size:32;not null"`
}

// ExampleWithLock runs one cycle of periodic work on one server at a
// time: the server that gets the lock writes its report inside the lock's
// transaction; another server trying meanwhile skips the cycle at once.
func ExampleWithLock() {
	dir, _ := os.MkdirTemp("", "claimstore-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, "sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	reports, err := sqlstore.New[Report](db)
	if err != nil {
		panic(err)
	}
	if err := reports.Migrate(ctx); err != nil {
		panic(err)
	}

	ran, err := coord.WithLock(ctx, reports, "nightly-report", func(ctx context.Context, tx any) error {
		// Meanwhile another server tries the same cycle: it skips.
		other, err := coord.WithLock(ctx, reports, "nightly-report", func(context.Context, any) error { return nil })
		fmt.Println("other server ran:", other, err)
		// Writes through tx commit or roll back with the lock.
		if err := tx.(*gorm.DB).Create(&Report{Cycle: "2025-01-02"}).Error; err != nil {
			return err
		}
		return reports.WithTx(tx).Create(ctx, &Report{Cycle: "2025-01-03"})
	})
	fmt.Println("this server ran:", ran, err)
	n, _ := reports.Count(ctx, dao.Criteria{})
	fmt.Println("reports:", n)
	// Output:
	// other server ran: false <nil>
	// this server ran: true <nil>
	// reports: 2
}

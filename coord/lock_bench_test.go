package coord_test

import (
	"context"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// BenchmarkWithLock reports try-lock attempts per second per backend:
// uncontended (every attempt takes the free lock and commits an empty
// unit of work) and contended (another holder keeps the lock, so every
// attempt is the loser's: it returns ran == false).
//
//	go test ./coord -run '^$' -bench WithLock
func BenchmarkWithLock(b *testing.B) {
	sql := func(open func(testing.TB) *gorm.DB) func(b *testing.B) coord.Locker {
		return func(b *testing.B) coord.Locker {
			l, err := sqlstore.NewLocker(open(b))
			if err != nil {
				b.Fatal(err)
			}
			return l
		}
	}
	for _, c := range []struct {
		name string
		open func(b *testing.B) coord.Locker
	}{
		{"memory", func(*testing.B) coord.Locker { return memstore.NewLocker() }},
		{"sqlite", sql(testdb.SQLite)},
		{"postgres", sql(testdb.Postgres)},
		{"mysql", sql(testdb.MySQL)},
	} {
		b.Run(c.name+"/uncontended", func(b *testing.B) {
			l := c.open(b)
			ctx := context.Background()
			for b.Loop() {
				if ran, err := coord.WithLock(ctx, l, "bench", func(context.Context, any) error { return nil }); !ran || err != nil {
					b.Fatalf("WithLock = %v, %v", ran, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
		})
		b.Run(c.name+"/contended", func(b *testing.B) {
			l := c.open(b)
			ctx := context.Background()
			held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				_, err := coord.WithLock(ctx, l, "bench", func(context.Context, any) error {
					close(held)
					<-release
					return nil
				})
				done <- err
			}()
			<-held
			for b.Loop() {
				if ran, err := coord.WithLock(ctx, l, "bench", func(context.Context, any) error { return nil }); ran || err != nil {
					b.Fatalf("WithLock on a held lock = %v, %v", ran, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
			close(release)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

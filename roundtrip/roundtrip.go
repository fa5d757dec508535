package roundtrip

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/internal/roundtrip"
)

// Counter counts database round trips; see internal/roundtrip.Counter for
// what one count is.
type Counter = roundtrip.Counter

// Driver returns d wrapped so that every round trip through it adds one to c.
func Driver(d driver.Driver, c *Counter) driver.Driver { return roundtrip.Driver(d, c) }

// Connector returns conn wrapped so that every round trip through the
// connections it makes adds one to c.
func Connector(conn driver.Connector, c *Counter) driver.Connector {
	return roundtrip.Connector(conn, c)
}

// Open returns a *sql.DB for backend and dsn whose round trips add to c;
// it fails on an unknown backend or a DSN the driver cannot parse.
func Open(backend, dsn string, c *Counter) (*sql.DB, error) { return roundtrip.Open(backend, dsn, c) }

// Gorm returns a GORM handle for backend over sqlDB with configuration cfg.
func Gorm(backend string, sqlDB *sql.DB, cfg *gorm.Config) (*gorm.DB, error) {
	return roundtrip.Gorm(backend, sqlDB, cfg)
}

// OpenGorm opens a counting pool with Open, puts GORM over it with Gorm and
// pings the server with ctx; on error the pool is closed.
func OpenGorm(ctx context.Context, backend, dsn string, c *Counter, cfg *gorm.Config) (*gorm.DB, error) {
	return roundtrip.OpenGorm(ctx, backend, dsn, c, cfg)
}

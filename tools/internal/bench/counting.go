package bench

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/claimstore/claimstore/adapters/mysql"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"gorm.io/gorm"
)

// driverDSN returns dsn as sqlstore.Open would hand it to the driver, so
// counted pools and raw pools run with the library's driver settings
// (for MySQL and MariaDB: parseTime and interpolateParams added).
func driverDSN(backend, dsn string) (string, error) {
	if backend == "mysql" || backend == "mariadb" {
		return mysql.DSN(dsn)
	}
	return dsn, nil
}

// openCountedSQL opens a database/sql pool for backend whose round trips
// are counted by the roundtrip package, pings it, and returns it with the
// counter's reading function.
func openCountedSQL(ctx context.Context, backend, dsn string) (*sql.DB, func() int64, error) {
	dsn, err := driverDSN(backend, dsn)
	if err != nil {
		return nil, nil, err
	}
	c := new(roundtrip.Counter)
	db, err := roundtrip.Open(backend, dsn, c)
	if err != nil {
		return nil, nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("ping %s: %w", backend, err)
	}
	return db, c.Count, nil
}

// openCountedGorm opens a GORM handle with the library's configuration
// (sqlstore.Config) over a counted pool, and returns it with the counter's
// reading function.
func openCountedGorm(ctx context.Context, backend, dsn string) (*gorm.DB, func() int64, error) {
	dsn, err := driverDSN(backend, dsn)
	if err != nil {
		return nil, nil, err
	}
	c := new(roundtrip.Counter)
	db, err := roundtrip.OpenGorm(ctx, backend, dsn, c, sqlstore.Config())
	if err != nil {
		return nil, nil, err
	}
	return db, c.Count, nil
}

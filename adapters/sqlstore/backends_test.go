package sqlstore_test

// The tests open every SQL backend through sqlstore.Open and sqlstore.New,
// which need the backend packages linked.
import (
	_ "github.com/claimstore/claimstore/adapters/mysql"
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	_ "github.com/claimstore/claimstore/adapters/sqlserver"
)

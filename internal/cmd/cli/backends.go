package cli

// The command works on every SQL backend, so it links them all; a program
// of your own imports only the backend packages it uses.
import (
	_ "github.com/claimstore/claimstore/adapters/mysql"
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	_ "github.com/claimstore/claimstore/adapters/sqlserver"
)

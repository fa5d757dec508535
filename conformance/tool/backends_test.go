package tool_test

// The tool opens any SQL backend by name, so it links them all.
import _ "github.com/claimstore/claimstore/adapters/sqlserver"

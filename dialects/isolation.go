package dialects

import (
	"fmt"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// Isolation is what a dialect's fast-path claim needs of the server's
// transaction isolation beyond what the claim sets itself. The claim runs
// FOR UPDATE SKIP LOCKED under READ COMMITTED, where a row another claimer
// changed is re-read and skipped when no longer eligible; on the
// distributed SQL servers, READ COMMITTED is a server-wide switch that may
// be off, and then a transaction that asks for it runs at a stronger level
// where the lost race becomes a serialization failure (SQLSTATE 40001)
// instead of a silent skip. A store checks the switch when it is built
// (see [CheckIsolation]).
type Isolation struct {
	// Level is the isolation level the claim runs at, as the server
	// spells it in SHOW transaction_isolation: "read committed".
	Level string
	// Setting names the server setting that makes Level available, with
	// its kind, e.g. "cluster setting sql.txn.read_committed_isolation.enabled".
	Setting string
	// Enable is how an operator turns Setting on.
	Enable string
	// Probe is a query that, run inside a transaction begun with
	// ISOLATION LEVEL READ COMMITTED, returns one text value: the level
	// the transaction really runs at.
	Probe string
	// Otherwise says what a transaction asking for Level gets when
	// Setting is off, and what that does to the claim.
	Otherwise string
	// Source is the manual section the above comes from.
	Source string
}

// isolationTable holds the requirement of each dialect that has one.
var isolationTable = map[Name]Isolation{
	CockroachDB: {
		Level:   "read committed",
		Setting: "cluster setting sql.txn.read_committed_isolation.enabled (CockroachDB 23.2 or later)",
		Enable:  "SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true",
		Probe:   "SHOW transaction_isolation",
		Otherwise: "a READ COMMITTED transaction is upgraded to SERIALIZABLE (and so is every transaction before 23.2); " +
			"SKIP LOCKED still passes over locked rows, but a row a concurrent claimer committed meanwhile fails the claim " +
			"with a retryable serialization error (40001, dao.ErrConflict) instead of being skipped",
		Source: "CockroachDB docs, \"Read Committed Transactions: Enable READ COMMITTED isolation\"; \"SELECT FOR UPDATE: Wait policies\" (SKIP LOCKED, 22.2 and later)",
	},
	YugabyteDB: {
		Level:   "read committed",
		Setting: "YB-TServer flag yb_enable_read_committed_isolation",
		Enable:  "start every yb-tserver with --yb_enable_read_committed_isolation=true (yugabyted: --tserver_flags=yb_enable_read_committed_isolation=true)",
		Probe:   "SHOW yb_effective_transaction_isolation_level",
		Otherwise: "READ COMMITTED falls back to Snapshot isolation (REPEATABLE READ), where a row a concurrent claimer " +
			"committed meanwhile fails the claim with a serialization error (40001, dao.ErrConflict) instead of being skipped; " +
			"SERIALIZABLE does not support SKIP LOCKED at all",
		Source: "YugabyteDB docs, YSQL \"SET TRANSACTION\" (Semantics) and \"Explicit locking\" (row-level locks)",
	},
}

// RequiredIsolation returns the isolation requirement of dialect n and
// true, or false when n has none beyond what the claim sets itself
// (PostgreSQL, MySQL, MariaDB, SQLite, SQL Server).
func RequiredIsolation(n Name) (Isolation, bool) {
	iso, ok := isolationTable[n]
	return iso, ok
}

// CheckIsolation decides whether a server of dialect n runs the claim as
// it must, given effective, the value [Isolation.Probe] returned inside a
// transaction begun with ISOLATION LEVEL READ COMMITTED. It returns nil
// when n has no requirement or effective is the required level (compared
// without regard to case and surrounding space), else an error wrapping
// [dao.ErrInvalidArgument] that names the setting and how to turn it on.
func CheckIsolation(n Name, effective string) error {
	iso, ok := isolationTable[n]
	if !ok || strings.EqualFold(strings.TrimSpace(effective), iso.Level) {
		return nil
	}
	return fmt.Errorf("dialects: %w: %s runs a READ COMMITTED transaction at %q: the claim needs %s: enable the %s (%s); otherwise %s",
		dao.ErrInvalidArgument, n, strings.TrimSpace(effective), strings.ToUpper(iso.Level), iso.Setting, iso.Enable, iso.Otherwise)
}

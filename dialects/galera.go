package dialects

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// DetectVariant returns [Galera] for a node of a MariaDB Galera Cluster
// ([DetectGalera]) and what [Detect] returns for every other server. On
// the MySQL dialector it asks the server twice (SELECT VERSION(), then
// SHOW GLOBAL VARIABLES when the server is MariaDB), with ctx; on the
// PostgreSQL dialector once; on the others not at all. Errors: Detect's,
// and DetectGalera's query error, wrapped.
func DetectVariant(ctx context.Context, db *gorm.DB) (Name, error) {
	n, err := Detect(ctx, db)
	if err != nil || n != MariaDB {
		return n, err
	}
	galera, err := DetectGalera(ctx, db)
	if err != nil {
		return "", err
	}
	if galera {
		return Galera, nil
	}
	return n, nil
}

// Behaviour is one documented way in which a server variant behaves
// unlike the lone server of its dialect, and what claimstore does about
// it.
type Behaviour struct {
	// Topic names the feature concerned, e.g. "GET_LOCK".
	Topic string
	// Server says what the variant does, as its manual documents it.
	Server string
	// Library says what claimstore does on the variant because of it,
	// and what a user needs to do, if anything.
	Library string
	// Source is the manual section the Server text comes from.
	Source string
}

// galeraBehaviours are the documented behaviours of MariaDB Galera
// Cluster that claimstore meets.
var galeraBehaviours = []Behaviour{
	{
		Topic: "GET_LOCK",
		Server: "explicit locks are unsupported: GET_LOCK() and RELEASE_LOCK() take a lock on the node that runs them only, " +
			"so a holder on each node runs at once (later MariaDB releases refuse them while wsrep_on is ON, error 1235)",
		Library: "every try-lock (sqlstore.NewLocker, a store's TryLock, coord.WithLock) returns an error wrapping " +
			"errors.ErrUnsupported and runs nothing; elect a leader over a lease table instead (coord.NewElector)",
		Source: "MariaDB Galera Cluster docs, \"Known Limitations\" (unsupported explicit locking: GET_LOCK(), RELEASE_LOCK()); MDEV-30473",
	},
	{
		Topic: "certification conflicts",
		Server: "a transaction runs with its own node's row locks and is certified against the other nodes' write sets " +
			"at commit; on a conflict one side is aborted and its client gets deadlock error 1213 (ER_LOCK_DEADLOCK), " +
			"also for a transaction aborted by a replicated write set (a brute-force abort); " +
			"an autocommit statement so aborted is first retried by the node itself (wsrep_retry_autocommit, default 1)",
		Library: "1213 is dao.ErrConflict: the claim absorbs it (the portable default goes on with its other candidates, " +
			"the fast path runs its transaction again) and counts it (dao.ClaimTrace.Conflict, " +
			"dispatch.Stats.ConflictRetries, jobs.Stats.ConflictRetries); a lease acquisition or fenced write that loses " +
			"returns dao.ErrConflict and is tried again at its next attempt; no row is claimed twice",
		Source: "MariaDB Galera Cluster docs, \"Certification-Based Replication\"; \"Galera Cluster System Variables\": wsrep_retry_autocommit",
	},
	{
		Topic: "reads of another node's writes",
		Server: "a node applies the other nodes' certified write sets a little after they commit there: a read may miss " +
			"a write committed through another node a moment before unless the session sets wsrep_sync_wait " +
			"(1: reads wait until the node has applied every write the cluster committed before them; default 0)",
		Library: "sets no wsrep_sync_wait: every change of ownership is a conditional write that certification refuses " +
			"when it rests on a stale read, and polled reads are read again each tick; a user who reads back through " +
			"one node what was just written through another sets wsrep_sync_wait = 1 on that session",
		Source: "MariaDB Galera Cluster docs, \"Galera Cluster System Variables\": wsrep_sync_wait",
	},
	{
		Topic: "primary keys",
		Server: "every table should have a primary key; DELETE is unsupported on a table without one, and its rows " +
			"may be in a different order on different nodes; replication covers InnoDB tables only",
		Library: "every table claimstore creates or maps has a primary key and is InnoDB (the server's default engine)",
		Source:  "MariaDB Galera Cluster docs, \"Known Limitations\"",
	},
}

// Behaviours returns the documented behaviours of variant n that differ
// from the lone server of its dialect, with what claimstore does about
// each: [Galera]'s (GET_LOCK, certification conflicts returned as
// deadlock error 1213, reads of another node's writes and
// wsrep_sync_wait, primary keys). It returns nil for every other name.
// The slice is a fresh copy.
func Behaviours(n Name) []Behaviour {
	if n == Galera {
		return slices.Clone(galeraBehaviours)
	}
	return nil
}

// DetectGalera reports whether db's server is a node of a MariaDB Galera
// Cluster ([Galera]): wsrep_on is ON and a wsrep_provider is loaded (MariaDB Galera
// Cluster docs, "Galera Cluster System Variables"). It asks the server
// with SHOW GLOBAL VARIABLES (one round trip, run with ctx); a MySQL
// server, which has neither variable, and a MariaDB server outside a
// cluster report false. For dialectors other than MySQL's it does no I/O
// and reports false. Errors: the query's, wrapped.
//
// On Galera, row locks and named locks are local to the node that takes
// them, and a write conflicts with another node's only at commit
// (certification), returned as a deadlock (error 1213); GET_LOCK is
// among the features Galera does not support ("Known Limitations").
func DetectGalera(ctx context.Context, db *gorm.DB) (bool, error) {
	if db == nil || db.Dialector == nil || db.Dialector.Name() != "mysql" {
		return false, nil
	}
	var rows []struct {
		VariableName string `gorm:"column:Variable_name"`
		Value        string `gorm:"column:Value"`
	}
	if err := db.WithContext(ctx).Raw("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_provider')").Scan(&rows).Error; err != nil {
		return false, fmt.Errorf("dialects: detect galera: %w", err)
	}
	on, provider := false, false
	for _, r := range rows {
		switch strings.ToLower(r.VariableName) {
		case "wsrep_on":
			on = strings.EqualFold(r.Value, "ON")
		case "wsrep_provider":
			provider = r.Value != "" && !strings.EqualFold(r.Value, "none")
		}
	}
	return on && provider, nil
}

package jobs

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/dialects"
)

// WaitIndexNames returns the names of the indexes the schema step of
// sequences and batches creates (see createWaits), by GORM's naming
// strategy of db: the pending index (pending jobs by id), the sequence
// index (sequence_key, state, id), the batch index (batch_id, state) and
// the callback index (batch_callback).
func WaitIndexNames(db *gorm.DB, table string) (pending, sequence, batch, callback string) {
	n := db.NamingStrategy
	return n.IndexName(table, "pending"), n.IndexName(table, "sequence"), n.IndexName(table, "batch"), n.IndexName(table, "callback")
}

// createWaits brings a job table to the schema of sequences and batches:
// the columns sequence_key, sequence_head (with its unique index, partial
// on PostgreSQL and SQLite, filtered on SQL Server), sequence_release,
// batch_id and batch_callback, which GORM's AutoMigrate of [Row] adds to
// a table of an earlier version, and the indexes the promotion reads:
//
//   - pending: on PostgreSQL (id) WHERE state = 'pending', elsewhere
//     (state, id): the maintenance's scan of pending jobs;
//   - sequence: (sequence_key, state, id): a sequence's first pending job;
//   - batch: (batch_id, state): a batch's jobs that are not final, and
//     its counts by state;
//   - callback: (batch_callback): a batch's callback.
//
// Like every step it creates only what is missing.
func createWaits(db *gorm.DB, table string, dialect dialects.Name) error {
	if err := autoMigrate(db, table, &Row{}); err != nil {
		return err
	}
	postgres := dialect == dialects.Postgres
	pending, sequence, batch, callback := WaitIndexNames(db, table)
	t := clause.Table{Name: table}
	col := func(n string) clause.Column { return clause.Column{Name: n} }
	exists := "CREATE INDEX ? ON ? "
	if postgres {
		exists = "CREATE INDEX IF NOT EXISTS ? ON ? "
	}
	idx := []index{
		{sequence, exists + "(?, ?, ?)", []any{col(sequence), t, col(ColSequenceKey), col(ColState), col(ColID)}},
		{batch, exists + "(?, ?)", []any{col(batch), t, col(ColBatchID), col(ColState)}},
		{callback, exists + "(?)", []any{col(callback), t, col(ColBatchCallback)}},
	}
	if postgres {
		idx = append(idx, index{pending, exists + "(?) WHERE ? = 'pending'", []any{col(pending), t, col(ColID), col(ColState)}})
	} else {
		idx = append(idx, index{pending, exists + "(?, ?)", []any{col(pending), t, col(ColState), col(ColID)}})
	}
	if err := createIndexes(db, table, postgres, idx); err != nil {
		return err
	}
	if dialect == dialects.SQLServer {
		return filterUniqueIndexOf(db, table, ColSequenceHead)
	}
	return nil
}

package jobs

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/dialects"
)

// WorkflowIndexName returns the name of the index the schema step of
// workflows creates (see createWorkflows), by GORM's naming strategy of
// db: (workflow_id), a workflow's jobs.
func WorkflowIndexName(db *gorm.DB, table string) string {
	return db.NamingStrategy.IndexName(table, "workflow")
}

// createWorkflows brings a job table to the schema of workflows (schema
// version 5): the columns workflow_id, workflow_task, workflow_deps,
// workflow_ignore and workflow_inputs, which GORM's AutoMigrate of [Row]
// adds to a table of an earlier version, and the workflow index on
// (workflow_id), which the promotion and [Client.Workflow] read a
// workflow's jobs by. Like every step it creates only what is missing.
func createWorkflows(db *gorm.DB, table string, dialect dialects.Name) error {
	if err := autoMigrate(db, table, &Row{}); err != nil {
		return err
	}
	postgres := dialect == dialects.Postgres
	name := WorkflowIndexName(db, table)
	create := "CREATE INDEX ? ON ? (?)"
	if postgres {
		create = "CREATE INDEX IF NOT EXISTS ? ON ? (?)"
	}
	return createIndexes(db, table, postgres, []index{
		{name, create, []any{clause.Column{Name: name}, clause.Table{Name: table}, clause.Column{Name: ColWorkflowID}}},
	})
}

// Package dao is the portable data-access API of claimstore.
//
// It defines [Store], the contract programs use over one table (or index)
// holding rows of a GORM model type T, and the building blocks that
// contract takes: [Criteria] for eligibility, [Order] for ordering, [Set]
// for the fields a write or a claim applies, [Query] and [ClaimRequest].
//
// [Table] is its one implementation, built by [New] over a backend's
// driver (package dao/driver): it checks every request once against the
// model, wraps every error once with the prefix "claimstore: <operation>:",
// and claims with the [Strategy] chosen in New. Backend packages return a
// Table: adapters/postgres, adapters/mysql, adapters/sqlite,
// adapters/sqlserver (each linking its own database driver), the
// in-memory adapters/memstore and adapters/esstore for Elasticsearch.
// Beyond Store, a Table runs inside a caller's transaction ([Table.WithTx]),
// sees soft-deleted rows ([Table.Unscoped]), tells its table name
// ([Table.TableName]) and the database's time ([Table.Now]), and runs a
// non-blocking try-lock on its database ([Table.TryLock], which package
// coord's WithLock uses).
//
// The heart of the contract is the atomic find-and-claim, [Store.Claim]:
// select up to Limit rows matching Where, apply Set to them, and return them
// in their post-claim state, such that no two concurrent callers ever receive
// the same row as claimed. Backends on the fast-path allow-list do this in
// one operation ([StrategyFastPath]); every other backend runs the portable
// default written once in this package ([StrategyPortable]): read
// candidates, then claim each with a guarded update that re-asserts Where,
// keeping only the rows the update affected.
//
// # Field names and values
//
// Field names are the column names of the model's GORM schema (see driver.Model).
// An unknown field, a value whose type does not fit the column, an empty In
// list, a nil where a value is required, or any other malformed input is
// reported as [ErrInvalidArgument] before anything reaches the database.
// No input ever becomes SQL text: identifiers come from the schema and values
// are bound parameters.
//
// # Soft delete and timestamps
//
// A model with a soft-delete field (gorm.DeletedAt, as in gorm.Model, or
// the integer shapes of the gorm.io/plugin/soft_delete plugin) is soft
// deleted as GORM does it: Get, Find, Count, Update and Claim see live
// rows only, the live-row condition being added to the criteria every
// backend and every claim statement receives, and Delete marks rows
// deleted instead of removing them. [Table.Unscoped] sees every row and
// deletes for good. Columns GORM stamps automatically (autoCreateTime,
// autoUpdateTime, the CreatedAt and UpdatedAt conventions; time values or
// unix seconds, milliseconds, nanoseconds) are set by Create when zero
// and by Update and Claim unless their Set writes them, with the
// database's clock where the backend writes it in the same statement
// (PostgreSQL Update and fast-path claim, SQL Server Update) and the
// application's ([WithClock]) elsewhere. docs/models.md has the details.
//
// # Errors
//
// Adapters map their native errors to the sentinels of this package exactly
// once and keep the native error wrapped, so both errors.Is (with a sentinel)
// and errors.As (with the driver's error type) work. [IsRetryable] says
// whether retrying the same call can succeed.
package dao

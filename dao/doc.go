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
// # Errors
//
// Adapters map their native errors to the sentinels of this package exactly
// once and keep the native error wrapped, so both errors.Is (with a sentinel)
// and errors.As (with the driver's error type) work. [IsRetryable] says
// whether retrying the same call can succeed.
package dao

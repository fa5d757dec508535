// Package dao is the portable data-access API of claimstore.
//
// It defines [Store], the contract every adapter implements over one table
// (or index) holding rows of a GORM model type T, and the building blocks
// that contract takes: [Criteria] for eligibility, [Order] for ordering,
// [Set] for the fields a write or a claim applies, [Query] and
// [ClaimRequest].
//
// The heart of the contract is the atomic find-and-claim, [Store.Claim]:
// select up to Limit rows matching Where, apply Set to them, and return them
// in their post-claim state, such that no two concurrent callers ever receive
// the same row as claimed. Adapters on the fast-path allow-list do this in one
// statement; every other adapter uses the portable default written once in
// this package, [PortableClaim]: read candidates, then claim each with a
// guarded update that re-asserts Where, keeping only the rows the update
// affected.
//
// # Field names and values
//
// Field names are the column names of the model's GORM schema (see [Model]).
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

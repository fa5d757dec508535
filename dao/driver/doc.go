// Package driver is the interface between claimstore's portable layer and
// its backends. It is for adapter authors: programs use package dao and a
// backend package, and never call a driver directly, as programs use
// database/sql rather than database/sql/driver.
//
// A backend implements [Driver] for one table (or index) of a model type
// T: insert, select, count, update and delete on requests that the
// portable layer (dao.New, which returns the one implementation of
// dao.Store) has already checked against the model, plus the two steps of
// the portable claim, [Driver.ReadCandidates] and [Driver.ClaimRow]. It may
// add optional interfaces, which the portable layer detects with a type
// assertion:
//
//   - [Claimer]: a single-operation claim (the fast path), chosen by the
//     claim strategy;
//   - [KeyUpdater]: an update that returns the keys it matched, in one
//     operation (the batched, fenced outcome writes);
//   - [EachUpdater]: different values written to many rows in fewer
//     statements than one per row;
//   - [AbsentInserter]: many rows inserted in one operation, skipping
//     those a unique key already holds;
//   - [Getter]: a read by primary key of the backend's own;
//   - [TxBinder]: running inside a transaction the caller opened;
//   - [Migrator]: creating the table or index;
//   - [Clock]: reading the database's time;
//   - [Listener]: notifications between sessions;
//   - [As]: the escape hatch to the backend's own types.
//
// The package also holds what every driver shares: the request types the
// user builds through package dao ([Criteria], [Query], [ClaimRequest],
// [Set], [Order], [Increment]), the error sentinels drivers wrap, the
// parsed model ([Model]: schema, column kinds, value normalization,
// in-memory evaluation of criteria for backends without a query language)
// and the facts a driver states ([Info], [ClaimerInfo], [LostRace],
// [Collation], [RoundTrips]).
//
// The conformance package is the shared test suite a new driver must pass:
// build a store with dao.New over the driver and run conformance.Run.
package driver

// Package roundtrip counts database round trips exactly, with a
// database/sql driver hook (github.com/ngrok/sqlmw) rather than timing or
// log parsing.
//
// A [Counter] is an atomic count. [Open] returns a *sql.DB for a backend
// whose driver is wrapped so that every Exec, Query, Prepare, execution of
// a prepared statement, Begin, Commit and Rollback adds one; [Gorm] puts a
// GORM handle over such a *sql.DB, and [OpenGorm] does both. [Driver] and
// [Connector] wrap any other driver or connector the same way. The Counter
// documentation says precisely what one count is and what is not counted.
//
// Tests use it to prove that a PostgreSQL fast-path claim is one round trip
// and the portable default 1 + N; benchmarks report round trips per claim
// from it. It is tooling for the module's own tests and benchmarks, not a
// user feature, hence internal.
package roundtrip

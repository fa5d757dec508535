// Package bench is the machinery behind `claimstore-dev bench` and the claim
// benchmarks: it loads a table of [Job] rows, burns it down with concurrent
// claimers until no row is left, and accounts for every claimed primary key
// so that a row claimed twice (a duplicate) or never claimed (lost) is
// detected exactly. It measures wall time, claim calls and rows per second,
// claim latency percentiles and database round trips per claim, the latter
// counted exactly by a driver hook: the internal/testutil/roundtrip package for
// database/sql (and so for GORM; on PostgreSQL a pgx tracer inside pgx's
// database/sql driver, which also sees the statements the library runs
// with pgx natively on those connections), a pgx QueryTracer for the raw
// pgx baseline. The library's handle and both raw PostgreSQL baselines
// run in pgx's default query exec mode (QueryExecModeCacheStatement: each
// connection prepares a statement text once and then runs it in one round
// trip), so every variant runs the claim as the same prepared statement.
//
// A run compares variants on fresh tables of the same shape and size in one
// process: the library's Store.Claim, the raw driver executing the same SQL,
// and the naive SELECT-then-guarded-UPDATE-per-row loop written by hand.
// [Config.Variants] selects them by name ([VariantNames]), and
// [Config.Budget] stops each run of a slow variant after a wall time,
// reporting its figures so far as partial. The report starts with the
// machine and the server's version and gives each variant's rows per
// second, latency, round trips per claim and its throughput ratio to the
// raw baseline, never only an absolute time; [Report.WriteJSON] writes it
// for comparison across commits.
package bench

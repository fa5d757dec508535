// Package esstore is the Elasticsearch backend of claimstore: [New]
// returns the portable [dao.Table] over its driver, built on
// github.com/elastic/go-elasticsearch/v8. One store holds the rows of a
// GORM model type T as documents of one index.
//
// # Documents and mapping
//
// A document is the model serialized with its column names (parsed by
// driver.Model, the same GORM schema parsing as the SQL adapter, so one model
// works on both); its _id is the primary key. dao.Table.Migrate creates the
// index with an explicit, strict mapping derived from the model: keyword
// for strings, long for integers, double for floats, boolean, date for
// times, binary for []byte, and a disabled object (kept in _source, not
// indexed) for any other column type: a JSON column type is stored as
// JSON, a column with a GORM serializer (serializer:json) as the
// serializer's output. Binary, object and serialized columns cannot be used
// in criteria or ordering ([dao.ErrInvalidArgument], before any request).
// Unsigned integers above math.MaxInt64 do not fit a long and are refused.
//
// Elasticsearch enforces the uniqueness of _id only: unique indexes the
// model declares on other columns are not enforced by this store.
//
// Create assigns integer primary keys that are zero from a counter
// document in a second index (see [Indexes]), updated with
// optimistic concurrency: read with its _seq_no, written with if_seq_no and
// if_primary_term, retried on a version conflict. The keys are unique and
// increasing per index; unlike an auto-increment column they are allocated
// per batch, and an explicit key raises the counter above it.
//
// # Times
//
// Times are written as RFC 3339 strings with up to nine fraction digits in
// UTC (time.RFC3339Nano). The _source keeps the string as written, so a
// value read back is the same instant to the nanosecond (time.Time.Equal
// holds; the location becomes UTC and the monotonic reading is dropped).
// The index, however, stores dates at millisecond resolution: criteria and
// ordering on a time column compare values truncated to the millisecond.
// Years must be 0000 to 9999.
//
// # Criteria
//
// Criteria become the query DSL: Eq is a term query, In a terms query, the
// orderings range queries, IsNull/NotNull exists (negated with must_not),
// Ne an exists filter with a must_not term (a missing field matches
// neither Eq nor Ne, as NULL in SQL), And a bool filter, Or a bool should
// with minimum_should_match 1, and field-to-field comparisons a script
// query running the fixed [FieldCompareScript] with the field names as
// params. Strings compare as keywords, byte-wise. Ordering sorts on the
// fields with the primary key as the final tie breaker; NULLs sort last
// ascending and first descending.
//
// # Writes and refresh
//
// Elasticsearch searches only see refreshed documents. Every write of the
// store makes itself visible before it returns: Create, Delete and the claim
// writes send refresh=wait_for ([RefreshWaitFor], the default, waits for
// the next scheduled refresh) or refresh=true ([WithRefresh]); Update uses
// the update-by-query API, which only takes refresh=true. Get is real time.
// Update runs the fixed painless [WriteScript] with the Set as params
// (update by query changes documents only through a script); no value is
// ever concatenated into a script source. Delete searches the
// smallest keys up to the limit and deletes them in one bulk request, each
// delete guarded by if_seq_no/if_primary_term, so it is bounded and
// idempotent. Bulk writes are not atomic; see the driver's Insert (create.go).
//
// # Claim
//
// Claim is the portable default (dao.StrategyPortable) guarded by optimistic
// concurrency control alone: one search with seq_no_primary_term: true
// reads the candidates with their _source, _seq_no and _primary_term; each
// is then claimed by an index API call that writes the document as read,
// with the Set applied, carrying if_seq_no and if_primary_term. No script
// re-checks the criteria: a write succeeds only on the exact document
// version the search saw, and that version matched them. When another
// writer changed a candidate after the search, Elasticsearch answers 409
// version_conflict_engine_exception: the claim stops and returns the rows
// it had claimed together with an error wrapping [dao.ErrConflict]
// ([dao.LostRaceConflict]). A candidate deleted since the search is
// skipped (after the 409, a real-time get finds it gone). No row is ever
// claimed twice. A claim costs 1 + N round trips (one more when it meets a
// conflict) and reads at most one page of candidates ([WithPageSize]). The
// claim writes run no painless; scripts remain in Update and in
// field-to-field criteria only.
//
// Claimers that search at the same time read the same candidates in the
// same order, so under contention most of them conflict on their first
// row and return early: correctness holds, but throughput falls as workers
// are added, and callers must retry on [dao.IsRetryable] errors (with a
// little jitter). The claim's own refresh keeps the claimed rows out of the
// next search, so a retry sees fresh candidates.
//
// # Errors
//
// Native errors are mapped once: 404 is [dao.ErrNotFound], 409
// [dao.ErrConflict] (on Create, [dao.ErrDuplicate]), a 400 caused by a
// document or argument value [dao.ErrInvalidArgument], 429 [dao.ErrBusy],
// 502/503/504 and transport failures (connection refused or reset)
// [dao.ErrUnavailable]. The response is kept as an [*Error] (status, type,
// reason, body), reachable with errors.As.
//
// # References
//
// Elasticsearch Reference: "Optimistic concurrency control" (if_seq_no,
// if_primary_term and version conflicts); "Index API" (if_seq_no on
// writes, op_type create); "Get API" (real time); "Search API" (the
// seq_no_primary_term parameter, search_after); "refresh parameter"
// (true, wait_for and their costs); "Update by query API" (refresh, version
// conflicts abort the request); "Bulk API"; "Count API"; "Painless
// scripting language".
package esstore

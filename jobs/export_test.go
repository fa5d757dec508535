package jobs

// MigrateTo is migrate: Migrate up to schema version version, for tests
// that make a table of an older version.
var MigrateTo = migrate

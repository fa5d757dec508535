package jobs

// MigrateTo is migrate: Migrate up to schema version version, for tests
// that make a table of an older version.
var MigrateTo = migrate

// ConfigOf returns the configuration c runs with: cfg as NewClient
// completed it (defaults applied, deprecated fields read).
func ConfigOf(c *Client) Config { return c.cfg }

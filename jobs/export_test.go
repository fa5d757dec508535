package jobs

// ConfigOf returns the configuration c runs with: cfg as NewClient
// completed it (defaults applied, deprecated fields read).
func ConfigOf(c *Client) Config { return c.cfg }

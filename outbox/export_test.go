package outbox

import "time"

// CrashOnCancel makes r behave like a process that dies when its context
// ends: Run returns without finishing, marking or releasing the batches in
// flight, which stay processing until their lease expires.
func CrashOnCancel(r *Relay) { r.hardStop = true }

// SetHostClock makes r's database clock read the host's time from host
// instead of time.Now, as on a host whose wall clock is skewed; it reports
// false when r does not read the database clock.
func SetHostClock(r *Repository, host func() time.Time) bool {
	if r.dbc == nil {
		return false
	}
	r.dbc.Host = host
	return true
}

// ReaderConfigOf returns the configuration c reads with: its
// LogReaderConfig with defaults applied and deprecated fields read.
func ReaderConfigOf(c *LogConsumer) LogReaderConfig { return c.cfg }

package cli

import (
	"time"

	"github.com/claimstore/claimstore/dispatch"
)

// Event is one JSON line of the output of `claimstore dispatch run`: the
// worker's start, each fire, and its totals when it stops. The dispatch
// demo reads the lines of its worker processes to check every fire.
type Event struct {
	// Type is "start", "fire" or "stop".
	Type string `json:"type"`
	// Worker is the worker id.
	Worker string `json:"worker"`
	// HTTP is the address /readyz and /livez listen on (start; empty
	// without --http).
	HTTP string `json:"http,omitempty"`
	// Key and ID name the schedule fired; Due is the NextFireAt the fire
	// was claimed for, Lag how late it was claimed (seconds), End when the
	// handler returned by the worker's clock.
	Key string    `json:"key,omitempty"`
	ID  int64     `json:"id,omitempty"`
	Due time.Time `json:"due,omitzero"`
	Lag float64   `json:"lag_s,omitempty"`
	End time.Time `json:"end,omitzero"`
	// OK tells whether the fire succeeded; Error is its error otherwise.
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
	// Attempt is the step of the retry ladder: 1 + the consecutive
	// failures before this fire.
	Attempt int `json:"attempt,omitempty"`
	// Cron tells a cron schedule's fire from a once schedule's.
	Cron bool `json:"cron,omitempty"`
	// Payload is the schedule's payload as text.
	Payload string `json:"payload,omitempty"`
	// Stats and Fires are the worker's totals (stop).
	Stats *dispatch.Stats         `json:"stats,omitempty"`
	Fires *dispatch.ScheduleStats `json:"fires,omitempty"`
}

package jobadmin

import (
	"fmt"
	"strconv"
	"time"

	"github.com/claimstore/claimstore/jobs"
)

// Limit is a limited queue of a job table (jobs.Client.Limits) as the
// console's JSON and `claimstore jobs limits --json` show it: its
// recorded limit, its running jobs and its partitions in use.
type Limit struct {
	Queue string `json:"queue"`
	// Known is false when no client recorded the queue's limit; the
	// settings are then zero.
	Known      bool         `json:"known"`
	Max        int          `json:"max"`
	Rate       int          `json:"rate"`
	Period     string       `json:"period,omitempty"`
	Burst      int          `json:"burst"`
	ByKind     bool         `json:"byKind"`
	ByArgs     []string     `json:"byArgs"`
	RecordedAt *time.Time   `json:"recordedAt,omitempty"`
	Running    int          `json:"running"`
	Partitions []LimitShare `json:"partitions"`
	More       int          `json:"more"`
}

// LimitShare is one partition in use of a limited queue.
type LimitShare struct {
	Key     string   `json:"key"`
	Running int      `json:"running"`
	Tokens  *float64 `json:"tokens"`
}

// MaxText returns the limit's Max for people: "?" when unknown, "-"
// when the limit has none.
func (l Limit) MaxText() string {
	switch {
	case !l.Known:
		return "?"
	case l.Max == 0:
		return "-"
	}
	return strconv.Itoa(l.Max)
}

// UseText returns the queue's running jobs against its Max for people.
func (l Limit) UseText() string {
	switch {
	case !l.Known:
		return fmt.Sprintf("%d running, limit not recorded", l.Running)
	case l.Max == 0:
		return "no Max"
	case l.ByKind || len(l.ByArgs) > 0:
		return fmt.Sprintf("%d running, at most %d per partition", l.Running, l.Max)
	}
	return fmt.Sprintf("%d of %d running", l.Running, l.Max)
}

// RateText returns the limit's rate for people: "?" when unknown, "-"
// when the limit has none, else starts per period and the bucket.
func (l Limit) RateText() string {
	switch {
	case !l.Known:
		return "?"
	case l.Rate == 0:
		return "-"
	}
	return fmt.Sprintf("%d per %s, burst %d", l.Rate, l.Period, l.Burst)
}

// KeyText returns the partition's key for people: "(queue)" for the
// whole queue.
func (p LimitShare) KeyText() string {
	if p.Key == "" {
		return "(queue)"
	}
	return p.Key
}

// TokensText returns the partition's tokens to one decimal, "-" when no
// rate is known.
func (p LimitShare) TokensText() string {
	if p.Tokens == nil {
		return "-"
	}
	return strconv.FormatFloat(*p.Tokens, 'f', 1, 64)
}

// LimitView returns the view of in: settings zero and Known false when
// no client recorded the queue's limit, Period in Go's duration text
// when the limit has a rate.
func LimitView(in jobs.LimitInfo) Limit {
	q := Limit{Queue: in.Queue, ByArgs: []string{}, RecordedAt: in.RecordedAt, Running: in.Running, More: in.More, Partitions: []LimitShare{}}
	if l := in.Limit; l != nil {
		q.Known, q.Max, q.Rate, q.Burst, q.ByKind = true, l.Max, l.Rate, l.Burst, l.ByKind
		q.ByArgs = append(q.ByArgs, l.ByArgs...)
		if l.Rate > 0 {
			q.Period = l.Period.String()
		}
	}
	for _, p := range in.Partitions {
		q.Partitions = append(q.Partitions, LimitShare{Key: p.Key, Running: p.Running, Tokens: p.Tokens})
	}
	return q
}

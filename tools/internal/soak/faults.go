//go:build linux

package soak

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault kinds.
const (
	FaultKill      = "kill"      // SIGKILL a process, start it again after Pause
	FaultFreeze    = "freeze"    // SIGSTOP a process, SIGCONT after Pause
	FaultConnKill  = "conn-kill" // terminate a process's database connections
	FaultNATSKill  = "nats-kill" // SIGKILL a NATS node, start it again after Pause
	faultFirstGap  = 5 * time.Second
	faultMinGap    = 2 * time.Second
	faultMaxGap    = 8 * time.Second
	faultQuietTail = 5 * time.Second // no fault starts this close to the end of the load
)

// PlannedFault is one entry of a run's fault schedule.
type PlannedFault struct {
	// At is the offset from the start of the load.
	At time.Duration
	// Kind is a Fault* constant.
	Kind string
	// Target is a slot ("w2") or a NATS node index ("1").
	Target string
	// Pause is how long a killed process or node stays down, or a frozen
	// process stays frozen.
	Pause time.Duration
}

// String describes the fault.
func (f PlannedFault) String() string {
	switch f.Kind {
	case FaultKill:
		return fmt.Sprintf("SIGKILL %s, restarted after %v", f.Target, f.Pause)
	case FaultFreeze:
		return fmt.Sprintf("SIGSTOP %s for %v", f.Target, f.Pause)
	case FaultConnKill:
		return fmt.Sprintf("database connections of %s terminated", f.Target)
	case FaultNATSKill:
		return fmt.Sprintf("SIGKILL NATS node n%s, restarted after %v", f.Target, f.Pause)
	}
	return f.Kind + " " + f.Target
}

// PlanFaults draws the fault schedule of a load of length d over slots
// from seed: a fault every 2 to 8 s from the 5th second to 5 s before the
// end. A process is killed, frozen or disconnected from the database with
// weight 3 each (a worker three times as often as a producer, a relay
// and a Watermill subscriber twice as often), a NATS node killed with
// weight 1. The same seed, length and slots give the same schedule; with
// no subscribers a seed draws the schedule it drew before they existed.
func PlanFaults(seed uint64, d time.Duration, producers, workers, relays, subscribers int) []PlannedFault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var slots []string
	add := func(prefix string, n, weight int) {
		for i := range n {
			for range weight {
				slots = append(slots, fmt.Sprintf("%s%d", prefix, i+1))
			}
		}
	}
	add("p", producers, 1)
	add("w", workers, 3)
	add("r", relays, 2)
	add("s", subscribers, 2)
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)).Round(10*time.Millisecond)
	}
	var plan []PlannedFault
	for at := faultFirstGap; at < d-faultQuietTail; at += between(faultMinGap, faultMaxGap) {
		f := PlannedFault{At: at}
		switch k := rng.IntN(10); {
		case k < 3:
			f.Kind, f.Pause = FaultKill, between(300*time.Millisecond, 2*time.Second)
		case k < 6:
			f.Kind, f.Pause = FaultFreeze, between(500*time.Millisecond, 6*time.Second)
		case k < 9:
			f.Kind = FaultConnKill
		default:
			f.Kind, f.Target, f.Pause = FaultNATSKill, fmt.Sprint(1+rng.IntN(3)), between(time.Second, 4*time.Second)
		}
		if f.Target == "" {
			f.Target = slots[rng.IntN(len(slots))]
		}
		plan = append(plan, f)
	}
	return plan
}

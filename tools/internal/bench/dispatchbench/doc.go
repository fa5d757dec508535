// Package dispatchbench measures the schedule dispatcher for `claimstore
// bench dispatch`: a fresh schedule table is seeded with once schedules
// (due a day later, by Schedules.AddMany), worker processes (`claimstore dispatch
// run`, each writing one line per fire to a file of its own) are started,
// and one UPDATE makes every schedule due at the database's current time.
// The clock runs from that UPDATE until no schedule is active. The
// report gives fires per second, the fire lag (claim time − next_fire_at)
// at p50 and p99, and the verdict read from the processes' files: no
// schedule fired twice (duplicates) and none left unfired (missed).
//
// [Run] takes its options as an [Options] value, writes progress to the
// writer given there and returns a [Report]; it holds no state between
// runs.
package dispatchbench

//go:build !unix

package bench

import "time"

// processCPU reports that the process CPU time is not available.
func processCPU() (time.Duration, bool) { return 0, false }

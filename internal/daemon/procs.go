package daemon

import (
	"os"
	"runtime"
	"strconv"
)

// By default agenticd leaves GOMAXPROCS to the runtime, which operators expect and which
// Go makes container-aware (it follows the CPU quota). max_procs lowers it for machines
// where agenticd's agents compute beside it: agenticd brokers, and spread over every
// CPU its many short hand-offs wake a sleeping thread each, taking CPU from the agents.
// docs/BENCHMARKS.md gives what one P instead of two cost and saved on 2 CPUs.

// setMaxProcs sets GOMAXPROCS to configured unless that is 0 (the runtime's default) or
// the environment set GOMAXPROCS; it returns the value it set (0: none).
func setMaxProcs(configured int) int {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 {
		return 0 // the runtime took it
	}
	if configured == 0 {
		return 0
	}
	runtime.GOMAXPROCS(configured)
	return configured
}

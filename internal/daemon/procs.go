package daemon

import (
	"os"
	"runtime"
	"strconv"
)

// agenticd brokers; its ACP agents compute, as processes on the same machine (and so
// may its clients). With GOMAXPROCS at every CPU, Go spreads agenticd's many short
// hand-offs (a reader publishing, a stream sending, gRPC's writer flushing) over all of
// them and wakes a sleeping thread for each, which costs context switches and CPU the
// agents could use. Measured on 2 CPUs (agent, agenticd and benchmark clients on one
// machine), an ACP flood through agenticd took 1.06 × what a bare reader of the agent
// takes on one P, against 1.15 × on two; the price was about 0.1-0.16 ms more p99
// latency with 16 subscribers at 1,000 events/s (p50 within 0.03 ms). So agenticd (Run,
// the program; not a server embedded in another one) uses half of the CPUs it may use,
// at least one, unless max_procs or a valid GOMAXPROCS in the environment says
// otherwise. Half is carried over to larger machines unmeasured: it still leaves
// agenticd far more than its brokering needs.

// setMaxProcs sets GOMAXPROCS to configured (0: half of the current value, at least
// one), unless the environment set it; it returns the value it set (0: none).
func setMaxProcs(configured int) int {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 {
		return 0 // the runtime took it
	}
	procs := configured
	if procs == 0 {
		procs = max(1, runtime.GOMAXPROCS(0)/2)
	}
	runtime.GOMAXPROCS(procs)
	return procs
}

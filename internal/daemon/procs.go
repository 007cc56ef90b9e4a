package daemon

import (
	"os"
	"runtime"
)

// agenticd brokers: the agents it starts do the computing, as processes on the same
// machine. With GOMAXPROCS at every CPU, Go spreads agenticd's many short hand-offs
// (a reader publishing, a stream sending, gRPC's writer flushing) over all of them and
// wakes sleeping threads for each, which costs context switches and takes CPU from the
// agents. Measured on 2 CPUs, an ACP flood through agenticd finished 15 % sooner on one.
// So agenticd (Run, the program; not a server embedded in another one) uses half of the
// CPUs it may use, at least one, unless max_procs or GOMAXPROCS says otherwise.

// setMaxProcs sets GOMAXPROCS to configured (0: half of the current value, at least
// one), unless the environment set it; it returns the value it set (0: none) and the
// one to restore.
func setMaxProcs(configured int) (set, previous int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0, 0
	}
	set = configured
	if set == 0 {
		set = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return set, runtime.GOMAXPROCS(set)
}

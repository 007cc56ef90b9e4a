package daemon

import (
	"runtime"
	"testing"
)

// The program takes half the CPUs by default, what max_procs says otherwise, and leaves
// GOMAXPROCS alone when the environment set it.
func TestSetMaxProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	t.Setenv("GOMAXPROCS", "") // unset for the cases below (Setenv restores it)
	for _, c := range []struct{ start, configured, want int }{
		{start: 2, want: 1},
		{start: 1, want: 1},
		{start: 8, want: 4},
		{start: 8, configured: 3, want: 3},
	} {
		runtime.GOMAXPROCS(c.start)
		set, previous := setMaxProcs(c.configured)
		if set != c.want || previous != c.start || runtime.GOMAXPROCS(0) != c.want {
			t.Errorf("from %d, max_procs %d: set %d (previous %d), GOMAXPROCS now %d; want %d", c.start, c.configured, set, previous, runtime.GOMAXPROCS(0), c.want)
		}
	}
	runtime.GOMAXPROCS(4)
	t.Setenv("GOMAXPROCS", "4")
	if set, _ := setMaxProcs(0); set != 0 || runtime.GOMAXPROCS(0) != 4 {
		t.Errorf("with GOMAXPROCS in the environment: set %d, GOMAXPROCS now %d; want it left at 4", set, runtime.GOMAXPROCS(0))
	}
}

package daemon

import (
	"runtime"
	"testing"
)

// The program keeps the runtime's GOMAXPROCS by default, takes what max_procs says
// otherwise, and leaves GOMAXPROCS alone when the environment set it (an invalid value
// the runtime ignored does not count).
func TestSetMaxProcs(t *testing.T) {
	t.Cleanup(func() { runtime.SetDefaultGOMAXPROCS() })
	for _, c := range []struct {
		env                     string
		start, configured, want int
		set                     int
	}{
		{start: 2, want: 2, set: 0},
		{start: 8, want: 8, set: 0},
		{start: 8, configured: 3, want: 3, set: 3},
		{start: 2, configured: 1, want: 1, set: 1},
		{env: "4", start: 4, configured: 1, want: 4, set: 0},
		{env: "lots", start: 4, configured: 2, want: 2, set: 2},
		{env: "0", start: 4, want: 4, set: 0},
	} {
		t.Setenv("GOMAXPROCS", c.env)
		runtime.GOMAXPROCS(c.start)
		if set := setMaxProcs(c.configured); set != c.set || runtime.GOMAXPROCS(0) != c.want {
			t.Errorf("GOMAXPROCS=%q, from %d, max_procs %d: set %d, GOMAXPROCS now %d; want set %d, GOMAXPROCS %d",
				c.env, c.start, c.configured, set, runtime.GOMAXPROCS(0), c.set, c.want)
		}
	}
}

package sandbox

import (
	"strings"
	"testing"

	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// Terminals run under Options.Limits: here a write beyond the file size limit fails, and
// the terminal's own process limit holds. Run as an ordinary user, for whom RLIMIT_NPROC
// counts.
func TestTerminalsRunUnderTheLimits(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	_, terms := newTerminals(t, Options{Confinement: ConfineOn, Limits: Limits{Processes: 16, FileSize: 1 << 20}})
	if out, code := shell(t, terms, `dd if=/dev/zero of=big bs=1M count=2 2>&1; echo "exit $?"; wc -c < big`); !strings.Contains(out, "exit 153") || !strings.Contains(out, "1048576") {
		t.Errorf("a 2 MiB file under a 1 MiB limit (exit %d): %q; want dd killed by SIGXFSZ at 1 MiB", code, out)
	}
	// dash gives up at the first fork that fails.
	if out, code := shell(t, terms, `for i in $(seq 64); do sleep 1000 & done; echo all started`); code == 0 || !strings.Contains(out, "Cannot fork") {
		t.Errorf("64 sleeps under a limit of 16 tasks: exit %d, %q; want a fork refused", code, out)
	}
}

// The confinement state names each limit and how this machine enforces it, per tree,
// and the network policy.
func TestConfinementStateNamesTheLimits(t *testing.T) {
	roots, err := NewRoots([]string{t.TempDir()}, Options{Confinement: ConfineAuto, Limits: confine.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	state := roots.ConfinementState()
	t.Log(state)
	for _, want := range []string{"processes: 4096 per tree", "memory: 4 GiB per process (RLIMIT_DATA)", "file size: 1 GiB (RLIMIT_FSIZE)", "network open"} {
		if !strings.Contains(state, want) {
			t.Errorf("state %q lacks %q", state, want)
		}
	}
	s := confine.Probe()
	if s.Root && s.PidsCgroup == "" && !strings.Contains(state, "NOT ENFORCED") {
		t.Errorf("as root without a pids cgroup, state %q does not say the process limit is not enforced", state)
	}
	agent := roots.ProcessConfinement(ProcessPaths{Limits: &Limits{Memory: 1 << 30}, Network: &Network{AllowTCPPorts: []uint16{443}}})
	t.Log(agent)
	if !strings.Contains(agent, "memory: 1 GiB") || strings.Contains(agent, "processes") || !strings.Contains(agent, "port 443") {
		t.Errorf("an agent's own bounds: %q", agent)
	}
}

package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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

// While one session's terminal runs a fork bomb, held at its tree's process limit,
// another session's 20 commands all succeed and this process stays responsive; the
// bomb's processes end with its terminal. Run as an ordinary user, for whom RLIMIT_NPROC
// counts.
func TestBombDoesNotStarveAnotherSession(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	opts := Options{Confinement: ConfineOn, Limits: Limits{Processes: 256}}
	_, bombTerms := newTerminals(t, opts)
	_, terms := newTerminals(t, opts)
	marker := fmt.Sprintf("agenticd-bomb-%d-%d", os.Getpid(), time.Now().UnixNano())
	id, err := bombTerms.Create(context.Background(), TerminalSpec{Command: "/bin/bash", Args: []string{"-c", `b() { b | b & }; b; wait; sleep 1000`, marker}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bomb reached its limit", func() bool {
		out, err := bombTerms.Output(id)
		return err == nil && strings.Contains(out.Output, "Resource temporarily unavailable")
	})
	if n := len(processesWith(marker)); n >= 256 {
		t.Errorf("the bomb runs %d processes, limit 256 tasks", n)
	}
	var slowest, slowestCommand time.Duration
	for i := range 20 {
		start := time.Now()
		if out, code := shell(t, terms, fmt.Sprintf("echo ok %d", i)); code != 0 || strings.TrimSpace(out) != fmt.Sprintf("ok %d", i) {
			t.Errorf("command %d beside the bomb: exit %d, %q", i, code, out)
		}
		// A goroutine's round trip stands for the server answering a health check.
		ping := time.Now()
		answered := make(chan struct{})
		go func() { close(answered) }()
		<-answered
		slowest = max(slowest, time.Since(ping))
		slowestCommand = max(slowestCommand, time.Since(start))
	}
	t.Logf("beside the bomb: slowest command %v, slowest goroutine round trip %v", slowestCommand, slowest)
	if err := bombTerms.Kill(id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bomb's processes ended with its terminal", func() bool { return len(processesWith(marker)) == 0 })
}

package confine_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// bombScript starts up to 4×limit sleeps in bash, which retries a fork that fails with
// EAGAIN and says so on stderr; "spawned" means every fork succeeded.
func bombScript(marker string, limit int) string {
	return fmt.Sprintf(`for i in $(seq %d); do sleep %s & done; echo spawned; read line`, 4*limit, marker)
}

// startBomb starts bombScript confined by policy and returns it once bash reported a
// failed fork (true) or every fork succeeded (false).
func startBomb(t *testing.T, policy confine.Policy, dir, marker string, limit int) (*exec.Cmd, bool) {
	t.Helper()
	cmd := exec.Command("/bin/bash", "-c", bombScript(marker, limit))
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatalf("wrap: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog(t, cmd)
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		killSleeps(marker)
	})
	hit := make(chan bool, 2)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Resource temporarily unavailable") {
				hit <- true
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) == "spawned" {
			hit <- false
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return cmd, <-hit
}

// A process bomb stays at its tree's limit, and its processes end with it. Run as an
// ordinary user, for whom RLIMIT_NPROC counts (per tree: its own user namespace).
func TestProcessLimitHoldsABomb(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireSupport(t)
	const limit = 32
	tr := newTree(t)
	policy := tr.policy()
	policy.Limits = confine.Limits{Processes: limit}
	marker := markerSleep()
	cmd, hit := startBomb(t, policy, tr.ws, marker, limit)
	if !hit {
		t.Fatalf("the bomb started %d processes, limit %d", 4*limit, limit)
	}
	if n := countSleeps(marker); n >= limit {
		t.Errorf("%d sleeps run, limit %d tasks per tree", n, limit)
	}
	// A second tree is not counted with the first: it starts and forks.
	if r := run(t, &policy, tr.ws, `sleep 0 & wait; echo ok`); r.code != 0 || r.stdout != "ok\n" {
		t.Errorf("beside the bomb, another tree: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	// The init, whose threads count too, still forwards a signal at the limit.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("SIGTERM at the limit: exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if n := waitSleeps(marker, 0); n != 0 {
		t.Errorf("%d of the bomb's processes outlived it", n)
	}
}

// As root RLIMIT_NPROC does not count: a pids control group of the tree's own holds the
// bomb instead, where agenticd may create one.
func TestProcessLimitGroupHoldsRoot(t *testing.T) {
	requireSupport(t)
	if os.Getuid() != 0 || confine.Probe().PidsCgroup == "" {
		t.Skip("needs root and a writable cgroup v1 pids hierarchy")
	}
	const limit = 32
	tr := newTree(t)
	policy := tr.policy()
	policy.Limits = confine.Limits{Processes: limit}
	group, err := confine.NewGroup(policy.Limits)
	if err != nil || group == nil {
		t.Fatalf("NewGroup: %v, %v", group, err)
	}
	defer group.Remove()
	policy.Group = group
	marker := markerSleep()
	cmd, hit := startBomb(t, policy, tr.ws, marker, limit)
	if !hit {
		t.Fatalf("the bomb started %d processes as root, limit %d", 4*limit, limit)
	}
	if n := countSleeps(marker); n >= limit {
		t.Errorf("%d sleeps run, limit %d tasks per tree", n, limit)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := waitSleeps(marker, 0); n != 0 {
		t.Errorf("%d of the bomb's processes outlived it", n)
	}
}

// An allocation beyond the memory limit fails, and node still runs under it; a write
// beyond the file size limit fails. Only inside the tree: the same commands succeed
// outside it.
func TestMemoryAndFileSizeLimits(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireSupport(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	tr := newTree(t)
	policy := tr.policy()
	policy.Limits = confine.Limits{Memory: 1 << 30, FileSize: 1 << 20}
	alloc := node + ` -e 'try { new Uint8Array(1.5 * 2 ** 30); console.log("allocated") } catch (e) { console.log(e.message) }'`
	write := `dd if=/dev/zero of=big bs=1M count=2 2>/dev/null; echo $?; wc -c < big`
	if r := run(t, nil, tr.ws, alloc); strings.TrimSpace(r.stdout) != "allocated" {
		t.Fatalf("unconfined, node could not allocate 1.5 GiB (exit %d, %q %q): the test cannot tell", r.code, r.stdout, r.stderr)
	}
	if r := run(t, &policy, tr.ws, alloc); strings.TrimSpace(r.stdout) != "Array buffer allocation failed" {
		t.Errorf("1.5 GiB under a 1 GiB limit: exit %d, %q %q; want the allocation refused", r.code, r.stdout, r.stderr)
	}
	if r := run(t, nil, tr.ws, write); r.stdout != "0\n2097152\n" {
		t.Fatalf("unconfined, a 2 MiB file: %q %q", r.stdout, r.stderr)
	}
	// dd dies of SIGXFSZ (exit 128+25) at the limit, having written up to it.
	if r := run(t, &policy, tr.ws, write); r.stdout != "153\n1048576\n" {
		t.Errorf("2 MiB under a 1 MiB limit: %q %q; want dd killed by SIGXFSZ at 1 MiB", r.stdout, r.stderr)
	}
	if r := run(t, &policy, tr.ws, `trap '' XFSZ; dd if=/dev/zero of=big bs=1M count=2`); r.code == 0 || !strings.Contains(r.stderr, "File too large") {
		t.Errorf("with SIGXFSZ ignored: exit %d, %q; want EFBIG", r.code, r.stderr)
	}
}

// node starts and runs under the default limits.
func TestNodeRunsUnderDefaultLimits(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireSupport(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	tr := newTree(t)
	policy := tr.policy()
	policy.Limits = confine.DefaultLimits
	r := run(t, &policy, tr.ws, node+` -e 'new WebAssembly.Memory({initial: 1}); const a = new Uint8Array(256 * 2 ** 20).fill(1); console.log("ok", a[a.length - 1])'`)
	if r.code != 0 || r.stdout != "ok 1\n" {
		t.Errorf("node under %+v: exit %d, %q %q", policy.Limits, r.code, r.stdout, r.stderr)
	}
}

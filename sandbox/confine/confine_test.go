package confine_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agenticd/agenticd/sandbox/confine"
	"github.com/creack/pty"
)

// requireSupport skips when this machine cannot confine at all: the
// tests below are about the boundary, not about its absence.
func requireSupport(t *testing.T) {
	t.Helper()
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("confinement unavailable: %s", strings.Join(missing, "; "))
	}
}

func TestProbe(t *testing.T) {
	s := confine.Probe()
	t.Logf("support: %s", s)
	if s.LandlockABI < 0 {
		t.Fatalf("LandlockABI %d", s.LandlockABI)
	}
	if s.Namespaces == nil && len(s.Missing()) == 0 && !strings.Contains(s.String(), "namespaces ok") {
		t.Fatalf("String() = %q, want it to say the namespaces work", s)
	}
}

// TestFilesystemBoundary runs each attack unconfined first, where it must
// succeed (so the check can fail), then confined.
func TestFilesystemBoundary(t *testing.T) {
	requireSupport(t)
	escape := filepath.Join(os.TempDir(), fmt.Sprintf("confine-escape-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(escape) })
	cases := []struct {
		name   string
		script string // {token}, {data}, {ws}, {tmp} and {escape} are replaced
		denied bool   // confined, the script must fail
	}{
		{"read token outside read paths", `cat {token}`, true},
		{"truncate token", `: > {token}`, true},
		{"write into data dir", `echo x > {data}/planted`, true},
		{"write into /tmp outside private tmp", `echo x > {escape}`, true},
		{"list data dir", `ls {data}`, true},
		{"write in workspace", `mkdir -p {ws}/sub && echo x > {ws}/sub/f && cat {ws}/sub/f`, false},
		{"write in private tmp", `echo x > {tmp}/f && rm {tmp}/f`, false},
		// mv falls back to copying when rename(2) fails: the same inode
		// afterwards shows it renamed.
		{"rename across workspace dirs", `mkdir -p {ws}/a {ws}/b && echo x > {ws}/a/f && i=$(stat -c %i {ws}/a/f) && mv {ws}/a/f {ws}/b/f && [ "$(stat -c %i {ws}/b/f)" = "$i" ]`, false},
		{"hard link across workspace dirs", `mkdir -p {ws}/c {ws}/d && echo x > {ws}/c/f && ln {ws}/c/f {ws}/d/f`, false},
		{"write /dev/null, read /dev/urandom", `echo x > /dev/null && head -c 4 /dev/urandom | wc -c`, false},
		{"read /etc", `cat /etc/passwd > /dev/null`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			script := strings.NewReplacer("{token}", tr.token, "{data}", tr.data, "{ws}", tr.ws,
				"{tmp}", tr.tmp, "{escape}", escape).Replace(tc.script)
			if plain := run(t, nil, tr.ws, script); plain.code != 0 {
				t.Fatalf("unconfined, %q failed (%d): %s", script, plain.code, plain.stderr)
			}
			os.Remove(escape)
			// Undo what the plain run did so the confined run starts the same.
			for _, dir := range []string{tr.ws, tr.data} {
				os.RemoveAll(dir)
				os.Mkdir(dir, 0o755)
			}
			os.WriteFile(tr.token, []byte("tok-7f3a9\n"), 0o600)

			policy := tr.policy()
			got := run(t, &policy, tr.ws, script)
			if tc.denied {
				if got.code == 0 {
					t.Fatalf("confined, %q succeeded: %q", script, got.stdout)
				}
				if !strings.Contains(got.stderr, "Permission denied") {
					t.Fatalf("confined, %q failed without a permission error: %q", script, got.stderr)
				}
				if strings.Contains(got.stdout, "tok-7f3a9") {
					t.Fatalf("token leaked: %q", got.stdout)
				}
				if _, err := os.Stat(escape); err == nil {
					t.Fatalf("%s was written", escape)
				}
				if b, _ := os.ReadFile(tr.token); string(b) != "tok-7f3a9\n" {
					t.Fatalf("token file changed to %q", b)
				}
				return
			}
			if got.code != 0 {
				t.Fatalf("confined, %q failed (%d): %s", script, got.code, got.stderr)
			}
		})
	}
}

// TestFilesKeepOwner: the user namespace maps the caller's ids to
// themselves, so what the command creates belongs to the caller.
func TestFilesKeepOwner(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	policy := tr.policy()
	if got := run(t, &policy, tr.ws, `echo x > f; id -u; id -g`); got.code != 0 {
		t.Fatalf("confined failed (%d): %s", got.code, got.stderr)
	} else if want := fmt.Sprintf("%d\n%d\n", os.Getuid(), os.Getgid()); got.stdout != want {
		t.Fatalf("ids inside = %q, want %q", got.stdout, want)
	}
	info, err := os.Stat(filepath.Join(tr.ws, "f"))
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	if int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
		t.Fatalf("file owned by %d:%d, want %d:%d", st.Uid, st.Gid, os.Getuid(), os.Getgid())
	}
}

// TestParentEnvironHidden: a helper standing in for agenticd holds a
// secret in its environment and starts a shell without it. Unconfined the
// shell reads the secret from /proc/<helper>/environ; confined it sees
// only its own PID namespace.
func TestParentEnvironHidden(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	secret := fmt.Sprintf("s3cr3t-%d", time.Now().UnixNano())
	script := `
		cat /proc/$PPID/environ 2>/dev/null | tr '\0' '\n'
		for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null | tr '\0' '\n'; done
		echo "pids: $(cd /proc && echo [0-9]*)"`
	helper := func(mode string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/proc/self/exe", script, tr.ws)
		cmd.Env = append(os.Environ(), helperEnv+"="+mode, secretEnv+"="+secret)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s helper: %v: %s", mode, err, out)
		}
		return string(out)
	}
	if out := helper("plain"); !strings.Contains(out, secret) {
		t.Fatalf("unconfined, the shell did not find the parent's secret; the check proves nothing:\n%s", out)
	}
	out := helper("confined")
	if strings.Contains(out, secret) {
		t.Fatalf("confined, the shell read the parent's secret:\n%s", out)
	}
	if strings.Contains(out, "AGENTICD_CONFINE") {
		t.Fatalf("confined, the init's marker variable reached the command:\n%s", out)
	}
	// The helper is outside the namespace: the shell's parent is the init
	// (pid 1) and the only processes are the init, the shell and its children.
	last := out[strings.LastIndex(out, "pids: "):]
	if fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(last), "pids: ")); len(fields) > 4 || fields[0] != "1" {
		t.Fatalf("confined /proc shows %v, want only the namespace's few processes starting at 1", fields)
	}
}

// TestCommandHasNoCapabilities: the init's capabilities in the namespace
// (all of them when agenticd runs as root, two ambient ones otherwise) do
// not reach the command, and no file capability can add any.
func TestCommandHasNoCapabilities(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	const script = `grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status`
	if plain := run(t, nil, tr.ws, script); !strings.Contains(plain.stdout, "CapBnd:\t000001") {
		t.Fatalf("unconfined, the bounding set is already empty: %q", plain.stdout)
	}
	policy := tr.policy()
	got := run(t, &policy, tr.ws, script)
	for _, line := range strings.Split(strings.TrimSpace(got.stdout), "\n") {
		if !strings.HasSuffix(line, "0000000000000000") {
			t.Fatalf("confined command holds capabilities: %q", got.stdout)
		}
	}
	if got.stdout == "" {
		t.Fatalf("no capability lines: %q", got.stderr)
	}
}

// watchdog kills cmd's process group if the test has not finished
// within 10 s, so a broken boundary fails the test instead of hanging it.
func watchdog(t *testing.T, cmd *exec.Cmd) {
	timer := time.AfterFunc(10*time.Second, func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	t.Cleanup(func() { timer.Stop() })
}

// markerSleep is a sleep whose duration is unique to this test run, so
// scanning /proc finds exactly the processes this test started.
func markerSleep() string {
	return fmt.Sprintf("1000.%09d", time.Now().UnixNano()%1e9)
}

// sleepPids are the processes (anywhere on the machine) that run
// "sleep marker".
func sleepPids(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte("sleep\x00"+marker+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func countSleeps(marker string) int { return len(sleepPids(marker)) }

func killSleeps(marker string) {
	for _, pid := range sleepPids(marker) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitSleeps waits up to 5 s for countSleeps(marker) to become want.
func waitSleeps(marker string, want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := countSleeps(marker)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// escapeScript starts a setsid'd sleep and a double-forked one, says
// "started" and then waits for a line on stdin.
func escapeScript(marker string) string {
	return fmt.Sprintf(`setsid sleep %[1]s </dev/null >/dev/null 2>&1 &
(sh -c 'sleep %[1]s </dev/null >/dev/null 2>&1 &' &)
echo started
read line
exit 3`, marker)
}

// TestNothingOutlives: background processes that left the command's
// session and process group die with it, however it ends.
func TestNothingOutlives(t *testing.T) {
	requireSupport(t)
	cases := []struct {
		name     string
		end      func(cmd *exec.Cmd, stdin io.WriteCloser) error
		wantCode int
	}{
		{"command exits", func(_ *exec.Cmd, stdin io.WriteCloser) error {
			_, err := io.WriteString(stdin, "go\n")
			return err
		}, 3},
		// What agenticd's process-group kill does.
		{"init SIGKILLed", func(cmd *exec.Cmd, _ io.WriteCloser) error {
			return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}, -1},
		{"init SIGTERMed", func(cmd *exec.Cmd, _ io.WriteCloser) error {
			return cmd.Process.Signal(syscall.SIGTERM)
		}, 128 + int(syscall.SIGTERM)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			marker := markerSleep()
			policy := tr.policy()
			cmd, stdin := startEscaper(t, &policy, tr.ws, marker)
			if n := waitSleeps(marker, 2); n != 2 {
				t.Fatalf("%d marked sleeps running, want 2 before the end", n)
			}
			if err := tc.end(cmd, stdin); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.wantCode {
				t.Fatalf("exit code %d, want %d (%v)", code, tc.wantCode, cmd.ProcessState)
			}
			if n := waitSleeps(marker, 0); n != 0 {
				t.Fatalf("%d marked sleeps outlived the command", n)
			}
		})
	}
	// Without the boundary the same script leaves both sleeps behind:
	// the checks above can fail.
	t.Run("unconfined control", func(t *testing.T) {
		tr := newTree(t)
		marker := markerSleep()
		t.Cleanup(func() { killSleeps(marker) })
		cmd, stdin := startEscaper(t, nil, tr.ws, marker)
		if n := waitSleeps(marker, 2); n != 2 {
			t.Fatalf("%d marked sleeps running, want 2", n)
		}
		io.WriteString(stdin, "go\n")
		cmd.Wait()
		time.Sleep(100 * time.Millisecond)
		if n := countSleeps(marker); n != 2 {
			t.Fatalf("unconfined, %d marked sleeps survived, want 2", n)
		}
	})
}

// startEscaper starts escapeScript in its own process group (as agenticd
// starts agents) and waits for it to say "started".
func startEscaper(t *testing.T, policy *confine.Policy, dir, marker string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", escapeScript(marker))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if policy != nil {
		if _, err := policy.Wrap(cmd); err != nil {
			t.Fatal(err)
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog(t, cmd)
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("script said %q (%v), want started", line, err)
	}
	return cmd, stdin
}

func TestExitStatusAndStdio(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	policy := tr.policy()
	cases := []struct {
		script string
		code   int
	}{
		{`exit 7`, 7},
		{`kill -KILL $$`, 128 + int(syscall.SIGKILL)},
		{`exec /no/such/command`, 127},
	}
	for _, tc := range cases {
		if got := run(t, &policy, tr.ws, tc.script); got.code != tc.code {
			t.Errorf("%q exited %d, want %d (stderr %q)", tc.script, got.code, tc.code, got.stderr)
		}
	}

	cmd := exec.Command("/bin/sh", "-c", `tr a-z A-Z; echo err >&2`)
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader("hello\nworld\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "HELLO\nWORLD\n" || stderr.String() != "err\n" {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestSignalForwarded: SIGTERM to the init reaches the command once, which
// can then end on its own terms.
func TestSignalForwarded(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	policy := tr.policy()
	cmd := exec.Command("/bin/sh", "-c", `trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog(t, cmd)
	r := bufio.NewReader(stdout)
	if line, _ := r.ReadString('\n'); line != "ready\n" {
		t.Fatalf("got %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("wait: %v (output %q)", err, rest)
	}
	if string(rest) != "got-term\n" {
		t.Fatalf("after SIGTERM the command wrote %q, want got-term once", rest)
	}
}

// TestUnderPty: pty.Start on a wrapped interactive shell. The shell has the
// terminal (its stdin is one), is in its foreground group (Ctrl-C reaches
// it once), and echo works. (tty(1) cannot name it: its /dev/pts/N lies in
// the host's devpts, which the shell does not see.)
func TestUnderPty(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	policy := tr.policy()
	cmd := exec.Command("/bin/sh", "-i")
	cmd.Dir = tr.ws
	cmd.Env = append(os.Environ(), "PS1=$ ")
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	watchdog(t, cmd)
	out := &screen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(out, ptmx) // ends with EIO when the shell exits
	}()
	// Each step waits for the terminal's answer to the one before: the trap is set once
	// hello-42 is printed, and Ctrl-C has reached the terminal once it echoes ^C.
	io.WriteString(ptmx, "trap 'echo caught-$((40+2))' INT; test -t 0 && echo on-a-$((3*3))-tty; echo hello-$((6*7))\n")
	out.waitFor(t, "hello-42")
	ptmx.Write([]byte{3}) // Ctrl-C
	out.waitFor(t, "^C")
	io.WriteString(ptmx, "exit 5\n")
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 5 {
		t.Fatalf("wait: %v, want exit 5", err)
	}
	<-done
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if !strings.Contains(got, "on-a-9-tty\n") {
		t.Errorf("the shell's stdin is not a terminal:\n%s", got)
	}
	if !strings.Contains(got, "\nhello-42\n") {
		t.Errorf("echo missing:\n%s", got)
	}
	if n := strings.Count(got, "caught-42"); n != 1 {
		t.Errorf("Ctrl-C reached the shell %d times, want once:\n%s", n, got)
	}
}

// TestPtyGrant: opening a new pty needs Policy.Pty.
func TestPtyGrant(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	const script = `exec 3<>/dev/ptmx && echo opened`
	policy := tr.policy()
	if got := run(t, &policy, tr.ws, script); got.code == 0 {
		t.Fatalf("without Pty, /dev/ptmx opened: %q", got.stdout)
	}
	policy.Pty = true
	if got := run(t, &policy, tr.ws, script); got.code != 0 || got.stdout != "opened\n" {
		t.Fatalf("with Pty, /dev/ptmx: %d %q %q", got.code, got.stdout, got.stderr)
	}
}

func TestWrapRejectsBadPolicy(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	cases := []struct {
		name   string
		policy confine.Policy
		path   string
		want   string
	}{
		{"relative path", confine.Policy{ReadOnly: []string{"usr"}}, "/bin/sh", "not absolute"},
		{"missing path", confine.Policy{ReadOnly: []string{"/usr"}, ReadWrite: []string{filepath.Join(tr.base, "nope")}}, "/bin/sh", "no such file"},
		{"command outside", confine.Policy{ReadOnly: []string{"/etc"}, ReadWrite: []string{tr.ws}}, "/bin/sh", "outside the policy's paths"},
	}
	t.Run("wrapped twice", func(t *testing.T) {
		cmd := exec.Command("/bin/sh")
		policy := tr.policy()
		if _, err := policy.Wrap(cmd); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.Wrap(cmd); !errors.Is(err, confine.ErrInvalidPolicy) || !strings.Contains(err.Error(), "already wrapped") {
			t.Fatalf("second Wrap = %v, want ErrInvalidPolicy saying already wrapped", err)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.path)
			_, err := tc.policy.Wrap(cmd)
			if !errors.Is(err, confine.ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Wrap = %v, want ErrInvalidPolicy saying %q", err, tc.want)
			}
			if cmd.Path != tc.path {
				t.Fatalf("a rejected Wrap changed the command to %q", cmd.Path)
			}
		})
	}
}

// TestForegroundUnderPty: under a pty the command's own process group, not
// the init's, is the terminal's foreground group, so Ctrl-C and SIGWINCH
// reach the command once, straight from the terminal.
func TestForegroundUnderPty(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	policy := tr.policy()
	// Fields 5 and 8 of /proc/<pid>/stat: process group and the
	// terminal's foreground group (a shell without -i keeps its group).
	cmd := exec.Command("/bin/sh", "-c", `set -- $(cat /proc/$$/stat); echo "pgrp=$5 tpgid=$8"`)
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	watchdog(t, cmd)
	out, _ := io.ReadAll(ptmx) // ends with EIO when the command exits
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	var pgrp, tpgid int
	if _, err := fmt.Sscanf(string(out), "pgrp=%d tpgid=%d", &pgrp, &tpgid); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if pgrp != tpgid || pgrp == 1 {
		t.Fatalf("pgrp=%d tpgid=%d: want the command's group (not the init's, 1) in the foreground", pgrp, tpgid)
	}
}

// TestDiesWithParent: when agenticd (here a helper) dies without a chance
// to clean up, its confined command and the command's children die too.
func TestDiesWithParent(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	marker := markerSleep()
	t.Cleanup(func() { killSleeps(marker) })
	helper := exec.Command("/proc/self/exe", fmt.Sprintf("setsid sleep %s & sleep 1000", marker), tr.ws)
	helper.Env = append(os.Environ(), helperEnv+"=confined")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	if n := waitSleeps(marker, 1); n != 1 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("%d marked sleeps running, want 1", n)
	}
	helper.Process.Kill()
	helper.Wait()
	if n := waitSleeps(marker, 0); n != 0 {
		t.Fatalf("%d marked sleeps outlived their agenticd", n)
	}
}

// TestVanishedPathFailsLoudly: a policy path that disappears between Wrap
// and Start stops the command from running at all.
func TestVanishedPathFailsLoudly(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	policy := tr.policy()
	policy.ReadOnly = append(policy.ReadOnly, tr.data)
	cmd := exec.Command("/bin/sh", "-c", "echo ran")
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tr.data); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != confine.ExitSetupFailed || stdout.Len() > 0 {
		t.Fatalf("exit %d, stdout %q, want %d and no output", code, stdout.String(), confine.ExitSetupFailed)
	}
	if !strings.Contains(stderr.String(), "confine: landlock:") {
		t.Fatalf("stderr %q does not say what failed", stderr.String())
	}
}

func TestSupportMissing(t *testing.T) {
	full := confine.Support{LandlockABI: 7}
	if m := full.Missing(); len(m) != 0 {
		t.Fatalf("ABI 7 with namespaces: missing %q", m)
	}
	old := confine.Support{LandlockABI: 2, Namespaces: errors.New("user namespaces disabled")}
	m := old.Missing()
	if len(m) != 2 || !strings.Contains(m[0], "Landlock ABI 2") || !strings.Contains(m[1], "user namespaces disabled") {
		t.Fatalf("missing %q", m)
	}
}

// maskedProcEnv runs TestWithoutNamespaces's checks in a child test binary
// whose /proc is partly covered (as containers cover it), where the kernel
// refuses a fresh /proc in a user namespace.
const maskedProcEnv = "CONFINE_TEST_MASKED_PROC"

// TestWithoutNamespaces: where namespaces cannot be used, a strict policy
// is refused with ErrUnsupported, and a best-effort one says what is
// missing and still applies Landlock.
func TestWithoutNamespaces(t *testing.T) {
	if os.Getenv(maskedProcEnv) == "" {
		if os.Getuid() != 0 {
			t.Skip("covering /proc needs root")
		}
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("needs unshare(1)")
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount -t tmpfs none /proc/bus && exec "$0" -test.run='^TestWithoutNamespaces$' -test.v`, self)
		cmd.Env = append(os.Environ(), maskedProcEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestWithoutNamespaces") {
			t.Fatalf("masked /proc run: %v\n%s", err, out)
		}
		return
	}
	support := confine.Probe()
	if support.Namespaces == nil {
		t.Fatal("namespaces probed usable under a masked /proc")
	}
	tr := newTree(t)
	policy := tr.policy()
	if _, err := policy.Wrap(exec.Command("/bin/sh", "-c", "true")); !errors.Is(err, confine.ErrUnsupported) {
		t.Fatalf("strict Wrap = %v, want ErrUnsupported", err)
	}
	policy.BestEffort = true
	cmd := exec.Command("/bin/sh", "-c", `echo $$; cat `+tr.token)
	missing, err := policy.Wrap(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || !strings.Contains(missing[0], "process confinement") {
		t.Fatalf("missing = %q, want process confinement only", missing)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	if !strings.Contains(stderr.String(), "Permission denied") || strings.Contains(stdout.String(), "tok-") {
		t.Fatalf("best effort read the token: stdout %q stderr %q", stdout.String(), stderr.String())
	}
	// No init: the command took over the started process.
	if want := fmt.Sprintf("%d\n", cmd.Process.Pid); stdout.String() != want {
		t.Fatalf("command pid %q, want the started process %q", stdout.String(), want)
	}
}

// screen collects a pty's output while a test reads it.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the output holds want; the bound turns a hang into a failure.
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the terminal after 20s:\n%s", want, s.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSupportMissingByABI: Landlock ABIs 3 to 5 confine files but not
// abstract Unix sockets and signals (ABI 6): that is reported as missing,
// so auto mode says "partial" and on mode refuses.
func TestSupportMissingByABI(t *testing.T) {
	nsDown := errors.New("user namespaces disabled")
	for abi := range 10 {
		for _, ns := range []error{nil, nsDown} {
			s := confine.Support{LandlockABI: abi, Namespaces: ns}
			missing := strings.Join(s.Missing(), "; ")
			files := strings.Contains(missing, "filesystem confinement")
			scoping := strings.Contains(missing, "IPC scoping")
			if files != (abi < 3) {
				t.Errorf("ABI %d, namespaces %v: filesystem confinement reported missing = %v: %q", abi, ns, files, missing)
			}
			if scoping != (abi >= 3 && abi < 6) {
				t.Errorf("ABI %d, namespaces %v: IPC scoping reported missing = %v: %q", abi, ns, scoping, missing)
			}
			if scoping && !strings.Contains(missing, fmt.Sprintf("Landlock ABI %d, need 6", abi)) {
				t.Errorf("ABI %d: the scoping gap does not say which ABI is needed: %q", abi, missing)
			}
			if signals := strings.Contains(missing, "signal"); signals != (scoping && ns != nil) {
				t.Errorf("ABI %d, namespaces %v: signals reported missing = %v (only a PID namespace keeps other processes out of reach): %q", abi, ns, signals, missing)
			}
			if sockets := strings.Contains(missing, "every Unix socket"); sockets != (ns != nil && abi < 9) {
				t.Errorf("ABI %d, namespaces %v: pathname sockets reported missing = %v: %q", abi, ns, sockets, missing)
			}
		}
	}
}

// TestDevptsFallbackIsReported: where devpts cannot be mounted, the summary
// says that commands cannot open terminals.
func TestDevptsFallbackIsReported(t *testing.T) {
	s := confine.Support{LandlockABI: 7, Devpts: errors.New("mount devpts: operation not permitted")}
	if !strings.Contains(s.String(), "cannot open new terminals") || !strings.Contains(s.String(), "operation not permitted") {
		t.Fatalf("String() = %q", s)
	}
	if strings.Contains(confine.Support{LandlockABI: 7}.String(), "terminals") {
		t.Fatalf("with devpts, String() = %q", confine.Support{LandlockABI: 7})
	}
}

// TestOtherTerminalsHidden: a terminal the test opened (as agenticd or
// another session holds one) cannot be opened by a confined command, even
// one granted Pty; it sees a /dev/pts of its own and can still open new
// terminals there.
func TestOtherTerminalsHidden(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	script := fmt.Sprintf(`echo hijack > %s; echo open=$?; echo "ls: $(ls /dev/pts | tr '\n' ' ')"; exec 3<>/dev/ptmx && echo new=ok`, tty.Name())
	if plain := run(t, nil, tr.ws, script); !strings.Contains(plain.stdout, "open=0") {
		t.Fatalf("unconfined, %s did not open; the check proves nothing: %q %q", tty.Name(), plain.stdout, plain.stderr)
	}
	policy := tr.policy()
	policy.Pty = true
	got := run(t, &policy, tr.ws, script)
	if strings.Contains(got.stdout, "open=0") {
		t.Errorf("confined, the command opened %s: %q", tty.Name(), got.stdout)
	}
	if !strings.Contains(got.stdout, "ls: ptmx \n") {
		t.Errorf("confined, /dev/pts holds more than a fresh instance's ptmx: %q", got.stdout)
	}
	if !strings.Contains(got.stdout, "new=ok") {
		t.Errorf("confined with Pty, the command cannot open a new terminal: %q %q", got.stdout, got.stderr)
	}
}

// listen serves a Unix socket at path, answering every connection with
// "hello from <path>".
func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "hello from %s", path)
			c.Close()
		}
	}()
}

// connect runs the test binary's connect helper, confined by policy unless it
// is nil, and reports whether it got the listener's greeting.
func connect(t *testing.T, policy *confine.Policy, path string) (bool, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, path)
	cmd.Env = append(os.Environ(), helperEnv+"=connect")
	if policy != nil {
		p := *policy
		p.ReadOnly = append(slices.Clone(p.ReadOnly), filepath.Dir(self))
		if _, err := p.Wrap(cmd); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := cmd.CombinedOutput()
	return string(out) == "hello from "+path, string(out)
}

// TestUnixSocketsOutsideUnreachable: a Unix socket bound outside the paths
// a command may write (a session bus, docker.sock, an SSH agent) refuses
// it, on kernels whose Landlock leaves connect(2) alone too; one in its
// workspace still answers.
func TestUnixSocketsOutsideUnreachable(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	outside := filepath.Join(tr.config, "agent.sock")
	inside := filepath.Join(tr.ws, "dev.sock")
	listen(t, outside)
	listen(t, inside)
	for _, path := range []string{outside, inside} {
		if ok, out := connect(t, nil, path); !ok {
			t.Fatalf("unconfined, %s did not answer; the check proves nothing: %q", path, out)
		}
	}
	policy := tr.policy()
	if ok, out := connect(t, &policy, outside); ok || !strings.Contains(out, "connect: ") {
		t.Errorf("confined, the command reached %s, or failed before connecting: %q", outside, out)
	}
	if ok, out := connect(t, &policy, inside); !ok {
		t.Errorf("confined, the socket in the workspace did not answer: %q", out)
	}
}

// TestRuntimeDirHidden: /run/user/<uid> is covered as a whole, so a socket
// bound there after the command started (a new SSH agent) is out of reach
// too.
func TestRuntimeDirHidden(t *testing.T) {
	requireSupport(t)
	runtimeDir := fmt.Sprintf("/run/user/%d", os.Getuid())
	if _, err := os.Stat(runtimeDir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(runtimeDir, 0o700); err != nil {
			t.Skipf("no %s and cannot make one: %v", runtimeDir, err)
		}
		t.Cleanup(func() { os.Remove(runtimeDir) })
	}
	dir, err := os.MkdirTemp(runtimeDir, "confine-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tr := newTree(t)
	path := filepath.Join(dir, "late.sock")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The shell waits for the socket, then becomes the connect helper.
	policy := tr.policy()
	policy.ReadOnly = append(policy.ReadOnly, filepath.Dir(self))
	cmd := exec.Command("/bin/sh", "-c", `read line; exec "$0" "$1"`, self, path)
	cmd.Env = append(os.Environ(), helperEnv+"=connect")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog(t, cmd)
	listen(t, path) // after the command's boundary is up
	if ok, out := connect(t, nil, path); !ok {
		t.Fatalf("unconfined, %s did not answer; the check proves nothing: %q", path, out)
	}
	io.WriteString(stdin, "go\n")
	err = cmd.Wait()
	if err == nil || strings.Contains(out.String(), "hello from") || !strings.Contains(out.String(), "connect: ") {
		t.Errorf("confined, the command reached %s, bound after it started: %v, %q", path, err, out.String())
	}
}

package confine_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// wrapIn is sh -c script wrapped by policy, to start in dir; it writes to out.
func wrapIn(t *testing.T, policy confine.Policy, dir, script string, out *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if _, err := policy.Wrap(cmd); err != nil {
		t.Fatalf("wrap: %v", err)
	}
	return cmd
}

// exitCode runs cmd and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run: %v", err)
	}
	return cmd.ProcessState.ExitCode()
}

// The command starts in cmd.Dir as its own mount namespace names it, given as a path or
// as a descriptor the caller holds open: getcwd answers, and ".." leads to the parent the
// namespace shows. Run as an ordinary user, whom getcwd fails outside the namespace.
func TestStartsInDirInsideItsNamespace(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireSupport(t)
	tr := newTree(t)
	open, err := os.Open(tr.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	for _, dir := range []string{tr.ws, fmt.Sprintf("/proc/self/fd/%d", open.Fd())} {
		var out bytes.Buffer
		cmd := wrapIn(t, tr.policy(), dir, `/bin/pwd && cd .. && /bin/pwd`, &out)
		if code := exitCode(t, cmd); code != 0 || out.String() != tr.ws+"\n"+tr.base+"\n" {
			t.Errorf("in %s: exit %d, %q; want %q", dir, code, out.String(), tr.ws+"\n"+tr.base+"\n")
		}
	}
}

// A working directory swapped for a symlink to elsewhere between Wrap and the start is
// refused: the command does not run. One swapped before Wrap, while the caller held it
// open, cannot redirect it either: it starts in the directory the caller opened, wherever
// that has moved.
func TestReplacedDirRefused(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireSupport(t)
	tr := newTree(t)
	sub := filepath.Join(tr.ws, "sub")
	swap := func(moved string) {
		t.Helper()
		if err := os.Rename(sub, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(tr.tmp, sub); err != nil {
			t.Fatal(err)
		}
	}
	script := `touch ran; /bin/pwd`

	// By path: swapped after Wrap.
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := wrapIn(t, tr.policy(), sub, script, &out)
	swap(filepath.Join(tr.ws, "first"))
	if code := exitCode(t, cmd); code != confine.ExitSetupFailed || !strings.Contains(out.String(), "was replaced") {
		t.Errorf("in a directory replaced after Wrap: exit %d, %q; want %d, refused", code, out.String(), confine.ExitSetupFailed)
	}
	if _, err := os.Stat(filepath.Join(tr.tmp, "ran")); err == nil {
		t.Error("the command ran in the directory swapped in")
	}
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}

	// By descriptor: swapped before Wrap, and then again after it.
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	open, err := os.Open(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	fdDir := fmt.Sprintf("/proc/self/fd/%d", open.Fd())
	second := filepath.Join(tr.ws, "second")
	swap(second)
	out.Reset()
	cmd = wrapIn(t, tr.policy(), fdDir, script, &out)
	if code := exitCode(t, cmd); code != 0 || out.String() != second+"\n" {
		t.Errorf("in an open directory moved before Wrap: exit %d, %q; want it to start in %s", code, out.String(), second)
	}
	out.Reset()
	cmd = wrapIn(t, tr.policy(), fdDir, script, &out)
	if err := os.Rename(second, filepath.Join(tr.ws, "third")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tr.tmp, second); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd); code != confine.ExitSetupFailed || !strings.Contains(out.String(), "was replaced") {
		t.Errorf("in an open directory moved after Wrap: exit %d, %q; want %d, refused", code, out.String(), confine.ExitSetupFailed)
	}
	if _, err := os.Stat(filepath.Join(tr.tmp, "ran")); err == nil {
		t.Error("the command ran in the directory swapped in")
	}
}

// A working directory that does not exist is refused at Wrap, with what to do.
func TestMissingDirRefused(t *testing.T) {
	requireSupport(t)
	tr := newTree(t)
	cmd := exec.Command("/bin/true")
	cmd.Dir = filepath.Join(tr.ws, "missing")
	policy := tr.policy()
	if _, err := policy.Wrap(cmd); !errors.Is(err, confine.ErrInvalidPolicy) || !strings.Contains(err.Error(), "create it first") {
		t.Errorf("Wrap in a missing directory: %v, want ErrInvalidPolicy", err)
	}
}

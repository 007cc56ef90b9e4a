package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agenticd/agenticd/internal/testlisten"
	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// Every way a session starts a confined process (a terminal or DeepChat's run_command, an
// MCP server, an agent) starts it in its workspace as a path of its own mount namespace:
// getcwd names it, so pwd, git, Python and node work there. The test runs as an ordinary
// user: root's capabilities walk ".." out of a directory the namespace cannot name.
func TestConfinedCommandStartsInItsWorkspace(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	tr, terms := newTerminals(t, Options{Confinement: ConfineOn})
	checks := []struct{ name, line string }{
		{"pwd", "/bin/pwd"},
		{"git", "git init -q && git status --short >/dev/null && /bin/pwd"},
		{"python", `python3 -c 'import os; print(os.getcwd())'`},
		{"node", `node -e 'console.log(process.cwd())'`},
	}
	for _, cwd := range []string{"", "dir/sub"} {
		want := filepath.Join(tr.wsDir, cwd)
		for _, c := range checks {
			if c.name != "pwd" {
				if _, err := exec.LookPath(strings.Fields(c.line)[0]); err != nil {
					t.Logf("%s not installed: %v", c.name, err)
					continue
				}
			}
			out, st := runToExit(t, terms, TerminalSpec{Command: c.line, Cwd: cwd, Env: map[string]string{"HOME": tr.wsDir}})
			if !sameStatus(st, code(0)) || out.Output != want+"\n" {
				t.Errorf("terminal in %q: %s exited with %v, printed %q; want %q", cwd, c.name, st, out.Output, want+"\n")
			}
		}
	}

	// An MCP server.
	var stderr []string
	proc, err := tr.ws.StartProcess(ProcessSpec{Command: "/bin/pwd", StderrLine: func(line string) { stderr = append(stderr, line) }})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _ := io.ReadAll(proc.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	proc.Stop(ctx, time.Second)
	if err := proc.Close(); err != nil {
		t.Errorf("reading the process's stderr: %v", err)
	}
	if reason := proc.ExitReason(); string(stdout) != tr.wsDir+"\n" || reason != "exited with status 0" {
		t.Errorf("process: %s, printed %q (stderr %q); want %q", reason, stdout, stderr, tr.wsDir+"\n")
	}

	// An agent, started as the ACP presenter does.
	cmd := exec.Command("/bin/pwd")
	cmd.Dir = tr.wsDir
	release, err := tr.roots.Confine(cmd, tr.wsDir, ProcessPaths{})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != tr.wsDir+"\n" {
		t.Errorf("agent: %v, printed %q; want %q", err, out, tr.wsDir+"\n")
	}
}

// A terminal's cwd swapped with a symlink to the outside just after the terminal was
// created, while its init is still setting up, never moves the confined command out:
// it starts in the directory checked, or not at all.
func TestConfinedTerminalCwdSwappedAtStart(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	tr, terms := newTerminals(t, Options{Confinement: ConfineOn})
	flip, alt := filepath.Join(tr.wsDir, "flip"), filepath.Join(tr.wsDir, "alt")
	mustMkdir(t, flip)
	if err := os.Symlink(tr.outside, alt); err != nil {
		t.Fatal(err)
	}
	exchange := func() {
		t.Helper()
		if err := unix.Renameat2(unix.AT_FDCWD, flip, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
			t.Fatalf("swap %s and %s: %v", flip, alt, err)
		}
	}
	// The init is a Go program that sets up mounts before it enters the cwd: the swap
	// nearly always comes first. The bound only turns a hang into a failure.
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			t.Fatal("the cwd was never swapped before the init entered it; the test proves nothing")
		}
		id, err := terms.Create(context.Background(), TerminalSpec{Command: "/bin/pwd", Cwd: "flip"})
		if err != nil {
			t.Fatal(err)
		}
		exchange() // flip is now a symlink to the outside
		st, err := terms.WaitForExit(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out, err := terms.Output(id)
		if err != nil {
			t.Fatal(err)
		}
		terms.Release(id)
		exchange()
		switch {
		case sameStatus(st, code(confine.ExitSetupFailed)) && strings.Contains(out.Output, "was replaced"):
			return
		case sameStatus(st, code(0)) && (out.Output == flip+"\n" || out.Output == alt+"\n"):
			// The init entered the cwd before the swap: pwd names the same directory as
			// flip, or as alt when it ran after the swap had renamed it.
		default:
			t.Fatalf("a terminal whose cwd was swapped for a symlink to %s exited with %v: %q", tr.outside, st, out.Output)
		}
	}
}

// A Unix socket outside the paths a confined command may write is as far out of its
// reach by a path relative to its working directory as by its absolute path, and one in
// its workspace answers either way. Run as an ordinary user, as above.
func TestConfinedCommandCannotReachHiddenSocketsByRelativePath(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireConfinement(t)
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("the attack is written in Python: %v", err)
	}
	outside := filepath.Join(unprivileged.Dir(t), "agent.sock")
	serveUnix(t, outside)
	connect := func(terms *Terminals, path string) string {
		out, _ := shell(t, terms, fmt.Sprintf(`%s -I -S -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(s.recv(100).decode().strip())' %s; echo exit=$?`, python, path))
		return out
	}
	// relative is path as a workspace names it with "..".
	relative := func(ws *Workspace, path string) string {
		rel, err := filepath.Rel(ws.Root(), path)
		if err != nil || !strings.HasPrefix(rel, "../") {
			t.Fatalf("%s is not outside the workspace %s: %q, %v", path, ws.Root(), rel, err)
		}
		return rel
	}

	plainWS, plain := shortWorkspace(t, Options{})
	for _, path := range []string{outside, relative(plainWS, outside)} {
		if out := connect(plain, path); !strings.Contains(out, "greetings from agent.sock") {
			t.Fatalf("unconfined, %s did not answer (%q); the confined run proves nothing", path, out)
		}
	}
	ws, terms := shortWorkspace(t, Options{Confinement: ConfineOn})
	inside := filepath.Join(ws.Root(), "dev.sock")
	serveUnix(t, inside)
	for _, path := range []string{outside, relative(ws, outside)} {
		// The traceback names line 3: connect failed, not Python's start.
		if out := connect(terms, path); strings.Contains(out, "greetings") || !strings.Contains(out, "line 3, in <module>") {
			t.Errorf("confined, the command reached %s, or failed before connecting: %q", path, out)
		}
	}
	for _, path := range []string{inside, "dev.sock", "../ws/dev.sock"} {
		if out := connect(terms, path); !strings.Contains(out, "greetings from dev.sock") {
			t.Errorf("confined, the socket in the workspace did not answer at %s: %q", path, out)
		}
	}
}

// shortWorkspace is a workspace "ws" in a root of its own, and its terminals. Its path is
// short: a socket's path must fit in 108 bytes, which t.TempDir's names overflow.
func shortWorkspace(t *testing.T, opts Options) (*Workspace, *Terminals) {
	t.Helper()
	root, err := filepath.EvalSymlinks(unprivileged.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(root, "ws"))
	roots, err := NewRoots([]string{root}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := roots.Open(filepath.Join(root, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	terms := ws.NewTerminals()
	t.Cleanup(func() { terms.Close() })
	return ws, terms
}

// serveUnix listens on a Unix socket at path and greets whoever connects with the
// socket's name, until the test ends.
func serveUnix(t *testing.T, path string) {
	t.Helper()
	testlisten.Serve(t, "unix", path, func(c net.Conn) { fmt.Fprintf(c, "greetings from %s\n", filepath.Base(path)) })
}

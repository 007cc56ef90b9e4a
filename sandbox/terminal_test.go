package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func newTerminals(t *testing.T, opts Options) (*testTree, *Terminals) {
	t.Helper()
	tr := newTree(t, opts)
	tr.plant(t)
	terms := tr.ws.NewTerminals()
	t.Cleanup(func() { terms.Close() })
	return tr, terms
}

// runToExit creates a terminal, waits for its exit and returns its output.
func runToExit(t *testing.T, terms *Terminals, spec TerminalSpec) (TerminalOutput, ExitStatus) {
	t.Helper()
	id, err := terms.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create(%+v): %v", spec, err)
	}
	defer terms.Release(id)
	st, err := terms.WaitForExit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := terms.Output(id)
	if err != nil {
		t.Fatal(err)
	}
	if out.Exit == nil {
		t.Fatal("Output after exit has no exit status")
	}
	return out, st
}

func code(n int) ExitStatus { return ExitStatus{Code: &n} }

func sameStatus(a, b ExitStatus) bool {
	if (a.Code == nil) != (b.Code == nil) || a.Signal != b.Signal {
		return false
	}
	return a.Code == nil || *a.Code == *b.Code
}

func (e ExitStatus) String() string {
	if e.Code != nil {
		return "code " + strconv.Itoa(*e.Code)
	}
	return "signal " + e.Signal
}

// eventually polls cond until it holds; the bound only turns a hang into
// a failure, it is not what the test measures.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after 20s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processGone reports whether pid has exited (a zombie counts: it has).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func (t *Terminals) termOf(id string) *terminal {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[id]
}

func (t *Terminals) pidOf(id string) int { return t.termOf(id).cmd.Process.Pid }

func TestTerminalShellLine(t *testing.T) {
	tr, terms := newTerminals(t, Options{})
	out, st := runToExit(t, terms, TerminalSpec{Command: "echo hi > x; echo done"})
	if out.Output != "done\n" || !sameStatus(st, code(0)) || out.Truncated {
		t.Fatalf("output %q status %v truncated %v", out.Output, st, out.Truncated)
	}
	if got := mustRead(t, tr.wsDir+"/x"); got != "hi\n" {
		t.Fatalf("the redirect wrote %q to x in the workspace root", got)
	}
}

func TestTerminalArgsStaySeparate(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	out, _ := runToExit(t, terms, TerminalSpec{Command: "printf", Args: []string{"%s|", "a b", "c;d", "$(id)", "*"}})
	if out.Output != "a b|c;d|$(id)|*|" {
		t.Fatalf("output %q", out.Output)
	}
}

func TestTerminalRelativeCommandFromCwd(t *testing.T) {
	tr, terms := newTerminals(t, Options{})
	if err := os.WriteFile(tr.wsDir+"/dir/run.sh", []byte("#!/bin/sh\necho ran \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := runToExit(t, terms, TerminalSpec{Command: "./run.sh", Args: []string{"arg"}, Cwd: "dir"})
	if out.Output != "ran arg\n" {
		t.Fatalf("output %q", out.Output)
	}
}

func TestTerminalEnv(t *testing.T) {
	tr, terms := newTerminals(t, Options{})
	bin := t.TempDir()
	if err := os.WriteFile(bin+"/mytool", []byte("#!/bin/sh\necho custom tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := runToExit(t, terms, TerminalSpec{
		Command: "sh",
		Args:    []string{"-c", `printf '%s|%s|%s' "$FOO" "$PWD" "$HOME"`},
		Env:     map[string]string{"FOO": "bar baz"},
	})
	if want := "bar baz|" + tr.wsDir + "|" + os.Getenv("HOME"); out.Output != want {
		t.Fatalf("output %q; want %q (additions, PWD, inherited HOME)", out.Output, want)
	}
	out, _ = runToExit(t, terms, TerminalSpec{Command: "mytool", Args: []string{"x"}, Env: map[string]string{"PATH": bin + ":/usr/bin:/bin"}})
	if out.Output != "custom tool\n" {
		t.Fatalf("command not looked up in the terminal's PATH: %q", out.Output)
	}
}

func TestTerminalCwd(t *testing.T) {
	tr, terms := newTerminals(t, Options{})
	tests := []struct {
		cwd  string
		want string
		err  error
	}{
		{"", tr.wsDir, nil},
		{"dir/sub", tr.wsDir + "/dir/sub", nil},
		{tr.wsDir + "/dir", tr.wsDir + "/dir", nil},
		{"link-in", tr.wsDir + "/dir", nil},
		{"..", "", ErrOutsideWorkspace},
		{"link-out", "", ErrOutsideWorkspace},
		{"/tmp", "", ErrOutsideWorkspace},
		{"missing", "", ErrNotFound},
		{"file.txt", "", ErrInvalidPath},
	}
	for _, tt := range tests {
		t.Run(tt.cwd, func(t *testing.T) {
			spec := TerminalSpec{Command: "pwd -P; echo $PWD", Cwd: tt.cwd}
			if tt.err != nil {
				if _, err := terms.Create(context.Background(), spec); !errors.Is(err, tt.err) {
					t.Fatalf("Create with cwd %q = %v; want %v", tt.cwd, err, tt.err)
				}
				return
			}
			out, _ := runToExit(t, terms, spec)
			if want := tt.want + "\n" + tt.want + "\n"; out.Output != want {
				t.Fatalf("output %q; want %q", out.Output, want)
			}
		})
	}
}

func TestTerminalIsAPty(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	out, _ := runToExit(t, terms, TerminalSpec{Command: "test -t 1 && echo stdout-tty; test -t 2 && echo stderr-tty; test -t 0 || echo stdin-not-tty; echo err >&2; ps -o pid=,pgid=,sid= -p $$"})
	lines := strings.Split(strings.TrimSpace(out.Output), "\n")
	if len(lines) != 5 || strings.Join(lines[:4], ",") != "stdout-tty,stderr-tty,stdin-not-tty,err" {
		t.Fatalf("output %q", out.Output)
	}
	if ids := strings.Fields(lines[4]); len(ids) != 3 || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("the command should lead its own process group and session: pid pgid sid = %q", lines[4])
	}
}

func TestTerminalExitStatus(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	tests := []struct {
		command string
		want    ExitStatus
	}{
		{"true", code(0)},
		{"exit 3", code(3)},
		{"no-such-command-xyz", code(127)},
		{"kill -TERM $$", ExitStatus{Signal: "SIGTERM"}},
		{"kill -KILL $$", ExitStatus{Signal: "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			out, st := runToExit(t, terms, TerminalSpec{Command: tt.command})
			if !sameStatus(st, tt.want) || !sameStatus(*out.Exit, tt.want) {
				t.Fatalf("status %v / %v; want %v", st, *out.Exit, tt.want)
			}
		})
	}
}

func TestTerminalCreateRefusals(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		spec TerminalSpec
		err  error
	}{
		{"empty command", context.Background(), TerminalSpec{Command: "  "}, ErrInvalidArgument},
		{"NUL in an argument", context.Background(), TerminalSpec{Command: "echo", Args: []string{"a\x00b"}}, ErrInvalidArgument},
		{"bad env name", context.Background(), TerminalSpec{Command: "true", Env: map[string]string{"A=B": "x"}}, ErrInvalidArgument},
		{"command not in PATH", context.Background(), TerminalSpec{Command: "no-such-command-xyz", Args: []string{"a"}}, ErrNotFound},
		{"cancelled", cancelled, TerminalSpec{Command: "true"}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if id, err := terms.Create(tt.ctx, tt.spec); !errors.Is(err, tt.err) {
				t.Fatalf("Create = %q, %v; want %v", id, err, tt.err)
			}
		})
	}
}

// The kept output is exactly the newest bytes of what the command wrote,
// starting at a character boundary, for cuts that fall inside 2-, 3- and
// 4-byte characters, with writes that split characters too.
func TestTerminalOutputTruncation(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	const pattern = "aé€😀\n" // 1+2+3+4+1 bytes
	const total = 11 * 3000
	full := patternBytes(pattern, total)
	for _, limit := range []int{100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 4096, total - 1, total, total + 1, 1 << 20} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			out, _ := runToExit(t, terms, TerminalSpec{
				Command:         mainBinary(),
				Args:            []string{pattern, strconv.Itoa(total), "7"},
				Env:             map[string]string{helperEnv: "emit"},
				OutputByteLimit: int64(limit),
			})
			want, truncated := string(full), false
			if len(full) > limit {
				tail := full[len(full)-limit:]
				for len(tail) > 0 && tail[0]&0xC0 == 0x80 {
					tail = tail[1:]
				}
				want, truncated = string(tail), true
			}
			if out.Output != want || out.Truncated != truncated {
				t.Fatalf("kept %d bytes (truncated %v) starting %q; want %d bytes (truncated %v) starting %q",
					len(out.Output), out.Truncated, head(out.Output), len(want), truncated, head(want))
			}
			if !utf8.ValidString(out.Output) || len(out.Output) > limit {
				t.Fatalf("output not valid UTF-8 within %d bytes", limit)
			}
		})
	}
}

func head(s string) string { return s[:min(len(s), 12)] }

func TestTerminalOutputWhileRunning(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	id, err := terms.Create(context.Background(), TerminalSpec{Command: "echo started; exec sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	var out TerminalOutput
	eventually(t, "output shows 'started'", func() bool {
		out, err = terms.Output(id)
		return err == nil && out.Output == "started\n"
	})
	if out.Exit != nil {
		t.Fatalf("a running command has exit status %v", *out.Exit)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := terms.WaitForExit(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForExit with a cancelled context = %v", err)
	}
	if err := terms.Release(id); err != nil {
		t.Fatal(err)
	}
}

// Kill reaches the children the command spawned, and the terminal stays
// readable afterwards.
func TestTerminalKillProcessGroup(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	id, err := terms.Create(context.Background(), TerminalSpec{Command: "sleep 1000 & echo $!; sleep 1000 & echo $!; sh -c 'sleep 1000 & echo $!; wait' & wait"})
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{terms.pidOf(id)}
	eventually(t, "three child pids printed", func() bool {
		out, _ := terms.Output(id)
		return len(strings.Fields(out.Output)) == 3
	})
	out, _ := terms.Output(id)
	for _, f := range strings.Fields(out.Output) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q", out.Output)
		}
		pids = append(pids, pid)
	}
	if err := terms.Kill(id); err != nil {
		t.Fatal(err)
	}
	st, err := terms.WaitForExit(context.Background(), id)
	if err != nil || st.Signal != "SIGKILL" {
		t.Fatalf("after Kill: %v, %v", st, err)
	}
	after, err := terms.Output(id)
	if err != nil || after.Exit == nil || after.Exit.Signal != "SIGKILL" || after.Output != out.Output {
		t.Fatalf("terminal not readable after kill: %+v, %v", after, err)
	}
	for _, pid := range pids {
		eventually(t, fmt.Sprintf("process %d gone", pid), func() bool { return processGone(pid) })
	}
	if err := terms.Kill(id); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := terms.Release(id); err != nil {
		t.Fatal(err)
	}
}

func TestTerminalRelease(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	id, err := terms.Create(context.Background(), TerminalSpec{Command: "sleep", Args: []string{"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := terms.pidOf(id)
	if err := terms.Release(id); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("process %d survived Release", pid)
	}
	if err := terms.Release(id); err != nil {
		t.Fatalf("second Release = %v; want nil", err)
	}
	if _, err := terms.Output(id); !errors.Is(err, ErrTerminalNotFound) {
		t.Fatalf("Output after Release = %v", err)
	}
	if _, err := terms.WaitForExit(context.Background(), id); !errors.Is(err, ErrTerminalNotFound) {
		t.Fatalf("WaitForExit after Release = %v", err)
	}
	if err := terms.Kill(id); !errors.Is(err, ErrTerminalNotFound) {
		t.Fatalf("Kill after Release = %v", err)
	}
	if err := terms.Release("term-unknown"); !errors.Is(err, ErrTerminalNotFound) {
		t.Fatalf("Release of an unknown id = %v", err)
	}
	other := terms.ws.NewTerminals()
	if err := other.Release(id); !errors.Is(err, ErrTerminalNotFound) {
		t.Fatalf("another session released this session's id: %v", err)
	}

	// Racing releases of one id all return nil, after the process is gone.
	id, err = terms.Create(context.Background(), TerminalSpec{Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	pid = terms.pidOf(id)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := terms.Release(id); err != nil {
				t.Error(err)
			}
			if !processGone(pid) {
				t.Errorf("Release returned while process %d runs", pid)
			}
		})
	}
	wg.Wait()
}

func TestTerminalsClose(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	var pids []int
	for range 3 {
		id, err := terms.Create(context.Background(), TerminalSpec{Command: "sleep 1000"})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, terms.pidOf(id))
	}
	if err := terms.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Fatalf("process %d survived Close", pid)
		}
	}
	if _, err := terms.Create(context.Background(), TerminalSpec{Command: "true"}); !errors.Is(err, ErrTerminalsClosed) {
		t.Fatalf("Create after Close = %v", err)
	}
	if err := terms.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestTerminalCap(t *testing.T) {
	tr, terms := newTerminals(t, Options{MaxTerminals: 2})
	sameDir, err := tr.roots.Open(tr.wsDir)
	if err != nil {
		t.Fatal(err)
	}
	otherSession := sameDir.NewTerminals()
	defer otherSession.Close()
	first, err := terms.Create(context.Background(), TerminalSpec{Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherSession.Create(context.Background(), TerminalSpec{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := terms.Create(context.Background(), TerminalSpec{Command: "true"}); !errors.Is(err, ErrTooManyTerminals) {
		t.Fatalf("third terminal in the workspace = %v; want ErrTooManyTerminals", err)
	}
	mustMkdir(t, tr.rootDir+"/elsewhere")
	elsewhere, err := tr.roots.Open(tr.rootDir + "/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	elsewhereTerms := elsewhere.NewTerminals()
	defer elsewhereTerms.Close()
	if _, err := elsewhereTerms.Create(context.Background(), TerminalSpec{Command: "true"}); err != nil {
		t.Fatalf("another workspace shares the cap: %v", err)
	}
	if err := terms.Release(first); err != nil {
		t.Fatal(err)
	}
	if _, err := terms.Create(context.Background(), TerminalSpec{Command: "true"}); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

func TestConcurrentTerminals(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id, err := terms.Create(context.Background(), TerminalSpec{Command: "printf", Args: []string{"terminal %s\n", strconv.Itoa(i)}})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := terms.WaitForExit(context.Background(), id); err != nil {
				t.Error(err)
			}
			out, err := terms.Output(id)
			if want := fmt.Sprintf("terminal %d\n", i); err != nil || out.Output != want {
				t.Errorf("terminal %d output %q, %v", i, out.Output, err)
			}
			if err := terms.Release(id); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// A process that leaves the process group keeps the pty open; the exit of
// the command is still reported, and Release still ends the reader.
func TestTerminalEscapedProcess(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	// The shell exits only once the escaped process is in its own session
	// (it wrote its pid after setsid), so the hangup cannot reach it.
	id, err := terms.Create(context.Background(), TerminalSpec{
		Command: `setsid sh -c 'echo $$ > escaped.pid; exec sleep 1000' & while [ ! -s escaped.pid ]; do :; done; cat escaped.pid`,
	})
	if err != nil {
		t.Fatal(err)
	}
	term := terms.termOf(id)
	st, err := terms.WaitForExit(context.Background(), id)
	if err != nil || !sameStatus(st, code(0)) {
		t.Fatalf("exit %v, %v", st, err)
	}
	out, _ := terms.Output(id)
	escaped, err := strconv.Atoi(strings.TrimSpace(out.Output))
	if err != nil {
		t.Fatalf("output %q", out.Output)
	}
	defer func() {
		if p, err := os.FindProcess(escaped); err == nil {
			p.Kill()
			p.Release()
		}
		eventually(t, "escaped process killed", func() bool { return processGone(escaped) })
	}()
	if isClosed(term.readerDone) {
		t.Fatal("the escaped process does not hold the pty; this test no longer tests that case")
	}
	if err := terms.Release(id); err != nil {
		t.Fatal(err)
	}
	if !isClosed(term.readerDone) {
		t.Fatal("Release returned with the reader still running")
	}
}

func TestTerminalLeavesNoDescriptors(t *testing.T) {
	_, terms := newTerminals(t, Options{})
	runToExit(t, terms, TerminalSpec{Command: "true"}) // warm up lazily opened runtime descriptors
	before := openFDs(t)
	var ids []string
	for range 5 {
		id, err := terms.Create(context.Background(), TerminalSpec{Command: "echo x; sleep 1000"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	runToExit(t, terms, TerminalSpec{Command: "echo done"})
	for _, id := range ids {
		if err := terms.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	// Fewer is fine: the runtime may close descriptors of earlier tests.
	after := openFDs(t)
	if len(after) > len(before) {
		t.Fatalf("%d descriptors open before, %d after releasing every terminal: %q", len(before), len(after), after)
	}
	for _, target := range after {
		if strings.HasPrefix(target, "/dev/pts/") || target == "/dev/ptmx" {
			t.Fatalf("a pty descriptor is still open: %q", after)
		}
	}
}

// openFDs lists what this process's descriptors point to.
func openFDs(t *testing.T) []string {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var targets []string
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		targets = append(targets, target)
	}
	return targets
}

func TestDescriptorDirNamesTheOpenDirectory(t *testing.T) {
	tr := newTree(t, Options{})
	d, err := os.Open(tr.wsDir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := descriptorDir(d, tr.wsDir); !strings.HasPrefix(got, "/proc/self/fd/") {
		t.Fatalf("descriptorDir = %q; the cwd would be entered by name", got)
	}
}

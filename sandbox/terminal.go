package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TerminalSpec is an ACP terminal/create request.
type TerminalSpec struct {
	// Command is run with Args, never joined into a string. With no Args
	// it is a whole shell line (what agents send, e.g. "go test ./... 2>&1")
	// and runs as /bin/sh -c Command.
	Command string
	Args    []string
	// Env is added to (and overrides) the server's environment, which
	// terminals inherit without Options.HiddenEnv and any AGENTICD_* variable.
	Env map[string]string
	// Cwd is a directory inside the workspace; empty means the root.
	Cwd string
	// OutputByteLimit is how many of the newest output bytes are kept
	// (0: Options.DefaultOutputByteLimit; clamped to Options.MaxOutputByteLimit).
	OutputByteLimit int64
}

// ExitStatus is how a terminal's command ended: an exit code, or the name
// of the signal that killed it ("SIGKILL").
type ExitStatus struct {
	Code   *int
	Signal string
}

// TerminalOutput is an ACP terminal/output response.
type TerminalOutput struct {
	Output    string // always valid UTF-8
	Truncated bool   // older output was dropped to respect the byte limit
	// Offset is where Output starts in all the command printed: how many bytes were
	// dropped before it (exact while the output is valid UTF-8).
	Offset uint64
	Exit   *ExitStatus
}

// Terminal window size. Wide, so that tools which fit their output to the
// terminal (ps, tables) cut as little as possible.
const (
	terminalRows = 50
	terminalCols = 200
)

// drainGrace bounds how long an exited command's output is awaited when
// something else (a background process that escaped the kill) still holds
// the terminal open. Normally the terminal reports end of file at once.
const (
	drainGrace     = 100 * time.Millisecond
	maxDrainRearms = 20
)

// Terminals owns the terminals of one session: their processes, ptys and
// reader goroutines. Close releases them all. It is safe for concurrent use.
type Terminals struct {
	ws *Workspace

	mu       sync.Mutex
	live     map[string]*terminal
	released map[string]chan struct{} // closed once that release has finished
	closed   bool
}

// NewTerminals returns an empty set of terminals bound to w; one per session.
func (w *Workspace) NewTerminals() *Terminals {
	return &Terminals{ws: w, live: make(map[string]*terminal), released: make(map[string]chan struct{})}
}

// Create starts spec's command in a new pty, in its own session and process
// group, and returns the terminal id. ctx bounds only the start: the
// terminal lives until Release or Close.
func (t *Terminals) Create(ctx context.Context, spec TerminalSpec) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("create terminal: %w", err)
	}
	if strings.TrimSpace(spec.Command) == "" {
		return "", fmt.Errorf("%w: empty terminal command", ErrInvalidArgument)
	}
	if strings.IndexByte(spec.Command, 0) >= 0 || slices.ContainsFunc(spec.Args, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
		return "", fmt.Errorf("%w: terminal command or argument contains a NUL byte", ErrInvalidArgument)
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = "."
	}
	dir, err := t.ws.resolve(cwd)
	if err != nil {
		return "", err
	}
	if dir.info == nil {
		return "", fmt.Errorf("%w: terminal cwd %s does not exist in the workspace", ErrNotFound, spec.Cwd)
	}
	if !dir.info.IsDir() {
		return "", fmt.Errorf("%w: terminal cwd %s is not a directory", ErrInvalidPath, spec.Cwd)
	}
	env, err := terminalEnv(os.Environ(), t.ws.opts.HiddenEnv, spec.Env, dir.abs)
	if err != nil {
		return "", err
	}
	limit := spec.OutputByteLimit
	if limit <= 0 {
		limit = t.ws.opts.DefaultOutputByteLimit
	}
	limit = min(limit, t.ws.opts.MaxOutputByteLimit)

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", fmt.Errorf("%w: the session's terminals were closed", ErrTerminalsClosed)
	}
	if !t.ws.slots.acquire() {
		return "", fmt.Errorf("%w: workspace %s already has %d unreleased terminals; release finished ones first", ErrTooManyTerminals, t.ws.root, t.ws.opts.MaxTerminals)
	}
	term, err := startTerminal(t.ws, spec, dir, env, int(limit))
	if err != nil {
		t.ws.slots.release()
		return "", err
	}
	id := "term-" + randomHex(8)
	for t.live[id] != nil || t.released[id] != nil {
		id = "term-" + randomHex(8)
	}
	t.live[id] = term
	return id, nil
}

// Output returns the kept output, whether it was truncated, and the exit
// status once the command has exited.
func (t *Terminals) Output(id string) (TerminalOutput, error) {
	term, err := t.get(id)
	if err != nil {
		return TerminalOutput{}, err
	}
	out := TerminalOutput{}
	if term.exited() {
		st := term.exitStatus()
		out.Exit = &st
	}
	out.Output, out.Truncated, out.Offset = term.out.snapshot(isClosed(term.readerDone))
	return out, nil
}

// WaitForExit blocks until the command exits (or ctx ends) and returns how
// it ended.
func (t *Terminals) WaitForExit(ctx context.Context, id string) (ExitStatus, error) {
	term, err := t.get(id)
	if err != nil {
		return ExitStatus{}, err
	}
	select {
	case <-term.done:
		return term.exitStatus(), nil
	case <-ctx.Done():
		return ExitStatus{}, fmt.Errorf("wait for terminal %s: %w", id, ctx.Err())
	}
}

// Kill sends SIGKILL to the command's whole process group and returns once
// its exit is recorded. The terminal stays readable until released.
func (t *Terminals) Kill(id string) error {
	term, err := t.get(id)
	if err != nil {
		return err
	}
	term.kill()
	<-term.done
	return nil
}

// Release kills the command if it still runs, frees the pty, the reader
// and the id, and returns once nothing of the terminal is left. Releasing
// an id this Terminals already released is a no-op.
func (t *Terminals) Release(id string) error {
	t.mu.Lock()
	term, ok := t.live[id]
	if !ok {
		finished, was := t.released[id]
		t.mu.Unlock()
		if !was {
			return fmt.Errorf("%w: no terminal with id %q in this session", ErrTerminalNotFound, id)
		}
		<-finished
		return nil
	}
	delete(t.live, id)
	finished := make(chan struct{})
	t.released[id] = finished
	t.mu.Unlock()

	term.shutdown()
	t.ws.slots.release()
	close(finished)
	return nil
}

// Close releases every terminal; later Creates fail with ErrTerminalsClosed.
func (t *Terminals) Close() error {
	t.mu.Lock()
	t.closed = true
	ids := make([]string, 0, len(t.live))
	for id := range t.live {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { t.Release(id) })
	}
	wg.Wait()
	return nil
}

func (t *Terminals) get(id string) (*terminal, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	term, ok := t.live[id]
	if !ok {
		if _, was := t.released[id]; was {
			return nil, fmt.Errorf("%w: terminal %q was released", ErrTerminalNotFound, id)
		}
		return nil, fmt.Errorf("%w: no terminal with id %q in this session", ErrTerminalNotFound, id)
	}
	return term, nil
}

// terminal is one running (or finished, unreleased) command.
type terminal struct {
	cmd     *exec.Cmd
	release func() // removes the private temp dir of a confined command once it exited
	pgid    int
	master  *os.File // pty master, non-blocking so Close interrupts a Read
	out     *outputBuffer

	reaped     atomic.Bool   // cmd.Wait has returned: the pid may be reused
	readerDone chan struct{} // the reader saw end of file or the master closed
	drained    chan struct{} // the reader has everything the exited command wrote
	drainOnce  sync.Once
	done       chan struct{} // exit is set and the output drained
	exit       ExitStatus
}

func startTerminal(ws *Workspace, spec TerminalSpec, dir resolved, env []string, limit int) (*terminal, error) {
	name, args := spec.Command, spec.Args
	if len(args) == 0 {
		name, args = "/bin/sh", []string{"-c", spec.Command}
	}
	path, err := lookPath(name, envValue(env, "PATH"))
	if err != nil {
		return nil, err
	}

	// The command starts in the cwd opened inside the workspace root, not
	// in whatever its name leads to, so a symlink swapped in after Resolve
	// cannot move it out.
	cwd, err := ws.openDir("terminal cwd", dir.rel)
	if err != nil {
		return nil, err
	}
	defer cwd.Close()

	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close() // the child has its own copy once started
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: terminalRows, Cols: terminalCols}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size pty: %w", err)
	}
	if err := rawOutput(tty); err != nil {
		ptmx.Close()
		return nil, err
	}
	master, err := nonBlocking(ptmx)
	if err != nil {
		return nil, err
	}

	cmd := &exec.Cmd{
		Path: path,
		Args: append([]string{name}, args...),
		Env:  env,
		Dir:  descriptorDir(cwd, dir.abs),
		// stdin is /dev/null: nobody can type into an agent's terminal, so
		// a prompt should see end of input rather than wait forever.
		Stdout: tty,
		Stderr: tty,
		// A new session makes the child the leader of its own process
		// group (the group Kill signals) with the pty as its controlling
		// terminal (fd 1 in the child).
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 1},
	}
	release, err := ws.opts.confine(cmd, ws.root, ProcessPaths{}, false)
	if err != nil {
		master.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		release()
		master.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: start %q: %v", ErrNotFound, name, err)
		}
		return nil, fmt.Errorf("start %q: %w", name, err)
	}
	term := &terminal{
		cmd:        cmd,
		release:    release,
		pgid:       cmd.Process.Pid,
		master:     master,
		out:        newOutputBuffer(limit),
		readerDone: make(chan struct{}),
		drained:    make(chan struct{}),
		done:       make(chan struct{}),
	}
	go term.read()
	go term.wait()
	return term, nil
}

// read copies the pty output into the buffer until every process holding
// the pty has closed it (EIO) or the master is closed by release.
func (tm *terminal) read() {
	buf := make([]byte, 32<<10)
	rearms := 0
	for {
		n, err := tm.master.Read(buf)
		if n > 0 {
			tm.out.write(buf[:n])
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The command exited a while ago but the pty is still held
			// open. Once nothing is left unread, its output is complete;
			// keep collecting whatever the holder writes after that. A
			// holder that never stops writing ends the wait after a while.
			if pendingBytes(tm.master) > 0 && rearms < maxDrainRearms {
				rearms++
				tm.master.SetReadDeadline(time.Now().Add(drainGrace))
				continue
			}
			tm.markDrained()
			tm.master.SetReadDeadline(time.Time{})
		default:
			close(tm.readerDone)
			tm.markDrained()
			return
		}
	}
}

func (tm *terminal) markDrained() { tm.drainOnce.Do(func() { close(tm.drained) }) }

// wait reaps the command, then publishes its status once its output is in.
func (tm *terminal) wait() {
	tm.cmd.Wait()
	tm.release()
	tm.reaped.Store(true)
	tm.exit = exitStatusOf(tm.cmd.ProcessState)
	tm.master.SetReadDeadline(time.Now().Add(drainGrace)) // fails harmlessly once released
	<-tm.drained
	close(tm.done)
}

func (tm *terminal) exited() bool { return isClosed(tm.done) }

// exitStatus returns a copy, so callers cannot change the recorded code.
// Only valid once done is closed.
func (tm *terminal) exitStatus() ExitStatus {
	st := tm.exit
	if st.Code != nil {
		code := *st.Code
		st.Code = &code
	}
	return st
}

// kill sends SIGKILL to the process group. While the leader is unreaped
// its pid cannot be reused, so the group id is safe to signal; after
// that, only while something still holds the pty (a group member).
func (tm *terminal) kill() {
	if tm.reaped.Load() && isClosed(tm.readerDone) {
		return
	}
	_ = unix.Kill(-tm.pgid, unix.SIGKILL) // ESRCH: already gone
}

// shutdown kills the group, closes the pty and waits for both goroutines.
// Closing the master also ends the reader when a process that left the
// group still holds the pty.
func (tm *terminal) shutdown() {
	tm.kill()
	tm.master.Close()
	<-tm.readerDone
	<-tm.done
}

func exitStatusOf(ps *os.ProcessState) ExitStatus {
	if ps == nil {
		code := -1
		return ExitStatus{Code: &code}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = ws.Signal().String()
		}
		return ExitStatus{Signal: name}
	}
	code := ps.ExitCode()
	return ExitStatus{Code: &code}
}

// serverEnvPrefix starts the names of the server's own variables (its token among
// them), never passed to the processes it starts.
const serverEnvPrefix = "AGENTICD_"

// withoutSecrets is the server's environment without its own variables and those named
// in hidden.
func withoutSecrets(server, hidden []string) []string {
	env := make([]string, 0, len(server))
	for _, kv := range server {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, serverEnvPrefix) && !slices.Contains(hidden, name) {
			env = append(env, kv)
		}
	}
	return env
}

// terminalEnv is the server's environment without its secrets, PWD set to the cwd, then
// the request's additions (last one wins in exec).
func terminalEnv(server, hidden []string, add map[string]string, pwd string) ([]string, error) {
	env := withoutSecrets(server, hidden)
	env = append(env, "PWD="+pwd)
	keys := make([]string, 0, len(add))
	for k := range add {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := add[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%w: environment variable %q: names must be non-empty without '=' and neither may contain NUL", ErrInvalidArgument, k)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds name in the terminal's own PATH (which the request may
// have changed). Names with a slash are left to the kernel, relative ones
// being taken from the cwd. Relative PATH entries are ignored: they would
// run whatever the workspace holds under that name.
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: command %q is not in PATH; give its full path or run it through a shell line", ErrNotFound, name)
}

// descriptorDir names the open directory dir as /proc/self/fd/N, for
// exec.Cmd.Dir: the command starts in this very directory. Unconfined, the
// child enters it before its descriptors are rearranged or closed on exec;
// confined, the init enters the path it has, inside the command's own mount
// namespace, and refuses to run the command if that is no longer this
// directory (confine.Policy.Wrap). Without /proc it falls back to the
// resolved path.
func descriptorDir(dir *os.File, abs string) string {
	p := fmt.Sprintf("/proc/self/fd/%d", dir.Fd())
	a, err1 := os.Stat(p)
	b, err2 := dir.Stat()
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return abs
	}
	return p
}

// rawOutput turns off output post-processing on the pty so the command's
// bytes arrive unchanged ("\n" stays "\n", not "\r\n").
func rawOutput(tty *os.File) error {
	fd := int(tty.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("read pty settings: %w", err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, tio); err != nil {
		return fmt.Errorf("set pty settings: %w", err)
	}
	return nil
}

// nonBlocking replaces ptmx with a non-blocking duplicate that the Go
// poller manages: Close then interrupts a pending Read and read deadlines
// work. (pty.Open leaves the master in blocking mode.)
func nonBlocking(ptmx *os.File) (*os.File, error) {
	defer ptmx.Close()
	fd, err := unix.FcntlInt(ptmx.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// pendingBytes is how much output waits unread in the pty.
func pendingBytes(master *os.File) int {
	rc, err := master.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	})
	return n
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

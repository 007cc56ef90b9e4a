package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ProcessSpec is a program a session runs beside its agent and speaks to over pipes (an
// MCP server over stdio).
type ProcessSpec struct {
	Command string
	Args    []string
	// Env is added to (and overrides) the server's environment, which the process gets
	// without Options.HiddenEnv and any AGENTICD_* variable, as terminals do.
	Env map[string]string
	// Installed makes the command's own installation (its file, the interpreter of its
	// "#!" line, absolute files among its arguments) readable. Set it only for commands
	// from agenticd's configuration, never for commands a request named: there it would
	// open any file to reading.
	Installed bool
	// StderrLine gets each line the process writes to its stderr.
	StderrLine func(line string)
}

// Process is a program in its own process group, with pipes for its standard streams:
// an ACP agent (StartPiped) or a session's MCP server (Workspace.StartProcess). Its
// stderr is read line by line for whoever started it; stdin and stdout are theirs.
// Plain pipes, not exec's copying goroutines, so that Wait never races with a reader of
// the last lines the process wrote.
type Process struct {
	Stdin  *os.File // ours to write; closing it is end of input
	Stdout *os.File // ours to read

	cmd        *exec.Cmd
	release    func()
	exited     chan struct{}
	exitErr    error // valid once exited is closed
	stderr     *os.File
	stderrRead chan struct{}
	stderrErr  error // valid once stderrRead is closed
}

// StartProcess starts spec in the workspace root under the workspace's boundary (see
// Roots.Confine; off when confinement is off), as StartPiped does. The caller reads
// Stdout until EOF, and calls Stop and then Close.
func (w *Workspace) StartProcess(spec ProcessSpec) (*Process, error) {
	if err := w.checkIdentity(); err != nil {
		return nil, err
	}
	// Started in the root opened and checked here, not in whatever its name
	// leads to when the process starts.
	dir, err := w.openDir("workspace", ".")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	env, err := terminalEnv(os.Environ(), w.opts.HiddenEnv, spec.Env, w.root)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(spec.Command, envValue(env, "PATH"))
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: append([]string{spec.Command}, spec.Args...), Env: env, Dir: descriptorDir(dir, w.root)}
	p, err := StartPiped(cmd, func(cmd *exec.Cmd) (func(), error) {
		return w.opts.confine(cmd, w.root, ProcessPaths{}, spec.Installed)
	}, spec.StderrLine)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: start %q: %v", ErrNotFound, spec.Command, err)
	}
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", spec.Command, err)
	}
	return p, nil
}

// StartPiped starts cmd, whose Path, Args, Env and Dir are set, with pipes for its
// standard streams, in a new process group: Stop signals the whole group, and whatever
// is left in it when the process exits is killed. If agenticd dies without cleaning up,
// the kernel kills the process. confine puts cmd under its boundary before it starts (it
// may rewrite cmd) and returns what to release once it has exited. Each line the process
// writes to stderr goes to stderrLine, if set.
func StartPiped(cmd *exec.Cmd, confine func(*exec.Cmd) (release func(), err error), stderrLine func(string)) (*Process, error) {
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < len(pipes); i += 2 {
		var err error
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeFiles(pipes[:i]...)
			return nil, fmt.Errorf("create pipes: %w", err)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0], pipes[3], pipes[5]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	release, err := confine(cmd)
	if err != nil {
		closeFiles(pipes[:]...)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		release()
		closeFiles(pipes[:]...)
		return nil, err
	}
	// The child holds its own copies; closing ours lets EOF arrive when it exits.
	closeFiles(pipes[0], pipes[3], pipes[5])
	p := &Process{Stdin: pipes[1], Stdout: pipes[2], cmd: cmd, release: release, exited: make(chan struct{}),
		stderr: pipes[4], stderrRead: make(chan struct{})}
	go p.readStderr(stderrLine)
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	killGroup(p.cmd.Process.Pid) // whatever the leader left behind in its group goes with it
	p.release()
	p.exitErr = err
	close(p.exited)
}

func (p *Process) readStderr(line func(string)) {
	defer close(p.stderrRead)
	sc := bufio.NewScanner(p.stderr)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if line != nil {
			line(sc.Text())
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		p.stderrErr = err
	}
}

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and its group was killed.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// StderrRead is closed once all the process wrote to stderr was read, or Close gave up
// waiting for it.
func (p *Process) StderrRead() <-chan struct{} { return p.stderrRead }

// ExitReason says how the process ended ("exited with status 1", "killed by signal
// killed"); valid once Exited is closed.
func (p *Process) ExitReason() string { return ExitReason(p.exitErr) }

// ExitReason says how a process ended, from what exec.Cmd.Wait returned.
func ExitReason(waitErr error) string {
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if waitErr != nil {
		return waitErr.Error()
	}
	return "exited with status 0"
}

// Stop ends the process: end of input first (well-behaved programs exit), then SIGTERM
// to its group, then SIGKILL, each after grace or as soon as ctx ends. It returns once
// the process has exited.
func (p *Process) Stop(ctx context.Context, grace time.Duration) {
	_ = p.Stdin.Close()
	pgid := p.cmd.Process.Pid
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = syscall.Kill(-pgid, sig)
		}
		t := time.NewTimer(grace)
		select {
		case <-p.exited:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
			return
		case <-t.C:
		}
	}
	<-p.exited
}

// stderrDrain bounds how long Close waits for the rest of stderr: it reaches EOF when
// the group is gone, but a process that escaped the group may hold it.
const stderrDrain = time.Second

// Close releases our ends of the pipes once the process has exited: stdin, stdout, and
// stderr once what was written to it was read. It returns why reading stderr failed,
// if it did.
func (p *Process) Close() error {
	closeFiles(p.Stdin, p.Stdout)
	t := time.NewTimer(stderrDrain)
	defer t.Stop()
	select {
	case <-p.stderrRead:
	case <-t.C:
		_ = p.stderr.Close()
		<-p.stderrRead
	}
	_ = p.stderr.Close()
	return p.stderrErr
}

// groupGoneTimeout bounds how long killGroup waits for a group to disappear.
const groupGoneTimeout = 2 * time.Second

// killGroup sends SIGKILL to a process group and waits until no member is left (kill
// returns before the signal is handled), so that "stopped" means gone.
func killGroup(pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		return // ESRCH: the group is empty already
	}
	deadline := time.Now().Add(groupGoneTimeout)
	for pause := time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, 50*time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); err != nil {
			return
		}
		time.Sleep(pause)
	}
}

func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

package sandbox

import (
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
}

// Process is a program started by Workspace.StartProcess: its own process group,
// started in and confined to the workspace like the session's commands, with pipes for
// stdin, stdout and stderr.
type Process struct {
	Stdin  *os.File // ours to write; closing it is end of input
	Stdout *os.File
	Stderr *os.File

	cmd     *exec.Cmd
	release func()
	exited  chan struct{}
	exitErr error
}

// StartProcess starts spec in the workspace root under the workspace's boundary (see
// Roots.Confine; off when confinement is off). The process and what it starts share a
// new process group that Stop kills; confined, nothing it starts outlives it, and the
// kernel kills it if agenticd dies. The caller reads Stdout and Stderr until EOF and
// calls Stop.
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
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < len(pipes); i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeFiles(pipes[:i]...)
			return nil, fmt.Errorf("create pipes for %q: %w", spec.Command, err)
		}
	}
	cmd := &exec.Cmd{
		Path: path, Args: append([]string{spec.Command}, spec.Args...), Env: env, Dir: descriptorDir(dir, w.root),
		Stdin: pipes[0], Stdout: pipes[3], Stderr: pipes[5],
		// Setpgid: Stop kills the whole group. Pdeathsig: if agenticd dies without
		// cleaning up, the kernel ends the process.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	release, err := w.opts.confine(cmd, w.root, ProcessPaths{}, spec.Installed)
	if err != nil {
		closeFiles(pipes[:]...)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		release()
		closeFiles(pipes[:]...)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: start %q: %v", ErrNotFound, spec.Command, err)
		}
		return nil, fmt.Errorf("start %q: %w", spec.Command, err)
	}
	// The child holds its own copies; closing ours lets EOF arrive when it exits.
	closeFiles(pipes[0], pipes[3], pipes[5])
	p := &Process{Stdin: pipes[1], Stdout: pipes[2], Stderr: pipes[4], cmd: cmd, release: release, exited: make(chan struct{})}
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

// Exited is closed once the process has exited and its group was killed.
func (p *Process) Exited() <-chan struct{} { return p.exited }

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

// Stop ends the process: end of input first (well-behaved servers exit), then SIGTERM
// to its group, then SIGKILL, each after grace or as soon as ctx ends. It returns once the
// process has exited, and closes our ends of the pipes.
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
			closeFiles(p.Stdout, p.Stderr)
			return
		case <-ctx.Done():
			t.Stop()
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
			closeFiles(p.Stdout, p.Stderr)
			return
		case <-t.C:
		}
	}
	<-p.exited
	closeFiles(p.Stdout, p.Stderr)
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

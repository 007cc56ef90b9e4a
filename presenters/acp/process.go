package acp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agenticd/agenticd/presenters/textutil"
	"github.com/agenticd/agenticd/sandbox"
)

// process is one running agent binary in its own process group. Its stdout and stdin
// are plain pipes (not exec's copying goroutines) so that Wait never races with the
// connection reading the last lines the agent wrote.
type process struct {
	cmd    *exec.Cmd
	pgid   int
	stdin  *os.File // our end: we write requests here
	stdout *os.File // our end: the connection reads here
	stderr *os.File // our end: logged line by line

	release    func()        // frees what confining the process took (its private temp dir)
	exited     chan struct{} // closed when the process has exited and its group was killed
	exitErr    error         // valid after exited
	stderrDone chan struct{}
	tail       stderrTail // its last stderr lines, for the reason it stopped
	started    time.Time
}

// confiner puts a process under the OS boundary of its workspace and gives it agenticd's
// environment without agenticd's secrets (sandbox.Roots).
type confiner interface {
	Confine(cmd *exec.Cmd, workspace string, extra sandbox.ProcessPaths) (release func(), err error)
	AgentEnv(set map[string]string, keep []string) []string
	ConfinesFiles() bool
}

var _ confiner = (*sandbox.Roots)(nil)

// startProcess starts the agent in its workspace, confined to it, with agenticd's
// environment less agenticd's secrets plus env, stderr lines going to log. The process
// and anything it spawns share a new process group; confined, they also end with it.
func startProcess(command string, args []string, env map[string]string, keepEnv []string, workspace string, conf confiner, paths sandbox.ProcessPaths, log *slog.Logger) (*process, error) {
	path, err := exec.LookPath(command)
	if err != nil {
		return nil, fmt.Errorf("agent command %q not found: install it or fix `command` in the config: %w", command, err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create agent stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("create agent stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("create agent stderr pipe: %w", err)
	}

	cmd := exec.Command(path, args...)
	cmd.Env = conf.AgentEnv(env, keepEnv)
	cmd.Dir = workspace
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// Setpgid: kill the whole group (agents such as gemini-cli re-spawn themselves).
	// Pdeathsig: if agenticd dies without cleaning up, the kernel ends the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	release, err := conf.Confine(cmd, workspace, paths)
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start agent %q: %w", command, err)
	}
	if err := cmd.Start(); err != nil {
		release()
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start agent %q: %w", command, err)
	}
	// The child holds its own copies; closing ours lets EOF arrive when it exits.
	closeAll(inR, outW, errW)

	p := &process{
		cmd:        cmd,
		release:    release,
		pgid:       cmd.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		started:    time.Now(),
	}
	go p.logStderr(log)
	go p.wait()
	return p, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	// Whatever the leader left behind in its group goes with it.
	p.killGroup()
	p.release()
	p.exitErr = err
	close(p.exited)
}

// groupGoneTimeout bounds how long killGroup waits for the group to disappear.
const groupGoneTimeout = 2 * time.Second

// killGroup sends SIGKILL to the process group and waits until no member is left
// (kill returns before the signal is handled), so that "stopped" means gone.
func (p *process) killGroup() {
	if err := syscall.Kill(-p.pgid, syscall.SIGKILL); err != nil {
		return // ESRCH: the group is empty already
	}
	deadline := time.Now().Add(groupGoneTimeout)
	for pause := time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, 50*time.Millisecond) {
		if err := syscall.Kill(-p.pgid, 0); err != nil {
			return
		}
		time.Sleep(pause)
	}
}

func (p *process) logStderr(log *slog.Logger) {
	defer close(p.stderrDone)
	sc := bufio.NewScanner(p.stderr)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		log.Info("agent stderr", "line", sc.Text())
		p.tail.add(sc.Text())
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		log.Warn("reading agent stderr failed", "err", err)
	}
}

// stop ends the agent: stdin closed (well-behaved agents exit), then SIGTERM to the
// group, then SIGKILL, each step bounded by grace or ctx. It returns once the process
// has exited.
func (p *process) stop(ctx context.Context, grace time.Duration) {
	_ = p.stdin.Close()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = syscall.Kill(-p.pgid, sig)
		}
		t := time.NewTimer(grace)
		select {
		case <-p.exited:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			<-p.exited
			return
		case <-t.C:
		}
	}
	<-p.exited
}

// closePipes releases our stdin and stderr ends after exit. stderr reaches EOF when
// the group is gone; if a process escaped the group and holds it, closing our end
// ends the logging goroutine anyway.
func (p *process) closePipes() {
	_ = p.stdin.Close()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.stderrDone:
	case <-t.C:
		_ = p.stderr.Close()
		<-p.stderrDone
	}
	_ = p.stderr.Close()
}

// Bounds of what an exit reason quotes of the agent's stderr.
const (
	tailLines     = 8
	tailLineBytes = 240
	maxRefused    = 5
)

// stderrTail keeps an agent's last stderr lines, each cut to tailLineBytes, and the
// paths its stderr said it was refused.
type stderrTail struct {
	mu      sync.Mutex
	lines   []string
	refused []string
}

func (t *stderrTail) add(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range refusedPaths(line) {
		if len(t.refused) < maxRefused && !slices.Contains(t.refused, p) {
			t.refused = append(t.refused, p)
		}
	}
	if len(t.lines) == tailLines {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, textutil.Prefix(line, tailLineBytes))
}

// snapshot returns the kept lines and refused paths.
func (t *stderrTail) snapshot() (lines, refused []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines), slices.Clone(t.refused)
}

// deniedWords mark a line that reports a refused file operation: node's EACCES/EPERM
// errors, libc's and Rust's "Permission denied", "Operation not permitted".
var deniedWords = []string{"EACCES", "EPERM", "Permission denied", "permission denied", "Operation not permitted", "operation not permitted"}

// pathInLine matches an absolute path, quoted or bare.
var pathInLine = regexp.MustCompile(`'(/[^']+)'|"(/[^"]+)"|‘(/[^’]+)’|“(/[^”]+)”|(?:^|[\s(:=])(/[A-Za-z0-9._@+/-]+)`)

// refusedPaths are the absolute paths a stderr line names when it reports a refused
// file operation.
func refusedPaths(line string) []string {
	if !slices.ContainsFunc(deniedWords, func(w string) bool { return strings.Contains(line, w) }) {
		return nil
	}
	var out []string
	for _, m := range pathInLine.FindAllStringSubmatch(line, -1) {
		for _, g := range m[1:] {
			if g != "" && g != "/" {
				out = append(out, filepath.Clean(g))
				break
			}
		}
	}
	return out
}

// exitReason says how the process ended, for status_reason and logs.
func (p *process) exitReason() string { return sandbox.ExitReason(p.exitErr) }

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// expandHome expands a leading "~" in each path; a path that cannot be expanded (no
// home directory) is left out, as a missing path would be.
func expandHome(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if e, err := sandbox.ExpandHome(p); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// createState makes the state an agent needs to exist: missing directories (0700) and
// files (0600, with their seed). An existing path is left as it is; what cannot be made
// is logged, and the agent then says what it misses.
func createState(state []StatePath, log *slog.Logger) {
	for _, st := range state {
		p, err := sandbox.ExpandHome(st.Path)
		if err != nil {
			continue
		}
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if st.File {
			err = os.MkdirAll(filepath.Dir(p), 0o700)
			if err == nil {
				err = os.WriteFile(p, []byte(st.Seed), 0o600)
			}
		} else {
			err = os.MkdirAll(p, 0o700)
		}
		if err != nil {
			log.Warn("cannot create the agent's state", "path", p, "err", err)
			continue
		}
		log.Info("created the agent's state", "path", p)
	}
}

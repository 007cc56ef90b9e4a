package acp

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters/textutil"
	"github.com/agenticd/agenticd/sandbox"
)

// process is one running agent binary (in its own process group: sandbox.Process) and
// what agenticd keeps of it: when it started, and its last stderr lines.
type process struct {
	*sandbox.Process
	tail    stderrTail // its last stderr lines, for the reason it stopped
	started time.Time
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
	cmd := exec.Command(path, args...)
	cmd.Env = conf.AgentEnv(env, keepEnv)
	cmd.Dir = workspace
	p := &process{}
	confine := func(cmd *exec.Cmd) (func(), error) { return conf.Confine(cmd, workspace, paths) }
	p.Process, err = sandbox.StartPiped(cmd, confine, func(line string) {
		log.Info("agent stderr", "line", line)
		p.tail.add(line)
	})
	if err != nil {
		return nil, fmt.Errorf("start agent %q: %w", command, err)
	}
	p.started = time.Now()
	return p, nil
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

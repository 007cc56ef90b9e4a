package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxReadBytes       int64       = 10 << 20
	DefaultMaxTerminals                   = 16
	DefaultOutputByteLimit    int64       = 1 << 20
	DefaultMaxOutputByteLimit int64       = 16 << 20
	defaultSearchMaxResults               = 200
	maxSymlinkHops                        = 40 // Linux's own limit (MAXSYMLINKS)
	workspaceDirPerm          fs.FileMode = 0o755
)

// Options tunes the limits of every Workspace opened from a Roots.
// Zero (or negative) fields take the defaults.
type Options struct {
	// MaxReadBytes caps how many bytes one read scans (default 10 MiB).
	MaxReadBytes int64
	// MaxTerminals caps the unreleased terminals of one workspace directory,
	// shared by every session using it (default 16).
	MaxTerminals int
	// DefaultOutputByteLimit is the output a terminal keeps when the request
	// names no limit (default 1 MiB).
	DefaultOutputByteLimit int64
	// MaxOutputByteLimit clamps a requested outputByteLimit so that one
	// request cannot make the server hold an arbitrary amount (default 16 MiB).
	MaxOutputByteLimit int64
}

func (o Options) withDefaults() Options {
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.MaxTerminals <= 0 {
		o.MaxTerminals = DefaultMaxTerminals
	}
	if o.DefaultOutputByteLimit <= 0 {
		o.DefaultOutputByteLimit = DefaultOutputByteLimit
	}
	if o.MaxOutputByteLimit <= 0 {
		o.MaxOutputByteLimit = DefaultMaxOutputByteLimit
	}
	if o.DefaultOutputByteLimit > o.MaxOutputByteLimit {
		o.MaxOutputByteLimit = o.DefaultOutputByteLimit
	}
	return o
}

// Roots is the set of directories below which workspaces may be opened.
// It is safe for concurrent use.
type Roots struct {
	dirs []string
	opts Options

	mu    sync.Mutex
	slots map[string]*terminalSlots // by workspace real path
}

// NewRoots is NewRootsWithOptions with default Options.
func NewRoots(dirs []string) (*Roots, error) {
	return NewRootsWithOptions(dirs, Options{})
}

// NewRootsWithOptions expands a leading "~", makes each dir absolute and
// resolves its symlinks; every root must be an existing directory.
func NewRootsWithOptions(dirs []string, opts Options) (*Roots, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no workspace roots configured; set workspace_roots to the directories sessions may work in", ErrWorkspaceNotAllowed)
	}
	r := &Roots{opts: opts.withDefaults(), slots: make(map[string]*terminalSlots)}
	seen := make(map[string]bool)
	for _, d := range dirs {
		real, err := canonicalRoot(d)
		if err != nil {
			return nil, err
		}
		if !seen[real] {
			seen[real] = true
			r.dirs = append(r.dirs, real)
		}
	}
	return r, nil
}

func canonicalRoot(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("%w: empty workspace root", ErrWorkspaceNotAllowed)
	}
	expanded, err := expandHome(dir)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(expanded)
	if err != nil {
		return "", fmt.Errorf("workspace root %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: workspace root %q does not exist or is unreadable (%v); create it or fix workspace_roots", ErrWorkspaceNotAllowed, dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("workspace root %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: workspace root %q is not a directory", ErrWorkspaceNotAllowed, dir)
	}
	return real, nil
}

func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %q: %w", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}

// Dirs returns the canonical (absolute, symlink-free) root directories.
func (r *Roots) Dirs() []string {
	return append([]string(nil), r.dirs...)
}

// Open returns the Workspace for dir, which must be an absolute path to an
// existing directory at or below one of the roots (after resolving
// symlinks). Workspaces of the same directory share one terminal cap.
func (r *Roots) Open(dir string) (*Workspace, error) {
	allowed := strings.Join(r.dirs, ", ")
	if dir == "" || !filepath.IsAbs(dir) || strings.IndexByte(dir, 0) >= 0 {
		return nil, fmt.Errorf("%w: workspace %q must be an absolute path to a directory under one of: %s", ErrWorkspaceNotAllowed, dir, allowed)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("%w: workspace %q does not exist or is unreadable (%v); it must be an existing directory under one of: %s", ErrWorkspaceNotAllowed, dir, err, allowed)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("%w: workspace %q: %v; it must be an existing directory under one of: %s", ErrWorkspaceNotAllowed, dir, err, allowed)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: workspace %q is not a directory; it must be a directory under one of: %s", ErrWorkspaceNotAllowed, dir, allowed)
	}
	inside := false
	for _, root := range r.dirs {
		if within(root, real) {
			inside = true
			break
		}
	}
	if !inside {
		return nil, fmt.Errorf("%w: workspace %q (%s) is not under any workspace root; use a directory under one of: %s", ErrWorkspaceNotAllowed, dir, real, allowed)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("sandbox: platform without stat device/inode numbers")
	}
	return &Workspace{
		root:  real,
		dev:   uint64(st.Dev),
		ino:   st.Ino,
		opts:  r.opts,
		slots: r.slotsFor(real),
	}, nil
}

func (r *Roots) slotsFor(real string) *terminalSlots {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.slots[real]
	if !ok {
		s = &terminalSlots{max: r.opts.MaxTerminals}
		r.slots[real] = s
	}
	return s
}

// terminalSlots counts the unreleased terminals of one workspace directory.
type terminalSlots struct {
	mu   sync.Mutex
	used int
	max  int
}

func (s *terminalSlots) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.max {
		return false
	}
	s.used++
	return true
}

func (s *terminalSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

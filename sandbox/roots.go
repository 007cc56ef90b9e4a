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
	// HiddenEnv names variables of the server's environment that neither
	// terminals nor agents' processes inherit (the API keys of the server's own
	// agents); every AGENTICD_* variable is always hidden. A terminal request
	// may still set any of them itself, and an agent keeps its own keys.
	HiddenEnv []string
	// Excluded are files and directories that no workspace may reach, even
	// below a root: the server's own data (its database, config file, TLS
	// key). A path resolving into one is refused as outside the workspace, and
	// a workspace inside one is not allowed. "~" is expanded; paths that do not
	// exist yet are excluded all the same.
	Excluded []string
	// Confinement is the OS boundary of the processes started for sessions; the zero
	// value is ConfineOff.
	Confinement ConfinementMode
	// Limits bound each confined process tree that brings none of its own
	// (ProcessPaths.Limits): terminals, commands, MCP servers. The zero value leaves
	// them unbounded.
	Limits Limits
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

// NewRoots expands a leading "~", makes each dir absolute and
// resolves its symlinks; every root must be an existing directory.
func NewRoots(dirs []string, opts Options) (*Roots, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no workspace roots configured; set workspace_roots to the directories sessions may work in", ErrWorkspaceNotAllowed)
	}
	r := &Roots{opts: opts.withDefaults(), slots: make(map[string]*terminalSlots)}
	excluded, err := canonicalExcluded(opts.Excluded)
	if err != nil {
		return nil, err
	}
	r.opts.Excluded = excluded
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
	expanded, err := ExpandHome(dir)
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

// canonicalExcluded makes each excluded path absolute and symlink-free, so
// that it compares with resolved paths. A path that does not exist yet keeps
// its deepest existing parent resolved and the rest as written.
func canonicalExcluded(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" {
			continue
		}
		expanded, err := ExpandHome(p)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(expanded)
		if err != nil {
			return nil, fmt.Errorf("excluded path %q: %w", p, err)
		}
		var rest []string
		for {
			real, err := filepath.EvalSymlinks(abs)
			if err == nil {
				out = append(out, filepath.Join(append([]string{real}, rest...)...))
				break
			}
			parent := filepath.Dir(abs)
			if parent == abs {
				out = append(out, filepath.Join(append([]string{abs}, rest...)...))
				break
			}
			rest = append([]string{filepath.Base(abs)}, rest...)
			abs = parent
		}
	}
	return out, nil
}

// ExpandHome replaces a leading "~" (alone or followed by "/") with the
// user's home directory; other paths are returned unchanged.
func ExpandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %q: %w", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}

// Excluded returns the paths no workspace may reach (Options.Excluded, canonical):
// agenticd's own files.
func (r *Roots) Excluded() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.opts.Excluded...)
}

// Dirs returns the canonical (absolute, symlink-free) root directories.
func (r *Roots) Dirs() []string {
	return append([]string(nil), r.dirs...)
}

// Open returns the Workspace for dir, which must be an absolute path to an
// existing directory at or below one of the roots (after resolving
// symlinks) that holds none of agenticd's own files: a workspace holding them
// would hand them to every process of the session, which may write its whole
// workspace. Workspaces of the same directory share one terminal cap.
func (r *Roots) Open(dir string) (*Workspace, error) {
	w, err := r.openDir(dir)
	if err != nil {
		return nil, err
	}
	if ex, holds := holdsExcluded(r.opts.Excluded, w.root); holds {
		return nil, fmt.Errorf("%w: workspace %q holds agenticd's own files (%s), which sessions may not reach; choose a project directory inside it instead", ErrWorkspaceNotAllowed, dir, ex)
	}
	return w, nil
}

// openDir is Open without the check that the workspace holds none of agenticd's files:
// what a workspace looks like whose directory came to hold them after it was opened (a
// config moved in), which the file operations refuse path by path.
func (r *Roots) openDir(dir string) (*Workspace, error) {
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
		if Within(root, real) {
			inside = true
			break
		}
	}
	if !inside {
		return nil, fmt.Errorf("%w: workspace %q (%s) is not under any workspace root; use a directory under one of: %s", ErrWorkspaceNotAllowed, dir, real, allowed)
	}
	if isExcluded(r.opts.Excluded, real) {
		return nil, fmt.Errorf("%w: workspace %q lies inside agenticd's own data (its database, config or keys), which sessions may not use; choose another directory under one of: %s", ErrWorkspaceNotAllowed, dir, allowed)
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

// isExcluded reports whether the clean absolute path p is or lies below one
// of the (canonical) excluded paths.
func isExcluded(excluded []string, p string) bool {
	for _, e := range excluded {
		if Within(e, p) {
			return true
		}
	}
	return false
}

// holdsExcluded returns an excluded path that is dir or lies below it.
func holdsExcluded(excluded []string, dir string) (string, bool) {
	for _, e := range excluded {
		if Within(dir, e) {
			return e, true
		}
	}
	return "", false
}

// Within reports whether the clean absolute path p is root or below it.
func Within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

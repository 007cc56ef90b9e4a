package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Workspace is one directory that a session's file and terminal operations
// are confined to. It is safe for concurrent use.
type Workspace struct {
	root     string // absolute, symlink-free
	dev, ino uint64 // identity of root when opened; checked on every operation
	opts     Options
	slots    *terminalSlots
}

// Root returns the workspace directory (absolute, symlinks resolved).
func (w *Workspace) Root() string { return w.root }

// Resolve returns the absolute, symlink-resolved form of path, which must
// lie inside the workspace and outside Options.Excluded. Relative paths are taken from the workspace
// root. Symlinks are followed component by component as the kernel would;
// for a path that does not exist yet, the deepest existing parent is
// resolved and the rest appended. Devices, FIFOs and sockets are refused.
func (w *Workspace) Resolve(path string) (string, error) {
	r, err := w.resolve(path)
	if err != nil {
		return "", err
	}
	return r.abs, nil
}

// resolved is the outcome of resolve: where a path lands and what is there.
type resolved struct {
	abs  string      // absolute, symlink-free path inside the workspace
	rel  string      // abs relative to the workspace root ("." for the root)
	info fs.FileInfo // Lstat of abs at resolution time; nil if it does not exist
}

func (w *Workspace) resolve(path string) (resolved, error) {
	if path == "" {
		return resolved{}, fmt.Errorf("%w: empty path; give a path relative to the workspace root or an absolute path inside %s", ErrInvalidPath, w.root)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return resolved{}, fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, path)
	}
	if err := w.checkIdentity(); err != nil {
		return resolved{}, err
	}
	cur := w.root
	if filepath.IsAbs(path) {
		cur = "/"
	}
	pending := components(path)
	var missing []string // components below the deepest existing directory
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch {
		case c == ".":
			continue
		case c == ".." && len(missing) > 0:
			// A directory that does not exist cannot be a symlink, so
			// stepping back out of it is plain string work.
			missing = missing[:len(missing)-1]
			continue
		case c == "..":
			// cur is symlink-free, so its lexical parent is its real parent.
			cur = filepath.Dir(cur)
			continue
		case len(missing) > 0:
			missing = append(missing, c)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, c)
			continue
		}
		if err != nil {
			return resolved{}, w.walkError(path, cur, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hops++
			if hops > maxSymlinkHops {
				return resolved{}, w.walkError(path, cur, fmt.Errorf("%w: %q: too many levels of symbolic links", ErrInvalidPath, path))
			}
			target, err := os.Readlink(next)
			if err != nil {
				return resolved{}, w.walkError(path, cur, err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			pending = append(components(target), pending...)
			continue
		}
		if !fi.IsDir() && len(pending) > 0 {
			return resolved{}, w.walkError(path, cur, fmt.Errorf("%w: %q: %s is not a directory", ErrInvalidPath, path, w.display(next)))
		}
		cur = next
	}
	abs := filepath.Join(append([]string{cur}, missing...)...)
	if !Within(w.root, abs) {
		// Only the path as given: where it leads is outside, and not the caller's to learn.
		return resolved{}, fmt.Errorf("%w: %q leads outside the workspace %s; use a path inside the workspace", ErrOutsideWorkspace, path, w.root)
	}
	if isExcluded(w.opts.Excluded, abs) {
		return resolved{}, fmt.Errorf("%w: %q is agenticd's own data (its database, config or keys), which sessions may not touch; use another path in the workspace", ErrOutsideWorkspace, path)
	}
	rel, err := filepath.Rel(w.root, abs)
	if err != nil {
		return resolved{}, fmt.Errorf("%w: %q: %v", ErrInvalidPath, path, err)
	}
	r := resolved{abs: abs, rel: rel}
	if len(missing) == 0 {
		fi, err := os.Lstat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Removed since the walk; callers treat it as not existing.
		case err != nil:
			return resolved{}, fmt.Errorf("resolve %q: %w", path, err)
		default:
			r.info = fi
		}
	}
	if r.info != nil && !r.info.Mode().IsRegular() && !r.info.IsDir() {
		return resolved{}, fmt.Errorf("%w: %q is a %s, not a regular file or directory", ErrInvalidPath, path, fileKind(r.info.Mode()))
	}
	return r, nil
}

// walkError reports a failure met while resolving. If the walk had left
// the workspace at that point, the caller only learns that the path is
// outside: errors must not probe the layout beyond the workspace.
func (w *Workspace) walkError(path, cur string, err error) error {
	if !Within(w.root, cur) {
		return fmt.Errorf("%w: %q leads outside the workspace %s; use a path inside the workspace", ErrOutsideWorkspace, path, w.root)
	}
	switch {
	case errors.Is(err, ErrInvalidPath):
		return err
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: %q: file name too long", ErrInvalidPath, path)
	}
	return fmt.Errorf("resolve %q: %w", path, err)
}

// display shows an absolute path inside the workspace relative to its root.
func (w *Workspace) display(abs string) string {
	if rel, err := filepath.Rel(w.root, abs); err == nil && Within(w.root, abs) {
		return rel
	}
	return abs
}

// components splits a slash-separated path into its non-empty parts.
func components(p string) []string {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, s := range parts {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDir != 0:
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	default:
		return "special file"
	}
}

// openRoot opens the workspace directory as an os.Root. Every operation
// after resolution goes through it: os.Root walks each component with
// openat(O_NOFOLLOW) from the root's descriptor and refuses to leave it, so
// a symlink or directory swapped in after Resolve cannot redirect the
// operation outside. The root's own identity is re-checked so that a
// workspace directory replaced after Open is noticed rather than followed.
func (w *Workspace) openRoot() (*os.Root, error) {
	root, err := os.OpenRoot(w.root)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", w.root, err)
	}
	fi, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("stat workspace %s: %w", w.root, err)
	}
	if err := w.sameDir(fi); err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// openDir opens the directory rel (resolved: "." is the root) through the
// workspace root, so that a symlink swapped in after resolution cannot lead
// it outside; what names it in errors ("terminal cwd").
func (w *Workspace) openDir(what, rel string) (*os.File, error) {
	root, err := w.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	dir, err := root.Open(rel)
	if err != nil {
		return nil, osError("open "+what, rel, err)
	}
	if fi, err := dir.Stat(); err != nil || !fi.IsDir() {
		dir.Close()
		return nil, fmt.Errorf("%w: %s %s is not a directory", ErrInvalidPath, what, rel)
	}
	return dir, nil
}

// checkIdentity verifies that the workspace path still names the directory
// opened (not, say, a symlink put in its place).
func (w *Workspace) checkIdentity() error {
	fi, err := os.Lstat(w.root)
	if err != nil {
		return fmt.Errorf("%w: workspace %s: %v; open the workspace again", ErrNotFound, w.root, err)
	}
	return w.sameDir(fi)
}

func (w *Workspace) sameDir(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || uint64(st.Dev) != w.dev || st.Ino != w.ino {
		return fmt.Errorf("%w: the workspace directory %s was replaced after the session opened it; open the workspace again", ErrOutsideWorkspace, w.root)
	}
	return nil
}

// osError maps an error from an os.Root operation on name to the package's
// sentinels, keeping the original error in the message.
func osError(op, name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s %s: no such file or directory", ErrNotFound, op, name)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %s %s: a path component is not a directory", ErrInvalidPath, op, name)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w: %s %s: is a directory", ErrInvalidPath, op, name)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: %s %s: too many levels of symbolic links", ErrInvalidPath, op, name)
	case isRootEscape(err):
		return fmt.Errorf("%w: %s %s: the path changed to lead outside the workspace while in use", ErrOutsideWorkspace, op, name)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// isRootEscape recognises os.Root's refusal to leave the root. os does not
// export that error value, so it is matched by its fixed text.
func isRootEscape(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// ReadOptions selects a range of lines (ACP fs/read_text_file).
type ReadOptions struct {
	Line  int // 1-based first line; 0 (or less) reads from the start
	Limit int // maximum number of lines; 0 (or less) reads to the end
}

// ReadTextFile returns the text of a file in the workspace, or the lines
// opts selects. Lines keep their terminators, so consecutive ranges
// concatenate to the file. At most MaxReadBytes are scanned: a file is
// ErrTooLarge only if the range asked for ends beyond that point. Text must
// be valid UTF-8 without NUL bytes, else ErrNotText.
func (w *Workspace) ReadTextFile(path string, opts ReadOptions) (string, error) {
	r, err := w.resolve(path)
	if err != nil {
		return "", err
	}
	if r.info == nil {
		return "", fmt.Errorf("%w: %s does not exist in the workspace", ErrNotFound, path)
	}
	if r.info.IsDir() {
		return "", fmt.Errorf("%w: %s is a directory; list it instead of reading it", ErrInvalidPath, path)
	}
	root, err := w.openRoot()
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := openRegular(root, r.rel, path)
	if err != nil {
		return "", err
	}
	defer f.Close()

	limit := w.opts.MaxReadBytes
	if opts.Line <= 1 && opts.Limit <= 0 {
		return readWhole(f, path, limit)
	}
	return readLines(f, path, limit, opts)
}

// openRegular opens rel for reading and checks, on the open descriptor,
// that it is a regular file. O_NONBLOCK keeps a FIFO swapped in after the
// check from blocking the open.
func openRegular(root *os.Root, rel, display string) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, osError("open", display, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", display, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is a %s, not a regular file", ErrInvalidPath, display, fileKind(fi.Mode()))
	}
	return f, nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%w: %s is larger than the %s read limit; read a range of it with line and limit", ErrTooLarge, path, formatBytes(limit))
}

func notText(path string) error {
	return fmt.Errorf("%w: %s contains bytes that are not UTF-8 text (binary file)", ErrNotText, path)
}

func isText(b []byte) bool {
	return bytes.IndexByte(b, 0) < 0 && utf8.Valid(b)
}

func readWhole(f *os.File, path string, limit int64) (string, error) {
	size := int64(0)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if size > limit {
		return "", tooLarge(path, limit)
	}
	// One byte more than the limit tells a file that grew past it.
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(f, limit+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if n > limit {
		return "", tooLarge(path, limit)
	}
	if !isText(buf.Bytes()) {
		return "", notText(path)
	}
	return buf.String(), nil
}

func readLines(f *os.File, path string, limit int64, opts ReadOptions) (string, error) {
	first := max(opts.Line, 1)
	br := bufio.NewReaderSize(io.LimitReader(f, limit+1), 64<<10)
	var out strings.Builder
	var scanned int64
	taken := 0
	for lineNo := 1; opts.Limit <= 0 || taken < opts.Limit; lineNo++ {
		line, err := br.ReadBytes('\n')
		scanned += int64(len(line))
		if scanned > limit {
			return "", tooLarge(path, limit)
		}
		if !isText(line) {
			return "", notText(path)
		}
		if lineNo >= first && len(line) > 0 {
			out.Write(line)
			taken++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", path, err)
		}
	}
	return out.String(), nil
}

// WriteTextFile replaces (or creates) a file in the workspace with content.
// Parent directories are created. The write is atomic: the content goes to
// a temporary file in the same directory, is fsynced, and is renamed over
// the target, so readers see the old or the new file, never a mix. A
// replaced file keeps its permission bits (and owner, where allowed). A
// path through a symlink is written at the symlink's target, which must be
// inside the workspace.
func (w *Workspace) WriteTextFile(path string, content string) error {
	if strings.HasSuffix(path, "/") {
		return fmt.Errorf("%w: %s ends in a slash; name a file", ErrInvalidPath, path)
	}
	r, err := w.resolve(path)
	if err != nil {
		return err
	}
	if r.rel == "." || (r.info != nil && r.info.IsDir()) {
		return fmt.Errorf("%w: %s is a directory; name a file", ErrInvalidPath, path)
	}
	root, err := w.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()

	dir, base := filepath.Dir(r.rel), filepath.Base(r.rel)
	if err := root.MkdirAll(dir, workspaceDirPerm); err != nil {
		return osError("create parent directories of", path, err)
	}
	// The target as it is now, through the root: the mode to keep, and a
	// last refusal of anything that is not a regular file.
	var existing fs.FileInfo
	switch fi, err := root.Lstat(r.rel); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return osError("stat", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is a %s; only regular files are written", ErrInvalidPath, path, fileKind(fi.Mode()))
	default:
		existing = fi
	}

	tmp := filepath.Join(dir, "."+base+".agenticd-"+randomHex(6)+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return osError("create temporary file for", path, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if _, err := f.WriteString(content); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if existing != nil {
		if err := f.Chmod(existing.Mode().Perm()); err != nil {
			return fmt.Errorf("keep the mode of %s: %w", path, err)
		}
		keepOwner(f, existing)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := root.Rename(tmp, r.rel); err != nil {
		return osError("replace", path, err)
	}
	committed = true
	// Make the rename itself durable.
	if d, err := root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// keepOwner gives the new file the owner of the one it replaces when the
// process may (as root); otherwise the file belongs to this process, as any
// editor's save would.
func keepOwner(f *os.File, existing fs.FileInfo) {
	st, ok := existing.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid()) {
		return
	}
	_ = f.Chown(int(st.Uid), int(st.Gid)) // EPERM when not privileged: keep ours
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d-byte", n)
	}
}

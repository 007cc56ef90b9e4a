package sandbox

import (
	"bytes"
	"fmt"
	"io"
)

// ReadFile returns the bytes of a regular file in the workspace, which may be
// binary (an image to attach, say). A file larger than maxBytes is
// ErrTooLarge; maxBytes <= 0 means the workspace's read cap (MaxReadBytes).
// Like ReadTextFile it opens through the workspace root without blocking and
// checks the opened descriptor, so a FIFO, device or outside symlink swapped
// in after the path was resolved is refused instead of read (or waited on).
func (w *Workspace) ReadFile(path string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = w.opts.MaxReadBytes
	}
	r, err := w.resolve(path)
	if err != nil {
		return nil, err
	}
	if r.info == nil {
		return nil, fmt.Errorf("%w: %s does not exist in the workspace", ErrNotFound, path)
	}
	if r.info.IsDir() {
		return nil, fmt.Errorf("%w: %s is a directory; name a file", ErrInvalidPath, path)
	}
	root, err := w.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openRegular(root, r.rel, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(0)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if size > maxBytes {
		return nil, fileTooLarge(path, maxBytes)
	}
	// One byte more than the cap tells a file that grew past it.
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n > maxBytes {
		return nil, fileTooLarge(path, maxBytes)
	}
	return buf.Bytes(), nil
}

func fileTooLarge(path string, limit int64) error {
	return fmt.Errorf("%w: %s is larger than the %s limit; use a smaller file", ErrTooLarge, path, formatBytes(limit))
}

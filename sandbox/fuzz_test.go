package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzResolve checks, for every input, that Resolve either refuses it or
// returns a clean absolute path inside the workspace with no symlink in
// it, in a tree planted with symlinks leading in, out, back and around.
// Where the kernel itself can open the path, Resolve must agree with where
// the kernel lands (the kernel is the oracle). Reading the path must never
// return the secret kept beside the workspace.
func FuzzResolve(f *testing.F) {
	tr := newTree(f, Options{})
	tr.plant(f)
	for _, seed := range []string{
		"", ".", "..", "/", "file.txt", "./dir/../file.txt", "../ws/file.txt",
		"../../outside/secret.txt", "/etc/passwd", "link-in/inner.txt", "link-in-abs/../file.txt",
		"link-out/secret.txt", "link-out-abs", "secret-link", "link-root/etc", "dir/up/file.txt",
		"dir/up/../ws/file.txt", "dir/up2/ws", "dir/up2/outside/secret.txt", "back/inner.txt",
		"back/../../outside", "loop1/x", "self/self/../ws", "dangling-in/deeper", "dangling-out",
		"new/../../outside/secret.txt", "fifo", "file.txt/..", "a\x00b", "//dir//./sub/",
		tr.wsDir + "/dir/up/../outside", tr.outside + "/secret.txt", "~/x", "dir/sub/../../../ws/self",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := tr.ws.Resolve(p)
		if err == nil {
			if !filepath.IsAbs(got) || filepath.Clean(got) != got || !Within(tr.wsDir, got) {
				t.Fatalf("Resolve(%q) = %q: not a clean path inside %s", p, got, tr.wsDir)
			}
			if real := realPrefix(got); real != existingPrefix(got) {
				t.Fatalf("Resolve(%q) = %q still goes through a symlink (real %q)", p, got, real)
			}
		} else if !errors.Is(err, ErrOutsideWorkspace) && !errors.Is(err, ErrInvalidPath) {
			t.Fatalf("Resolve(%q): unexpected error kind %v", p, err)
		}

		if kernel, ok := kernelResolve(tr.wsDir, p); ok {
			switch {
			case !Within(tr.wsDir, kernel):
				if !errors.Is(err, ErrOutsideWorkspace) {
					t.Fatalf("Resolve(%q) = %q, %v; the kernel lands outside at %q", p, got, err, kernel)
				}
			case err == nil && got != kernel:
				t.Fatalf("Resolve(%q) = %q; the kernel lands at %q", p, got, kernel)
			case err != nil && !errors.Is(err, ErrInvalidPath):
				t.Fatalf("Resolve(%q) = %v; the kernel lands inside at %q", p, err, kernel)
			}
		}

		if text, err := tr.ws.ReadTextFile(p, ReadOptions{}); err == nil && strings.Contains(text, "TOP SECRET") {
			t.Fatalf("ReadTextFile(%q) read the secret outside the workspace", p)
		}
	})
}

// kernelResolve opens p (relative to dir) the way a process would, without
// reading it, and reports where the kernel landed.
func kernelResolve(dir, p string) (string, bool) {
	if strings.IndexByte(p, 0) >= 0 || p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = dir + "/" + p
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	return real, err == nil
}

// existingPrefix is the longest prefix of the clean absolute path p that exists.
func existingPrefix(p string) string {
	for {
		if _, err := os.Lstat(p); err == nil || p == "/" {
			return p
		}
		p = filepath.Dir(p)
	}
}

// realPrefix is the existing prefix of p with all symlinks resolved.
func realPrefix(p string) string {
	e := existingPrefix(p)
	real, err := filepath.EvalSymlinks(e)
	if err != nil {
		return "error: " + err.Error()
	}
	return real
}

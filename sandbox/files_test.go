package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadTextFile(t *testing.T) {
	tr := newTree(t, Options{MaxReadBytes: 64})
	tr.plant(t)
	ws := tr.wsDir
	mustWrite(t, ws+"/lines.txt", "one\ntwo\nthree\n")
	mustWrite(t, ws+"/no-final-newline.txt", "a\nb\nc")
	mustWrite(t, ws+"/crlf.txt", "a\r\nb\r\n")
	mustWrite(t, ws+"/utf8.txt", "héllo wörld 😀\n")
	mustWrite(t, ws+"/empty.txt", "")
	mustWrite(t, ws+"/latin1.txt", "caf\xe9\n")
	mustWrite(t, ws+"/nul.txt", "a\x00b\n")
	mustWrite(t, ws+"/exact.txt", strings.Repeat("x", 64))
	mustWrite(t, ws+"/big.txt", "short first line\n"+strings.Repeat("y", 100)+"\n")

	tests := []struct {
		name string
		path string
		opts ReadOptions
		want string
		err  error
	}{
		{"whole", "lines.txt", ReadOptions{}, "one\ntwo\nthree\n", nil},
		{"from line 2", "lines.txt", ReadOptions{Line: 2}, "two\nthree\n", nil},
		{"line 2, one line", "lines.txt", ReadOptions{Line: 2, Limit: 1}, "two\n", nil},
		{"first two lines", "lines.txt", ReadOptions{Limit: 2}, "one\ntwo\n", nil},
		{"limit beyond the end", "lines.txt", ReadOptions{Line: 3, Limit: 10}, "three\n", nil},
		{"line past the end", "lines.txt", ReadOptions{Line: 10}, "", nil},
		{"negative values read all", "lines.txt", ReadOptions{Line: -1, Limit: -5}, "one\ntwo\nthree\n", nil},
		{"last line without newline", "no-final-newline.txt", ReadOptions{Line: 3, Limit: 5}, "c", nil},
		{"CRLF kept", "crlf.txt", ReadOptions{Line: 2}, "b\r\n", nil},
		{"multi-byte UTF-8", "utf8.txt", ReadOptions{}, "héllo wörld 😀\n", nil},
		{"empty file", "empty.txt", ReadOptions{}, "", nil},
		{"exactly the cap", "exact.txt", ReadOptions{}, strings.Repeat("x", 64), nil},
		{"range within the cap of a big file", "big.txt", ReadOptions{Line: 1, Limit: 1}, "short first line\n", nil},
		{"through a symlink inside", "link-in/inner.txt", ReadOptions{}, "inner\n", nil},
		{"absolute path inside", ws + "/file.txt", ReadOptions{}, "hello\n", nil},

		{"over the cap", "big.txt", ReadOptions{}, "", ErrTooLarge},
		{"range ending past the cap", "big.txt", ReadOptions{Line: 2}, "", ErrTooLarge},
		{"invalid UTF-8", "latin1.txt", ReadOptions{}, "", ErrNotText},
		{"NUL byte", "nul.txt", ReadOptions{Line: 1}, "", ErrNotText},
		{"missing", "missing.txt", ReadOptions{}, "", ErrNotFound},
		{"directory", "dir", ReadOptions{}, "", ErrInvalidPath},
		{"FIFO", "fifo", ReadOptions{}, "", ErrInvalidPath},
		{"symlink out", "secret-link", ReadOptions{}, "", ErrOutsideWorkspace},
		{"dotdot out", "../../outside/secret.txt", ReadOptions{}, "", ErrOutsideWorkspace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tr.ws.ReadTextFile(tt.path, tt.opts)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ReadTextFile(%q) = %q, %v; want %v", tt.path, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ReadTextFile(%q, %+v) = %q, %v; want %q", tt.path, tt.opts, got, err, tt.want)
			}
		})
	}
}

func TestReadTextFileErrorMessages(t *testing.T) {
	tr := newTree(t, Options{MaxReadBytes: 10})
	mustWrite(t, tr.wsDir+"/big.txt", strings.Repeat("z", 11))
	_, err := tr.ws.ReadTextFile("big.txt", ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "big.txt") || !strings.Contains(err.Error(), "line and limit") {
		t.Fatalf("too-large error %q should name the file and the way out", err)
	}
}

func TestWriteTextFile(t *testing.T) {
	tr := newTree(t, Options{})
	tr.plant(t)
	ws := tr.wsDir

	t.Run("creates parents", func(t *testing.T) {
		if err := tr.ws.WriteTextFile("a/b/c/new.txt", "new\n"); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, ws+"/a/b/c/new.txt"); got != "new\n" {
			t.Fatalf("content %q", got)
		}
	})
	t.Run("replaces and keeps the mode", func(t *testing.T) {
		for _, mode := range []os.FileMode{0o600, 0o755, 0o640} {
			p := ws + "/mode.sh"
			mustWrite(t, p, "old")
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			if err := tr.ws.WriteTextFile("mode.sh", "#!/bin/sh\n"); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode || mustRead(t, p) != "#!/bin/sh\n" {
				t.Fatalf("after write: mode %v content %q; want mode %v", fi.Mode().Perm(), mustRead(t, p), mode)
			}
		}
	})
	t.Run("through a symlink inside writes the target", func(t *testing.T) {
		if err := tr.ws.WriteTextFile("file-link", "via link\n"); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, ws+"/file.txt"); got != "via link\n" {
			t.Fatalf("target content %q", got)
		}
		if fi, err := os.Lstat(ws + "/file-link"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the symlink itself was replaced: %v %v", fi, err)
		}
	})
	t.Run("empty content", func(t *testing.T) {
		if err := tr.ws.WriteTextFile("empty.txt", ""); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, ws+"/empty.txt"); got != "" {
			t.Fatalf("content %q", got)
		}
	})

	refused := []struct {
		name string
		path string
		err  error
	}{
		{"symlink to an outside file", "secret-link", ErrOutsideWorkspace},
		{"symlinked dir leading out", "link-out/planted.txt", ErrOutsideWorkspace},
		{"dangling symlink leading out", "dangling-out", ErrOutsideWorkspace},
		{"absolute outside", tr.outside + "/planted.txt", ErrOutsideWorkspace},
		{"dotdot", "../../outside/planted.txt", ErrOutsideWorkspace},
		{"directory", "dir", ErrInvalidPath},
		{"root", ".", ErrInvalidPath},
		{"trailing slash", "newdir/", ErrInvalidPath},
		{"FIFO", "fifo", ErrInvalidPath},
		{"parent is a file", "file.txt/child", ErrInvalidPath},
		{"NUL", "a\x00b", ErrInvalidPath},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			if err := tr.ws.WriteTextFile(tt.path, "planted"); !errors.Is(err, tt.err) {
				t.Fatalf("WriteTextFile(%q) = %v; want %v", tt.path, err, tt.err)
			}
		})
	}
	if got := mustRead(t, tr.outside+"/secret.txt"); got != secret {
		t.Fatalf("outside secret changed to %q", got)
	}
	for _, name := range []string{"planted.txt", "new"} {
		if _, err := os.Stat(filepath.Join(tr.outside, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was created outside the workspace", name)
		}
	}
	t.Run("no temporary files left", func(t *testing.T) {
		entries, err := os.ReadDir(ws)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp") {
				t.Fatalf("temporary file %s left behind", e.Name())
			}
		}
	})
}

// Concurrent readers of a file being rewritten see the old or the new
// content, never a partial file.
func TestWriteTextFileIsAtomic(t *testing.T) {
	tr := newTree(t, Options{})
	a, b := strings.Repeat("a", 256<<10), strings.Repeat("b", 256<<10)
	mustWrite(t, tr.wsDir+"/f.txt", a)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			content := a
			if i%2 == 0 {
				content = b
			}
			if err := tr.ws.WriteTextFile("f.txt", content); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 200 {
		got, err := tr.ws.ReadTextFile("f.txt", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got != a && got != b {
			t.Fatalf("read a torn file of %d bytes", len(got))
		}
	}
	close(stop)
	wg.Wait()
}

// A directory swapped with a symlink to the outside while operations run
// (the check-then-use race) must never let a read or write through.
func TestSymlinkSwapRace(t *testing.T) {
	tr := newTree(t, Options{})
	ws := tr.wsDir
	mustMkdir(t, ws+"/flip")
	mustWrite(t, ws+"/flip/secret.txt", "inside\n")
	if err := os.Symlink(tr.outside, ws+"/alt"); err != nil {
		t.Fatal(err)
	}
	exchange := func() error {
		return unix.Renameat2(unix.AT_FDCWD, ws+"/flip", unix.AT_FDCWD, ws+"/alt", unix.RENAME_EXCHANGE)
	}
	if err := exchange(); err != nil {
		t.Skipf("atomic exchange unsupported here: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := exchange(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	leaks := 0
	for range 3000 {
		if got, err := tr.ws.ReadTextFile("flip/secret.txt", ReadOptions{}); err == nil && got == secret {
			leaks++
		}
		tr.ws.WriteTextFile("flip/planted.txt", "planted")
		if entries, err := tr.ws.ListDir("flip"); err == nil && slices.ContainsFunc(entries, func(e DirEntry) bool { return e.Name == "secret.txt" && e.Size == int64(len(secret)) }) {
			leaks++
		}
	}
	close(stop)
	wg.Wait()
	if leaks > 0 {
		t.Fatalf("%d operations reached outside the workspace", leaks)
	}
	if _, err := os.Stat(tr.outside + "/planted.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a write landed outside the workspace")
	}
}

func TestListDir(t *testing.T) {
	tr := newTree(t, Options{})
	tr.plant(t)
	entries, err := tr.ws.ListDir("")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]DirEntry{}
	var names []string
	for _, e := range entries {
		byName[e.Name] = e
		names = append(names, e.Name)
	}
	if !slices.IsSorted(names) {
		t.Fatalf("not sorted: %q", names)
	}
	if d := byName["dir"]; !d.IsDir {
		t.Fatalf("dir entry %+v", d)
	}
	if f := byName["file.txt"]; f.IsDir || f.Size != 6 || f.ModTime.IsZero() {
		t.Fatalf("file entry %+v", f)
	}
	if l := byName["link-out"]; l.IsDir {
		t.Fatalf("a symlink leading out is described by its target: %+v", l)
	}
	sub, err := tr.ws.ListDir("link-in")
	if err != nil || len(sub) != 4 { // inner.txt, sub, up, up2
		t.Fatalf("ListDir(link-in) = %+v, %v", sub, err)
	}
	for path, want := range map[string]error{
		"link-out":  ErrOutsideWorkspace,
		"..":        ErrOutsideWorkspace,
		"file.txt":  ErrInvalidPath,
		"missing":   ErrNotFound,
		"fifo":      ErrInvalidPath,
		"/":         ErrOutsideWorkspace,
		"dir/up2":   ErrOutsideWorkspace,
		"link-root": ErrOutsideWorkspace,
	} {
		if _, err := tr.ws.ListDir(path); !errors.Is(err, want) {
			t.Errorf("ListDir(%q) = %v; want %v", path, err, want)
		}
	}
}

func TestDeviceInsideWorkspace(t *testing.T) {
	tr := newTree(t, Options{})
	dev := tr.wsDir + "/null"
	if err := unix.Mknod(dev, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("cannot create a device node here: %v", err)
	}
	if _, err := tr.ws.ReadTextFile("null", ReadOptions{}); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("read of a device = %v; want ErrInvalidPath", err)
	}
	if err := tr.ws.WriteTextFile("null", "x"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("write of a device = %v; want ErrInvalidPath", err)
	}
}

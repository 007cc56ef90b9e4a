package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	tr := newTree(t, Options{})
	tr.plant(t)
	ws := tr.wsDir
	tests := []struct {
		name string
		path string
		want string // absolute result; empty when an error is expected
		err  error
	}{
		{"relative file", "file.txt", ws + "/file.txt", nil},
		{"dot segments", "./dir/../file.txt", ws + "/file.txt", nil},
		{"root itself", ".", ws, nil},
		{"absolute inside", ws + "/dir/inner.txt", ws + "/dir/inner.txt", nil},
		{"duplicate slashes", "//" + ws + "//dir///inner.txt", ws + "/dir/inner.txt", nil},
		{"leaves and comes back", "../ws/file.txt", ws + "/file.txt", nil},
		{"not yet existing", "new/deep/file.go", ws + "/new/deep/file.go", nil},
		{"dotdot out of a missing dir", "new/../file.txt", ws + "/file.txt", nil},
		{"symlink inside", "link-in/inner.txt", ws + "/dir/inner.txt", nil},
		{"absolute symlink inside", "link-in-abs/inner.txt", ws + "/dir/inner.txt", nil},
		{"file symlink", "file-link", ws + "/file.txt", nil},
		{"symlink to parent", "dir/up/file.txt", ws + "/file.txt", nil},
		{"dotdot after symlink is the target's parent", "link-in/../file.txt", ws + "/file.txt", nil},
		{"symlink out and back", "back/inner.txt", ws + "/dir/inner.txt", nil},
		{"symlink to self", "self/self/file.txt", ws + "/file.txt", nil},
		{"dangling symlink inside", "dangling-in", ws + "/new/place", nil},
		{"through the root's parent and back", "dir/up2/ws/file.txt", ws + "/file.txt", nil},

		{"empty", "", "", ErrInvalidPath},
		{"NUL byte", "file.txt\x00.png", "", ErrInvalidPath},
		{"FIFO", "fifo", "", ErrInvalidPath},
		{"file used as directory", "file.txt/x", "", ErrInvalidPath},
		{"symlink loop", "loop1", "", ErrInvalidPath},
		{"parent", "..", "", ErrOutsideWorkspace},
		{"dotdot out", "../../outside/secret.txt", "", ErrOutsideWorkspace},
		{"dotdot out of a missing dir", "new/../../outside", "", ErrOutsideWorkspace},
		{"absolute outside", "/etc/passwd", "", ErrOutsideWorkspace},
		{"device", "/dev/null", "", ErrOutsideWorkspace},
		{"symlink out", "link-out/secret.txt", "", ErrOutsideWorkspace},
		{"symlink out itself", "link-out", "", ErrOutsideWorkspace},
		{"symlink to an outside file", "secret-link", "", ErrOutsideWorkspace},
		{"absolute symlink out", "link-out-abs/new-file", "", ErrOutsideWorkspace},
		{"symlink to /", "link-root/etc/passwd", "", ErrOutsideWorkspace},
		{"symlink to grandparent", "dir/up2", "", ErrOutsideWorkspace},
		{"dotdot after symlink to parent", "dir/up/../file.txt", "", ErrOutsideWorkspace},
		{"dangling symlink out", "dangling-out", "", ErrOutsideWorkspace},
		{"probe outside stays opaque", "../../outside/secret.txt/x", "", ErrOutsideWorkspace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tr.ws.Resolve(tt.path)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Resolve(%q) = %q, %v; want error %v", tt.path, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
}

func TestResolveErrorsSayWhatToDo(t *testing.T) {
	tr := newTree(t, Options{})
	_, err := tr.ws.Resolve("../x")
	if err == nil || !strings.Contains(err.Error(), tr.wsDir) || !strings.Contains(err.Error(), "inside the workspace") {
		t.Fatalf("error %v should name the workspace and the fix", err)
	}
}

func TestNewRoots(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	real := filepath.Join(base, "real")
	mustMkdir(t, real)
	if err := os.Symlink(real, filepath.Join(base, "via-link")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(base, "a-file"), "x")
	t.Setenv("HOME", base)

	tests := []struct {
		name string
		dirs []string
		want []string
		ok   bool
	}{
		{"absolute", []string{real}, []string{real}, true},
		{"tilde", []string{"~/real"}, []string{real}, true},
		{"bare tilde", []string{"~"}, []string{base}, true},
		{"symlink resolved and deduplicated", []string{base + "/via-link", real}, []string{real}, true},
		{"none", nil, nil, false},
		{"missing", []string{base + "/missing"}, nil, false},
		{"a file", []string{base + "/a-file"}, nil, false},
		{"empty string", []string{""}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRoots(tt.dirs, Options{})
			if !tt.ok {
				if err == nil {
					t.Fatalf("NewRoots(%q) succeeded; want an error", tt.dirs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Dirs(); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("Dirs() = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestRootsOpen(t *testing.T) {
	tr := newTree(t, Options{})
	mustMkdir(t, filepath.Join(tr.rootDir, "other", "nested"))
	mustWrite(t, filepath.Join(tr.rootDir, "plain-file"), "x")
	if err := os.Symlink(tr.outside, filepath.Join(tr.rootDir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(tr.rootDir, "other"), filepath.Join(tr.base, "alias")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		dir      string
		wantRoot string
	}{
		{"the root itself", tr.rootDir, tr.rootDir},
		{"nested", tr.rootDir + "/other/nested", tr.rootDir + "/other/nested"},
		{"unclean", tr.rootDir + "/other/../ws/", tr.wsDir},
		{"symlink from outside into the root", tr.base + "/alias", tr.rootDir + "/other"},
		{"relative", "root/ws", ""},
		{"empty", "", ""},
		{"outside every root", tr.outside, ""},
		{"missing", tr.rootDir + "/missing", ""},
		{"a file", tr.rootDir + "/plain-file", ""},
		{"symlink in the root leading out", tr.rootDir + "/escape", ""},
		{"dotdot out", tr.rootDir + "/..", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tr.roots.Open(tt.dir)
			if tt.wantRoot == "" {
				if !errors.Is(err, ErrWorkspaceNotAllowed) {
					t.Fatalf("Open(%q) = %v; want ErrWorkspaceNotAllowed", tt.dir, err)
				}
				if !strings.Contains(err.Error(), tr.rootDir) {
					t.Fatalf("error %q should name the roots", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Root() != tt.wantRoot {
				t.Fatalf("Root() = %q; want %q", w.Root(), tt.wantRoot)
			}
		})
	}
}

// A workspace directory swapped for a symlink after Open must not be followed.
func TestWorkspaceReplacedAfterOpen(t *testing.T) {
	tr := newTree(t, Options{})
	mustWrite(t, filepath.Join(tr.wsDir, "secret.txt"), "mine\n")
	if err := os.Rename(tr.wsDir, tr.wsDir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tr.outside, tr.wsDir); err != nil {
		t.Fatal(err)
	}
	got, err := tr.ws.ReadTextFile("secret.txt", ReadOptions{})
	if !errors.Is(err, ErrOutsideWorkspace) {
		t.Fatalf("read after the swap = %q, %v; want ErrOutsideWorkspace", got, err)
	}
	if err := tr.ws.WriteTextFile("planted.txt", "x"); !errors.Is(err, ErrOutsideWorkspace) {
		t.Fatalf("write after the swap = %v; want ErrOutsideWorkspace", err)
	}
	if _, err := os.Stat(filepath.Join(tr.outside, "planted.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a file was written outside the workspace")
	}
}

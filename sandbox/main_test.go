package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/sandbox/confine"
)

// helperEnv makes the test binary act as a child command for terminal
// tests (an exact byte producer) instead of running the tests.
const helperEnv = "SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// runHelper: "emit PATTERN TOTAL CHUNK" writes TOTAL bytes of PATTERN
// repeated, CHUNK bytes per write (so writes split characters).
func runHelper(mode string, args []string) int {
	switch mode {
	case "emit":
		total, _ := strconv.Atoi(args[1])
		chunk, _ := strconv.Atoi(args[2])
		data := patternBytes(args[0], total)
		for len(data) > 0 {
			n := min(chunk, len(data))
			if _, err := os.Stdout.Write(data[:n]); err != nil {
				return 1
			}
			data = data[n:]
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// patternBytes is pattern repeated and cut to exactly total bytes (the cut
// may split a character; callers choose totals that end on a boundary).
func patternBytes(pattern string, total int) []byte {
	out := make([]byte, 0, total+len(pattern))
	for len(out) < total {
		out = append(out, pattern...)
	}
	return out[:total]
}

// testTree is a workspace with an "outside" sibling holding a secret.
type testTree struct {
	base    string // parent of root and outside, symlink-free
	rootDir string // the configured workspace root
	wsDir   string // the workspace, rootDir/ws
	outside string
	roots   *Roots
	ws      *Workspace
}

const secret = "TOP SECRET outside the workspace\n"

func newTree(t testing.TB, opts Options) *testTree {
	t.Helper()
	// Not t.TempDir: its path holds the test's name, and a Unix socket's path (at most 107
	// bytes) in a tree under the ordinary user's temp dir would not fit.
	dir, err := os.MkdirTemp("", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	base, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr := &testTree{
		base:    base,
		rootDir: filepath.Join(base, "root"),
		wsDir:   filepath.Join(base, "root", "ws"),
		outside: filepath.Join(base, "outside"),
	}
	mustMkdir(t, tr.wsDir)
	mustMkdir(t, tr.outside)
	mustWrite(t, filepath.Join(tr.outside, "secret.txt"), secret)
	tr.roots, err = NewRoots([]string{tr.rootDir}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tr.ws, err = tr.roots.Open(tr.wsDir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// plant creates the standard set of files and symlinks in the workspace.
func (tr *testTree) plant(t testing.TB) {
	t.Helper()
	ws := tr.wsDir
	mustWrite(t, filepath.Join(ws, "file.txt"), "hello\n")
	mustMkdir(t, filepath.Join(ws, "dir", "sub"))
	mustWrite(t, filepath.Join(ws, "dir", "inner.txt"), "inner\n")
	links := map[string]string{
		"link-in":      "dir",
		"link-in-abs":  filepath.Join(ws, "dir"),
		"file-link":    "file.txt",
		"link-out":     "../../outside",
		"link-out-abs": tr.outside,
		"secret-link":  "../../outside/secret.txt",
		"link-root":    "/",
		"dir/up":       "..",
		"dir/up2":      "../..",
		"back":         "../ws/dir",
		"loop1":        "loop2",
		"loop2":        "loop1",
		"self":         ".",
		"dangling-in":  "new/place",
		"dangling-out": "../../outside/new",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mainBinary is the absolute path of this test binary (the helper command).
func mainBinary() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

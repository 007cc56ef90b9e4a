package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A terminal inherits the server's environment, but not agenticd's token nor the
// variables the server hides (its agents' API keys); the request may add its own.
func TestTerminalEnvHidesServerSecrets(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "token-secret")
	t.Setenv("SANDBOX_TEST_API_KEY", "key-secret")
	t.Setenv("SANDBOX_TEST_VISIBLE", "shown")
	_, terms := newTerminals(t, Options{HiddenEnv: []string{"SANDBOX_TEST_API_KEY"}})
	out, st := runToExit(t, terms, TerminalSpec{Command: "env", Env: map[string]string{"SANDBOX_TEST_ADDED": "added"}})
	if !sameStatus(st, code(0)) {
		t.Fatalf("env exited with %v: %q", st, out.Output)
	}
	for _, want := range []string{"SANDBOX_TEST_VISIBLE=shown", "SANDBOX_TEST_ADDED=added"} {
		if !strings.Contains(out.Output, want) {
			t.Errorf("the terminal's environment lacks %s", want)
		}
	}
	for _, leaked := range []string{"token-secret", "key-secret", "AGENTICD_TOKEN", "SANDBOX_TEST_API_KEY"} {
		if strings.Contains(out.Output, leaked) {
			t.Errorf("the terminal's environment has %s", leaked)
		}
	}
}

// The server's own files are out of reach even inside a workspace, whatever the spelling
// (direct, through a symlink, not created yet), and cannot be a workspace themselves.
func TestExcludedPathsAreRefused(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "home")
	data := filepath.Join(ws, ".local", "share", "agenticd")
	mustMkdir(t, data)
	mustWrite(t, filepath.Join(data, "agenticd.db"), "database")
	mustWrite(t, filepath.Join(ws, "agenticd.yaml"), "token: config-secret\n")
	mustWrite(t, filepath.Join(ws, "notes.txt"), "mine\n")
	mustMkdir(t, filepath.Join(ws, "agenticd.yaml.d"))
	if err := os.Symlink(data, filepath.Join(ws, "data-link")); err != nil {
		t.Fatal(err)
	}
	// The data dir is named through a symlink in the config: it is excluded all the same.
	alias := filepath.Join(base, "alias")
	if err := os.Symlink(data, alias); err != nil {
		t.Fatal(err)
	}
	roots, err := NewRoots([]string{ws}, Options{Excluded: []string{alias, filepath.Join(ws, "agenticd.yaml"), filepath.Join(ws, "later")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roots.Open(ws); !errors.Is(err, ErrWorkspaceNotAllowed) || !strings.Contains(err.Error(), "holds agenticd's own files") {
		t.Fatalf("Open of a workspace holding agenticd's files: %v, want it refused", err)
	}
	// One that came to hold them after it was opened: refused path by path.
	w, err := roots.openDir(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		".local/share/agenticd",
		".local/share/agenticd/agenticd.db",
		filepath.Join(data, "agenticd.db"),
		"data-link/agenticd.db",
		"agenticd.yaml",
		"later/new.txt",
	} {
		if _, err := w.Resolve(p); !errors.Is(err, ErrOutsideWorkspace) || !strings.Contains(err.Error(), "agenticd's own data") {
			t.Errorf("Resolve(%q) = %v, want it refused as agenticd's own data", p, err)
		}
	}
	if text, err := w.ReadTextFile("agenticd.yaml", ReadOptions{}); err == nil {
		t.Errorf("read the config file: %q", text)
	}
	if err := w.WriteTextFile("data-link/agenticd.db", "overwritten"); err == nil {
		t.Error("wrote into the data dir")
	}
	if got := mustRead(t, filepath.Join(data, "agenticd.db")); got != "database" {
		t.Errorf("the database file now holds %q", got)
	}
	// Neighbours with a common prefix, and the parents of excluded paths, stay usable.
	for _, p := range []string{"notes.txt", "agenticd.yaml.d", ".local/share", "later-not"} {
		if _, err := w.Resolve(p); err != nil {
			t.Errorf("Resolve(%q): %v", p, err)
		}
	}
	if _, err := roots.Open(data); !errors.Is(err, ErrWorkspaceNotAllowed) {
		t.Errorf("Open(the data dir) = %v, want ErrWorkspaceNotAllowed", err)
	}
}

// Refusing a path that leads outside says nothing of where it leads.
func TestOutsideErrorShowsOnlyTheGivenPath(t *testing.T) {
	tr := newTree(t, Options{})
	tr.plant(t)
	for _, p := range []string{"link-out/secret.txt", "secret-link", "dangling-out", "../outside/secret.txt"} {
		_, err := tr.ws.Resolve(p)
		if !errors.Is(err, ErrOutsideWorkspace) {
			t.Fatalf("Resolve(%q) = %v, want ErrOutsideWorkspace", p, err)
		}
		if msg := err.Error(); strings.Contains(msg, tr.outside) || !strings.Contains(msg, p) {
			t.Errorf("Resolve(%q): %q should name the path as given and not where it leads", p, msg)
		}
	}
}

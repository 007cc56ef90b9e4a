package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchSkipsExcludedPaths(t *testing.T) {
	ws := t.TempDir()
	mustWrite := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("agenticd.yaml", "token: secret-token\n")
	mustWrite("data/agenticd.db", "secret-token in the database\n")
	mustWrite("src/main.go", "// secret-token is mentioned in code\n")
	roots, err := NewRoots([]string{ws}, Options{Excluded: []string{
		filepath.Join(ws, "agenticd.yaml"), filepath.Join(ws, "data"),
	}})
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
	matches, err := w.SearchFiles(context.Background(), SearchQuery{Pattern: "secret-token"})
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) != 1 || matches[0].Path != filepath.Join("src", "main.go") {
		t.Fatalf("matches = %+v, want only src/main.go", matches)
	}
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestSearchFiles(t *testing.T) {
	tr := newTree(t, Options{MaxReadBytes: 4096})
	tr.plant(t)
	ws := tr.wsDir
	mustWrite(t, ws+"/main.go", "package main\n\nfunc main() {\n\tprintln(\"needle\")\n}\n")
	mustWrite(t, ws+"/dir/util.go", "package dir\n// needle in a comment\r\n")
	mustWrite(t, ws+"/dir/notes.md", "a needle here too\n")
	mustWrite(t, ws+"/binary.bin", "needle\x00\x01\x02")
	mustWrite(t, ws+"/huge.txt", strings.Repeat("needle\n", 1000))
	mustMkdir(t, ws+"/.git")
	mustWrite(t, ws+"/.git/config", "needle\n")
	mustWrite(t, ws+"/long.txt", strings.Repeat("é", 800)+"needle\n")
	if err := os.Symlink("main.go", ws+"/main-link.go"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, tr.outside+"/leak.go", "needle from outside\n")

	type hit struct {
		path string
		line int
	}
	hits := func(ms []SearchMatch) []hit {
		var out []hit
		for _, m := range ms {
			out = append(out, hit{m.Path, m.Line})
		}
		return out
	}
	tests := []struct {
		name string
		q    SearchQuery
		want []hit
	}{
		{"everything", SearchQuery{Pattern: "needle"}, []hit{
			{"dir/notes.md", 1}, {"dir/util.go", 2}, {"long.txt", 1}, {"main-link.go", 4}, {"main.go", 4},
		}},
		{"glob", SearchQuery{Pattern: "needle", Glob: "*.go"}, []hit{{"dir/util.go", 2}, {"main-link.go", 4}, {"main.go", 4}}},
		{"sub directory", SearchQuery{Pattern: "needle", Path: "dir"}, []hit{{"dir/notes.md", 1}, {"dir/util.go", 2}}},
		{"through a symlinked dir", SearchQuery{Pattern: "needle", Path: "link-in"}, []hit{{"dir/notes.md", 1}, {"dir/util.go", 2}}},
		{"single file", SearchQuery{Pattern: "^func", Path: "main.go"}, []hit{{"main.go", 3}}},
		{"regexp", SearchQuery{Pattern: `^package \w+$`}, []hit{{"dir/util.go", 1}, {"main-link.go", 1}, {"main.go", 1}}},
		{"max results", SearchQuery{Pattern: "needle", MaxResults: 2}, []hit{{"dir/notes.md", 1}, {"dir/util.go", 2}}},
		{"no match", SearchQuery{Pattern: "haystack"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tr.ws.SearchFiles(context.Background(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(hits(got)) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v\nwant %v", hits(got), tt.want)
			}
		})
	}

	t.Run("text", func(t *testing.T) {
		got, err := tr.ws.SearchFiles(context.Background(), SearchQuery{Pattern: "comment", Path: "dir"})
		if err != nil || len(got) != 1 || got[0].Text != "// needle in a comment" {
			t.Fatalf("got %+v, %v", got, err)
		}
		long, err := tr.ws.SearchFiles(context.Background(), SearchQuery{Pattern: "needle", Path: "long.txt"})
		if err != nil || len(long) != 1 || len(long[0].Text) > maxMatchText+len("…") || !strings.HasSuffix(long[0].Text, "é…") {
			t.Fatalf("long line not cut at a character: %d bytes, %v", len(long[0].Text), err)
		}
	})

	errs := []struct {
		name string
		q    SearchQuery
		err  error
	}{
		{"bad regexp", SearchQuery{Pattern: "("}, ErrInvalidArgument},
		{"empty pattern", SearchQuery{}, ErrInvalidArgument},
		{"bad glob", SearchQuery{Pattern: "x", Glob: "["}, ErrInvalidArgument},
		{"outside", SearchQuery{Pattern: "needle", Path: "../../outside"}, ErrOutsideWorkspace},
		{"symlink out", SearchQuery{Pattern: "needle", Path: "link-out"}, ErrOutsideWorkspace},
		{"missing", SearchQuery{Pattern: "needle", Path: "nope"}, ErrNotFound},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tr.ws.SearchFiles(context.Background(), tt.q); !errors.Is(err, tt.err) {
				t.Fatalf("got %v; want %v", err, tt.err)
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := tr.ws.SearchFiles(ctx, SearchQuery{Pattern: "needle"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v; want context.Canceled", err)
		}
	})
}

package main

import (
	"fmt"
	"io"
	"strings"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

const (
	// diffLineLimit bounds the lines shown of a permission request's diffs, so that the
	// rewrite of a large file does not scroll the question off the screen.
	diffLineLimit = 80
	// diffContext is how many unchanged lines are shown around a change.
	diffContext = 3

	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiCyan  = "\x1b[36m"
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

// writeDiffs shows the file changes of a permission request as unified-diff-like
// hunks, indented, coloured when colour is set; after limit lines it stops and says how
// many it left out.
func writeDiffs(w io.Writer, diffs []*pb.DiffBlock, colour bool, limit int) {
	var lines []string
	paint := func(code, s string) string {
		if !colour {
			return s
		}
		return code + s + ansiReset
	}
	for _, d := range diffs {
		oldLines, newLines := splitLines(d.GetOldText()), splitLines(d.GetNewText())
		if len(oldLines) == 0 {
			lines = append(lines, paint(ansiBold, "new file "+d.GetPath()))
		} else {
			lines = append(lines, paint(ansiBold, "--- "+d.GetPath()), paint(ansiBold, "+++ "+d.GetPath()))
		}
		for _, l := range hunk(oldLines, newLines) {
			switch l[0] {
			case '-':
				l = paint(ansiRed, l)
			case '+':
				l = paint(ansiGreen, l)
			case '@':
				l = paint(ansiCyan, l)
			}
			lines = append(lines, l)
		}
	}
	shown := lines
	if len(shown) > limit {
		shown = shown[:limit]
	}
	for _, l := range shown {
		fmt.Fprintln(w, "  "+l)
	}
	if cut := len(lines) - len(shown); cut > 0 {
		fmt.Fprintf(w, "  … %d more lines of the change not shown (the request's diffs hold all of it: agenticctl events --json)\n", cut)
	}
}

// hunk is the one hunk that turns old into new: the lines between their common
// beginning and end, removed then added, with up to diffContext unchanged lines on
// either side. It is not a minimal diff, but a true one, and the change is seen as a
// whole.
func hunk(oldLines, newLines []string) []string {
	pre := 0
	for pre < len(oldLines) && pre < len(newLines) && oldLines[pre] == newLines[pre] {
		pre++
	}
	suf := 0
	for suf < len(oldLines)-pre && suf < len(newLines)-pre && oldLines[len(oldLines)-1-suf] == newLines[len(newLines)-1-suf] {
		suf++
	}
	if pre == len(oldLines) && pre == len(newLines) {
		return []string{"  (no change)"}
	}
	start := max(pre-diffContext, 0)
	oldEnd, newEnd := len(oldLines)-suf, len(newLines)-suf
	after := min(suf, diffContext)
	out := []string{fmt.Sprintf("@@ -%d,%d +%d,%d @@", start+1, oldEnd+after-start, start+1, newEnd+after-start)}
	for _, l := range oldLines[start:pre] {
		out = append(out, " "+l)
	}
	for _, l := range oldLines[pre:oldEnd] {
		out = append(out, "-"+l)
	}
	for _, l := range newLines[pre:newEnd] {
		out = append(out, "+"+l)
	}
	for _, l := range oldLines[oldEnd : oldEnd+after] {
		out = append(out, " "+l)
	}
	return out
}

// splitLines splits text into lines without their line ends; a final line end does
// not start another line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

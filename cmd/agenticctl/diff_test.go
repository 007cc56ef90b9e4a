package main

import (
	"fmt"
	"strings"
	"testing"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

func TestWriteDiffsShowsTheChangeWithContext(t *testing.T) {
	var b strings.Builder
	writeDiffs(&b, []*pb.DiffBlock{
		{Path: "/ws/a.go", OldText: "1\n2\n3\n4\n5\nold\n7\n8\n9\n10\n11\n", NewText: "1\n2\n3\n4\n5\nnew\nnewer\n7\n8\n9\n10\n11\n"},
		{Path: "/ws/n.txt", NewText: "hi\n"},
	}, false, diffLineLimit)
	want := strings.Join([]string{
		"  --- /ws/a.go", "  +++ /ws/a.go", "  @@ -3,7 +3,8 @@", "   3", "   4", "   5", "  -old", "  +new", "  +newer", "   7", "   8", "   9",
		"  new file /ws/n.txt", "  @@ -1,0 +1,1 @@", "  +hi", "",
	}, "\n")
	if b.String() != want {
		t.Fatalf("plain diff:\n%s\nwant\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Fatal("colour codes in a plain diff")
	}
	b.Reset()
	writeDiffs(&b, []*pb.DiffBlock{{Path: "p", OldText: "a\n", NewText: "b\n"}}, true, diffLineLimit)
	if !strings.Contains(b.String(), ansiRed+"-a"+ansiReset) || !strings.Contains(b.String(), ansiGreen+"+b"+ansiReset) {
		t.Fatalf("coloured diff = %q", b.String())
	}
}

func TestWriteDiffsStopsAtTheLimitAndSaysSo(t *testing.T) {
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprint("line ", i))
	}
	var b strings.Builder
	writeDiffs(&b, []*pb.DiffBlock{{Path: "big.txt", NewText: strings.Join(lines, "\n")}}, false, 10)
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	// The file's name, the hunk header, 8 of its 100 lines, then the note.
	if len(got) != 11 || got[9] != "  +line 7" || got[10] != "  … 92 more lines of the change not shown (the request's diffs hold all of it: agenticctl events --json)" {
		t.Fatalf("cut diff:\n%s", b.String())
	}
}

func TestDescribePermissionNamesTheRiskOnce(t *testing.T) {
	got := describePermission(&pb.PermissionRequest{ToolName: "run_command", Description: "run `rm -rf build` in /ws",
		CommandInfo: &pb.CommandInfo{Command: "rm -rf build", Cwd: "/ws", RiskLevel: pb.RiskLevel_RISK_LEVEL_HIGH, Reason: "deletes files"}})
	if strings.Count(got, "high") != 1 || strings.Count(got, "deletes files") != 1 || !strings.Contains(got, `"rm -rf build" in /ws, risk high: deletes files`) {
		t.Fatalf("description = %q", got)
	}
}

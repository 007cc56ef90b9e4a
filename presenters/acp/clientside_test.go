package acp

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

func TestFileSystemRequestsStayInTheWorkspace(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(h.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "lines.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := h.presenter(h.config(`{"turns": [[
	 {"read": {"path": "{cwd}/lines.txt", "line": 2, "limit": 2}},
	 {"write": {"path": "{cwd}/sub/new.txt", "content": "written"}},
	 {"read": {"path": "{cwd}/sub/new.txt"}},
	 {"read": {"path": "{cwd}/missing.txt"}},
	 {"read": {"path": "{cwd}/../../outside/secret.txt"}},
	 {"read": {"path": "{cwd}/escape/secret.txt"}},
	 {"write": {"path": "{cwd}/escape/planted.txt", "content": "x"}},
	 {"write": {"path": "/tmp/agenticd-acp-escape-test.txt", "content": "x"}}
	]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "files")
	got := afterPreamble(t, h.finish(s.SessionID, res, from))

	if len(got) != 14 {
		t.Fatalf("events %q", got)
	}
	wantStart := []string{
		`DELTA assistant A "read: two\nthree\n"`,
		`DELTA assistant A "write ok"`,
		`DELTA assistant A "read: written"`,
	}
	if !reflect.DeepEqual(got[:3], wantStart) {
		t.Fatalf("in-workspace results %q, want %q", got[:3], wantStart)
	}
	if !strings.HasPrefix(got[3], `DELTA assistant A "read error: Resource not found`) {
		t.Fatalf("missing file: %s, want a resource-not-found error", got[3])
	}
	// Each escape: an ERROR event for the session, then the agent reporting its ACP error.
	for i := 4; i < 12; i += 2 {
		if got[i] != "ERROR path_outside_workspace" || !strings.HasPrefix(got[i+1], `DELTA assistant A "`) || !strings.Contains(got[i+1], "error: Invalid params") {
			t.Fatalf("escape attempt %d: %q %q", (i-4)/2+1, got[i], got[i+1])
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); !os.IsNotExist(err) {
		t.Fatalf("a write through a symlink reached outside the workspace: %v", err)
	}
	if _, err := os.Stat("/tmp/agenticd-acp-escape-test.txt"); !os.IsNotExist(err) {
		t.Fatalf("an absolute write outside the workspace happened: %v", err)
	}
	ev, _ := h.rec.waitFrom(t, from, "an fs error", isType(presenters.EventError))
	if e := ev.Payload.(presenters.ErrorPayload); e.MessageID != res.MessageID || !strings.Contains(e.Message, "outside the session's workspace") {
		t.Fatalf("error event %+v", e)
	}
}

func TestTerminalRequestsRunInTheWorkspaceAndShowTheirOutput(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	 {"terminal": {"command": "pwd; echo from-$NAME; exit 3", "env": {"NAME": "agent"}, "toolCallId": "run1"}},
	 {"terminal": {"command": "sleep", "args": ["30"], "kill": true}},
	 {"terminal": {"command": "ls", "cwd": "/"}}
	]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "run")
	got := afterPreamble(t, h.finish(s.SessionID, res, from))

	var starts, ends []presenters.ToolCall
	for _, ev := range h.rec.eventsOf(s.SessionID, from) {
		switch v := ev.Payload.(type) {
		case presenters.ToolStartPayload:
			starts = append(starts, v.Tool)
		case presenters.ToolEndPayload:
			ends = append(ends, v.Tool)
		}
	}
	if len(starts) != 1 || len(ends) != 1 {
		t.Fatalf("tool events %q", got)
	}
	term := ends[0].Content[0].Terminal
	if term == nil || term.TerminalID == "" || term.Command != "pwd; echo from-$NAME; exit 3" || term.ExitCode == nil || *term.ExitCode != 3 ||
		!strings.Contains(term.Output, h.ws) || !strings.Contains(term.Output, "from-agent") {
		t.Fatalf("terminal block at the tool's end %+v", term)
	}
	if starts[0].Kind != presenters.ToolExecute || starts[0].CommandInfo == nil {
		t.Fatalf("execute tool %+v: want its command classified", starts[0])
	}
	var reports []string
	for _, l := range got {
		if strings.HasPrefix(l, `DELTA assistant A "terminal`) {
			reports = append(reports, l)
		}
	}
	if len(reports) != 3 || !strings.Contains(reports[0], "exit=3") || !strings.Contains(reports[1], "signal=SIGKILL") ||
		!strings.Contains(reports[2], "terminal error: Invalid params") {
		t.Fatalf("agent's terminal reports %q", reports)
	}
	if !reflect.DeepEqual(got[len(got)-2:], []string{`END assistant A end_turn`, `STATUS idle`}) {
		t.Fatalf("turn end %q", got)
	}
	if !strings.Contains(strings.Join(got, "\n"), "ERROR path_outside_workspace") {
		t.Fatalf("a terminal with cwd outside the workspace must be reported: %q", got)
	}
}

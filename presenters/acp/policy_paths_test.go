package acp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// The raw input shapes are those real agents send (TOOLCHAIN.md, "Real agents' habits").
func TestPolicyTargetPathsReadRealAgentsShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  []string
	}{
		{"claude-code-acp Write", `{"file_path": "/ws/a.go", "content": "package a\n"}`, []string{"/ws/a.go"}},
		{"claude-code-acp MultiEdit nested edits", `{"file_path": "/ws/a.go", "edits": [{"old_string": "a", "new_string": "b"}]}`, []string{"/ws/a.go"}},
		{"gemini read_file", `{"absolute_path": "/etc/shadow"}`, []string{"/etc/shadow"}},
		{"gemini list_directory", `{"dir_path": "../.."}`, []string{"../.."}},
		{"directory and workdir", `{"directory": "sub", "workdir": "/tmp/w"}`, []string{"sub", "/tmp/w"}},
		{"codex exec cwd, argv command", `{"command": ["bash", "-lc", "/usr/bin/make"], "cwd": "/ws"}`, []string{"/ws"}},
		{"codex patch changes map", `{"changes": {"/ws/a.go": {"type": "update", "unified_diff": "@@"}, "/home/u/.bashrc": {"type": "add", "content": "x"}}}`,
			[]string{"/home/u/.bashrc", "/ws/a.go"}},
		{"codex-acp 0.16 exec approval", `{"call_id": "c", "command": ["/bin/bash", "-lc", "echo hi > a.txt"], "cwd": "/ws", "proposed_execpolicy_amendment": ["/bin/bash", "-lc", "echo hi > a.txt"], "available_decisions": ["approved", {"approved_execpolicy_amendment": {"proposed_execpolicy_amendment": ["/bin/bash", "-lc", "echo hi > a.txt"]}}, "abort"], "parsed_cmd": [{"type": "unknown", "cmd": "echo hi > a.txt"}]}`, []string{"/ws"}},
		{"paths array", `{"paths": ["a.go", "../../b.go"]}`, []string{"a.go", "../../b.go"}},
		{"relative map keys that climb", `{"changes": {"../x.go": {}, "type": "a"}}`, []string{"../x.go"}},
		{"nested edits with their own paths", `{"edits": [{"file": {"path": "x/y.go"}}, {"target": "z.go", "source": "/src"}]}`,
			[]string{"x/y.go", "/src", "z.go"}},
		{"home path anywhere", `{"options": {"out": "~/.ssh/id_rsa"}}`, []string{"~/.ssh/id_rsa"}},
		{"move", `{"old_path": "a", "new_path": "/b", "destination": "c"}`, []string{"c", "/b", "a"}},
		{"contents are not paths", `{"file_path": "a.c", "content": "/* a comment */\nint x;\n", "file_text": "relative text", "pattern": "**/*.go"}`,
			[]string{"a.c"}},
		{"a one-line absolute string under any key", `{"note": "/etc/hosts"}`, []string{"/etc/hosts"}},
		{"a plain string input", `"/etc/passwd"`, []string{"/etc/passwd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := targetPaths(presenters.ToolCall{Arguments: json.RawMessage(tc.input)})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("paths %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPolicyTargetPathsAddLocationsAndDiffsOnce(t *testing.T) {
	call := presenters.ToolCall{
		Locations: []presenters.ToolLocation{{Path: "/ws/a"}},
		Content:   []presenters.ToolContent{{Diff: &presenters.DiffBlock{Path: "/ws/b"}}, {Text: "/not/a/path/content"}},
		Arguments: json.RawMessage(`{"file_path": "/ws/a"}`),
	}
	got, err := targetPaths(call)
	if err != nil || !reflect.DeepEqual(got, []string{"/ws/a", "/ws/b"}) {
		t.Fatalf("paths %q (%v)", got, err)
	}
}

func TestPolicyTargetPathsRefuseInputsBeyondTheBounds(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxInputDepth+2) + `"x"` + strings.Repeat(`}`, maxInputDepth+2)
	wide := `[` + strings.TrimSuffix(strings.Repeat(`"x",`, maxInputNodes+1), ",") + `]`
	for name, input := range map[string]string{"deep": deep, "wide": wide} {
		if _, err := targetPaths(presenters.ToolCall{Arguments: json.RawMessage(input)}); !errors.Is(err, errInputTooLarge) {
			t.Errorf("%s input: %v, want errInputTooLarge", name, err)
		}
	}
}

// openWorkspace opens dir/home/project as a workspace with $HOME at dir/home.
func openWorkspace(t *testing.T) (*sandbox.Workspace, string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	project := filepath.Join(home, "project")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(project, "keys")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	roots, err := sandbox.NewRoots([]string{home}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := roots.Open(project)
	if err != nil {
		t.Fatal(err)
	}
	return ws, project
}

func TestPolicyOutsideReason(t *testing.T) {
	ws, project := openWorkspace(t)
	for _, tc := range []struct {
		path    string
		outside bool
	}{
		{"a.go", false},
		{filepath.Join(project, "sub/new.go"), false},
		{"~/project/a.go", false}, // the workspace is under $HOME and this lands inside
		{"~/.ssh/id_rsa", true},
		{"~", true},
		{"~root/.ssh/id_rsa", true},
		{"keys/id_rsa", true}, // a symlink out
		{"../.bashrc", true},
		{"sub/../../x", true},
		{"/etc/passwd", true},
		{"a\x00b", true},
	} {
		reason := outsideReason(ws, []string{"a.go", tc.path})
		if (reason != "") != tc.outside {
			t.Errorf("%q: reason %q, want outside=%v", tc.path, reason, tc.outside)
		}
		if tc.outside && !strings.Contains(reason, tc.path) {
			t.Errorf("%q: the reason %q must name the path", tc.path, reason)
		}
	}
}

// A tilde path is $HOME, not a directory named ~ inside the workspace.
func TestPolicyTildeOutsideHomeIsOutside(t *testing.T) {
	ws, _ := openWorkspace(t)
	t.Setenv("HOME", t.TempDir()) // the workspace is not under $HOME
	if reason := outsideReason(ws, []string{"~/project/a.go"}); reason == "" {
		t.Fatal("~/project/a.go is under another $HOME, outside the workspace")
	}
}

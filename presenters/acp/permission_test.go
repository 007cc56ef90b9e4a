package acp

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// editScript edits b.txt after asking; every turn repeats it.
const editScript = `{"turns": [[
 {"update": {"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "Edit b.txt", "kind": "edit", "status": "pending",
   "locations": [{"path": "{cwd}/b.txt"}], "rawInput": {"file_path": "{cwd}/b.txt", "content": "new"}}},
 {"permission": {"toolCall": {"toolCallId": "e1", "title": "Edit b.txt", "kind": "edit", "status": "pending"}, "report": true,
   "onAllow": [{"write": {"path": "{cwd}/b.txt", "content": "new"}}, {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed"}}],
   "onReject": [{"update": {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "failed"}}],
   "onCancel": [{"update": {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "failed"}}]}}
]]}`

func TestPermissionAnsweredByAUser(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(editScript))
	s := h.create(p)
	target := filepath.Join(h.ws, "b.txt")

	for _, tc := range []struct {
		option   string
		decision string
		tail     []string
		content  string
	}{
		{"allow", "PERMISSION_GRANTED e1 allow by user",
			[]string{`DELTA assistant A "permission: allow_once allow"`, `DELTA assistant A "write ok"`, `TOOL_END e1 edit completed "Edit b.txt"`}, "new"},
		{"reject", `PERMISSION_DENIED e1 "reject" by user`,
			[]string{`DELTA assistant A "permission: reject_once reject"`, `TOOL_END e1 edit failed "Edit b.txt"`}, "old"},
	} {
		t.Run(tc.option, func(t *testing.T) {
			if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			res, from := h.send(p, s.SessionID, "edit b.txt")
			req := h.permissionRequired(s.SessionID, from)
			if req.ToolID != "e1" || req.PermissionType != presenters.PermissionWrite || req.MessageID != res.MessageID ||
				!reflect.DeepEqual(req.Paths, []string{target}) || len(req.Options) != 2 || req.Rememberable {
				t.Fatalf("permission request %+v", req)
			}
			if info, _ := p.GetSession(testContext(t), s.SessionID); info.Status != presenters.SessionPaused || len(info.PendingPermissions) != 1 {
				t.Fatalf("while waiting: status %s, %d pending", info.Status, len(info.PendingPermissions))
			}
			if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "nope"}); !errors.Is(err, presenters.ErrInvalidArgument) {
				t.Fatalf("unknown option: %v, want ErrInvalidArgument", err)
			}
			if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: tc.option}); err != nil {
				t.Fatal(err)
			}
			if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow"}); !errors.Is(err, presenters.ErrNotFound) {
				t.Fatalf("second answer: %v, want ErrNotFound (the first answer wins)", err)
			}
			got := afterPreamble(t, h.finish(s.SessionID, res, from))
			want := append([]string{
				`TOOL_START e1 edit pending "Edit b.txt"`,
				`PERMISSION_REQUIRED e1 [` + target + `]`,
				`STATUS paused`,
				tc.decision,
				`STATUS generating`,
			}, tc.tail...)
			want = append(want, `END assistant A end_turn`, `STATUS idle`)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("events:\n got %q\nwant %q", got, want)
			}
			if b, _ := os.ReadFile(target); string(b) != tc.content {
				t.Fatalf("b.txt = %q, want %q", b, tc.content)
			}
		})
	}
}

// The server denies, without asking anyone, a tool call whose target lies outside the
// workspace: by location, by raw input only, or through a symlink inside it.
func TestPermissionOutsideTheWorkspaceIsDeniedByPolicy(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(h.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.ws, "link")); err != nil {
		t.Fatal(err)
	}
	// ~ is $HOME for agents: here h.dir, above the workspace, so ~/.ssh is outside.
	t.Setenv("HOME", h.dir)
	for name, toolCall := range map[string]string{
		"location":             `{"toolCallId": "x", "title": "Edit", "kind": "edit", "locations": [{"path": "/etc/passwd"}]}`,
		"rawInput":             `{"toolCallId": "x", "title": "Write", "rawInput": {"file_path": "{cwd}/../../outside/x.txt", "content": "x"}}`,
		"symlink":              `{"toolCallId": "x", "title": "Write", "kind": "edit", "rawInput": {"path": "link/x.txt"}}`,
		"diff path":            `{"toolCallId": "x", "title": "Edit", "kind": "edit", "content": [{"type": "diff", "path": "/tmp/elsewhere.txt", "newText": "x"}]}`,
		"gemini absolute_path": `{"toolCallId": "x", "title": "ReadFile", "kind": "read", "rawInput": {"absolute_path": "/etc/shadow"}}`,
		"gemini dir_path":      `{"toolCallId": "x", "title": "ReadFolder", "kind": "read", "rawInput": {"dir_path": "../.."}}`,
		"codex changes map":    `{"toolCallId": "x", "title": "Apply patch", "kind": "edit", "rawInput": {"changes": {"{cwd}/ok.txt": {"add": {"content": "x"}}, "/etc/cron.d/x": {"add": {"content": "x"}}}}}`,
		"codex workdir":        `{"toolCallId": "x", "title": "Run", "kind": "execute", "rawInput": {"command": ["ls"], "workdir": "/"}}`,
		"nested edits":         `{"toolCallId": "x", "title": "Edit", "kind": "edit", "rawInput": {"edits": [{"file_path": "{cwd}/a.txt"}, {"file_path": "{cwd}/../../outside/b.txt"}]}}`,
		"paths array":          `{"toolCallId": "x", "title": "Read many", "kind": "read", "rawInput": {"paths": ["a.txt", "../x.txt"]}}`,
		"home":                 `{"toolCallId": "x", "title": "Read key", "kind": "read", "rawInput": {"file_path": "~/.ssh/id_rsa"}}`,
		"relative ..":          `{"toolCallId": "x", "title": "Write", "kind": "edit", "rawInput": {"file_path": "../../outside/x.txt"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := h.presenter(h.config(`{"turns": [[{"permission": {"toolCall": ` + toolCall + `, "report": true}}]]}`))
			s := h.create(p)
			res, from := h.send(p, s.SessionID, "write outside")
			got := afterPreamble(t, h.finish(s.SessionID, res, from))
			if len(got) != 6 || got[1] != `PERMISSION_DENIED x "reject" by policy` || got[2] != `DELTA assistant A "permission: reject_once reject"` ||
				!strings.HasPrefix(got[3], "TOOL_END x ") || !strings.Contains(got[3], " failed ") {
				t.Fatalf("events %q: want TOOL_START, a policy denial with the reject option, the agent's report, the denied tool ended failed, END, idle", got)
			}
			ev, _ := h.rec.waitFrom(t, from, "the denial", isType(presenters.EventToolPermissionDenied))
			if reason := ev.Payload.(presenters.PermissionDeniedPayload).Reason; reason == "" {
				t.Fatal("a policy denial must say why")
			}
			if _, err := os.Stat(filepath.Join(outside, "x.txt")); !os.IsNotExist(err) {
				t.Fatalf("outside file exists: %v", err)
			}
		})
	}
}

func TestPermissionBeforeItsToolCallAndCommandRisk(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	 {"permission": {"toolCall": {"toolCallId": "c1", "title": "Run tests", "kind": "execute", "rawInput": {"command": "go test ./..."}}, "report": true}},
	 {"update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run tests", "kind": "execute", "status": "in_progress", "rawInput": {"command": "go test ./..."}}},
	 {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "rawOutput": "ok"}}
	]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "test")
	req := h.permissionRequired(s.SessionID, from)
	if req.PermissionType != presenters.PermissionCommand || req.CommandInfo == nil ||
		req.CommandInfo.Command != "go test ./..." || req.CommandInfo.RiskLevel != presenters.RiskMedium || string(req.Arguments) != `{"command":"go test ./..."}` {
		t.Fatalf("permission request %+v (command info %+v)", req, req.CommandInfo)
	}
	// allow_always would make the agent skip later requests, and so the workspace
	// check: it is not offered.
	if _, ok := req.OptionOfKind(presenters.AllowAlways); ok || req.Rememberable {
		t.Fatalf("allow_always offered: %+v", req.Options)
	}
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow-always"}); !errors.Is(err, presenters.ErrInvalidArgument) {
		t.Fatalf("answering allow-always: %v, want ErrInvalidArgument", err)
	}
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow"}); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	want := []string{
		`TOOL_START c1 execute pending "Run tests"`,
		`PERMISSION_REQUIRED c1 []`,
		`STATUS paused`,
		`PERMISSION_GRANTED c1 allow by user`,
		`STATUS generating`,
		`DELTA assistant A "permission: allow_once allow"`,
		`TOOL_RUNNING c1 execute in_progress "Run tests"`,
		`TOOL_END c1 execute completed "Run tests"`,
		`END assistant A end_turn`,
		`STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

// Each policy_mode answers as documented: what it allows, the server answers with the
// agent's allow-once option (decided by policy, naming the rule); the rest is asked; a
// target outside the workspace is refused first, whatever the mode.
func TestPermissionPolicyModes(t *testing.T) {
	h := newHarness(t)
	const (
		read      = `{"toolCallId": "c", "title": "Read a.txt", "kind": "read", "rawInput": {"file_path": "{cwd}/a.txt"}}`
		search    = `{"toolCallId": "c", "title": "Search", "kind": "search", "rawInput": {"pattern": "TODO"}}`
		edit      = `{"toolCallId": "c", "title": "Edit a.txt", "kind": "edit", "rawInput": {"file_path": "{cwd}/a.txt", "content": "x"}}`
		low       = `{"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {"command": "ls -la"}}`
		medium    = `{"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {"command": "go test ./..."}}`
		high      = `{"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {"command": "rm -rf build"}}`
		noCommand = `{"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {}}`
		fetch     = `{"toolCallId": "c", "title": "Fetch", "kind": "fetch", "rawInput": {"url": "https://example.com"}}`
		noKind    = `{"toolCallId": "c", "title": "Tool", "rawInput": {"input": "x"}}`
		readOut   = `{"toolCallId": "c", "title": "Read key", "kind": "read", "rawInput": {"file_path": "/etc/shadow"}}`
		editOut   = `{"toolCallId": "c", "title": "Write", "kind": "edit", "rawInput": {"file_path": "{cwd}/../x.txt"}}`
	)
	const (
		asked   = `PERMISSION_REQUIRED c`
		allowed = `PERMISSION_GRANTED c allow by policy`
		refused = `PERMISSION_DENIED c "reject" by policy`
	)
	for _, tc := range []struct {
		mode, name, toolCall, want string
	}{
		{"strict", "read", read, asked},
		{"strict", "low command", low, asked},
		{"", "read (strict by default)", read, asked},

		{"balanced", "read", read, allowed},
		{"balanced", "search", search, allowed},
		{"balanced", "edit", edit, asked},
		{"balanced", "low command", low, asked},
		{"balanced", "fetch", fetch, asked},
		{"balanced", "read outside", readOut, refused},

		{"permissive", "edit", edit, allowed},
		{"permissive", "low command", low, allowed},
		{"permissive", "medium command", medium, allowed},
		{"permissive", "high command", high, asked},
		{"permissive", "unclassified command", noCommand, asked},
		{"permissive", "tool of no kind", noKind, asked},
		{"permissive", "edit outside", editOut, refused},
	} {
		t.Run(tc.mode+" "+tc.name, func(t *testing.T) {
			cfg := h.config(`{"turns": [[{"permission": {"toolCall": ` + tc.toolCall + `, "report": true}}]]}`)
			cfg.PolicyMode = tc.mode
			p := h.presenter(cfg)
			s := h.create(p)
			res, from := h.send(p, s.SessionID, "go")
			ev, _ := h.rec.waitFrom(t, from, "a decision or a question", func(ev presenters.Event) bool {
				switch ev.Payload.(type) {
				case presenters.PermissionGrantedPayload, presenters.PermissionDeniedPayload, presenters.PermissionRequiredPayload:
					return ev.SessionID == s.SessionID
				}
				return false
			})
			if got := eventSummary(ev.Payload); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			switch pl := ev.Payload.(type) {
			case presenters.PermissionRequiredPayload:
				if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: pl.Request.RequestID, OptionID: "reject"}); err != nil {
					t.Fatal(err)
				}
			case presenters.PermissionGrantedPayload:
				if want := "allowed by policy_mode " + tc.mode + ": "; !strings.HasPrefix(pl.Reason, want) {
					t.Fatalf("grant reason %q: want it to start %q and name the rule", pl.Reason, want)
				}
			}
			got := afterPreamble(t, h.finish(s.SessionID, res, from))
			if tc.want == allowed && !slices.Contains(got, `DELTA assistant A "permission: allow_once allow"`) {
				t.Fatalf("events %q: the agent must have received its allow-once option", got)
			}
		})
	}
}

// A mode's allow is the agent's allow-once option: an agent that offers none is asked
// about, so that a person chooses among its options.
func TestPermissionPolicyAllowNeedsAnAllowOnceOption(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(`{"turns": [[{"permission": {"toolCall": {"toolCallId": "c", "title": "Edit", "kind": "edit", "rawInput": {"file_path": "{cwd}/a.txt"}},
	  "options": [{"optionId": "always", "name": "Always", "kind": "allow_always"}, {"optionId": "reject", "name": "Reject", "kind": "reject_once"}], "report": true}}]]}`)
	cfg.PolicyMode = "permissive"
	p := h.presenter(cfg)
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "edit")
	req := h.permissionRequired(s.SessionID, from)
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "reject"}); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
}

// The old policy_mode values are aliases of strict: none may let a call run, or
// refuse one, that strict puts to a person.
func TestPermissionOldPolicyValuesAsk(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ mode, cmd string }{
		{"ask", "ls -la"},
		{"auto_allow_low", "ls -la"},
		{"auto", "ls -la"},
		{"auto_deny_high", "rm -rf build"},
		{"auto", "rm -rf build"},
	} {
		t.Run(tc.mode+" "+tc.cmd, func(t *testing.T) {
			cfg := h.config(`{"turns": [[{"permission": {"toolCall": {"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {"command": "` + tc.cmd + `"}}, "report": true}}]]}`)
			cfg.PolicyMode = tc.mode
			p := h.presenter(cfg)
			s := h.create(p)
			res, from := h.send(p, s.SessionID, "run")
			req := h.permissionRequired(s.SessionID, from)
			if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "reject"}); err != nil {
				t.Fatal(err)
			}
			h.finish(s.SessionID, res, from)
		})
	}
}

func TestParsePolicyMode(t *testing.T) {
	for _, tc := range []struct {
		value string
		mode  presenters.PermissionMode
		note  string // what the deprecation warning must say; "" for none
	}{
		{"", presenters.PermissionModeStrict, ""},
		{"strict", presenters.PermissionModeStrict, ""},
		{"balanced", presenters.PermissionModeBalanced, ""},
		{"permissive", presenters.PermissionModePermissive, ""},
		{"ask", presenters.PermissionModeStrict, "same meaning"},
		{"auto_allow_low", presenters.PermissionModeStrict, "low-risk commands are asked for instead of allowed"},
		{"auto_deny_high", presenters.PermissionModeStrict, "high- and critical-risk commands are asked for instead of refused"},
		{"auto", presenters.PermissionModeStrict, "instead of allowed, and high- and critical-risk ones instead of refused"},
	} {
		mode, note, err := ParsePolicyMode(tc.value)
		if err != nil || mode != tc.mode {
			t.Errorf("ParsePolicyMode(%q) = %q, %v; want %q", tc.value, mode, err, tc.mode)
		}
		if (note == "") != (tc.note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("ParsePolicyMode(%q) note %q, want one saying %q", tc.value, note, tc.note)
		}
		if tc.note != "" && (!strings.Contains(note, "deprecated") || !strings.Contains(note, `"strict"`)) {
			t.Errorf("note %q: must say the value is deprecated and name the new value", note)
		}
	}
	for _, bad := range []string{"yolo", "Strict", "auto_allow"} {
		if _, _, err := ParsePolicyMode(bad); !errors.Is(err, presenters.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "permissive") {
			t.Errorf("ParsePolicyMode(%q) = %v, want ErrInvalidArgument naming the value and the modes", bad, err)
		}
	}
	c, err := Config{ID: "acp.x.y", Command: "x", PolicyMode: "auto"}.validate()
	if err != nil || c.PolicyMode != "strict" || !strings.Contains(c.policyNote, "deprecated") {
		t.Fatalf("validate(auto) = %+v, %v: want strict and a deprecation note", c, err)
	}
}

func TestPermissionNobodyAnswersInTime(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(editScript)
	cfg.PermissionTimeout = 50 * time.Millisecond
	p := h.presenter(cfg)
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "edit")
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	want := []string{
		`TOOL_START e1 edit pending "Edit b.txt"`,
		`PERMISSION_REQUIRED e1 [` + filepath.Join(h.ws, "b.txt") + `]`,
		`STATUS paused`,
		`PERMISSION_DENIED e1 "" by cancelled`,
		`STATUS generating`,
		`DELTA assistant A "permission: cancelled"`,
		`TOOL_END e1 edit failed "Edit b.txt"`,
		`END assistant A end_turn`,
		`STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: "unknown", OptionID: "allow"}); !errors.Is(err, presenters.ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
}

// A path inside the workspace is asked about, whatever field names it (the policy
// does not deny everything it walks).
func TestPermissionInsideTheWorkspaceIsAsked(t *testing.T) {
	h := newHarness(t)
	t.Setenv("HOME", filepath.Dir(h.ws)) // ~/project is the workspace
	p := h.presenter(h.config(`{"turns": [[{"permission": {"toolCall": {"toolCallId": "x", "title": "Edit", "kind": "edit",
	  "rawInput": {"absolute_path": "{cwd}/a.txt", "changes": {"{cwd}/b.txt": {}}, "paths": ["c.txt"], "file_path": "~/project/d.txt",
	   "content": "/* not a path */\nx"}}, "report": true}}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "edit")
	req := h.permissionRequired(s.SessionID, from)
	want := []string{filepath.Join(h.ws, "a.txt"), filepath.Join(h.ws, "b.txt"), "~/project/d.txt", "c.txt"}
	if !reflect.DeepEqual(req.Paths, want) {
		t.Fatalf("paths %q, want %q", req.Paths, want)
	}
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "reject"}); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
}

// After a grant the agent may name other paths; the tool already runs, so an outside
// one is reported as an ERROR naming the tool.
func TestPermissionGrantedToolThatMovesOutsideIsReported(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	 {"update": {"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "Edit b.txt", "kind": "edit", "status": "pending",
	   "locations": [{"path": "{cwd}/b.txt"}]}},
	 {"permission": {"toolCall": {"toolCallId": "e1"},
	   "onAllow": [
	    {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "in_progress", "locations": [{"path": "{cwd}/b.txt"}, {"path": "/etc/passwd"}]}},
	    {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed", "locations": [{"path": "/etc/passwd"}]}}]}}
	]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "edit")
	req := h.permissionRequired(s.SessionID, from)
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow"}); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	want := []string{
		`TOOL_START e1 edit pending "Edit b.txt"`,
		`PERMISSION_REQUIRED e1 [` + filepath.Join(h.ws, "b.txt") + `]`,
		`STATUS paused`,
		`PERMISSION_GRANTED e1 allow by user`,
		`STATUS generating`,
		`TOOL_RUNNING e1 edit in_progress "Edit b.txt"`,
		`ERROR policy_violation`, // once: the path was reported already at the next update
		`TOOL_END e1 edit completed "Edit b.txt"`,
		`END assistant A end_turn`,
		`STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	ev, _ := h.rec.waitFrom(t, from, "the violation", isType(presenters.EventError))
	e := ev.Payload.(presenters.ErrorPayload)
	if !strings.Contains(e.Message, "e1") || !strings.Contains(e.Message, "/etc/passwd") || e.MessageID != res.MessageID {
		t.Fatalf("violation %+v: must name the tool and the path, for the turn's message", e)
	}
}

// With no turn running (here: a session/load replay) nothing is allowed, whatever the
// policy: a low-risk command, which permissive allows, is answered cancelled.
func TestPermissionWithoutATurnIsCancelledWhateverThePolicy(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(`{"agent": {"loadSession": true},
	 "load": [{"permission": {"toolCall": {"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {"command": "ls -la"}}}}],
	 "turns": [[{"text": "ok"}]]}`)
	cfg.PolicyMode = string(presenters.PermissionModePermissive)
	p := h.presenter(cfg)
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "first")
	h.finish(s.SessionID, res, from)
	p = h.restart(p, cfg)
	from = h.rec.len()
	if _, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	var decisions []string
	for _, ev := range h.rec.eventsOf(s.SessionID, from) {
		switch ev.Payload.(type) {
		case presenters.PermissionGrantedPayload, presenters.PermissionDeniedPayload, presenters.PermissionRequiredPayload:
			decisions = append(decisions, eventSummary(ev.Payload))
		}
	}
	if want := []string{`PERMISSION_DENIED c "" by cancelled`}; !reflect.DeepEqual(decisions, want) {
		t.Fatalf("decisions %q, want %q", decisions, want)
	}
}

// Without an open workspace nothing can be checked: the policy refuses (fail closed).
func TestPolicyWithoutAWorkspaceRefuses(t *testing.T) {
	s := &session{}
	pr := presenters.PermissionRequest{Options: []presenters.PermissionOption{{ID: "allow", Kind: presenters.AllowOnce}, {ID: "no", Kind: presenters.RejectOnce}}}
	d, decided := s.policy(pr, presenters.ToolCall{Kind: presenters.ToolRead}, nil, nil)
	if !decided || d.optionID != "no" || d.by != presenters.DecidedByPolicy || d.reason == "" {
		t.Fatalf("decision %+v (decided %v): want the reject option by policy, with a reason", d, decided)
	}
}

// A permission request shows what the tool call announces it will do: the diff
// content of an edit (also when the request arrives before its tool_call) and the
// command line and directory of a command.
func TestPermissionRequestCarriesTheDiffAndTheCommand(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	 {"permission": {"toolCall": {"toolCallId": "e1", "title": "Edit a.txt", "kind": "edit",
	   "content": [{"type": "diff", "path": "{cwd}/a.txt", "oldText": "old\n", "newText": "new\n"}, {"type": "diff", "path": "{cwd}/n.txt", "newText": "n"}]}, "report": true}},
	 {"permission": {"toolCall": {"toolCallId": "c1", "title": "Run", "kind": "execute", "rawInput": {"command": ["make", "test"], "cwd": "{cwd}/sub"}}, "report": true}}
	]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "edit and run")
	edit := h.permissionRequired(s.SessionID, from)
	want := []presenters.DiffBlock{{Path: filepath.Join(h.ws, "a.txt"), OldText: "old\n", NewText: "new\n"}, {Path: filepath.Join(h.ws, "n.txt"), NewText: "n"}}
	if !reflect.DeepEqual(edit.Diffs, want) {
		t.Fatalf("edit request diffs %+v, want %+v", edit.Diffs, want)
	}
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: edit.RequestID, OptionID: "reject"}); err != nil {
		t.Fatal(err)
	}
	ev, _ := h.rec.waitFrom(t, from, "the command's request", func(ev presenters.Event) bool {
		r, ok := ev.Payload.(presenters.PermissionRequiredPayload)
		return ok && r.Request.ToolID == "c1"
	})
	run := ev.Payload.(presenters.PermissionRequiredPayload).Request
	if run.CommandInfo == nil || run.CommandInfo.Command != "make test" || run.CommandInfo.Cwd != filepath.Join(h.ws, "sub") || len(run.Diffs) != 0 {
		t.Fatalf("command request %+v (command info %+v)", run, run.CommandInfo)
	}
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: run.RequestID, OptionID: "reject"}); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
}

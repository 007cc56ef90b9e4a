package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

func TestCancelAnswersPendingPermissionsAndEndsTheTurn(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	 {"text": "working"},
	 {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run", "kind": "execute", "status": "in_progress", "rawInput": {"command": "make"}}},
	 {"permission": {"toolCall": {"toolCallId": "t2", "title": "Edit", "kind": "edit"}, "report": true}},
	 {"waitCancel": true}
	], [{"text": "second turn"}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	h.permissionRequired(s.SessionID, from)
	if _, err := p.CancelMessage(testContext(t), s.SessionID, "not-the-running-message"); !errors.Is(err, presenters.ErrMessageNotRunning) {
		t.Fatalf("cancel of another message id: %v, want ErrNotFound", err)
	}
	if _, err := p.CancelMessage(testContext(t), s.SessionID, res.MessageID); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	want := []string{
		`DELTA assistant A "working"`,
		`TOOL_START t1 execute in_progress "Run"`,
		`TOOL_START t2 edit pending "Edit"`,
		`PERMISSION_REQUIRED t2 []`,
		`STATUS paused`,
		`PERMISSION_DENIED t2 "" by cancelled`,
		`STATUS generating`,
		`DELTA assistant A "permission: cancelled"`,
		`TOOL_END t1 execute cancelled "Run"`,
		`TOOL_END t2 edit cancelled "Edit"`,
		`END assistant A cancelled`,
		`STATUS idle`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; last.Status != presenters.MessageCancelled || last.StopReason != presenters.StopCancelled {
		t.Fatalf("stored cancelled message %+v", last)
	}
	if _, err := p.CancelMessage(testContext(t), s.SessionID, ""); err != nil {
		t.Fatalf("cancel with nothing running: %v", err)
	}
	res, from = h.send(p, s.SessionID, "again")
	if got := afterPreamble(t, h.finish(s.SessionID, res, from)); got[0] != `DELTA assistant A "second turn"` {
		t.Fatalf("second turn %q", got)
	}
}

// An agent that never answers after session/cancel does not keep the turn open.
func TestCancelOfAnAgentThatIgnoresIt(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"text": "stuck"}, {"hang": true}]]}`))
	p.cancelGrace = 50 * time.Millisecond
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	h.rec.waitFrom(t, from, "the agent's text", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == "stuck"
	})
	if _, err := p.CancelMessage(testContext(t), s.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	if want := []string{`DELTA assistant A "stuck"`, `END assistant A cancelled`, `STATUS idle`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestAgentCrashMidTurnMarksSessionsAndRestarts(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	 {"text": "about to crash"},
	 {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read", "kind": "read", "status": "in_progress"}},
	 {"crashOnce": "{cwd}/.crashed"},
	 {"text": "after the restart"}
	]]}`))
	s := h.create(p)
	other := h.create(p)
	res, from := h.send(p, s.SessionID, "crash please")
	_, next := h.rec.waitFrom(t, from, "the crash's end of turn", isEnd(res.MessageID))
	h.rec.waitFrom(t, next, "the error status", func(ev presenters.Event) bool {
		st, ok := ev.Payload.(presenters.StatusChangedPayload)
		return ok && ev.SessionID == s.SessionID && st.Status == presenters.SessionError
	})
	got := afterPreamble(t, timeline(h.rec.eventsOf(s.SessionID, from), map[string]string{res.MessageID: "A", res.UserMessageID: "U"}))
	want := []string{
		`DELTA assistant A "about to crash"`,
		`TOOL_START t1 read in_progress "Read"`,
		`ERROR agent_crashed`,
		`TOOL_END t1 read cancelled "Read"`,
		`END assistant A error`,
		`STATUS error`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	h.rec.waitFrom(t, from, "the idle session's error", func(ev presenters.Event) bool {
		st, ok := ev.Payload.(presenters.StatusChangedPayload)
		return ok && ev.SessionID == other.SessionID && st.Status == presenters.SessionError
	})
	d := p.Describe(testContext(t))
	if d.Status != presenters.AgentCrashed || !strings.Contains(d.StatusReason, "exited with status 3") {
		t.Fatalf("agent after the crash %+v", d)
	}
	if _, err := p.SendMessage(testContext(t), s.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("SendMessage to a crashed session: %v, want ErrFailedPrecondition", err)
	}
	msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{})
	if err != nil || len(msgs) != 2 || msgs[1].Status != presenters.MessageError || msgs[1].Blocks[0].Text != "about to crash" {
		t.Fatalf("stored messages after the crash: %v %+v", err, msgs)
	}

	// The next call restarts the agent; the crashed session reopens from the store.
	from = h.rec.len()
	info, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != presenters.SessionIdle || p.Describe(testContext(t)).Status != presenters.AgentReady {
		t.Fatalf("after reopening: session %s, agent %s", info.Status, p.Describe(testContext(t)).Status)
	}
	if info.MessageCount != 2 {
		t.Fatalf("LoadSession's message count %d, want the 2 stored messages", info.MessageCount)
	}
	got = timeline(h.rec.eventsOf(s.SessionID, from), map[string]string{msgs[0].ID: "U", msgs[1].ID: "A"})
	want = []string{`STATUS idle`, `DELTA user U "crash please"`, `END user U `, `DELTA assistant A "about to crash"`, `MESSAGE_BLOCK`, `END assistant A error`, `SESSION_READY 2`}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[3] != want[3] || got[5] != want[5] || got[6] != want[6] {
		t.Fatalf("reopen events:\n got %q\nwant %q", got, want)
	}
	res, from = h.send(p, s.SessionID, "go on")
	// The script's tool call t1 is never ended by the agent: the turn's end ends it.
	if got := afterPreamble(t, h.finish(s.SessionID, res, from)); !reflect.DeepEqual(got[len(got)-4:], []string{
		`DELTA assistant A "after the restart"`, `TOOL_END t1 read cancelled "Read"`, `END assistant A end_turn`, `STATUS idle`}) {
		t.Fatalf("turn after the restart %q", got)
	}
}

func TestAgentThatNeedsAuthentication(t *testing.T) {
	h := newHarness(t)
	const script = `{"agent": {"requireAuth": true, "authMethods": [
	  {"id": "api-key", "name": "API key", "type": "env_var", "vars": [{"name": "TESTAGENT_API_KEY"}]},
	  {"id": "browser", "name": "Browser login"}]}}`
	os.Unsetenv("TESTAGENT_API_KEY")

	t.Run("no method configured", func(t *testing.T) {
		p := h.presenter(h.config(script))
		_, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
		var authErr *presenters.AuthRequiredError
		if !errors.As(err, &authErr) || !errors.Is(err, presenters.ErrAuthRequired) || len(authErr.Methods) != 2 ||
			authErr.Methods[0].ID != "api-key" || !strings.Contains(authErr.Methods[0].Description, "TESTAGENT_API_KEY") {
			t.Fatalf("CreateSession: %v (%+v)", err, authErr)
		}
		if d := p.Describe(testContext(t)); d.Status != presenters.AgentNeedsAuth || len(d.AuthMethods) != 2 {
			t.Fatalf("agent %+v, want needs_auth with its methods", d)
		}
	})
	t.Run("env var method with the variable", func(t *testing.T) {
		cfg := h.config(script)
		cfg.AuthMethod = "api-key"
		cfg.Env["TESTAGENT_API_KEY"] = "secret"
		p := h.presenter(cfg)
		h.create(p)
	})
	t.Run("env var method without the variable", func(t *testing.T) {
		cfg := h.config(script)
		cfg.AuthMethod = "api-key"
		p := h.presenter(cfg)
		_, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
		if !errors.Is(err, presenters.ErrAuthRequired) || !strings.Contains(err.Error(), "TESTAGENT_API_KEY") {
			t.Fatalf("CreateSession: %v, want ErrAuthRequired naming the variable", err)
		}
	})
	t.Run("a method the agent does not offer", func(t *testing.T) {
		cfg := h.config(script)
		cfg.AuthMethod = "token"
		p := h.presenter(cfg)
		if _, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)}); !errors.Is(err, presenters.ErrAuthRequired) {
			t.Fatalf("CreateSession: %v, want ErrAuthRequired", err)
		}
	})
}

// restart closes a presenter and starts a new one on the same store, as after a
// restart of agenticd.
func (h *harness) restart(old *Presenter, cfg Config) *Presenter {
	h.t.Helper()
	closePresenter(h.t, old)
	return h.presenter(cfg)
}

func TestLoadSessionWithSessionLoadReplaysTheAgentsHistory(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(`{"agent": {"loadSession": true},
	 "load": [
	  {"update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "earlier question"}}},
	  {"text": "earlier answer"},
	  {"update": {"sessionUpdate": "tool_call", "toolCallId": "old", "title": "Read", "kind": "read", "status": "completed"}}
	 ],
	 "turns": [[{"text": "fresh"}]]}`)
	p := h.presenter(cfg)
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "first")
	h.finish(s.SessionID, res, from)

	p = h.restart(p, cfg)
	info, err := p.GetSession(testContext(t), s.SessionID)
	if err != nil || info.Status != presenters.SessionClosed || info.MessageCount != 2 || info.Workspace != h.ws {
		t.Fatalf("stored session after a restart: %v %+v", err, info)
	}
	if msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{}); err != nil || len(msgs) != 2 {
		t.Fatalf("stored messages after a restart: %v %d", err, len(msgs))
	}
	if _, err := p.SendMessage(testContext(t), s.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("SendMessage before LoadSession: %v", err)
	}
	from = h.rec.len()
	if info, err = p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	loadEvents := h.rec.eventsOf(s.SessionID, from)
	checkReplayMarks(t, loadEvents)
	got := withoutCapabilityUpdates(timeline(loadEvents, nil))
	for i := range got {
		got[i] = stripIDs(got[i])
	}
	want := []string{
		`DELTA user "earlier question"`, `END user`,
		`DELTA assistant "earlier answer"`, `TOOL_START old read completed "Read"`, `TOOL_END old read completed "Read"`, `END assistant end_turn`,
		`STATUS idle`, `SESSION_READY 2`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("load events:\n got %q\nwant %q", got, want)
	}
	if info.Status != presenters.SessionIdle {
		t.Fatalf("loaded session %+v", info)
	}
	res, from = h.send(p, s.SessionID, "and now")
	if got := afterPreamble(t, h.finish(s.SessionID, res, from)); got[0] != `DELTA assistant A "fresh"` {
		t.Fatalf("turn after load %q", got)
	}
}

// withoutCapabilityUpdates drops the SESSION_UPDATED that tells a session reopened after
// a restart what its agent can do: known only once the agent's process has started.
func withoutCapabilityUpdates(lines []string) []string {
	return slices.DeleteFunc(lines, func(l string) bool { return l == "SESSION_UPDATED capabilities" })
}

// stripIDs drops the uuid of replayed messages from a timeline line.
func stripIDs(line string) string {
	f := strings.Fields(line)
	out := f[:0]
	for _, w := range f {
		if len(w) == 36 && strings.Count(w, "-") == 4 {
			continue
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}

func TestLoadSessionWithoutSessionLoad(t *testing.T) {
	for _, tc := range []struct{ name, agent string }{
		{"resume", `{"resume": true}`},
		{"new agent session", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(`{"agent": ` + tc.agent + `, "turns": [[{"text": "answer"}]]}`)
			p := h.presenter(cfg)
			s := h.create(p)
			res, from := h.send(p, s.SessionID, "question")
			h.finish(s.SessionID, res, from)
			if err := p.CloseSession(testContext(t), s.SessionID); err != nil {
				t.Fatal(err)
			}
			p = h.restart(p, cfg)
			from = h.rec.len()
			if _, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{MaxHistory: 1}); err != nil {
				t.Fatal(err)
			}
			loadEvents := h.rec.eventsOf(s.SessionID, from)
			checkReplayMarks(t, loadEvents)
			got := withoutCapabilityUpdates(timeline(loadEvents, map[string]string{res.MessageID: "A"}))
			want := []string{`STATUS idle`, `DELTA assistant A "answer"`, `END assistant A end_turn`, `SESSION_READY 1`}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("reopen events %q, want %q (the newest message only)", got, want)
			}
			res, from = h.send(p, s.SessionID, "more")
			if got := afterPreamble(t, h.finish(s.SessionID, res, from)); got[0] != `DELTA assistant A "answer"` {
				t.Fatalf("turn after reopening %q", got)
			}
			if msgs, _ := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{}); len(msgs) != 4 {
				t.Fatalf("%d stored messages, want 4", len(msgs))
			}
		})
	}
}

func TestCloseSession(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"agent": {"close": true}, "turns": [[{"text": "started"}, {"waitCancel": true}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "long")
	h.rec.waitFrom(t, from, "the agent in its turn", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == "started"
	})
	if err := p.CloseSession(testContext(t), s.SessionID); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, timeline(h.rec.eventsOf(s.SessionID, from), map[string]string{res.MessageID: "A"}))
	if want := []string{`DELTA assistant A "started"`, `END assistant A cancelled`, `STATUS idle`, `STATUS closed`, `SESSION_CLOSED`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("close events %q, want %q", got, want)
	}
	if _, err := p.SendMessage(testContext(t), s.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("SendMessage after close: %v", err)
	}
	if err := p.CloseSession(testContext(t), s.SessionID); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if info, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{}); err != nil || info.Status != presenters.SessionIdle {
		t.Fatalf("reopen after close: %v %+v", err, info)
	}
	if _, err := p.GetSession(testContext(t), "no-such-session"); !errors.Is(err, presenters.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestModesAndModels(t *testing.T) {
	h := newHarness(t)
	t.Run("session modes and a model config option", func(t *testing.T) {
		p := h.presenter(h.config(richScript))
		info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws), ModeID: "code", ModelID: "smart"})
		if err != nil {
			t.Fatal(err)
		}
		if info.CurrentModeID != "code" || info.CurrentModelID != "smart" {
			t.Fatalf("created with mode %s model %s", info.CurrentModeID, info.CurrentModelID)
		}
		from := h.rec.len()
		if info, err = p.SetMode(testContext(t), info.SessionID, "ask"); err != nil || info.CurrentModeID != "ask" {
			t.Fatalf("SetMode: %v %s", err, info.CurrentModeID)
		}
		if info, err = p.SetModel(testContext(t), info.SessionID, "fast"); err != nil || info.CurrentModelID != "fast" {
			t.Fatalf("SetModel: %v %s", err, info.CurrentModelID)
		}
		got := timeline(h.rec.eventsOf(info.SessionID, from), nil)
		if want := []string{`SESSION_UPDATED mode=ask`, `SESSION_UPDATED model=fast`}; !reflect.DeepEqual(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		if _, err := p.SetMode(testContext(t), info.SessionID, "yolo"); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Fatalf("unknown mode: %v", err)
		}
		if _, err := p.SetModel(testContext(t), info.SessionID, "gpt-99"); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Fatalf("unknown model: %v", err)
		}
	})
	t.Run("mode config option and unstable models", func(t *testing.T) {
		p := h.presenter(h.config(`{"session": {
		  "models": {"currentModelId": "m1", "availableModels": [{"modelId": "m1", "name": "M1"}, {"modelId": "m2", "name": "M2", "description": "bigger"}]},
		  "configOptions": [{"type": "select", "id": "mode", "name": "Mode", "category": "mode", "currentValue": "safe",
		    "options": [{"group": "g", "name": "G", "options": [{"value": "safe", "name": "Safe"}, {"value": "fast", "name": "Fast"}]}]}]}}`))
		info := h.create(p)
		if len(info.AvailableModes) != 2 || info.CurrentModeID != "safe" || len(info.AvailableModels) != 2 || info.AvailableModels[1].Description != "bigger" {
			t.Fatalf("session %+v", info)
		}
		if info, err := p.SetMode(testContext(t), info.SessionID, "fast"); err != nil || info.CurrentModeID != "fast" {
			t.Fatalf("SetMode through the config option: %v %s", err, info.CurrentModeID)
		}
		if info, err := p.SetModel(testContext(t), info.SessionID, "m2"); err != nil || info.CurrentModelID != "m2" {
			t.Fatalf("SetModel through set_model: %v %s", err, info.CurrentModelID)
		}
	})
	t.Run("session modes win over a mode config option", func(t *testing.T) {
		p := h.presenter(h.config(`{"session": {
		  "modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}, {"id": "b", "name": "B"}]},
		  "configOptions": [{"type": "select", "id": "mode", "name": "Mode", "category": "mode", "currentValue": "a",
		    "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B"}]}]}}`))
		info := h.create(p)
		// Set through the config option, the mode would stay what the session modes say.
		if info, err := p.SetMode(testContext(t), info.SessionID, "b"); err != nil || info.CurrentModeID != "b" {
			t.Fatalf("SetMode through set_mode: %v %s", err, info.CurrentModeID)
		}
	})
}

func TestPromptContentReachesTheAgent(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.ws, "notes.md"), []byte("# notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\n0000")
	if err := os.WriteFile(filepath.Join(h.ws, "shot.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	p := h.presenter(h.config(`{"agent": {"image": true, "embeddedContext": true}, "turns": [[{"echoPrompt": true}]]}`))
	s := h.create(p)
	from := h.rec.len()
	// Parts of every kind, interleaved: the agent gets them in this order.
	res, err := p.SendMessage(testContext(t), s.SessionID, presenters.MessageContent{Parts: []presenters.ContentPart{
		{Text: "look"},
		{Image: &presenters.Image{Kind: presenters.ImageBase64, Data: "AAAA", MimeType: "image/png"}},
		{Text: "and at this file"},
		{File: &presenters.File{Path: "notes.md"}},
		{Image: &presenters.Image{Kind: presenters.ImageFile, Data: "shot.png"}},
		{Resource: &presenters.Resource{URI: "mem://ctx", Text: "inline context", MimeType: "text/plain"}},
		{Text: "thanks"},
	}}, presenters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := h.rec.waitFrom(t, from, "the echo", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Role == presenters.RoleAssistant
	})
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(ev.Payload.(presenters.MessageDeltaPayload).Text), &blocks); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, b := range blocks {
		types = append(types, fmt.Sprint(b["type"]))
	}
	if want := []string{"text", "image", "text", "resource_link", "image", "resource", "text"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("prompt block types %v, want %v", types, want)
	}
	if blocks[0]["text"] != "look" || blocks[2]["text"] != "and at this file" || blocks[6]["text"] != "thanks" ||
		blocks[4]["mimeType"] != "image/png" || blocks[3]["uri"] != "file://"+filepath.Join(h.ws, "notes.md") || blocks[3]["name"] != "notes.md" {
		t.Fatalf("prompt blocks %v", blocks)
	}
	h.finish(s.SessionID, res, from)
	msgs, _ := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{})
	if len(msgs[0].Blocks) != 7 || msgs[0].Blocks[2].Text != "and at this file" || msgs[0].Blocks[3].Resource.Name != "notes.md" {
		t.Fatalf("stored user message %+v", msgs[0].Blocks)
	}

	noImages := h.presenter(h.config(`{}`))
	s2 := h.create(noImages)
	_, err = noImages.SendMessage(testContext(t), s2.SessionID, presenters.MessageContent{Parts: []presenters.ContentPart{
		{Text: "see"}, {Image: &presenters.Image{Kind: presenters.ImageBase64, Data: "AAAA", MimeType: "image/png"}}}}, presenters.SendOptions{})
	if !errors.Is(err, presenters.ErrInvalidArgument) || !strings.Contains(err.Error(), "content.parts[1]") {
		t.Fatalf("image to an agent without image support: %v, want ErrInvalidArgument naming content.parts[1]", err)
	}
	for _, bad := range []presenters.MessageContent{{}, {Parts: []presenters.ContentPart{{File: &presenters.File{Path: "/etc/passwd"}}}}} {
		if _, err := noImages.SendMessage(testContext(t), s2.SessionID, bad, presenters.SendOptions{}); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Fatalf("SendMessage(%+v): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// The agent's stderr goes to the log with the agent id; initialize declared exactly
// what the sandbox serves.
func TestAgentStderrIsLoggedAndCapabilitiesDeclared(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{}`))
	h.create(p)
	closePresenter(t, p)
	log := h.log.String()
	line := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "client capabilities") {
			line = l
		}
	}
	if !strings.Contains(line, `msg="agent stderr"`) || !strings.Contains(line, "agent_id=acp.test.scripted") {
		t.Fatalf("agent stderr line %q", line)
	}
	if !strings.Contains(line, `{\"auth\":{},\"elicitation\":{\"form\":{},\"url\":{}},\"fs\":{\"readTextFile\":true,\"writeTextFile\":true},\"terminal\":true}`) {
		t.Fatalf("declared capabilities in %q", line)
	}
}

func TestConfiguredMCPServersArePassedToSessions(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(`{}`)
	cfg.MCPServers = []MCPServer{{Name: "files", Command: "mcp-files", Args: []string{"--root", "/srv"}}, {Name: "web", URL: "http://127.0.0.1:9/mcp"}}
	p := h.presenter(cfg)
	h.create(p)
	closePresenter(t, p)
	// The agent has no MCP-over-http capability: only the stdio server is passed.
	want := `\"mcpServers\":[{\"args\":[\"--root\",\"/srv\"],\"command\":\"mcp-files\",\"env\":[],\"name\":\"files\"}]`
	if !strings.Contains(h.log.String(), want) {
		t.Fatalf("log does not show the agent got %s", want)
	}
}

// Close ends the agent and everything it spawned: nothing is left behind.
func TestCloseLeavesNoProcesses(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"spawn": "sleep 300"}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "spawn")
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	child, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(got[0], `DELTA assistant A "spawned `), `"`))
	if err != nil {
		t.Fatalf("spawn report %q", got[0])
	}
	agent, err := strconv.Atoi(strings.Split(s.AgentSessionID, "-")[1]) // the agent names sessions sess-<pid>-<n>
	if err != nil {
		t.Fatal(err)
	}
	if !alive(agent) || !alive(child) {
		t.Fatalf("agent %d or its child %d not running before Close", agent, child)
	}
	closePresenter(t, p)
	for _, pid := range []int{agent, child} {
		if alive(pid) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Errorf("process %d still runs after Close: %s", pid, stat)
		}
	}
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestConfigAndDiscover(t *testing.T) {
	for _, bad := range []Config{
		{ID: "claude", Command: "x"},
		{ID: "deepchat.a.b", Command: "x"},
		{ID: "acp.a.b"},
		{ID: "acp.a.b", Command: "x", PolicyMode: "yolo"},
	} {
		if _, err := bad.validate(); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Errorf("validate(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	c, err := Config{ID: "acp.x.y", Command: "x", StartTimeout: time.Second}.validate()
	if err != nil || c.StartTimeout != 30*time.Second || c.PermissionTimeout != DefaultPermissionTimeout || c.PolicyMode != string(presenters.PermissionModeStrict) {
		t.Fatalf("defaults: %v %+v", err, c)
	}

	found := Discover(func(name string) (string, error) {
		switch name {
		case "claude-code-acp", "gemini":
			return "/usr/local/bin/" + name, nil
		}
		return "", errors.New("not found")
	})
	if len(found) != 2 || found[0].ID != "acp.anthropic.claude-code" || found[1].ID != "acp.google.gemini" ||
		!reflect.DeepEqual(found[1].Args, []string{"--acp"}) || found[0].Command != "/usr/local/bin/claude-code-acp" {
		t.Fatalf("Discover: %+v", found)
	}
	for i, c := range found {
		if _, err := c.validate(); err != nil {
			t.Fatalf("discovered config invalid: %v", err)
		}
		found[i] = c.withLaunch(false)
	}
	if os.Geteuid() == 0 && found[0].Env["IS_SANDBOX"] != "1" {
		t.Fatalf("Claude's adapter as root needs IS_SANDBOX=1: %+v", found[0].Env)
	}
	if !slices.Contains(found[0].WritePaths, "~/.claude.json") || !slices.Contains(found[1].WritePaths, "~/.gemini") {
		t.Errorf("discovered agents cannot write their state: %v, %v", found[0].WritePaths, found[1].WritePaths)
	}
	// Agents' keys are hidden from every process agenticd starts, but each known agent
	// keeps its own.
	if !slices.Contains(found[0].KeepEnv, "ANTHROPIC_API_KEY") || !slices.Contains(found[1].KeepEnv, "GEMINI_API_KEY") {
		t.Errorf("known agents' own keys: %v, %v", found[0].KeepEnv, found[1].KeepEnv)
	}

	// Confined, codex-acp 2.x is told through its environment (it ignores -c arguments)
	// to start in its asking mode; what the agent's env: sets stays.
	codex := func(confined bool, env map[string]string) Config {
		return Config{ID: "acp.openai.codex", Command: "/usr/local/bin/codex-acp", Env: env}.withLaunch(confined)
	}
	c = codex(true, nil)
	if len(c.Args) != 0 || c.Env["INITIAL_AGENT_MODE"] != "read-only" || len(c.Env) != 1 {
		t.Errorf("confined codex-acp: args %q env %q", c.Args, c.Env)
	}
	if env := codex(false, nil).Env; len(env) != 0 {
		t.Errorf("unconfined codex-acp env %q, want its own defaults", env)
	}
	theirs := map[string]string{"INITIAL_AGENT_MODE": "agent-full-access", "CODEX_CONFIG": "{}"}
	if c := codex(true, theirs); c.Env["INITIAL_AGENT_MODE"] != "agent-full-access" || c.Env["CODEX_CONFIG"] != "{}" {
		t.Errorf("the agent's own env: is overridden: %q", c.Env)
	}
	if len(theirs) != 2 {
		t.Errorf("the config's env map was written to: %q", theirs)
	}
	if again := c.withLaunch(true); len(again.Env) != 1 || len(again.WritePaths) != 1 {
		t.Errorf("applying a launch twice adds twice: %q %q", again.Env, again.WritePaths)
	}
}

// A known agent's missing state is created before it starts (a confined agent cannot);
// what exists is left alone.
func TestCreateStateMakesWhatIsMissing(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"theirs": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	createState([]StatePath{{Path: "~/.claude"}, {Path: "~/.claude.json", File: true, Seed: "{}\n"},
		{Path: "~/.config/new.json", File: true, Seed: "{}\n"}}, testLogger(t))
	if fi, err := os.Stat(filepath.Join(home, ".claude")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("~/.claude: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".claude.json")); string(b) != `{"theirs": 1}` {
		t.Errorf("an existing state file was changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".config", "new.json")); string(b) != "{}\n" {
		t.Errorf("a missing state file was not seeded: %q", b)
	}
}

// internal/testagent/testdata/demo.json is the script the TypeScript and Python client programs
// run against: it must stream deltas, ask a permission and end the turn.
func TestDemoScriptForClientPrograms(t *testing.T) {
	h := newHarness(t)
	demo, err := os.ReadFile("../../internal/testagent/testdata/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	p := h.presenter(h.config(string(demo)))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "summarize the project")
	req := h.permissionRequired(s.SessionID, from)
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow"}); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	if got[len(got)-3] != "END assistant A end_turn usage=46" || !strings.Contains(strings.Join(got, "\n"), "PERMISSION_GRANTED write-notes allow by user") {
		t.Fatalf("demo turn %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(h.ws, "NOTES.md")); string(b) != "demo notes\n" {
		t.Fatalf("NOTES.md = %q", b)
	}
}

func TestAgentThatFailsToStart(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"agent": {"crashOnStart": 9}}`))
	_, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if !errors.Is(err, presenters.ErrAgentUnavailable) || !strings.Contains(err.Error(), "exited with status 9") {
		t.Fatalf("CreateSession: %v, want ErrAgentUnavailable with the exit status", err)
	}
	if d := p.Describe(testContext(t)); d.Status != presenters.AgentCrashed || !strings.Contains(d.StatusReason, "exited with status 9") {
		t.Fatalf("agent %+v", d)
	}

	missing := h.presenter(Config{ID: "acp.test.missing", Command: "no-such-agent-binary"})
	if _, err := missing.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)}); !errors.Is(err, presenters.ErrAgentUnavailable) ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("CreateSession with a missing binary: %v", err)
	}
}

func TestRestartBackoffGrowsWithCrashesInARow(t *testing.T) {
	for crashes, want := range map[int]time.Duration{0: 0, 1: 0, 2: time.Second, 3: 2 * time.Second, 4: 4 * time.Second,
		6: 16 * time.Second, 7: 30 * time.Second, 20: 30 * time.Second} {
		if got := backoffFor(crashes); got != want {
			t.Errorf("%d crashes in a row: wait %s, want %s", crashes, got, want)
		}
	}
	h := newHarness(t)
	p := h.presenter(h.config(`{}`))
	// A call whose deadline ends before the restart fails at once with the time to retry.
	p.mu.Lock()
	p.crashes, p.lastCrash = 5, time.Now()
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.ws)}); !errors.Is(err, presenters.ErrAgentUnavailable) || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("CreateSession during the backoff: %v", err)
	}
}

func TestStopReasonsAndAgentErrors(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [
	 [{"stop": "max_tokens"}], [{"stop": "refusal"}], [{"stop": "max_turn_requests"}],
	 [{"text": "partial"}, {"fail": {"code": -32603, "message": "model overloaded"}}],
	 [{"text": "fine again"}]]}`))
	s := h.create(p)
	for _, want := range [][]string{
		{`END assistant A max_tokens`, `STATUS idle`},
		{`END assistant A refusal`, `STATUS idle`},
		{`END assistant A max_turn_requests`, `STATUS idle`},
		{`DELTA assistant A "partial"`, `ERROR agent_error`, `END assistant A error`, `STATUS idle`},
		{`DELTA assistant A "fine again"`, `END assistant A end_turn`, `STATUS idle`},
	} {
		res, from := h.send(p, s.SessionID, "go")
		if got := afterPreamble(t, h.finish(s.SessionID, res, from)); !reflect.DeepEqual(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
	msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if failed := msgs[1]; failed.Status != presenters.MessageError || failed.StopReason != presenters.StopError || failed.Blocks[0].Text != "partial" {
		t.Fatalf("stored failed turn %+v", failed)
	}
}

// A running turn's message is written to the store before it ends (a crash of
// agenticd then leaves it incomplete, not lost).
func TestRunningTurnIsCheckpointed(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"text": "partial answer"}, {"waitCancel": true}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	h.rec.waitFrom(t, from, "the partial answer", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == "partial answer"
	})
	p.mu.Lock()
	sess := p.sessions[s.SessionID]
	p.mu.Unlock()
	sess.checkpoint()
	deadline := time.Now().Add(waitLimit)
	for {
		msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 2 && len(msgs[1].Blocks) == 1 && msgs[1].Blocks[0].Text == "partial answer" {
			if msgs[1].Status != presenters.MessageIncomplete {
				t.Fatalf("a running turn is stored as %s, want incomplete", msgs[1].Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running turn was not stored: %+v", msgs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.CancelMessage(testContext(t), s.SessionID, res.MessageID); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
}

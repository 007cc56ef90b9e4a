package acp

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Session ids are agenticd's: every agent here answers session/new with the same
// sessionId, in two processes of one agent (two workspaces) and in another agent, and
// each session still gets an id of its own, keeps the agent's beside it, and gets only
// its own agent's updates.
func TestSessionIDsAreMintedAndTheAgentsIDRoutes(t *testing.T) {
	h := newHarness(t)
	other := filepath.Join(filepath.Dir(h.ws), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `{"session": {"id": "same-id"}, "turns": [[{"echoPrompt": true}]]}`
	p := h.presenter(h.config(script))
	cfg := h.config(script)
	cfg.ID = "acp.test.second"
	second := h.presenter(cfg)

	var sessions []presenters.SessionInfo
	var owners []*Presenter
	for _, c := range []struct {
		p  *Presenter
		ws string
	}{{p, h.ws}, {p, other}, {second, h.ws}} {
		info, err := c.p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(c.ws)})
		if err != nil {
			t.Fatalf("CreateSession in %s by %s: %v", c.ws, c.p.AgentID(), err)
		}
		if info.AgentSessionID != "same-id" || info.SessionID == "same-id" || info.SessionID == "" {
			t.Fatalf("session %q with agent session %q: want an id of agenticd's own beside the agent's same-id", info.SessionID, info.AgentSessionID)
		}
		sessions, owners = append(sessions, info), append(owners, c.p)
	}
	if ids := []string{sessions[0].SessionID, sessions[1].SessionID, sessions[2].SessionID}; len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Fatalf("session ids %v: want three different ones", ids)
	}
	for i, s := range sessions {
		conv, err := h.store.GetConversation(testContext(t), s.SessionID)
		if err != nil || conv.AgentSessionID != "same-id" || conv.AgentID != owners[i].AgentID() {
			t.Fatalf("stored session %s: %+v, %v", s.SessionID, conv, err)
		}
		got, err := owners[i].GetSession(testContext(t), s.SessionID)
		if err != nil || got.AgentSessionID != "same-id" {
			t.Fatalf("GetSession(%s) = %+v, %v", s.SessionID, got, err)
		}
	}
	// Each turn's prompt goes to its own agent process under the agent's id, and the
	// echo comes back to the session that sent it, not to the others.
	for i, s := range sessions {
		text := "prompt of session " + s.SessionID
		res, from := h.send(owners[i], s.SessionID, text)
		lines := h.finish(s.SessionID, res, from)
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "DELTA assistant A") && strings.Contains(l, text) }) {
			t.Fatalf("session %s did not get its echo: %q", s.SessionID, lines)
		}
		for j, o := range sessions {
			if j == i {
				continue
			}
			for _, ev := range h.rec.eventsOf(o.SessionID, from) {
				if d, ok := ev.Payload.(presenters.MessageDeltaPayload); ok && strings.Contains(d.Text, text) {
					t.Fatalf("session %s got session %s's echo", o.SessionID, s.SessionID)
				}
			}
		}
	}
}

// A reopened session whose agent can neither load nor resume gets a new agent session:
// the session keeps its id, and the new agent id is stored beside it.
func TestReopenedAsNewAgentSessionKeepsItsID(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{}`))
	s := h.create(p)
	if err := p.CloseSession(testContext(t), s.SessionID); err != nil {
		t.Fatal(err)
	}
	info, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{})
	if err != nil {
		t.Fatal(err)
	}
	if info.SessionID != s.SessionID || info.AgentSessionID == s.AgentSessionID || info.AgentSessionID == "" {
		t.Fatalf("reopened %q (agent %q), created %q (agent %q): want the same id and a new agent session", info.SessionID, info.AgentSessionID, s.SessionID, s.AgentSessionID)
	}
	// The conversation is written behind the session: wait for it.
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(10 * time.Millisecond) {
		conv, err := h.store.GetConversation(testContext(t), s.SessionID)
		if err == nil && conv.AgentSessionID == info.AgentSessionID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored session %+v, %v: want agent session %s", conv, err, info.AgentSessionID)
		}
	}
}

// Client-chosen message ids name the turn's messages; an id taken is refused, and so
// is the same id for both.
func TestClientChosenMessageIDs(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"text": "one"}], [{"text": "two"}]]}`))
	s := h.create(p)
	ctx := testContext(t)
	from := h.rec.len()
	res, err := p.SendMessage(ctx, s.SessionID, presenters.TextContent("hi"), presenters.SendOptions{MessageID: "reply-1", UserMessageID: "ask-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.MessageID != "reply-1" || res.UserMessageID != "ask-1" {
		t.Fatalf("SendMessage = %+v, want the chosen ids", res)
	}
	h.finish(s.SessionID, res, from)
	msgs, err := p.GetMessages(ctx, s.SessionID, presenters.MessageQuery{})
	if err != nil || len(msgs) != 2 || msgs[0].ID != "ask-1" || msgs[1].ID != "reply-1" {
		t.Fatalf("stored messages %+v, %v", msgs, err)
	}
	for _, opts := range []presenters.SendOptions{{MessageID: "reply-1"}, {MessageID: "new", UserMessageID: "ask-1"}, {UserMessageID: "reply-1"}} {
		if _, err := p.SendMessage(ctx, s.SessionID, presenters.TextContent("again"), opts); !errors.Is(err, presenters.ErrMessageIDInUse) {
			t.Errorf("SendMessage with %+v: %v, want ErrMessageIDInUse", opts, err)
		}
	}
	for _, opts := range []presenters.SendOptions{{MessageID: "same", UserMessageID: "same"}, {MessageID: "has space"}, {UserMessageID: strings.Repeat("x", 129)}} {
		if _, err := p.SendMessage(ctx, s.SessionID, presenters.TextContent("again"), opts); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Errorf("SendMessage with %+v: %v, want ErrInvalidArgument", opts, err)
		}
	}
}

// CancelMessage names the turn it cancels: another id is ErrMessageNotRunning, while a
// turn runs and after; an empty id cancels whatever runs and says which.
func TestCancelNamesTheRunningTurn(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"waitCancel": true}]]}`))
	s := h.create(p)
	ctx := testContext(t)
	if id, err := p.CancelMessage(ctx, s.SessionID, ""); err != nil || id != "" {
		t.Fatalf("cancel with nothing running: %q, %v; want nothing and no error", id, err)
	}
	if _, err := p.CancelMessage(ctx, s.SessionID, "never-ran"); !errors.Is(err, presenters.ErrMessageNotRunning) {
		t.Fatalf("cancel of an id while idle: %v, want ErrMessageNotRunning", err)
	}
	res, from := h.send(p, s.SessionID, "wait")
	_, err := p.CancelMessage(ctx, s.SessionID, "other")
	if !errors.Is(err, presenters.ErrMessageNotRunning) || !strings.Contains(err.Error(), res.MessageID) {
		t.Fatalf("cancel of another id: %v, want ErrMessageNotRunning naming the running %s", err, res.MessageID)
	}
	id, err := p.CancelMessage(ctx, s.SessionID, "")
	if err != nil || id != res.MessageID {
		t.Fatalf("cancel of whatever runs: %q, %v; want %s", id, err, res.MessageID)
	}
	h.finish(s.SessionID, res, from)
	if _, err := p.CancelMessage(ctx, s.SessionID, res.MessageID); !errors.Is(err, presenters.ErrMessageNotRunning) {
		t.Fatalf("cancel of the ended turn: %v, want ErrMessageNotRunning", err)
	}
}

// The agent's status changes are published as agent events: starting and ready on the
// first use, crashed when its process dies.
func TestAgentStatusEvents(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"crash": 3}]]}`))
	s := h.create(p)
	if got, want := h.rec.agentStatuses(t, 0), []presenters.AgentStatus{presenters.AgentStarting, presenters.AgentReady}; !slices.Equal(got, want) {
		t.Fatalf("agent statuses on first use %v, want %v", got, want)
	}
	from := h.rec.len()
	h.send(p, s.SessionID, "crash")
	h.rec.waitFrom(t, from, "the crash", func(ev presenters.Event) bool {
		a, ok := ev.Payload.(presenters.AgentStatusChangedPayload)
		return ok && a.Info.Status == presenters.AgentCrashed && a.Info.StatusReason != ""
	})
	if d := p.Describe(testContext(t)); d.Status != presenters.AgentCrashed {
		t.Fatalf("Describe after the crash: %s", d.Status)
	}
}

// checkReplayMarks checks that of a LoadSession's events exactly the history shown
// again (messages, their blocks and tool calls) is marked replay.
func checkReplayMarks(t *testing.T, evs []presenters.Event) {
	t.Helper()
	for _, ev := range evs {
		history := false
		switch ev.Payload.(type) {
		case presenters.MessageDeltaPayload, presenters.MessageBlockPayload, presenters.MessageEndPayload,
			presenters.ToolStartPayload, presenters.ToolRunningPayload, presenters.ToolEndPayload:
			history = true
		}
		if ev.Replay != history {
			t.Errorf("%s marked replay %t, want %t", eventSummary(ev.Payload), ev.Replay, history)
		}
	}
}

package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// waitStatus waits for a session's status to become st and returns its reason.
func (h *harness) waitStatus(sessionID string, from int, st presenters.SessionStatus) string {
	h.t.Helper()
	ev, _ := h.rec.waitFrom(h.t, from, "status "+string(st), func(ev presenters.Event) bool {
		s, ok := ev.Payload.(presenters.StatusChangedPayload)
		return ok && ev.SessionID == sessionID && s.Status == st
	})
	return ev.Payload.(presenters.StatusChangedPayload).Reason
}

// Lines the SDK would drop (a wrong "jsonrpc", an "error" beside the method) used to be
// counted by the old reader and never finished: every later agent request then hung.
// Now they are dropped and the turn, with a permission request after them, goes on.
func TestMalformedUpdatesStallNothing(t *testing.T) {
	h := newHarness(t)
	var bad []string
	for range 300 { // more than the old reader's high-water mark
		bad = append(bad, `{"line": "{\"jsonrpc\":2,\"method\":\"session/update\",\"params\":{\"sessionId\":\"x\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"bad\"}}}}"}`,
			`{"line": "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"error\":\"x\",\"params\":{\"sessionId\":\"x\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":7}}}"}`)
	}
	p := h.presenter(h.config(`{"turns": [[` + strings.Join(bad, ",") + `,
	 {"permission": {"toolCall": {"toolCallId": "t1", "title": "Edit", "kind": "edit", "status": "pending", "locations": [{"path": "{cwd}/a.txt"}]}, "report": true}},
	 {"text": "after"}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	req := h.permissionRequired(s.SessionID, from)
	if err := p.RespondPermission(testContext(t), s.SessionID, presenters.PermissionResponse{RequestID: req.RequestID, OptionID: "allow"}); err != nil {
		t.Fatal(err)
	}
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	if !strings.Contains(strings.Join(got, "|"), `DELTA assistant A "after"|`) {
		t.Fatalf("turn %q", got)
	}
}

// An over-long line cannot be handed on; it ends the connection through the crash
// path with a reason, instead of being dropped (a dropped response hangs its caller).
func TestOverLongLineEndsTheConnectionWithAReason(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(fmt.Sprintf(`{"turns": [[{"text": "before"}, {"longLine": %d}, {"hang": true}]]}`, maxLineBytes)))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	h.finish(s.SessionID, res, from)
	if reason := h.waitStatus(s.SessionID, from, presenters.SessionError); !strings.Contains(reason, "longer than") {
		t.Fatalf("session error reason %q", reason)
	}
}

// An agent that closes its output but keeps running used to leave the turn waiting
// forever and the process behind. The turn ends in error, the process is stopped and
// the next request starts a new agent.
func TestAgentThatClosesItsConnectionButLives(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"text": "bye"}, {"closeOutput": true}], [{"text": "new agent"}]]}`))
	s := h.create(p)
	p.mu.Lock()
	pid := soleConnLocked(p).proc.Pid()
	p.mu.Unlock()
	res, from := h.send(p, s.SessionID, "go")
	got := afterPreamble(t, h.finish(s.SessionID, res, from))
	if got[len(got)-2] != "END assistant A error" {
		t.Fatalf("turn %q", got)
	}
	if reason := h.waitStatus(s.SessionID, from, presenters.SessionError); !strings.Contains(reason, "closed its connection") {
		t.Fatalf("session error reason %q", reason)
	}
	p.mu.Lock()
	conn := soleConnLocked(p)
	p.mu.Unlock()
	if conn != nil {
		<-conn.gone
	}
	if alive(pid) {
		t.Fatalf("agent process %d still runs after its connection ended", pid)
	}
	if _, err := p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatalf("reopening on a new agent: %v", err)
	}
}

// The agent's requests for a session that is registered but not (or no longer) bound
// to a workspace used to dereference nil and kill the daemon.
func TestAgentRequestsForASessionThatIsNotOpen(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{}`))
	info := h.create(p)
	conn, err := p.ensureConn(testContext(t), procScope{workspace: info.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := h.store.GetConversation(testContext(t), info.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	// A session known only from the store, registered before being attached (what a
	// session/load used to do).
	stored := newStoredSession(p, conv, presenters.Capabilities{})
	const id = sdk.SessionId("not-attached")
	if err := conn.register(id, stored); err != nil {
		t.Fatal(err)
	}
	defer conn.unregister(id)
	h2 := &client{c: conn}
	ctx := testContext(t)
	calls := map[string]func() error{
		"read": func() error {
			_, err := h2.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: id, Path: h.ws + "/a"})
			return err
		},
		"write": func() error {
			_, err := h2.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: id, Path: h.ws + "/a"})
			return err
		},
		"create": func() error {
			_, err := h2.CreateTerminal(ctx, sdk.CreateTerminalRequest{SessionId: id, Command: "true"})
			return err
		},
		"output": func() error {
			_, err := h2.TerminalOutput(ctx, sdk.TerminalOutputRequest{SessionId: id, TerminalId: "t"})
			return err
		},
		"wait": func() error {
			_, err := h2.WaitForTerminalExit(ctx, sdk.WaitForTerminalExitRequest{SessionId: id, TerminalId: "t"})
			return err
		},
		"kill": func() error {
			_, err := h2.KillTerminal(ctx, sdk.KillTerminalRequest{SessionId: id, TerminalId: "t"})
			return err
		},
		"release": func() error {
			_, err := h2.ReleaseTerminal(ctx, sdk.ReleaseTerminalRequest{SessionId: id, TerminalId: "t"})
			return err
		},
	}
	for name, call := range calls {
		var re *sdk.RequestError
		if err := call(); !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(fmt.Sprint(re.Data), "not open") {
			t.Errorf("%s for a session that is not open: %v, want invalid params saying so", name, err)
		}
	}
}

// Two LoadSession calls at once run session/load once: the second waits for the first.
func TestConcurrentLoadSessionLoadsOnce(t *testing.T) {
	h := newHarness(t)
	const messages = 4
	p := h.presenter(h.config(fmt.Sprintf(`{"agent": {"loadSession": true}, "load": [{"replay": {"messages": %d, "size": 16}}, {"sleep": "200ms"}]}`, messages)))
	s := h.create(p)
	if err := p.CloseSession(testContext(t), s.SessionID); err != nil {
		t.Fatal(err)
	}
	from := h.rec.len()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{})
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("LoadSession: %v, %v", errs[0], errs[1])
	}
	replayed := 0
	for _, ev := range h.rec.eventsOf(s.SessionID, from) {
		if _, ok := ev.Payload.(presenters.MessageEndPayload); ok {
			replayed++
		}
	}
	if replayed != messages {
		t.Fatalf("%d replayed messages, want %d: session/load ran more than once", replayed, messages)
	}
	if info, _ := p.GetSession(testContext(t), s.SessionID); info.Status != presenters.SessionIdle {
		t.Fatalf("status %s", info.Status)
	}
}

// SetMode/SetModel on a session closed meanwhile fail cleanly (they dereferenced a nil
// connection).
func TestSetModeAndModelOfAClosedSession(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"session": {
	 "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]},
	 "models": {"currentModelId": "m1", "availableModels": [{"modelId": "m1", "name": "M1"}, {"modelId": "m2", "name": "M2"}]}}}`))
	info := h.create(p)
	p.mu.Lock()
	s := p.sessions[info.SessionID]
	p.mu.Unlock()
	if err := s.close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.setMode(testContext(t), "code"); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("setMode after close: %v", err)
	}
	if err := s.setModel(testContext(t), "m2"); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("setModel after close: %v", err)
	}
}

// A mode or model the agent does not offer fails CreateSession before the session
// exists anywhere: not in memory, not in the store.
func TestCreateSessionWithABadModeLeavesNothing(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"agent": {"close": true}, "session": {
	 "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}]}}}`))
	for _, cfg := range []presenters.SessionConfig{{Workspace: h.opened(h.ws), ModeID: "nope"}, {Workspace: h.opened(h.ws), ModelID: "nope"}} {
		from := h.rec.len()
		if _, err := p.CreateSession(testContext(t), cfg); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Fatalf("CreateSession %+v: %v, want ErrInvalidArgument", cfg, err)
		}
		if evs := h.rec.eventsOf("", from); len(evs) != 0 {
			t.Fatalf("events for a session that failed: %s", describe(evs))
		}
	}
	p.mu.Lock()
	n := len(p.sessions)
	conn := soleConnLocked(p)
	p.mu.Unlock()
	conn.mu.Lock()
	registered := len(conn.sessions)
	conn.mu.Unlock()
	if n != 0 || registered != 0 {
		t.Fatalf("%d sessions in memory, %d registered after failed creations", n, registered)
	}
}

// A connection whose exit is being handled refuses new sessions, and a session on a
// dead connection is not live.
func TestRegisterOnAClosedConnectionIsRefused(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{}`))
	info := h.create(p)
	p.mu.Lock()
	conn := soleConnLocked(p)
	s := p.sessions[info.SessionID]
	p.mu.Unlock()
	conn.stop(context.Background())
	if err := conn.register("late", s); !errors.Is(err, errConnClosed) {
		t.Fatalf("register on a stopped connection: %v", err)
	}
	if err := s.checkLive(); err == nil {
		t.Fatal("a session on a stopped connection is live")
	}
}

// After the cancel grace the turn ends, but the session stays busy until the agent
// answers the prompt; what the agent sends late is dropped, never shown in the next turn.
func TestLateUpdatesOfACancelledTurnAreDropped(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"text": "stuck"}, {"lateAfterCancel": {"after": "300ms", "text": "late"}}], [{"text": "fresh"}]]}`))
	p.cancelGrace = 0
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	h.rec.waitFrom(t, from, "the agent's text", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == "stuck"
	})
	if _, err := p.CancelMessage(testContext(t), s.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
	_, err := p.SendMessage(testContext(t), s.SessionID, presenters.TextContent("next"), presenters.SendOptions{})
	for errors.Is(err, presenters.ErrSessionBusy) && strings.Contains(err.Error(), "still cancelling") {
		_, err = p.SendMessage(testContext(t), s.SessionID, presenters.TextContent("next"), presenters.SendOptions{})
	}
	if err != nil {
		t.Fatalf("SendMessage after the agent answered: %v", err)
	}
	for _, ev := range h.rec.eventsOf(s.SessionID, from) {
		if d, ok := ev.Payload.(presenters.MessageDeltaPayload); ok && d.Text == "late" {
			t.Fatalf("a late update of the cancelled turn was shown (message %s)", d.MessageID)
		}
	}
}

// Sessions read from the store are not kept in memory; closed ones are dropped.
func TestStoredSessionsAreNotCached(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{}`))
	info := h.create(p)
	if err := p.CloseSession(testContext(t), info.SessionID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetSession(testContext(t), info.SessionID); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	n := len(p.sessions)
	p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d sessions in memory after the only one was closed and read", n)
	}
}

// A client sees the agent's error message only; the error's data (stack traces, paths)
// goes to the log.
func TestAgentErrorDataStaysInTheLog(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"fail": {"code": -32603, "message": "model overloaded", "data": {"trace": "secret/internal/path.go:12"}}}]]}`))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "go")
	h.finish(s.SessionID, res, from)
	var shown string
	for _, ev := range h.rec.eventsOf(s.SessionID, from) {
		if e, ok := ev.Payload.(presenters.ErrorPayload); ok {
			shown = e.Message
		}
	}
	if !strings.Contains(shown, "model overloaded") || strings.Contains(shown, "secret") {
		t.Fatalf("ERROR event says %q", shown)
	}
	if !strings.Contains(h.log.String(), "secret/internal/path.go") {
		t.Fatal("the error's data is not in the log")
	}
}

package deepchat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

func isDelta(text string) func(presenters.Event) bool {
	return func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Text == text
	}
}

func isClosed(sessionID string) func(presenters.Event) bool {
	return func(ev presenters.Event) bool {
		_, ok := ev.Payload.(presenters.SessionClosedPayload)
		return ok && ev.SessionID == sessionID
	}
}

// TestCloseEndsEveryTurnWhateverItsContext runs three turns, one in each kind of wait
// (a provider stream, a command, a permission request), and closes the presenter with
// a context that has already ended: Close still returns only after every turn has
// committed its reply and sent MESSAGE_END.
func TestCloseEndsEveryTurnWhateverItsContext(t *testing.T) {
	h := newHarness(t)
	streaming := h.createSession("")
	h.llm.script(fakeReply{events: []string{textEvent("partial")}, hold: true})
	streamRes := h.send(streaming.SessionID, "stream")
	h.rec.waitFor(t, "the streamed delta", isDelta("partial"))

	running := h.createSession(ModePermissive)
	h.llm.script(toolReply("c_run", "run_command", `{"command":"sleep 60"}`))
	runRes := h.send(running.SessionID, "run")
	h.rec.waitFor(t, "the command running", func(ev presenters.Event) bool {
		p, ok := ev.Payload.(presenters.ToolRunningPayload)
		return ok && p.Tool.ToolID == "c_run" && len(p.Tool.Content) == 1
	})

	asking := h.createSession(ModeStrict)
	h.llm.script(toolReply("c_ask", "list_directory", `{}`))
	askRes := h.send(asking.SessionID, "ask")
	h.rec.waitFor(t, "the permission request", isPermissionRequired)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	events := h.rec.all()
	for _, res := range []presenters.SendResult{streamRes, runRes, askRes} {
		var end *presenters.MessageEndPayload
		for _, ev := range events {
			if isEnd(res.MessageID)(ev) {
				p := ev.Payload.(presenters.MessageEndPayload)
				end = &p
			}
		}
		if end == nil || end.StopReason != presenters.StopCancelled {
			t.Fatalf("turn %s had not ended when Close returned: %v", res.MessageID, end)
		}
	}
	for _, sid := range []string{streaming.SessionID, running.SessionID, asking.SessionID} {
		msgs := h.messages(sid)
		if msgs[1].Status != presenters.MessageCancelled {
			t.Fatalf("stored reply of %s = %s", sid, msgs[1].Status)
		}
	}
	if _, err := h.p.SendMessage(context.Background(), streaming.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrAgentUnavailable) {
		t.Fatalf("SendMessage after Close: %v", err)
	}
}

// TestCloseSessionCompletesAfterItsContextEnds: CloseSession's context ends while the
// turn is still ending; the turn's end then stores the close and sends SESSION_CLOSED,
// and the session behaves as closed (not as a half-closed one that refuses messages).
func TestCloseSessionCompletesAfterItsContextEnds(t *testing.T) {
	h := newHarness(t)
	info := h.createSession("")
	sid := info.SessionID
	h.llm.script(fakeReply{events: []string{textEvent("partial")}, hold: true})
	res := h.send(sid, "question")
	h.rec.waitFor(t, "the streamed delta", isDelta("partial"))
	// Hold the turn's end at its MESSAGE_END until CloseSession has given up.
	release := make(chan struct{})
	h.rec.setHook(func(ev presenters.Event) {
		if isEnd(res.MessageID)(ev) {
			<-release
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.p.CloseSession(ctx, sid); !errors.Is(err, presenters.ErrCancelled) {
		t.Fatalf("CloseSession with an ended context: %v", err)
	}
	close(release)
	h.rec.waitFor(t, "SESSION_CLOSED", isClosed(sid))
	h.rec.setHook(nil)

	conv, err := h.store.GetConversation(context.Background(), sid)
	if err != nil || !conv.Closed {
		t.Fatalf("stored conversation: closed=%v, %v", conv.Closed, err)
	}
	if got, _ := h.p.GetSession(context.Background(), sid); got.Status != presenters.SessionClosed {
		t.Fatalf("status = %s", got.Status)
	}
	if err := h.p.CloseSession(context.Background(), sid); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if n := len(ofType[presenters.SessionClosedPayload](h.rec.all())); n != 1 {
		t.Fatalf("%d SESSION_CLOSED events", n)
	}
	if _, err := h.p.SendMessage(context.Background(), sid, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("SendMessage on the closed session: %v", err)
	}
	if _, err := h.p.LoadSession(context.Background(), sid, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	h.llm.script(textReply("back"))
	if _, end := h.turn(sid, "again"); end.StopReason != presenters.StopEndTurn {
		t.Fatalf("turn after reopening = %+v", end)
	}
}

// TestCloseSessionRacingSendMessage closes sessions while messages are sent to them,
// after a restart (so the session is loaded from SQLite on first use). Whatever the
// order, a close that returned nil leaves the session closed, in SQLite too: a turn
// started in the gap must not write the session back open.
func TestCloseSessionRacingSendMessage(t *testing.T) {
	h := newHarness(t)
	const rounds = 200
	ids := make([]string, rounds)
	for i := range ids {
		ids[i] = h.createSession("").SessionID
		h.llm.script(textReply("ok"))
	}
	h.stop()
	h.rec = newRecorder()
	h.start()
	ctx := context.Background()
	for _, sid := range ids {
		var wg sync.WaitGroup
		var sent presenters.SendResult
		var sendErr, closeErr error
		wg.Go(func() { closeErr = h.p.CloseSession(ctx, sid) })
		wg.Go(func() {
			sent, sendErr = h.p.SendMessage(ctx, sid, presenters.TextContent("hi"), presenters.SendOptions{})
		})
		wg.Wait()
		if closeErr != nil {
			t.Fatalf("CloseSession: %v", closeErr)
		}
		if sendErr == nil {
			h.rec.waitFor(t, "the racing turn's end", isEnd(sent.MessageID))
			h.rec.waitFor(t, "SESSION_CLOSED", isClosed(sid))
		} else if !errors.Is(sendErr, presenters.ErrFailedPrecondition) {
			t.Fatalf("SendMessage: %v", sendErr)
		}
		conv, err := h.store.GetConversation(ctx, sid)
		if err != nil || !conv.Closed {
			t.Fatalf("session %s after CloseSession returned: stored closed=%v (%v); the message was sent: %v", sid, conv.Closed, err, sendErr == nil)
		}
		if got, _ := h.p.GetSession(ctx, sid); got.Status != presenters.SessionClosed {
			t.Fatalf("session %s status %s", sid, got.Status)
		}
	}
}

// CreateSession works in the workspace the service opened and resolves no path itself:
// here the presenter's own roots would refuse the directory. A turn opens the stored
// directory again, so the same session is refused there, as is one whose directory has
// gone, with ErrFailedPrecondition naming the session and the directory.
func TestSessionUsesTheWorkspaceItIsGiven(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	elsewhere, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serviceRoots, err := sandbox.NewRoots([]string{elsewhere}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := serviceRoots.Open(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	outside, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: ws})
	if err != nil {
		t.Fatalf("CreateSession with a workspace the service opened: %v", err)
	}
	if outside.Workspace != elsewhere {
		t.Errorf("session workspace %q, want %q", outside.Workspace, elsewhere)
	}

	gone := filepath.Join(h.workspace, "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	vanished, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(gone)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		session presenters.SessionInfo
		reason  string
	}{{outside, "not under any workspace root"}, {vanished, "does not exist"}} {
		_, err := h.p.SendMessage(ctx, c.session.SessionID, presenters.TextContent("hi"), presenters.SendOptions{})
		if !errors.Is(err, presenters.ErrFailedPrecondition) {
			t.Errorf("a turn in %s: %v, want ErrFailedPrecondition", c.session.Workspace, err)
			continue
		}
		for _, want := range []string{c.session.SessionID, c.session.Workspace, c.reason} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("a turn in %s: %q should mention %q", c.session.Workspace, err, want)
			}
		}
	}
}

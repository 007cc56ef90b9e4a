package e2e

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// WaitMessage through a replica that does not own the session (B; A owns it): for a
// message still running on A, the call waits (its deadline passes while the turn waits
// for a cancel) and, asked again, returns the message once the turn ends; for a message
// that already ended, it returns it at once. Each answer is A's stored message, and B
// never takes the session over.
func TestReplicasWaitMessage(t *testing.T) {
	script := `{"turns": [[{"text": "working; "}, {"waitCancel": true}], [{"text": "the second reply"}]]}`
	agent := scriptedAgent(t, "acp.test.wait", script)
	g := newReplicaGroup(t, agent)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := g.start(t, "a", agent, false)
	b := g.start(t, "b", agent, false)
	created, err := a.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent.ID, Config: &agenticv1.SessionConfig{Workspace: g.ws}})
	if err != nil {
		t.Fatalf("CreateSession through A: %v", err)
	}
	id := created.GetSession().GetSessionId()
	first, err := a.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("first")})
	if err != nil {
		t.Fatalf("SendMessage through A: %v", err)
	}
	running := first.GetMessageId()

	// The turn waits for a cancel that has not been sent: the message cannot end, so a
	// wait through B ends only at its deadline, with agenticd's reason.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err = b.client.WaitMessage(short, &agenticv1.WaitMessageRequest{SessionId: id, MessageId: running})
	cancelShort()
	if status.Code(err) != codes.DeadlineExceeded || reasonOf(err) != "DEADLINE_EXCEEDED" {
		t.Fatalf("WaitMessage through B for a running message, short deadline: %v (reason %q); want DEADLINE_EXCEEDED", err, reasonOf(err))
	}

	type waited struct {
		m   *agenticv1.SessionMessage
		err error
	}
	done := make(chan waited, 1)
	go func() {
		resp, err := b.client.WaitMessage(ctx, &agenticv1.WaitMessageRequest{SessionId: id, MessageId: running})
		done <- waited{resp.GetMessage(), err}
	}()
	// The cancel may come before or after the wait takes hold: either way the wait
	// answers the ended message (the short wait above showed it does not end early).
	if _, err := a.client.CancelMessage(ctx, &agenticv1.CancelMessageRequest{SessionId: id, MessageId: running}); err != nil {
		t.Fatalf("CancelMessage through A: %v", err)
	}
	w := <-done
	if w.err != nil {
		t.Fatalf("WaitMessage through B for the running message: %v", w.err)
	}
	if w.m.GetMessageId() != running || w.m.GetStatus() != agenticv1.MessageStatus_MESSAGE_STATUS_CANCELLED || storedText(w.m) != "working; " {
		t.Fatalf("WaitMessage through B answered %s, %v, %q; want %s, cancelled, %q", w.m.GetMessageId(), w.m.GetStatus(), storedText(w.m), running, "working; ")
	}

	// A message that already ended, and the first one again: answered at once, as stored.
	second, err := a.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("second")})
	if err != nil {
		t.Fatalf("second SendMessage through A: %v", err)
	}
	waitIdle(t, a.client, id)
	for _, c := range []struct {
		id     string
		status agenticv1.MessageStatus
		text   string
	}{
		{second.GetMessageId(), agenticv1.MessageStatus_MESSAGE_STATUS_COMPLETE, "the second reply"},
		{running, agenticv1.MessageStatus_MESSAGE_STATUS_CANCELLED, "working; "},
	} {
		resp, err := b.client.WaitMessage(ctx, &agenticv1.WaitMessageRequest{SessionId: id, MessageId: c.id})
		if err != nil {
			t.Fatalf("WaitMessage through B for ended message %s: %v", c.id, err)
		}
		if m := resp.GetMessage(); m.GetMessageId() != c.id || m.GetStatus() != c.status || storedText(m) != c.text {
			t.Errorf("WaitMessage through B for ended message %s answered %s, %v, %q; want %v, %q", c.id, m.GetMessageId(), m.GetStatus(), storedText(m), c.status, c.text)
		}
	}
	if holder, _ := g.leaseHolder(t, id); holder != "a" {
		t.Errorf("after the waits through B the lease is held by %q, want a", holder)
	}
}

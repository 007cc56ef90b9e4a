package service

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

// storedTurn is a fake agent's message as its store would have it, running until end.
type storedTurn struct {
	mu      sync.Mutex
	msg     *presenters.Message // nil: not stored yet
	running bool
}

func (s *storedTurn) set(m *presenters.Message, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msg, s.running = m, running
}

// serve makes the fake agent answer GetMessages and GetSession from the turn.
func (s *storedTurn) serve(f *fakePresenter) {
	f.messagesFn = func(ctx context.Context, id string, q presenters.MessageQuery) ([]presenters.Message, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.msg == nil || q.MessageID != s.msg.ID {
			return nil, nil
		}
		return []presenters.Message{*s.msg}, nil
	}
	f.getFn = func(ctx context.Context, id string) (presenters.SessionInfo, error) {
		f.mu.Lock()
		info := *f.sessions[id]
		f.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.running && s.msg != nil {
			info.MessageInFlight = s.msg.ID
		}
		return info, nil
	}
}

func reply(sessionID string, status presenters.MessageStatus, text string) *presenters.Message {
	return &presenters.Message{ID: "m1", SessionID: sessionID, Role: presenters.RoleAssistant, Status: status,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}}
}

// A message that ended before the call is returned at once, also one a crash left
// incomplete and nothing runs any more.
func TestWaitMessageEndedBefore(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	var turn storedTurn
	turn.serve(e.fake)
	for _, status := range []presenters.MessageStatus{presenters.MessageComplete, presenters.MessageIncomplete} {
		turn.set(reply(id, status, "done"), false)
		ctx, cancel := context.WithTimeout(bg, time.Second)
		resp, err := e.client.WaitMessage(ctx, &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
		cancel()
		if err != nil || resp.GetMessage().GetMessageId() != "m1" || resp.GetMessage().GetBlocks()[0].GetText().GetText() != "done" ||
			resp.GetMessage().GetStatus() != wire.MessageToPB(presenters.Message{Status: status}).GetStatus() {
			t.Fatalf("%s: %v, %v", status, resp, err)
		}
	}
}

// A running message, and one not stored yet, are waited for until their MESSAGE_END;
// the stored message then comes back.
func TestWaitMessageWaitsForTheEnd(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	var turn storedTurn
	turn.serve(e.fake)
	for _, stored := range []bool{true, false} {
		if stored {
			turn.set(reply(id, presenters.MessageIncomplete, "par"), true)
		} else {
			turn.set(nil, false)
		}
		done := make(chan *pb.WaitMessageResponse, 1)
		go func() {
			resp, err := e.client.WaitMessage(bg, &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		select {
		case resp := <-done:
			t.Fatalf("stored %v: returned %v while the message runs", stored, resp)
		case <-time.After(300 * time.Millisecond):
		}
		turn.set(reply(id, presenters.MessageComplete, "partial and whole"), false)
		presenters.NewEmitter(e.hub, fakeID, id).MessageEnd(presenters.MessageEndPayload{MessageID: "m1", StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant})
		select {
		case resp := <-done:
			if resp.GetMessage().GetStatus() != pb.MessageStatus_MESSAGE_STATUS_COMPLETE || resp.GetMessage().GetBlocks()[0].GetText().GetText() != "partial and whole" {
				t.Fatalf("stored %v: %v", stored, resp)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("stored %v: no answer 30s after MESSAGE_END", stored)
		}
	}
}

// The caller's deadline bounds the wait: DEADLINE_EXCEEDED, with its reason, once it
// passes.
func TestWaitMessageDeadline(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	var turn storedTurn
	turn.serve(e.fake)
	turn.set(reply(id, presenters.MessageIncomplete, "par"), true)
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.client.WaitMessage(ctx, &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
	st := wantCode(t, err, codes.DeadlineExceeded)
	// Not before the deadline, less the margin the server keeps for its answer (a tenth).
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("answered after %v for a deadline of 300ms", took)
	}
	if info := errorInfo(st); info.GetReason() != "DEADLINE_EXCEEDED" {
		t.Errorf("reason %q", info.GetReason())
	}
	_, err = e.client.WaitMessage(bg, &pb.WaitMessageRequest{SessionId: id})
	wantCode(t, err, codes.InvalidArgument)
}

// A message taken out of its session's queue without running never ends: a wait for it
// ends with MESSAGE_NOT_FOUND saying so, whether it began before the message left the
// queue or after.
func TestWaitMessageForAMessageTakenOutOfTheQueue(t *testing.T) {
	e := newEnv(t, envOptions{queue: true})
	id := e.createSession(t, fakeID).GetSessionId()
	var turn storedTurn
	turn.serve(e.fake)
	turn.set(nil, false)
	wantGone := func(err error) {
		t.Helper()
		st := wantCode(t, err, codes.NotFound)
		if info := errorInfo(st); info.GetReason() != "MESSAGE_NOT_FOUND" || info.GetMetadata()["message_id"] != "m1" ||
			!strings.Contains(st.Message(), "taken out of the queue without running (cancelled)") {
			t.Fatalf("%v, %v", st.Message(), info)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.client.WaitMessage(bg, &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("returned %v while the message waits in the queue", err)
	case <-time.After(300 * time.Millisecond):
	}
	e.hub.Publish(presenters.Event{SessionID: id, AgentID: fakeID,
		Payload: presenters.MessageDequeuedPayload{MessageID: "m1", UserMessageID: "u1", Reason: presenters.DequeuedCancelled}})
	select {
	case err := <-done:
		wantGone(err)
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30s after MESSAGE_DEQUEUED")
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	_, err := e.client.WaitMessage(ctx, &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
	wantGone(err)
}

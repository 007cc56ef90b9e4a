package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// Queue, steer, interrupt with DeepChat: messages sent during a turn wait in a durable
// queue, go into the running turn, or replace it.

func dcDeliver(t *testing.T, s *testServer, sessionID, text string, mode agenticv1.DeliveryMode) *agenticv1.SendMessageResponse {
	t.Helper()
	resp, err := s.Client.SendMessage(context.Background(), &agenticv1.SendMessageRequest{
		SessionId: sessionID, Content: textContent(text), RequestId: uuid.NewString(), Delivery: mode})
	if err != nil {
		t.Fatalf("SendMessage(%s, %v): %v", text, mode, err)
	}
	return resp
}

func dcQueued(t *testing.T, s *testServer, sessionID string) []*agenticv1.QueuedMessage {
	t.Helper()
	info, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	return info.GetSession().GetQueuedMessages()
}

func isDequeued(messageID string, reason agenticv1.DequeueReason) func(*agenticv1.AgenticEvent) bool {
	return func(ev *agenticv1.AgenticEvent) bool {
		d := ev.GetMessageDequeued()
		return d != nil && d.GetMessageId() == messageID && d.GetReason() == reason
	}
}

// lastUserText is the text of the last user message of the provider request i.
func (l *dcLLM) lastUserText(t *testing.T, i int) string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	raw, _ := json.Marshal(l.requests[i]["messages"])
	var msgs []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	for j := len(msgs) - 1; j >= 0; j-- {
		if msgs[j].Role == "user" {
			b, _ := json.Marshal(msgs[j].Content)
			return string(b)
		}
	}
	return ""
}

func TestDeepChatQueueSteerAndCancelQueued(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "balanced")
	events := dcSubscribe(t, s, sid)
	llm.script(dcTools(dcCall{"call_w", "write_file", `{"path":"a.txt","content":"x\n"}`}), dcText("Wrote it."), dcText("Second done."))
	first := dcSend(t, s, sid, "write a.txt")
	got := events.Until(t, dcPermissionOrEnd(first.GetMessageId()))
	req := got[len(got)-1].GetToolPermissionRequired().GetRequest()
	if req == nil {
		t.Fatal("no permission request")
	}

	// Two messages queue behind the running turn, in order, each under its own ids.
	second := dcDeliver(t, s, sid, "second", agenticv1.DeliveryMode_DELIVERY_MODE_UNSPECIFIED)
	third := dcDeliver(t, s, sid, "third", agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE)
	for _, r := range []*agenticv1.SendMessageResponse{second, third} {
		if r.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED || r.GetMessageId() == "" || r.GetMessageId() == first.GetMessageId() {
			t.Fatalf("queued answer = %v", r)
		}
	}
	events.Until(t, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetMessageQueued().GetMessage().GetMessageId() == third.GetMessageId()
	})
	q := dcQueued(t, s, sid)
	if len(q) != 2 || q[0].GetMessageId() != second.GetMessageId() || q[1].GetUserMessageId() != third.GetUserMessageId() ||
		q[0].GetContent().GetParts()[0].GetText() != "second" {
		t.Fatalf("queue = %v", q)
	}

	// CancelMessage naming a queued message takes it out.
	if resp, err := s.Client.CancelMessage(context.Background(), &agenticv1.CancelMessageRequest{SessionId: sid, MessageId: third.GetUserMessageId()}); err != nil || resp.GetMessageId() != third.GetMessageId() {
		t.Fatalf("CancelMessage(queued) = %v, %v", resp, err)
	}
	events.Until(t, isDequeued(third.GetMessageId(), agenticv1.DequeueReason_DEQUEUE_REASON_CANCELLED))
	if q := dcQueued(t, s, sid); len(q) != 1 || q[0].GetMessageId() != second.GetMessageId() {
		t.Fatalf("queue after cancel = %v", q)
	}

	// A steered message goes into the running turn, and the model reads it before its
	// next call.
	steered := dcDeliver(t, s, sid, "use tabs", agenticv1.DeliveryMode_DELIVERY_MODE_STEER)
	if steered.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_STEERED || steered.GetMessageId() != first.GetMessageId() {
		t.Fatalf("steer answer = %v", steered)
	}
	events.Until(t, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetMessageSteered().GetUserMessageId() == steered.GetUserMessageId()
	})
	dcRespond(t, s, sid, req.GetPermissionId(), agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE)
	events.Until(t, dcIsEnd(first.GetMessageId()))
	if text := llm.lastUserText(t, 1); !strings.Contains(text, "use tabs") {
		t.Fatalf("the model's second call ends with user message %s; want the steered one", text)
	}

	// The queued message starts by itself once the turn has ended.
	events.Until(t, isDequeued(second.GetMessageId(), agenticv1.DequeueReason_DEQUEUE_REASON_STARTED))
	end := events.Until(t, dcIsEnd(second.GetMessageId()))
	if end[len(end)-1].GetMessageEnd().GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN {
		t.Fatalf("queued turn's end = %v", end[len(end)-1])
	}
	if text := llm.lastUserText(t, 2); !strings.Contains(text, "second") {
		t.Fatalf("the queued turn sent %s", text)
	}
	if q := dcQueued(t, s, sid); len(q) != 0 {
		t.Fatalf("queue at the end = %v", q)
	}
	if n := llm.requestCount(); n != 3 {
		t.Fatalf("%d provider calls, want 3 (the cancelled message never ran)", n)
	}
}

func TestDeepChatInterruptCancelsThenSends(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "")
	events := dcSubscribe(t, s, sid)
	llm.script(dcReply{events: []string{dcDelta(map[string]any{"content": "Long story"}, nil)}, hold: true}, dcText("Short."))
	first := dcSend(t, s, sid, "tell a long story")
	events.Until(t, func(ev *agenticv1.AgenticEvent) bool { return ev.GetMessageDelta().GetText() == "Long story" })
	next := dcDeliver(t, s, sid, "no, a short one", agenticv1.DeliveryMode_DELIVERY_MODE_INTERRUPT)
	if next.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_STARTED || next.GetMessageId() == first.GetMessageId() {
		t.Fatalf("interrupt answer = %v", next)
	}
	got := events.Until(t, dcIsEnd(next.GetMessageId()))
	var stops []string
	for _, ev := range got {
		if e := ev.GetMessageEnd(); e != nil && e.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			stops = append(stops, e.GetStopReason().String())
		}
	}
	if strings.Join(stops, ",") != "STOP_REASON_CANCELLED,STOP_REASON_END_TURN" {
		t.Fatalf("turn ends = %v", stops)
	}
}

func TestDeepChatQueuedMessageSurvivesRestart(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "")
	events := dcSubscribe(t, s, sid)
	llm.script(dcReply{events: []string{dcDelta(map[string]any{"content": "Thinking"}, nil)}, hold: true})
	dcSend(t, s, sid, "first")
	events.Until(t, func(ev *agenticv1.AgenticEvent) bool { return ev.GetMessageDelta().GetText() == "Thinking" })
	later := dcDeliver(t, s, sid, "later", agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE)
	if later.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED {
		t.Fatalf("answer = %v", later)
	}
	events.Close()

	// Shutting down cancels the running turn; the queued message stays stored and runs
	// after the restart.
	llm.script(dcText("Later done."))
	s.Restart(t)
	events = s.Subscribe(t, subscribeAfter(0, sid))
	events.Until(t, dcIsEnd(later.GetMessageId()))
	if q := dcQueued(t, s, sid); len(q) != 0 {
		t.Fatalf("queue after the restart = %v", q)
	}
	msgs := dcMessages(t, s, sid)
	if last := msgs[len(msgs)-1]; last.GetMessageId() != later.GetMessageId() || last.GetStatus() != agenticv1.MessageStatus_MESSAGE_STATUS_COMPLETE {
		t.Fatalf("last message = %v", last)
	}
}

// A queued message that cannot start at all (its workspace is gone) leaves the queue as
// failed, saying why, and an ERROR names it.
func TestDeepChatQueuedMessageThatCannotStartLeavesTheQueue(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "")
	events := dcSubscribe(t, s, sid)
	llm.script(dcReply{events: []string{dcDelta(map[string]any{"content": "Thinking"}, nil)}, hold: true})
	first := dcSend(t, s, sid, "first")
	events.Until(t, func(ev *agenticv1.AgenticEvent) bool { return ev.GetMessageDelta().GetText() == "Thinking" })
	later := dcDeliver(t, s, sid, "later", agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE)
	if err := os.Rename(ws, ws+".moved"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CancelMessage(context.Background(), &agenticv1.CancelMessageRequest{SessionId: sid, MessageId: first.GetMessageId()}); err != nil {
		t.Fatal(err)
	}
	got := events.Until(t, isDequeued(later.GetMessageId(), agenticv1.DequeueReason_DEQUEUE_REASON_FAILED))
	if d := got[len(got)-1].GetMessageDequeued(); !strings.Contains(d.GetDetail(), "workspace") {
		t.Errorf("MESSAGE_DEQUEUED detail %q does not say the workspace is gone", d.GetDetail())
	}
	got = events.Until(t, func(ev *agenticv1.AgenticEvent) bool { return ev.GetError() != nil })
	if e := got[len(got)-1].GetError(); e.GetMessageId() != later.GetMessageId() || e.GetReason() != agenticv1.ErrorReason_ERROR_REASON_WORKSPACE_GONE ||
		!strings.Contains(e.GetMessage(), later.GetMessageId()) {
		t.Errorf("ERROR = %v; want WORKSPACE_GONE naming %s", e, later.GetMessageId())
	}
	if q := dcQueued(t, s, sid); len(q) != 0 {
		t.Errorf("queue = %v", q)
	}
}

// Closing a session takes its queued messages out of the queue, cancelled: they do not
// run, nor open the session again.
func TestDeepChatCloseCancelsTheQueue(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "")
	events := dcSubscribe(t, s, sid)
	llm.script(dcReply{events: []string{dcDelta(map[string]any{"content": "Thinking"}, nil)}, hold: true}, dcText("Never."))
	dcSend(t, s, sid, "first")
	events.Until(t, func(ev *agenticv1.AgenticEvent) bool { return ev.GetMessageDelta().GetText() == "Thinking" })
	later := dcDeliver(t, s, sid, "later", agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE)
	if _, err := s.Client.CloseSession(context.Background(), &agenticv1.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	got := events.Until(t, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetMessageDequeued().GetMessageId() == later.GetMessageId()
	})
	if d := got[len(got)-1].GetMessageDequeued(); d.GetReason() != agenticv1.DequeueReason_DEQUEUE_REASON_CANCELLED || d.GetDetail() != "the session was closed" {
		t.Errorf("MESSAGE_DEQUEUED = %v; want cancelled because the session was closed", d)
	}
	if q := dcQueued(t, s, sid); len(q) != 0 {
		t.Errorf("queue = %v", q)
	}
	info, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sid})
	if err != nil || info.GetSession().GetStatus() != agenticv1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("GetSession = %v, %v; want the session closed", info, err)
	}
	if n := llm.requestCount(); n != 1 {
		t.Errorf("%d provider calls, want 1 (the queued message never ran)", n)
	}
}

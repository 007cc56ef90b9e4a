package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// steerScript's first turn waits for a steering message (or a cancel); later turns
// answer at once.
const steerScript = `{"agent": {"steering": %s}, "turns": [
 [{"text": "Working."}, {"waitSteer": true}, {"text": " Done."}],
 [{"text": "Next turn."}]]}`

func startSteerAgent(t *testing.T, steering bool) (*testServer, string) {
	t.Helper()
	root, ws := workspaceUnder(t)
	const id = "acp.test.steer"
	script := strings.Replace(steerScript, "%s", map[bool]string{true: "true", false: "false"}[steering], 1)
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, id, script)}})
	created, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return s, created.GetSession().GetSessionId()
}

func isAssistantText(text string) func(*agenticv1.AgenticEvent) bool {
	return func(ev *agenticv1.AgenticEvent) bool {
		d := ev.GetMessageDelta()
		return d != nil && d.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_ASSISTANT && strings.Contains(d.GetText(), text)
	}
}

// An ACP agent that advertises _session/steering takes a STEER into its running turn.
func TestACPSteerIsInjectedIntoTheRunningTurn(t *testing.T) {
	s, sid := startSteerAgent(t, true)
	events := dcSubscribe(t, s, sid)
	first := dcSend(t, s, sid, "start")
	events.Until(t, isAssistantText("Working."))

	steered := dcDeliver(t, s, sid, "use tabs", agenticv1.DeliveryMode_DELIVERY_MODE_STEER)
	if steered.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_STEERED || steered.GetMessageId() != first.GetMessageId() ||
		steered.GetOutcomeReason() != "" {
		t.Fatalf("steer answer = %v", steered)
	}
	// agenticd echoes it once the agent took it (which may be after the agent's first
	// words on it), then MESSAGE_STEERED; the agent reads it in its turn.
	got := events.Until(t, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetMessageSteered().GetUserMessageId() == steered.GetUserMessageId()
	})
	steeredAt := len(got) - 1
	if !slices.ContainsFunc(got, dcIsEnd(first.GetMessageId())) {
		got = append(got, events.Until(t, dcIsEnd(first.GetMessageId()))...)
	}
	var echoed, answered bool
	for i, ev := range got {
		switch {
		case ev.GetMessageDelta().GetMessageId() == steered.GetUserMessageId() && ev.GetMessageDelta().GetText() == "use tabs":
			echoed = i < steeredAt
		case isAssistantText("steered: use tabs")(ev):
			answered = true
		}
	}
	if !echoed || !answered || got[steeredAt].GetMessageSteered().GetMessageId() != first.GetMessageId() {
		t.Fatalf("user message echoed before MESSAGE_STEERED of the turn %v, the agent read it %v; events %v", echoed, answered, got)
	}
	if q := dcQueued(t, s, sid); len(q) != 0 {
		t.Fatalf("queue = %v; the steered message must not wait there", q)
	}
}

// An ACP agent that advertises no steering gets a STEER after its turn, and the answer
// says so.
func TestACPSteerIsQueuedWithoutTheExtension(t *testing.T) {
	s, sid := startSteerAgent(t, false)
	events := dcSubscribe(t, s, sid)
	first := dcSend(t, s, sid, "start")
	events.Until(t, isAssistantText("Working."))

	queued := dcDeliver(t, s, sid, "use tabs", agenticv1.DeliveryMode_DELIVERY_MODE_STEER)
	if queued.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED || queued.GetMessageId() == first.GetMessageId() ||
		!strings.Contains(queued.GetOutcomeReason(), "takes no steering") {
		t.Fatalf("steer answer = %v", queued)
	}
	if q := dcQueued(t, s, sid); len(q) != 1 || q[0].GetMessageId() != queued.GetMessageId() {
		t.Fatalf("queue = %v", q)
	}
	if _, err := s.Client.CancelMessage(context.Background(), &agenticv1.CancelMessageRequest{SessionId: sid, MessageId: first.GetMessageId()}); err != nil {
		t.Fatalf("CancelMessage: %v", err)
	}
	events.Until(t, isDequeued(queued.GetMessageId(), agenticv1.DequeueReason_DEQUEUE_REASON_STARTED))
	events.Until(t, dcIsEnd(queued.GetMessageId()))
}

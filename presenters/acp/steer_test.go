package acp

import (
	"errors"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// A steering message goes to the agent only into a running turn of an agent that
// advertises steering; otherwise the error tells the service to queue it.
func TestSteerNeedsTheExtensionAndARunningTurn(t *testing.T) {
	h := newHarness(t)
	const turns = `"turns": [[{"text": "Working."}, {"waitSteer": true}]]}`
	plain := h.presenter(h.config(`{` + turns))
	s := h.create(plain)
	if _, err := plain.Steer(testContext(t), s.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrUnsupported) {
		t.Fatalf("Steer to an agent without steering: %v, want ErrUnsupported", err)
	}

	steering := h.presenter(h.config(`{"agent": {"steering": true}, ` + turns))
	s = h.create(steering)
	if _, err := steering.Steer(testContext(t), s.SessionID, presenters.TextContent("x"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrMessageNotRunning) {
		t.Fatalf("Steer without a turn: %v, want ErrMessageNotRunning", err)
	}
	res, from := h.send(steering, s.SessionID, "start")
	h.rec.waitFrom(t, from, "the agent's first words", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Role == presenters.RoleAssistant
	})
	got, err := steering.Steer(testContext(t), s.SessionID, presenters.TextContent("go on"), presenters.SendOptions{UserMessageID: "steered-1"})
	if err != nil || got.MessageID != res.MessageID || got.UserMessageID != "steered-1" {
		t.Fatalf("Steer into the turn = %+v, %v", got, err)
	}
	h.finish(s.SessionID, res, from)
}

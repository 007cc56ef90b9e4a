package acp

import (
	"errors"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// kept is the session the presenter keeps in memory under id.
func kept(t *testing.T, p *Presenter, id string) *session {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sessions[id]
	if s == nil {
		t.Fatalf("session %s is not kept in memory", id)
	}
	return s
}

func wantPhase(t *testing.T, s *session, want phase, when string) {
	t.Helper()
	s.mu.Lock()
	got := s.phase
	s.mu.Unlock()
	if got != want {
		t.Fatalf("%s: phase %d, want %d", when, got, want)
	}
}

// A session on a real agent walks the phases phase.go names: idle, prompting, draining
// once a cancelled turn ended without the agent's answer (this agent ignores the
// cancel), closed by CloseSession, idle again after LoadSession, cancelling while a
// cancelled turn has its grace, and closed when the presenter shuts down under it.
func TestSessionPhases(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"text": "stuck"}, {"hang": true}]]}`))
	info := h.create(p)
	s := kept(t, p, info.SessionID)
	wantPhase(t, s, phaseIdle, "created")

	stuck := func(from int) {
		h.rec.waitFrom(t, from, "the agent's text", func(ev presenters.Event) bool {
			d, ok := ev.Payload.(presenters.MessageDeltaPayload)
			return ok && ev.SessionID == info.SessionID && d.Text == "stuck"
		})
	}
	res, from := h.send(p, info.SessionID, "go")
	stuck(from)
	wantPhase(t, s, phasePrompting, "while the agent answers")
	p.cancelGrace = 0
	if _, err := p.CancelMessage(testContext(t), info.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	h.rec.waitFrom(t, from, "the cancelled turn's end", isEnd(res.MessageID))
	wantPhase(t, s, phaseDraining, "after the cancel grace, the agent silent")
	if _, err := p.SendMessage(testContext(t), info.SessionID, presenters.TextContent("next"), presenters.SendOptions{}); !errors.Is(err, presenters.ErrSessionBusy) {
		t.Fatalf("SendMessage while draining: %v, want ErrSessionBusy", err)
	}
	if err := p.CloseSession(testContext(t), info.SessionID); err != nil {
		t.Fatal(err)
	}
	wantPhase(t, s, phaseClosed, "closed")

	if _, err := p.LoadSession(testContext(t), info.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	s = kept(t, p, info.SessionID)
	wantPhase(t, s, phaseIdle, "reopened")
	p.cancelGrace = time.Hour
	res, from = h.send(p, info.SessionID, "again")
	stuck(from)
	if _, err := p.CancelMessage(testContext(t), info.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	wantPhase(t, s, phaseCancelling, "cancelled, within the grace")
	closePresenter(t, p)
	wantPhase(t, s, phaseClosed, "after the presenter closed")
	end, _ := h.rec.waitFrom(t, from, "the turn's end at shutdown", isEnd(res.MessageID))
	if stop := end.Payload.(presenters.MessageEndPayload).StopReason; stop != presenters.StopCancelled {
		t.Fatalf("stop reason at shutdown %s, want cancelled", stop)
	}
}

package acp

import (
	"errors"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// A live session of an agent that offers session/fork forks into a new session of
// agenticd's, announced, stored and usable, in the source's mode; an agent without it
// cannot fork.
func TestForkSession(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"agent": {"fork": true}, "session": {
  "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}},
  "turns": [[{"text": "hi"}, {"stop": "end_turn"}]]}`))
	ctx := testContext(t)
	src := h.create(p)
	if _, err := p.SetMode(ctx, src.SessionID, "code"); err != nil {
		t.Fatal(err)
	}
	from := h.rec.len()
	fork, err := p.ForkSession(ctx, src.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if fork.SessionID == src.SessionID || !strings.HasPrefix(fork.AgentSessionID, "fork-") || fork.Workspace != src.Workspace ||
		fork.CurrentModeID != "code" {
		t.Fatalf("fork %+v of %+v", fork, src)
	}
	h.rec.waitFrom(t, from, "SESSION_CREATED of the fork", func(ev presenters.Event) bool {
		_, ok := ev.Payload.(presenters.SessionCreatedPayload)
		return ok && ev.SessionID == fork.SessionID
	})
	if got, err := p.GetSession(ctx, fork.SessionID); err != nil || got.AgentSessionID != fork.AgentSessionID {
		t.Fatalf("the fork as stored: %+v, %v", got, err)
	}
	res, at := h.send(p, fork.SessionID, "go on")
	if tl := h.finish(fork.SessionID, res, at); !strings.Contains(strings.Join(tl, "\n"), `"hi"`) {
		t.Errorf("a turn in the fork: %q", tl)
	}

	plain := h.presenter(h.config(`{}`))
	other := h.create(plain)
	if _, err := plain.ForkSession(ctx, other.SessionID); !errors.Is(err, presenters.ErrUnsupported) {
		t.Errorf("fork of an agent without session/fork: %v, want ErrUnsupported", err)
	}
}

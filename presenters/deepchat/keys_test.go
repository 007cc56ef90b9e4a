package deepchat

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// A provider's name asks for a key only at its own address: provider openai with a
// local base_url and no api_key_env is ready, and its requests carry no Authorization.
func TestExplicitBaseURLNeedsNoKey(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.cfg.Provider, h.cfg.APIKeyEnv, h.cfg.Source = "openai", "", "config file /etc/agenticd.yaml"
	})
	d := h.p.Describe(context.Background())
	if d.Status != presenters.AgentReady || d.ConfigSource != "config file /etc/agenticd.yaml" {
		t.Fatalf("Describe = %+v", d)
	}
	info := h.createSession("")
	h.llm.script(textReply("local answer"))
	if _, end := h.turn(info.SessionID, "hi"); end.StopReason != presenters.StopEndTurn {
		t.Fatalf("end = %+v", end)
	}
	if reqs := h.llm.requestsSoFar(); len(reqs) != 1 || reqs[0].auth != "" {
		t.Fatalf("requests %+v; want one, without an Authorization header", reqs)
	}
}

// A server that wants a key when none was sent gets an error saying how to give one.
func TestUnauthorizedWithoutKeySaysHowToGiveOne(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.APIKeyEnv = "" })
	info := h.createSession("")
	h.llm.script(fakeReply{status: 401, body: `{"error":{"message":"missing bearer token"}}`})
	h.turn(info.SessionID, "hi")
	errs := ofType[presenters.ErrorPayload](h.rec.all())
	if len(errs) != 1 || errs[0].Code != "provider_unauthorized" || !strings.Contains(errs[0].Message, "agenticd sent none") ||
		!strings.Contains(errs[0].Message, "api_key_env") || !strings.Contains(errs[0].Message, "missing bearer token") {
		t.Fatalf("errors %+v", errs)
	}
}

// NeedsConfiguration is the reason the agent gives, whatever else is set, and turns are
// refused with it.
func TestNeedsConfigurationReason(t *testing.T) {
	const reason = "deepchat.default was set up from OPENAI_BASE_URL, but its server listed no models: set OPENAI_MODEL"
	h := newHarness(t, func(h *harness) { h.cfg.NeedsConfiguration = reason })
	ctx := context.Background()
	if d := h.p.Describe(ctx); d.Status != presenters.AgentNeedsConfiguration || d.StatusReason != reason {
		t.Fatalf("Describe = %+v", d)
	}
	info := h.createSession("")
	_, err := h.p.SendMessage(ctx, info.SessionID, presenters.TextContent("hi"), presenters.SendOptions{})
	if !errors.Is(err, presenters.ErrFailedPrecondition) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("SendMessage: %v", err)
	}
	if n := len(h.llm.requestsSoFar()); n != 0 {
		t.Fatalf("%d provider requests", n)
	}
}

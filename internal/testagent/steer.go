package main

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"
)

// Steering as claude-agent-acp 0.101.0 and codex-acp 2.6.0 ship it: advertised in
// initialize's _meta.steering.supported, requested with _session/steering. A message
// for a running turn goes to it (a waitSteer step takes it) and is "injected"; without
// a running turn the answer is "promptRequired", the behaviour the client asks for with
// _meta.steering.idleBehavior (the only one this agent knows).

const methodSteering = "_session/steering"

var _ sdk.ExtensionMethodHandler = (*agent)(nil)

func (a *agent) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method != methodSteering || !a.script.Agent.Steering {
		return nil, sdk.NewMethodNotFound(method)
	}
	var req struct {
		SessionID sdk.SessionId      `json:"sessionId"`
		Prompt    []sdk.ContentBlock `json:"prompt"`
		Meta      struct {
			Steering struct {
				IdleBehavior string `json:"idleBehavior"`
			} `json:"steering"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, sdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	if b := req.Meta.Steering.IdleBehavior; b != "promptRequired" {
		return nil, sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("_meta.steering.idleBehavior %q: this agent knows promptRequired only", b)})
	}
	s, err := a.session(req.SessionID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return map[string]string{"outcome": "promptRequired", "reason": "noRunningTurn"}, nil
	}
	select {
	case s.steered <- req.Prompt:
		return map[string]string{"outcome": "injected"}, nil
	default:
		return map[string]string{"outcome": "failed", "reason": "too many steering messages wait"}, nil
	}
}

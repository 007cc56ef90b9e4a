package acp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// Steering. claude-agent-acp (0.101.0) and codex-acp (2.6.0) take a message into a
// running turn with the _session/steering extension, which they advertise in the
// initialize answer as _meta.steering.supported. The SDK knows neither, so the
// capability is read from the answer's _meta as raw JSON and the request goes out as
// one of agenticd's own (legacyCalls.call). It asks for idleBehavior promptRequired:
// when no turn runs, the agent must not start one of its own, which this server would
// not follow; the service queues the message instead.

const methodSteering = "_session/steering"

// Outcomes of _session/steering.
const (
	steeringInjected       = "injected"
	steeringPromptRequired = "promptRequired"
)

var _ presenters.Steerer = (*Presenter)(nil)

// steeringSupported reports whether an agent's initialize answer advertises steering.
func steeringSupported(init sdk.InitializeResponse) bool {
	raw, err := json.Marshal(init.Meta["steering"])
	if err != nil {
		return false
	}
	var c struct {
		Supported bool `json:"supported"`
	}
	return json.Unmarshal(raw, &c) == nil && c.Supported
}

type steeringIdle struct {
	IdleBehavior string `json:"idleBehavior"`
}

type steeringMeta struct {
	Steering steeringIdle `json:"steering"`
}

type steeringRequest struct {
	SessionID sdk.SessionId      `json:"sessionId"`
	Prompt    []sdk.ContentBlock `json:"prompt"`
	Meta      steeringMeta       `json:"_meta"`
}

type steeringResponse struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
}

// Steer delivers a message into the session's running turn through the agent's
// steering extension. It is ErrUnsupported when the agent advertises none, or did not
// take the message (an error, or an outcome other than injected and promptRequired),
// and ErrMessageNotRunning when no turn runs: the service then queues the message.
func (p *Presenter) Steer(ctx context.Context, sessionID string, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	s, err := p.liveSession(ctx, sessionID)
	if err != nil {
		return presenters.SendResult{}, err
	}
	return s.steer(ctx, content, opts)
}

func (s *session) steer(ctx context.Context, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	if err := presenters.CheckSend(content, opts); err != nil {
		return presenters.SendResult{}, err
	}
	s.mu.Lock()
	if err := s.checkLiveLocked(); err != nil {
		s.mu.Unlock()
		return presenters.SendResult{}, err
	}
	if !steeringSupported(s.conn.init) {
		s.mu.Unlock()
		return presenters.SendResult{}, fmt.Errorf("agent %s does not advertise %s: %w", s.p.cfg.ID, methodSteering, presenters.ErrUnsupported)
	}
	if !s.turnRunningLocked() {
		s.mu.Unlock()
		return presenters.SendResult{}, fmt.Errorf("no turn runs in session %s that could take the message: %w", s.id, presenters.ErrMessageNotRunning)
	}
	conn, acpID, ws, caps, t := s.conn, s.acpID, s.ws, s.conn.init.AgentCapabilities.PromptCapabilities, s.turn
	s.mu.Unlock()

	if err := s.p.deps.Store.CheckMessageIDsFree(ctx, s.id, opts.UserMessageID); err != nil {
		return presenters.SendResult{}, err
	}
	// Reading attached files is I/O: not under s.mu.
	prompt, userBlocks, err := promptContent(content, ws, caps, s.p.cfg.ID)
	if err != nil {
		return presenters.SendResult{}, err
	}
	raw, err := conn.legacy.call(ctx, conn.stdin, conn.rpc.Done(), methodSteering,
		steeringRequest{SessionID: acpID, Prompt: prompt, Meta: steeringMeta{Steering: steeringIdle{IdleBehavior: steeringPromptRequired}}})
	if err != nil {
		s.log.Warn("the agent did not take a steering message", "err", err)
		return presenters.SendResult{}, fmt.Errorf("agent %s did not take the message into its turn (%s): %w", s.p.cfg.ID, agentErrorText(s.log, err), presenters.ErrUnsupported)
	}
	var resp steeringResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return presenters.SendResult{}, fmt.Errorf("agent %s answered %s with %s: %w", s.p.cfg.ID, methodSteering, raw, presenters.ErrUnsupported)
	}
	switch resp.Outcome {
	case steeringInjected:
	case steeringPromptRequired:
		return presenters.SendResult{}, fmt.Errorf("the turn in session %s ended before the agent took the message (%s): %w", s.id, resp.Reason, presenters.ErrMessageNotRunning)
	default:
		// failed, or startedNewTurn, which promptRequired rules out.
		s.log.Warn("the agent did not take a steering message", "outcome", resp.Outcome, "reason", resp.Reason)
		return presenters.SendResult{}, fmt.Errorf("agent %s did not take the message into its turn (%s %s): %w", s.p.cfg.ID, resp.Outcome, resp.Reason, presenters.ErrUnsupported)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	user := presenters.Message{ID: cmp.Or(opts.UserMessageID, s.p.newID()), SessionID: s.id, Role: presenters.RoleUser,
		Status: presenters.MessageComplete, Blocks: userBlocks, CreatedAt: time.Now()}
	s.echoUserLocked(user)
	s.emit.MessageSteered(t.assistantID, user.ID)
	return presenters.SendResult{MessageID: t.assistantID, UserMessageID: user.ID}, nil
}

// echoUserLocked sends a user message to subscribers as it is stored, and stores it
// (s.mu held).
func (s *session) echoUserLocked(user presenters.Message) {
	for _, b := range user.Blocks {
		if b.Type == presenters.BlockText {
			s.emit.MessageDelta(user.ID, presenters.RoleUser, b.Text)
		} else {
			s.emit.MessageBlock(user.ID, presenters.RoleUser, b)
		}
	}
	s.emit.MessageEnd(presenters.MessageEndPayload{MessageID: user.ID, Role: presenters.RoleUser})
	s.p.persist.SaveMessages(user)
}

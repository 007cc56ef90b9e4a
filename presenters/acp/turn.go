package acp

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/tracing/tracecontext"
)

// A turn: one session/prompt, from SendMessage to MESSAGE_END, and its cancel.

// turn is one prompt; the session's phase says how far it got.
type turn struct {
	userMsgID   string
	assistantID string
	stopPrompt  context.CancelFunc // gives up waiting for the agent's answer
	grace       *time.Timer        // after a cancel: when to give up
	answered    bool               // the agent's answer to its Prompt came (s.mu)
	done        chan struct{}      // closed after MESSAGE_END
}

// send starts a turn, its messages under the ids opts chose (minted where empty).
func (s *session) send(ctx context.Context, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	if err := presenters.CheckSend(content, opts); err != nil {
		return presenters.SendResult{}, err
	}
	// Only this session's turns write its messages and one runs at a time, so an id
	// free now is still free when the turn below stores it (a send racing this one finds
	// the session busy).
	if err := s.p.deps.Store.CheckMessageIDsFree(ctx, s.id, opts.UserMessageID, opts.MessageID); err != nil {
		return presenters.SendResult{}, err
	}
	s.mu.Lock()
	if err := s.sendableLocked(); err != nil {
		s.mu.Unlock()
		return presenters.SendResult{}, err
	}
	ws, caps := s.ws, s.conn.init.AgentCapabilities.PromptCapabilities
	s.mu.Unlock()
	// Reading attached files is I/O: not under s.mu, which SessionUpdate needs.
	prompt, userBlocks, err := promptContent(content, ws, caps, s.p.cfg.ID)
	if err != nil {
		return presenters.SendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sendableLocked(); err != nil {
		return presenters.SendResult{}, err
	}
	// The turn outlives the call, but keeps its values: the turn's trace span.
	turnCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	t := &turn{userMsgID: cmp.Or(opts.UserMessageID, s.p.newID()), assistantID: cmp.Or(opts.MessageID, s.p.newID()),
		stopPrompt: stop, done: make(chan struct{})}
	s.turn = t
	s.setPhase(phasePrompting)
	s.norm.startTurn(t.userMsgID, t.assistantID)

	now := time.Now()
	user := presenters.Message{ID: t.userMsgID, SessionID: s.id, Role: presenters.RoleUser,
		Status: presenters.MessageComplete, Blocks: userBlocks, CreatedAt: now}
	s.echoUserLocked(user)
	s.p.persist.SaveUpdate(s.norm.msg.update(store.StatusInProgress))

	old := s.info
	if s.info.Title == "" {
		s.info.Title = presenters.TitleFrom(content)
	}
	s.info.UpdatedAt = now
	s.publishPatch(old)
	s.info.MessageInFlight = t.assistantID
	s.setStatus(presenters.SessionGenerating, "")

	s.p.wg.Add(1)
	go s.runTurn(turnCtx, s.conn, s.acpID, t, prompt)
	return presenters.SendResult{MessageID: t.assistantID, UserMessageID: t.userMsgID}, nil
}

// sendableLocked says why a turn cannot start now, if it cannot (s.mu held).
func (s *session) sendableLocked() error {
	if err := s.checkLiveLocked(); err != nil {
		return err
	}
	if s.phase.turnInFlight() {
		return fmt.Errorf("session %s is still answering message %s; wait for its MESSAGE_END or cancel it: %w",
			s.id, s.turn.assistantID, presenters.ErrSessionBusy)
	}
	if s.phase == phaseDraining {
		return fmt.Errorf("session %s: the agent is still cancelling its last turn; try again shortly: %w", s.id, presenters.ErrSessionBusy)
	}
	return nil
}

// runTurn sends session/prompt and ends the turn with the agent's answer.
func (s *session) runTurn(ctx context.Context, conn *agentConn, acpID sdk.SessionId, t *turn, prompt []sdk.ContentBlock) {
	defer s.p.wg.Done()
	defer t.stopPrompt()
	resp, err := conn.rpc.Prompt(ctx, sdk.PromptRequest{SessionId: acpID, Prompt: prompt, Meta: tracecontext.ACPMeta(ctx)})
	if err != nil && !conn.alive() {
		// The agent is gone: the crash (or shutdown) handling ends the turn.
		<-conn.gone
	}
	s.finishTurn(t, resp, err)
}

// finishTurn ends a turn with the agent's answer: the message is stored, then
// MESSAGE_END is sent and the session is idle again. A turn ended already (after the
// cancel grace, or by a teardown) only takes note that the answer came.
func (s *session) finishTurn(t *turn, resp sdk.PromptResponse, promptErr error) {
	s.mu.Lock()
	t.answered = true
	if s.turn != t || !s.phase.turnRuns() {
		if s.turn == t && s.phase == phaseDraining {
			s.turn = nil
			s.setPhase(phaseIdle)
		}
		s.mu.Unlock()
		return
	}
	stop, status := presenters.StopReason(resp.StopReason), presenters.MessageComplete
	var usage *presenters.TokenUsage
	authFailed := false
	if promptErr == nil && resp.Usage != nil {
		usage = turnUsage(resp.Usage)
	}
	switch {
	case s.phase == phaseCancelling:
		stop, status = presenters.StopCancelled, presenters.MessageCancelled
	case promptErr != nil:
		stop, status = presenters.StopError, presenters.MessageError
		authFailed = isAuthRequired(promptErr)
		e := presenters.ErrorPayload{Code: "agent_error", MessageID: t.assistantID, Retryable: true,
			Message: "the agent failed the turn: " + agentErrorText(s.log, promptErr)}
		if authFailed {
			e.Code, e.Retryable = "agent_auth_required", false
			e.Message = "the agent requires authentication; set auth_method in its config (see ListAgents for its methods)"
		}
		s.emit.Error(e)
	default:
		switch stop {
		case presenters.StopEndTurn, presenters.StopMaxTokens, presenters.StopMaxTurnRequests, presenters.StopRefusal:
		case presenters.StopCancelled:
			status = presenters.MessageCancelled
		default:
			s.log.Warn("agent ended a turn with an unknown stop reason", "stop_reason", resp.StopReason)
			stop = presenters.StopEndTurn
		}
	}
	msg, wait := s.endTurnLocked(t, stop, status, usage)
	s.mu.Unlock()
	if authFailed {
		_ = s.p.needsAuth(promptErr)
	}
	<-wait // durable before MESSAGE_END
	s.turnEnded(t, msg)
}

// endTurnLocked finalizes the running turn's message and queues it for the store; wait
// closes when it was written (s.mu held). The session is ending.
func (s *session) endTurnLocked(t *turn, stop presenters.StopReason, status presenters.MessageStatus, usage *presenters.TokenUsage) (presenters.Message, <-chan error) {
	s.setPhase(phaseEnding)
	if t.grace != nil && t.grace.Stop() {
		s.p.wg.Done() // it will not run
	}
	// No tool call stays pending past its turn (an agent may end a turn after a
	// refused permission without ending the tool).
	s.norm.endUnfinished(s.emitPayload)
	s.cancelPendingLocked("the turn ended")
	final := s.norm.endTurn().update(status)
	final.StopReason, final.Usage = stop, usage
	if usage != nil {
		s.info.Usage = s.info.Usage.Add(*usage)
	}
	s.info.UpdatedAt = time.Now()
	s.storeConversationLocked()
	// The message's text is only what came since the last checkpoint: callers read its
	// id, stop reason and usage.
	return final.Message, s.p.persist.SaveUpdateWait(final)
}

// turnEnded sends MESSAGE_END and returns an ending session to idle, or to draining
// while the agent's answer is still awaited.
func (s *session) turnEnded(t *turn, msg presenters.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emit.MessageEnd(presenters.MessageEndPayload{MessageID: msg.ID, StopReason: msg.StopReason, Usage: msg.Usage, Role: presenters.RoleAssistant})
	if msg.Usage != nil {
		u := s.info.Usage
		s.emit.SessionUpdated(presenters.SessionPatch{Usage: &u})
	}
	if s.turn == t {
		s.info.MessageInFlight = ""
		switch {
		case s.phase == phaseEnding && !t.answered:
			s.setPhase(phaseDraining)
		case s.phase == phaseEnding:
			s.turn = nil
			s.setPhase(phaseIdle)
		default: // torn down meanwhile
			s.turn = nil
		}
	}
	if s.info.Status == presenters.SessionGenerating || s.info.Status == presenters.SessionPaused {
		s.setStatus(presenters.SessionIdle, "")
	}
	close(t.done)
}

// turnUsage is a prompt answer's usage: its three required counts are reported, zero
// or not; the optional ones only when present.
func turnUsage(u *sdk.Usage) *presenters.TokenUsage {
	return &presenters.TokenUsage{
		InputTokens:       presenters.Reported(int64(u.InputTokens)),
		OutputTokens:      presenters.Reported(int64(u.OutputTokens)),
		TotalTokens:       presenters.Reported(int64(u.TotalTokens)),
		CachedInputTokens: optionalCount(u.CachedReadTokens),
		ReasoningTokens:   optionalCount(u.ThoughtTokens),
	}
}

func optionalCount(v *int) *int64 {
	if v == nil {
		return nil
	}
	return presenters.Reported(int64(*v))
}

// cancel cancels the running turn and returns its message id: pending permissions are
// answered cancelled and the agent gets session/cancel. The turn still ends with
// MESSAGE_END(cancelled); if the agent does not answer within cancelGrace, without its
// answer. messageID names the turn (empty: whatever runs); naming another one is
// ErrMessageNotRunning.
func (s *session) cancel(ctx context.Context, messageID string) (string, error) {
	s.mu.Lock()
	if !s.phase.turnRuns() {
		s.mu.Unlock()
		if messageID == "" {
			return "", nil
		}
		return "", fmt.Errorf("message %s is not running in session %s: no turn runs: %w", messageID, s.id, presenters.ErrMessageNotRunning)
	}
	t := s.turn
	if messageID != "" && messageID != t.assistantID {
		s.mu.Unlock()
		return "", fmt.Errorf("message %s is not running in session %s; the running one is %s: %w", messageID, s.id, t.assistantID, presenters.ErrMessageNotRunning)
	}
	first := s.phase == phasePrompting
	if first {
		s.setPhase(phaseCancelling)
	}
	s.cancelPendingLocked("the turn was cancelled")
	conn, acpID := s.conn, s.acpID
	if first {
		// Owned by p.wg from here: done when it ran, or when endTurnLocked stopped it.
		s.p.wg.Add(1)
		t.grace = time.AfterFunc(s.p.cancelGrace, func() {
			defer s.p.wg.Done()
			s.endCancelledTurn(t)
		})
	}
	s.mu.Unlock()
	if first {
		if err := conn.rpc.Cancel(ctx, sdk.CancelNotification{SessionId: acpID}); err != nil {
			s.log.Warn("sending session/cancel failed", "err", err)
		}
	}
	return t.assistantID, nil
}

// endCancelledTurn ends a cancelled turn whose agent did not answer within the grace:
// MESSAGE_END(cancelled) now, while the Prompt is still awaited (phaseDraining).
func (s *session) endCancelledTurn(t *turn) {
	s.mu.Lock()
	if s.turn != t || s.phase != phaseCancelling {
		s.mu.Unlock()
		return
	}
	s.log.Warn("the agent did not end a cancelled turn in time; ending it without the agent's answer")
	msg, wait := s.endTurnLocked(t, presenters.StopCancelled, presenters.MessageCancelled, nil)
	s.mu.Unlock()
	<-wait
	s.turnEnded(t, msg)
}

// isSessionLevel reports whether an update belongs to the session rather than a turn.
func isSessionLevel(u sdk.SessionUpdate) bool {
	kind := updateKind(u)
	return strings.HasSuffix(kind, "_update") && kind != "tool_call_update"
}

// checkpoint stores the running turn's message as it stands, if it changed.
func (s *session) checkpoint() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpointLocked()
}

// checkpointLocked is checkpoint with s.mu held.
func (s *session) checkpointLocked() {
	if !s.phase.turnRuns() || s.norm.msg == nil || !s.norm.msg.dirty {
		return
	}
	// Queued under s.mu, so a checkpoint is always queued before the next one and the
	// final version: each appends to what the one before stored.
	s.p.persist.SaveUpdate(s.norm.msg.update(store.StatusInProgress))
}

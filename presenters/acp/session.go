package acp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/tracing/tracecontext"
)

// session is one agenticd session of an ACP agent. Its id is minted by agenticd;
// acpID is the id the agent knows it by (session/new's sessionId, or a later one when
// the session was reopened as a new agent session). Everything sent to the agent names
// acpID, and the agent's notifications and requests reach the session through its
// connection's registry, by acpID: two agents, or two processes of one, that pick the
// same id never meet. mu guards everything below it and is never held across a call to
// the agent or the store.
type session struct {
	p    *Presenter
	id   string
	emit presenters.Emitter
	// emitPayload and emitReplay are emit as the normalizer takes it, the latter
	// marking a session/load's replay: bound to the emitter, not to the session, so
	// that the normalizer never calls into the session.
	emitPayload emitFunc
	emitReplay  emitFunc
	log         *slog.Logger

	mu      sync.Mutex
	conn    *agentConn // nil while not live (not loaded, closed, crashed)
	acpID   sdk.SessionId
	ws      *sandbox.Workspace
	info    presenters.SessionInfo
	conv    store.Conversation
	norm    normalizer
	turn    *turn
	pending map[string]*pendingPermission
	// elicitations are the agent's questions waiting for an answer (elicitation.go).
	elicitations map[string]*pendingElicitation

	// extra are the session's additional directories and mcp its own MCP servers (the
	// agent's configured ones are merged in when the session is opened).
	extra []*sandbox.Workspace
	mcp   []presenters.MCPServer

	// What the agent said about modes and models; info's lists derive from them.
	modeState  *sdk.SessionModeState
	modelState *legacyModelState // the old `models` (legacymodels.go)
	configs    []sdk.SessionConfigOption

	terminals sessionTerminals // read by norm for tool content that shows a terminal
	following bool             // the terminal follower runs
	// draining is a cancelled turn that was ended without the agent's answer: its
	// Prompt is still awaited, its late updates are dropped and no turn may start.
	draining *turn
	// opening is closed when a LoadSession in progress ends; others wait for it.
	opening chan struct{}
	// unstored: CreateSession has not written the conversation yet (it writes the
	// latest state when it does).
	unstored bool
}

// turn is one running prompt.
type turn struct {
	userMsgID   string
	assistantID string
	stopPrompt  context.CancelFunc // gives up waiting for the agent's answer
	grace       *time.Timer        // after a cancel: when to give up
	cancelled   bool
	finished    bool          // the message was finalized; only MESSAGE_END may follow
	done        chan struct{} // closed after MESSAGE_END
}

func newSession(p *Presenter, id string, acpID sdk.SessionId, ws *sandbox.Workspace) *session {
	emit := presenters.NewEmitter(p.deps.Publisher, p.cfg.ID, id)
	replay := emit.Replaying()
	s := &session{
		p:           p,
		id:          id,
		emit:        emit,
		emitPayload: func(pl presenters.Payload) { emit.Emit(pl) },
		emitReplay:  func(pl presenters.Payload) { replay.Emit(pl) },
		log:         p.log.With("session_id", id, "acp_session_id", acpID),
		acpID:       acpID,
		pending:     map[string]*pendingPermission{},
		terminals:   newSessionTerminals(nil),
	}
	// The normalizer gets what it reads, never the session itself (see normalize.go).
	s.norm = normalizer{
		log:        s.log,
		sessionID:  id,
		classifier: p.classifier,
		terminals:  &s.terminals,
		newID:      p.newID,
	}
	if ws != nil {
		s.ws = ws
		s.norm.workspace = ws.Root()
	}
	return s
}

// newStoredSession is a session known only from the store (not live).
func newStoredSession(p *Presenter, conv store.Conversation, caps presenters.Capabilities) *session {
	s := newSession(p, conv.ID, sdk.SessionId(conv.AgentSessionID), nil)
	s.conv = conv
	s.norm.workspace = conv.Workspace
	reason := "not loaded since the server started; reopen it with LoadSession"
	if conv.Closed {
		reason = "closed; reopen it with LoadSession"
	}
	s.info = presenters.SessionInfo{
		SessionID: conv.ID, AgentSessionID: conv.AgentSessionID, AgentID: p.cfg.ID, Status: presenters.SessionClosed, StatusReason: reason,
		Workspace: conv.Workspace, Title: conv.Title, CreatedAt: conv.CreatedAt, UpdatedAt: conv.UpdatedAt,
		CurrentModeID: conv.ModeID, CurrentModelID: conv.ModelID, Capabilities: caps, Usage: conv.Usage,
	}
	return s
}

// errSessionNotOpen answers an agent's request for a session that is not live (closed,
// crashed, shutting down, or not attached yet).
var errSessionNotOpen = errors.New("session is not open")

// sandbox returns the session's workspace and terminals while it is live.
func (s *session) sandbox() (*sandbox.Workspace, *sandbox.Terminals, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.ws == nil || s.terminals.live == nil {
		return nil, nil, fmt.Errorf("session %s: %w", s.id, errSessionNotOpen)
	}
	return s.ws, s.terminals.live, nil
}

// snapshot is the session as GetSession shows it.
func (s *session) snapshot() presenters.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.PendingPermissions = append([]presenters.PermissionRequest(nil), s.info.PendingPermissions...)
	return info
}

func (s *session) checkLive() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkLiveLocked()
}

func (s *session) checkLiveLocked() error {
	switch {
	case s.info.Status == presenters.SessionError:
		return presenters.WithDetail(fmt.Errorf("session %s is in error (%s); reopen it with LoadSession: %w", s.id, s.info.StatusReason, presenters.ErrSessionClosed), "session_id", s.id)
	case s.conn == nil || s.info.Status == presenters.SessionClosed || !s.conn.alive():
		return presenters.WithDetail(fmt.Errorf("session %s is not open (%s): %w", s.id, s.info.StatusReason, presenters.ErrSessionClosed), "session_id", s.id)
	}
	return nil
}

// setStatus changes the status and tells subscribers (s.mu held).
func (s *session) setStatus(st presenters.SessionStatus, reason string) {
	if s.info.Status == st && s.info.StatusReason == reason {
		return
	}
	s.info.Status, s.info.StatusReason = st, reason
	s.emit.StatusChanged(st, reason)
}

// reportError emits an ERROR event for the running turn's message, if any.
func (s *session) reportError(e presenters.ErrorPayload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn != nil && e.MessageID == "" {
		e.MessageID = s.turn.assistantID
	}
	s.emit.Error(e)
}

// applyExt normalizes one session/update of a kind the SDK does not know. It never
// blocks (see flowreader.go).
func (s *session) applyExt(u extUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining != nil {
		s.log.Debug("dropping a late update of a cancelled turn", "kind", u.Kind)
		return
	}
	emit := s.emitPayload
	if s.norm.mode == modeReplay {
		emit = s.emitReplay
	}
	s.norm.ext(u, emit)
}

// applyUpdate normalizes one session/update. It never blocks (see flowreader.go).
func (s *session) applyUpdate(u sdk.SessionUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining != nil && !isSessionLevel(u) {
		s.log.Debug("dropping a late update of a cancelled turn", "kind", updateKind(u))
		return
	}
	emit := s.emitPayload
	if s.norm.mode == modeReplay {
		emit = s.emitReplay
	}
	if ch := s.norm.apply(u, emit); ch != nil {
		old := s.info
		s.applyChange(ch)
		s.publishPatch(old)
	}
	if s.norm.mode == modeTurn && s.norm.msg != nil && s.norm.msg.unsaved >= checkpointBytes {
		s.checkpointLocked()
	}
	if !s.following && len(s.norm.tools) > 0 && s.norm.showsLiveTerminal() {
		s.startFollowing()
	}
}

// applyChange applies a session-level update to the session's state (s.mu held).
func (s *session) applyChange(ch *sessionChange) {
	if ch.commands != nil {
		s.info.AvailableCommands = *ch.commands
	}
	if ch.modeID != nil {
		s.setCurrentModeLocked(*ch.modeID)
	}
	if ch.configOptions != nil {
		s.configs = *ch.configOptions
	}
	if ch.title != nil {
		s.info.Title = *ch.title
	}
	if ch.updatedAt != nil {
		s.info.UpdatedAt = *ch.updatedAt
	}
	if ch.contextUsed != nil || ch.contextSize != nil || ch.cost != nil {
		u := s.info.Usage
		if ch.contextUsed != nil {
			u.ContextUsed = presenters.Reported(*ch.contextUsed)
		}
		if ch.contextSize != nil {
			u.ContextSize = presenters.Reported(*ch.contextSize)
		}
		if ch.cost != nil { // the agent reports the session's cumulative cost
			u.Cost, u.CostCurrency = presenters.Reported(ch.cost.Amount), ch.cost.Currency
		}
		s.info.Usage = u
	}
	s.deriveModesModels()
}

// publishPatch emits SESSION_UPDATED with the fields that differ from old and stores
// the conversation's changed fields (s.mu held).
func (s *session) publishPatch(old presenters.SessionInfo) {
	var patch presenters.SessionPatch
	changed := false
	set := func(differs bool, apply func()) {
		if differs {
			apply()
			changed = true
		}
	}
	info := s.info
	set(info.Title != old.Title, func() { patch.Title = &info.Title })
	set(!reflect.DeepEqual(info.AvailableModes, old.AvailableModes), func() { patch.AvailableModes = &info.AvailableModes })
	set(info.CurrentModeID != old.CurrentModeID, func() { patch.CurrentModeID = &info.CurrentModeID })
	set(!reflect.DeepEqual(info.AvailableModels, old.AvailableModels), func() { patch.AvailableModels = &info.AvailableModels })
	set(info.CurrentModelID != old.CurrentModelID, func() { patch.CurrentModelID = &info.CurrentModelID })
	set(!reflect.DeepEqual(info.AvailableCommands, old.AvailableCommands), func() { patch.AvailableCommands = &info.AvailableCommands })
	set(!reflect.DeepEqual(info.ConfigOptions, old.ConfigOptions), func() { patch.ConfigOptions = &info.ConfigOptions })
	set(info.Capabilities != old.Capabilities, func() { patch.Capabilities = &info.Capabilities })
	set(!info.Usage.Equal(old.Usage), func() { patch.Usage = &info.Usage })
	set(!info.UpdatedAt.Equal(old.UpdatedAt) && changed, func() { patch.UpdatedAt = &info.UpdatedAt })
	if !changed {
		return
	}
	s.emit.SessionUpdated(patch)
	s.storeConversationLocked()
}

// storeConversationLocked queues the conversation's current fields for the store.
func (s *session) storeConversationLocked() {
	if s.unstored {
		return
	}
	s.conv.Title = s.info.Title
	s.conv.ModeID = s.info.CurrentModeID
	s.conv.ModelID = s.info.CurrentModelID
	s.conv.Usage = s.info.Usage
	s.conv.AgentSessionID = string(s.acpID)
	s.conv.UpdatedAt = time.Now()
	s.p.persist.SaveConversation(s.conv)
}

// send starts a turn, its messages under the ids opts chose (minted where empty).
func (s *session) send(ctx context.Context, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	if content.Empty() {
		return presenters.SendResult{}, fmt.Errorf("the message is empty; send text, images, files or resources: %w", presenters.ErrInvalidArgument)
	}
	if err := presenters.CheckSendOptions(opts); err != nil {
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
	if s.turn != nil {
		return fmt.Errorf("session %s is still answering message %s; wait for its MESSAGE_END or cancel it: %w",
			s.id, s.turn.assistantID, presenters.ErrSessionBusy)
	}
	if s.draining != nil {
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
// MESSAGE_END is sent and the session is idle again.
func (s *session) finishTurn(t *turn, resp sdk.PromptResponse, promptErr error) {
	s.mu.Lock()
	if t.finished {
		if s.draining == t {
			s.draining = nil
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
	case t.cancelled:
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

// endTurnLocked finalizes the turn's message and queues it for the store; wait closes
// when it was written (s.mu held).
func (s *session) endTurnLocked(t *turn, stop presenters.StopReason, status presenters.MessageStatus, usage *presenters.TokenUsage) (presenters.Message, <-chan error) {
	t.finished = true
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

// turnEnded sends MESSAGE_END and returns the session to idle.
func (s *session) turnEnded(t *turn, msg presenters.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emit.MessageEnd(presenters.MessageEndPayload{MessageID: msg.ID, StopReason: msg.StopReason, Usage: msg.Usage, Role: presenters.RoleAssistant})
	if msg.Usage != nil {
		u := s.info.Usage
		s.emit.SessionUpdated(presenters.SessionPatch{Usage: &u})
	}
	if s.turn == t {
		s.turn = nil
		s.info.MessageInFlight = ""
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
	t := s.turn
	if t == nil || t.finished {
		s.mu.Unlock()
		if messageID == "" {
			return "", nil
		}
		return "", fmt.Errorf("message %s is not running in session %s: no turn runs: %w", messageID, s.id, presenters.ErrMessageNotRunning)
	}
	if messageID != "" && messageID != t.assistantID {
		s.mu.Unlock()
		return "", fmt.Errorf("message %s is not running in session %s; the running one is %s: %w", messageID, s.id, t.assistantID, presenters.ErrMessageNotRunning)
	}
	first := !t.cancelled
	t.cancelled = true
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
	if first && conn != nil {
		if err := conn.rpc.Cancel(ctx, sdk.CancelNotification{SessionId: acpID}); err != nil {
			s.log.Warn("sending session/cancel failed", "err", err)
		}
	}
	return t.assistantID, nil
}

// endCancelledTurn ends a cancelled turn whose agent did not answer within the grace:
// MESSAGE_END(cancelled) now, while the Prompt is still awaited (see draining).
func (s *session) endCancelledTurn(t *turn) {
	s.mu.Lock()
	if t.finished {
		s.mu.Unlock()
		return
	}
	s.log.Warn("the agent did not end a cancelled turn in time; ending it without the agent's answer")
	msg, wait := s.endTurnLocked(t, presenters.StopCancelled, presenters.MessageCancelled, nil)
	s.draining = t
	s.mu.Unlock()
	<-wait
	s.turnEnded(t, msg)
}

// isSessionLevel reports whether an update belongs to the session rather than a turn.
func isSessionLevel(u sdk.SessionUpdate) bool {
	kind := updateKind(u)
	return strings.HasSuffix(kind, "_update") && kind != "tool_call_update"
}

// liveConn returns the connection and agent session id of a live session, or why it
// is not live (s.mu held).
func (s *session) liveConnLocked() (*agentConn, sdk.SessionId, error) {
	if err := s.checkLiveLocked(); err != nil {
		return nil, "", err
	}
	return s.conn, s.acpID, nil
}

// agentCallError maps a failed request to the agent to a presenters error.
func (s *session) agentCallError(conn *agentConn, method string, err error) error {
	if !conn.alive() {
		return fmt.Errorf("%w: agent %s stopped during %s; try again", presenters.ErrAgentUnavailable, s.p.cfg.ID, method)
	}
	if isAuthRequired(err) {
		return s.p.needsAuth(err)
	}
	var re *sdk.RequestError
	if errors.As(err, &re) {
		switch re.Code {
		case -32601:
			return presenters.WithDetail(fmt.Errorf("agent %s does not support %s: %w", s.p.cfg.ID, method, presenters.ErrUnsupported), "unsupported", method)
		case -32602:
			return fmt.Errorf("agent %s rejected %s: %s: %w", s.p.cfg.ID, method, agentErrorText(s.log, err), presenters.ErrInvalidArgument)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", method, presenters.ErrCancelled)
	}
	return fmt.Errorf("agent %s failed %s: %s: %w", s.p.cfg.ID, method, agentErrorText(s.log, err), presenters.ErrFailedPrecondition)
}

// close ends a live session: its turn is cancelled, its terminals released, the agent
// told (session/close when advertised). The history stays.
func (s *session) close(ctx context.Context) error {
	s.mu.Lock()
	if s.info.Status == presenters.SessionClosed {
		s.mu.Unlock()
		return nil
	}
	t := s.turn
	s.mu.Unlock()
	if t != nil {
		if _, err := s.cancel(ctx, ""); err != nil {
			return err
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("closing session %s: %w", s.id, presenters.ErrCancelled)
		}
	}
	s.mu.Lock()
	s.cancelPendingLocked("the session was closed")
	conn, acpID := s.conn, s.acpID
	s.mu.Unlock()
	if conn != nil {
		conn.unregister(acpID)
	}
	s.mu.Lock()
	if s.draining != nil {
		s.draining.stopPrompt()
		s.draining = nil
	}
	terms := s.terminals.live
	s.conn, s.terminals.live = nil, nil
	s.setStatus(presenters.SessionClosed, "closed by a client; reopen it with LoadSession")
	s.emit.SessionClosed("closed by a client")
	s.conv.Closed = true
	s.storeConversationLocked()
	s.mu.Unlock()
	if conn != nil {
		if conn.init.AgentCapabilities.SessionCapabilities.Close != nil && conn.alive() {
			if _, err := conn.rpc.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: acpID}); err != nil {
				s.log.Warn("session/close failed", "err", err)
			}
		}
	}
	if terms != nil {
		_ = terms.Close()
	}
	return nil
}

// shutdown ends the session because the presenter closes: a running turn is stored as
// incomplete and ends with MESSAGE_END(cancelled).
func (s *session) shutdown() {
	s.mu.Lock()
	t := s.turn
	var wait <-chan error
	var msg presenters.Message
	ending := t != nil && !t.finished
	if ending {
		t.stopPrompt()
		msg, wait = s.endTurnLocked(t, presenters.StopCancelled, presenters.MessageIncomplete, nil)
	}
	s.cancelPendingLocked("the server is shutting down")
	conn, acpID := s.conn, s.acpID
	s.mu.Unlock()
	if conn != nil {
		conn.unregister(acpID)
	}
	s.mu.Lock()
	if s.draining != nil {
		s.draining.stopPrompt()
		s.draining = nil
	}
	terms := s.terminals.live
	s.conn, s.terminals.live = nil, nil
	s.mu.Unlock()
	if terms != nil {
		_ = terms.Close()
	}
	if ending {
		<-wait
		s.turnEnded(t, msg)
	}
}

// connGone handles the end of the agent process the session lived on. After a crash
// the session is in error; its turn ends with ERROR and MESSAGE_END(error), the message
// stored first as for any turn.
func (s *session) connGone(c *agentConn, crashed bool, reason string) {
	s.mu.Lock()
	if s.conn != c {
		s.mu.Unlock()
		return
	}
	t := s.turn
	ending := t != nil && !t.finished
	if crashed {
		e := presenters.ErrorPayload{Code: "agent_crashed", Retryable: true,
			Message: fmt.Sprintf("agent %s stopped: %s; reopen the session with LoadSession", s.p.cfg.ID, reason)}
		if ending {
			e.MessageID = t.assistantID
		}
		s.emit.Error(e)
	}
	var msg presenters.Message
	var wait <-chan error
	if ending {
		msg, wait = s.endTurnLocked(t, presenters.StopError, presenters.MessageError, nil)
	}
	s.cancelPendingLocked("the agent stopped")
	acpID := s.acpID
	s.mu.Unlock()
	c.unregister(acpID)
	s.mu.Lock()
	s.draining = nil
	terms := s.terminals.live
	s.conn, s.terminals.live = nil, nil
	s.mu.Unlock()

	if ending {
		<-wait
	}
	s.mu.Lock()
	if ending {
		s.emit.MessageEnd(presenters.MessageEndPayload{MessageID: msg.ID, StopReason: msg.StopReason, Role: presenters.RoleAssistant})
		if s.turn == t {
			s.turn = nil
			s.info.MessageInFlight = ""
		}
	}
	if crashed {
		s.setStatus(presenters.SessionError, reason)
	}
	s.mu.Unlock()
	if ending {
		close(t.done)
	}
	if terms != nil {
		_ = terms.Close()
	}
}

// checkpoint stores the running turn's message as it stands, if it changed.
func (s *session) checkpoint() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpointLocked()
}

// checkpointLocked is checkpoint with s.mu held.
func (s *session) checkpointLocked() {
	t := s.turn
	if t == nil || t.finished || s.norm.msg == nil || !s.norm.msg.dirty {
		return
	}
	// Queued under s.mu, so a checkpoint is always queued before the next one and the
	// final version: each appends to what the one before stored.
	s.p.persist.SaveUpdate(s.norm.msg.update(store.StatusInProgress))
}

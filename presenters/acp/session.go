package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/acpmodels"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
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

	mu sync.Mutex
	// phase is where the session is in its life (phase.go); phaseChanged, when someone
	// waits for a transition, is closed at the next one.
	phase        phase
	phaseChanged chan struct{}
	conn         *agentConn // while bound
	acpID        sdk.SessionId
	ws           *sandbox.Workspace
	info         presenters.SessionInfo
	conv         store.Conversation
	norm         normalizer
	turn         *turn // from send until the session is idle again
	// permissions and elicitations are the agent's requests waiting for a person's
	// answer; urlElicitations holds the agent's own id of each url-mode elicitation, by
	// ours, for elicitation/complete.
	permissions     questions[presenters.PermissionRequest, string]
	elicitations    questions[presenters.ElicitationRequest, presenters.ElicitationResolvedPayload]
	urlElicitations map[string]string

	// extra are the session's additional directories and mcp its own MCP servers (the
	// agent's configured ones are merged in when the session is opened).
	extra []*sandbox.Workspace
	mcp   []presenters.MCPServer

	// What the agent said about modes and models; info's lists derive from them.
	modeState  *sdk.SessionModeState
	modelState *acpmodels.State // the old `models` (legacymodels.go)
	configs    []sdk.SessionConfigOption

	terminals sessionTerminals // read by norm for tool content that shows a terminal
	following bool             // the terminal follower runs
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
		terminals:   newSessionTerminals(nil),
	}
	s.permissions = newQuestions[presenters.PermissionRequest, string](&s.info.PendingPermissions,
		func(r presenters.PermissionRequest) string { return r.RequestID })
	s.elicitations = newQuestions[presenters.ElicitationRequest, presenters.ElicitationResolvedPayload](&s.info.PendingElicitations,
		func(r presenters.ElicitationRequest) string { return r.ElicitationID })
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
	if !s.phase.bound() {
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
	case !s.phase.open() || !s.conn.alive():
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

// reportError emits an ERROR event for the turn's message, if one is in flight.
func (s *session) reportError(e presenters.ErrorPayload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase.turnInFlight() && e.MessageID == "" {
		e.MessageID = s.turn.assistantID
	}
	s.emit.Error(e)
}

// applyExt normalizes one session/update of a kind the SDK does not know. It never
// blocks (see flowreader.go).
func (s *session) applyExt(u extUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lateTurnLocked() {
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
	if s.lateTurnLocked() && !isSessionLevel(u) {
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

// storeConversationLocked queues the conversation's current fields for the store; a
// session being created has none there yet (adopt stores it whole).
func (s *session) storeConversationLocked() {
	if s.phase == phaseCreating {
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

package acp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/acpmodels"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// sessionState is what session/new, session/load and session/resume answer.
type sessionState struct {
	modes   *sdk.SessionModeState
	models  *acpmodels.State // the old `models`, read beside the SDK
	configs []sdk.SessionConfigOption
}

// CreateSession asks the agent for a new session in the workspace the service opened.
// The session's id is minted here; the agent's own id is kept beside it.
func (p *Presenter) CreateSession(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
	ws := cfg.Workspace
	dirs := sessionDirs{ws: ws, extra: cfg.AdditionalDirectories}
	conn, err := p.ensureConn(ctx, dirs.scope(p.cfg, cfg.MCPServers))
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	caps := conn.init.AgentCapabilities
	plan := planMCP(p.mergedMCPServers(cfg.MCPServers), caps)
	p.importMu.RLock()
	stored := false
	defer func() {
		if !stored {
			p.importMu.RUnlock()
		}
	}()
	resp, err := conn.rpc.NewSession(ctx, sdk.NewSessionRequest{Cwd: ws.Root(), McpServers: plan.servers, AdditionalDirectories: dirs.forAgent(caps)})
	if err != nil {
		return presenters.SessionInfo{}, p.sessionCallError(conn, "session/new", err)
	}
	if resp.SessionId == "" {
		return presenters.SessionInfo{}, fmt.Errorf("%w: agent %s answered session/new without a session id", presenters.ErrAgentUnavailable, p.cfg.ID)
	}
	st := sessionState{resp.Modes, conn.legacy.takeModels(resp.SessionId), resp.ConfigOptions}
	s, err := p.adopt(ctx, conn, cfg, plan, resp.SessionId, st)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	stored = true
	p.importMu.RUnlock()
	return p.settle(ctx, s, cfg)
}

// adopt makes the agent's new session acpID (from session/new or session/fork) a
// session of agenticd's, stored and announced with SESSION_CREATED. The caller holds
// p.importMu for reading.
func (p *Presenter) adopt(ctx context.Context, conn *agentConn, cfg presenters.SessionConfig, plan mcpPlan,
	acpID sdk.SessionId, st sessionState) (*session, error) {
	ws := cfg.Workspace
	id := p.newID()
	now := time.Now()
	conv := store.Conversation{ID: id, AgentID: p.cfg.ID, AgentSessionID: string(acpID), Workspace: ws.Root(),
		Title: cfg.Title, CreatedAt: now, UpdatedAt: now}
	s := newSession(p, id, acpID, ws)
	p.mu.Lock()
	agentCaps := p.capabilities()
	p.mu.Unlock()

	s.mu.Lock()
	s.conv = conv
	s.extra, s.mcp = cfg.AdditionalDirectories, cfg.MCPServers
	s.info = presenters.SessionInfo{SessionID: id, AgentSessionID: string(acpID), AgentID: p.cfg.ID, Status: presenters.SessionIdle,
		Workspace: ws.Root(), Title: cfg.Title, CreatedAt: now, UpdatedAt: now, Capabilities: agentCaps}
	s.attachLocked(conn, acpID, ws, st, plan)
	// Until CreateConversation, updates arriving are only kept: they are stored with it.
	s.setPhase(phaseCreating)
	// An id the session does not offer fails before anyone can see the session.
	err := s.checkModeModelLocked(cfg.ModeID, cfg.ModelID)
	s.mu.Unlock()
	if err != nil {
		s.detach(phaseClosed)
		p.abandonAgentSession(conn, acpID)
		return nil, err
	}
	// Registered at once, so the updates the agent sends from now on reach the session.
	if err := conn.register(acpID, s); err != nil {
		s.detach(phaseClosed)
		return nil, fmt.Errorf("%w: agent %s stopped while creating a session; try again", presenters.ErrAgentUnavailable, p.cfg.ID)
	}
	if err := p.deps.Store.CreateConversation(ctx, conv); err != nil {
		s.detach(phaseClosed)
		p.abandonAgentSession(conn, acpID)
		return nil, fmt.Errorf("storing session %s: %w", id, err)
	}
	s.mu.Lock()
	if s.phase == phaseCreating { // stored; else its agent stopped meanwhile (connGone)
		s.setPhase(phaseIdle)
	}
	created := s.info
	created.Owner = cfg.Creator
	s.emit.SessionCreated(created)
	s.mu.Unlock()
	s.reportLeftOut(plan)
	p.mu.Lock()
	p.sessions[id] = s
	p.mu.Unlock()
	return s, nil
}

// settle puts a new session in the mode and model cfg asks for (else a known agent's
// asking mode) and stores it; a session that cannot be set so is closed.
func (p *Presenter) settle(ctx context.Context, s *session, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
	id := s.id
	modeID := cfg.ModeID
	if modeID == "" {
		modeID = s.askingMode()
	}
	if modeID != "" {
		if err := s.setMode(ctx, modeID); err != nil {
			_ = s.close(context.WithoutCancel(ctx))
			p.forget(s)
			return presenters.SessionInfo{}, fmt.Errorf("session %s was created but its mode could not be set, so it was closed: %w", id, err)
		}
	}
	if cfg.ModelID != "" {
		if err := s.setModel(ctx, cfg.ModelID); err != nil {
			_ = s.close(context.WithoutCancel(ctx))
			p.forget(s)
			return presenters.SessionInfo{}, fmt.Errorf("session %s was created but its model could not be set, so it was closed: %w", id, err)
		}
	}
	s.mu.Lock()
	s.storeConversationLocked()
	s.mu.Unlock()
	return s.snapshot(), nil
}

// abandonAgentSession tells the agent (session/close, when it advertises it) that a
// session it created will not be used, bounded by the start timeout.
func (p *Presenter) abandonAgentSession(conn *agentConn, id sdk.SessionId) {
	if conn.init.AgentCapabilities.SessionCapabilities.Close == nil || !conn.alive() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.StartTimeout)
	defer cancel()
	if _, err := conn.rpc.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: id}); err != nil {
		p.log.Warn("session/close of an abandoned session failed", "acp_session_id", id, "err", err)
	}
}

// attachLocked makes the session live on conn with the MCP servers of plan (s.mu held).
func (s *session) attachLocked(conn *agentConn, acpID sdk.SessionId, ws *sandbox.Workspace, st sessionState, plan mcpPlan) {
	s.attachSandboxLocked(conn, acpID, ws)
	s.modeState, s.modelState, s.configs = st.modes, st.models, st.configs
	s.info.Capabilities = s.p.agentCapabilities(conn.init.AgentCapabilities)
	s.info.AdditionalDirectories = sessionDirs{ws: ws, extra: s.extra}.extraRoots()
	s.info.MCPServerNames = plan.names
	s.deriveModesModels()
}

// attachSandboxLocked binds the session to conn and its workspace, so that the agent's
// requests can be served as soon as the session is registered (s.mu held).
func (s *session) attachSandboxLocked(conn *agentConn, acpID sdk.SessionId, ws *sandbox.Workspace) {
	s.conn, s.acpID, s.ws = conn, acpID, ws
	s.info.AgentSessionID = string(acpID)
	s.norm.workspace = ws.Root()
	if s.terminals.live == nil {
		s.terminals = newSessionTerminals(ws.NewTerminals())
	}
}

// sessionCallError maps a failed session/new, load or resume.
func (p *Presenter) sessionCallError(conn *agentConn, method string, err error) error {
	if isAuthRequired(err) {
		return p.needsAuth(err)
	}
	if !conn.alive() {
		return fmt.Errorf("%w: agent %s stopped during %s: %s", presenters.ErrAgentUnavailable, p.cfg.ID, method, conn.failReason(context.Background(), err))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", method, presenters.ErrCancelled)
	}
	return fmt.Errorf("%w: agent %s refused %s: %s", presenters.ErrAgentUnavailable, p.cfg.ID, method, agentErrorText(p.log, err))
}

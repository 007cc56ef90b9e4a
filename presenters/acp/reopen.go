package acp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// Reopening a session (LoadSession).

// LoadSession reopens a session. A live one just replays its stored history. Else the
// agent gets session/load when it advertises it (its replay streams as events);
// otherwise the stored transcript is replayed and the agent session reattached with
// session/resume when advertised, or replaced by a new one (the agent then does not
// remember the conversation, but its history stays in the store).
func (p *Presenter) LoadSession(ctx context.Context, sessionID string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
	info, err := p.loadSession(ctx, sessionID, lc)
	if err != nil {
		return info, err
	}
	// The stored count, as GetSession reports it: what a client can page through.
	if n, err := p.deps.Store.CountMessages(ctx, sessionID); err == nil {
		info.MessageCount = n
	}
	return info, nil
}

// loadSession is LoadSession's steps: wait for another reopening, reopen the stored
// directories, attach by session/load, else by session/resume or a new agent session.
func (p *Presenter) loadSession(ctx context.Context, sessionID string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
	s, err := p.openableSession(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	start, err := s.beginReopen(ctx)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	switch start {
	case reopenedByOther:
		return s.snapshot(), nil
	case reopenOpen:
		n, err := s.replayStored(ctx, lc)
		if err != nil {
			return presenters.SessionInfo{}, err
		}
		s.emit.SessionReady(n)
		return s.snapshot(), nil
	}
	defer s.endReopen()
	conv, dirs, own, err := p.reopenDirectories(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	conn, err := p.ensureConn(ctx, dirs.scope(p.cfg, own))
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	s.mu.Lock()
	acpID := s.acpID
	s.conv = conv
	s.conv.Closed = false
	s.extra, s.mcp = dirs.extra, own
	s.mu.Unlock()

	plan := planMCP(p.mergedMCPServers(own), conn.init.AgentCapabilities)
	n, loaded, err := s.attachByLoad(ctx, conn, acpID, dirs, plan)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	if !loaded {
		acpID, st, err := s.resumeOrNew(ctx, conn, acpID, dirs, plan)
		if err != nil {
			return presenters.SessionInfo{}, err
		}
		if err := s.reopened(conn, acpID, dirs.ws, st, plan); err != nil {
			return presenters.SessionInfo{}, err
		}
		if n, err = s.replayStored(ctx, lc); err != nil {
			return presenters.SessionInfo{}, err
		}
	}
	s.emit.SessionReady(n)
	s.reportLeftOut(plan)
	return s.snapshot(), nil
}

// How a LoadSession goes on once no other reopening or teardown is under way.
type reopenStart uint8

const (
	reopenNeeded    reopenStart = iota // this call reopens the session
	reopenOpen                         // the session is open: its stored history is replayed
	reopenedByOther                    // the call this one waited for reopened it, and replayed the history
)

// beginReopen waits for another LoadSession's reopening or a teardown to end, and for
// an open session whose agent stopped to be torn down (connGone); then it starts
// reopening the session unless it is open. One reopening at a time: later callers wait
// for it and then see an open session.
func (s *session) beginReopen(ctx context.Context) (reopenStart, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	waited := false
	for s.phase.passing() || (s.phase.open() && !s.conn.alive()) {
		waited = waited || s.phase.passing()
		if err := s.awaitPhaseLocked(ctx); err != nil {
			return 0, fmt.Errorf("waiting for session %s to reopen: %w", s.id, presenters.ErrCancelled)
		}
	}
	switch {
	case s.phase.open() && waited:
		return reopenedByOther, nil
	case s.phase.open():
		return reopenOpen, nil
	}
	s.setPhase(phaseOpening)
	return reopenNeeded, nil
}

// endReopen ends a reopening that did not open the session: it is closed again, or
// failed when its status says it is in error.
func (s *session) endReopen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.phase != phaseOpening:
	case s.info.Status == presenters.SessionError:
		s.setPhase(phaseFailed)
	default:
		s.setPhase(phaseClosed)
	}
}

// reopenDirectories reads a stored session and opens its workspace and additional
// directories again: they may have gone or changed since the session last ran. It
// returns the session's own MCP servers too.
func (p *Presenter) reopenDirectories(ctx context.Context, sessionID string) (store.Conversation, sessionDirs, []presenters.MCPServer, error) {
	conv, err := p.deps.Store.GetConversation(ctx, sessionID)
	if err != nil {
		return store.Conversation{}, sessionDirs{}, nil, err
	}
	ws, err := presenters.ReopenWorkspace(p.deps.Roots, sessionID, conv.Workspace)
	if err != nil {
		return store.Conversation{}, sessionDirs{}, nil, err
	}
	extraDirs, own, err := p.storedSetup(ctx, sessionID)
	if err != nil {
		return store.Conversation{}, sessionDirs{}, nil, err
	}
	extra, err := p.reopenDirs(sessionID, extraDirs)
	if err != nil {
		return store.Conversation{}, sessionDirs{}, nil, err
	}
	return conv, sessionDirs{ws: ws, extra: extra}, own, nil
}

// attachByLoad reopens the session through session/load when the agent offers it: the
// agent replays the history as events, and n is how many messages. It reports false
// when the agent does not offer it, or its load failed in a way the other ways may not
// (they use the stored transcript).
func (s *session) attachByLoad(ctx context.Context, conn *agentConn, acpID sdk.SessionId, dirs sessionDirs, plan mcpPlan) (n int64, loaded bool, err error) {
	if !conn.init.AgentCapabilities.LoadSession {
		return 0, false, nil
	}
	st, n, err := s.loadFromAgent(ctx, conn, acpID, dirs, plan)
	if err != nil {
		if errors.Is(err, presenters.ErrAuthRequired) || !conn.alive() {
			return 0, false, err
		}
		s.log.Warn("session/load failed; reopening from the stored transcript", "err", err)
		return 0, false, nil
	}
	if err := s.reopened(conn, acpID, dirs.ws, st, plan); err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// resumeOrNew gets an agent session for a session the agent does not load: the same one
// through session/resume when the agent offers it, else a new one (the agent then does
// not remember the earlier turns; the store still has them).
func (s *session) resumeOrNew(ctx context.Context, conn *agentConn, acpID sdk.SessionId, dirs sessionDirs, plan mcpPlan) (sdk.SessionId, sessionState, error) {
	caps := conn.init.AgentCapabilities
	if caps.SessionCapabilities.Resume != nil {
		resp, err := conn.rpc.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: acpID, Cwd: dirs.ws.Root(), McpServers: plan.servers,
			AdditionalDirectories: dirs.forAgent(caps)})
		if err != nil {
			return "", sessionState{}, s.p.sessionCallError(conn, "session/resume", err)
		}
		return acpID, sessionState{resp.Modes, conn.legacy.takeModels(acpID), resp.ConfigOptions}, nil
	}
	resp, err := conn.rpc.NewSession(ctx, sdk.NewSessionRequest{Cwd: dirs.ws.Root(), McpServers: plan.servers, AdditionalDirectories: dirs.forAgent(caps)})
	if err != nil {
		return "", sessionState{}, s.p.sessionCallError(conn, "session/new", err)
	}
	s.log.Info("agent cannot load or resume sessions: reopened as a new agent session; the agent does not remember the earlier turns",
		"acp_session_id", resp.SessionId)
	return resp.SessionId, sessionState{resp.Modes, conn.legacy.takeModels(resp.SessionId), resp.ConfigOptions}, nil
}

// loadFromAgent runs session/load; the agent's replay streams through the normalizer
// as events while it runs. The session is attached to its workspace before it is
// registered, so that the agent's requests during the load can be served.
func (s *session) loadFromAgent(ctx context.Context, conn *agentConn, acpID sdk.SessionId, dirs sessionDirs, plan mcpPlan) (sessionState, int64, error) {
	s.mu.Lock()
	s.attachSandboxLocked(conn, acpID, dirs.ws)
	s.setPhase(phaseAttaching)
	s.norm.startReplay()
	s.mu.Unlock()
	err := conn.register(acpID, s)
	var resp sdk.LoadSessionResponse
	if err == nil {
		resp, err = conn.rpc.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: acpID, Cwd: dirs.ws.Root(), McpServers: plan.servers,
			AdditionalDirectories: dirs.forAgent(conn.init.AgentCapabilities)})
		if err != nil {
			err = s.p.sessionCallError(conn, "session/load", err)
		}
	} else {
		err = fmt.Errorf("%w: agent %s stopped before session/load; try again", presenters.ErrAgentUnavailable, s.p.cfg.ID)
	}
	s.mu.Lock()
	count := s.norm.endReplay(s.emitReplay)
	s.mu.Unlock()
	if err != nil {
		s.detach(phaseOpening)
		return sessionState{}, 0, err
	}
	return sessionState{resp.Modes, conn.legacy.takeModels(acpID), resp.ConfigOptions}, count, nil
}

// reopened makes a reopened session open and tells subscribers. A connection that
// closed meanwhile refuses the session, which is then in error.
func (s *session) reopened(conn *agentConn, acpID sdk.SessionId, ws *sandbox.Workspace, st sessionState, plan mcpPlan) error {
	s.mu.Lock()
	old := s.info
	s.attachLocked(conn, acpID, ws, st, plan)
	s.setPhase(phaseAttaching)
	s.mu.Unlock()
	if err := conn.register(acpID, s); err != nil {
		s.mu.Lock()
		_, _, terms := s.unbindLocked()
		s.setStatus(presenters.SessionError, "the agent stopped while the session was reopened; reopen it with LoadSession")
		s.setPhase(phaseFailed)
		s.mu.Unlock()
		closeTerminals(terms)
		return fmt.Errorf("%w: agent %s stopped while session %s was reopened; try again", presenters.ErrAgentUnavailable, s.p.cfg.ID, s.id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != phaseAttaching { // the agent stopped meanwhile: connGone reported it
		return fmt.Errorf("%w: agent %s stopped while session %s was reopened; try again", presenters.ErrAgentUnavailable, s.p.cfg.ID, s.id)
	}
	s.info.Workspace = ws.Root()
	s.setStatus(presenters.SessionIdle, "")
	s.publishPatch(old)
	s.storeConversationLocked()
	s.setPhase(phaseIdle)
	return nil
}

// replayStored streams the stored history as events marked replay (text as deltas,
// every other block as a block, then MESSAGE_END per message) and returns how many
// messages.
func (s *session) replayStored(ctx context.Context, lc presenters.LoadContext) (int64, error) {
	msgs, err := s.p.deps.Store.Messages(ctx, s.id, presenters.MessageQuery{Limit: lc.MaxHistory})
	if err != nil {
		return 0, err
	}
	emit := s.emit.Replaying()
	var n int64
	for _, m := range msgs {
		if m.Role == presenters.RoleSystem && !lc.IncludeSystemMessages {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == presenters.BlockText {
				emit.MessageDelta(m.ID, m.Role, b.Text)
			} else {
				emit.MessageBlock(m.ID, m.Role, b)
			}
		}
		emit.MessageEnd(presenters.MessageEndPayload{MessageID: m.ID, StopReason: m.StopReason, Usage: m.Usage, Role: m.Role})
		n++
	}
	return n, nil
}

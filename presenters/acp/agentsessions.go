package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// The agent's own sessions and account: session/list (import), session/delete, logout.

// listPageLimit bounds how many pages of session/list one import reads, so that an agent
// whose cursor never ends cannot keep a start going.
const listPageLimit = 100

// importSessions records the agent's sessions of c's workspace (session/list) that
// agenticd does not know yet as closed sessions: ListSessions shows them, LoadSession
// opens them through session/load or session/resume. It runs when a process starts,
// before any session is opened on it; what fails is logged, and the start goes on.
func (p *Presenter) importSessions(ctx context.Context, c *agentConn) {
	if c.init.AgentCapabilities.SessionCapabilities.List == nil {
		p.log.Info("import_sessions is set, but the agent does not offer session/list; nothing to import")
		return
	}
	p.importMu.Lock()
	defer p.importMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	imported := 0
	var cursor *string
	for page := 0; page < listPageLimit; page++ {
		cwd := c.workspace
		resp, err := c.rpc.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &cwd, Cursor: cursor})
		if err != nil {
			p.log.Warn("cannot import the agent's sessions: session/list failed", "workspace", c.workspace, "err", agentErrorText(p.log, err))
			break
		}
		// Read after the agent answered: a session CreateSession stored meanwhile, on
		// another process, is known by its conversation even before the service records
		// its owner.
		known, err := p.knownAgentSessions(ctx, resp.Sessions)
		if err != nil {
			p.log.Warn("cannot import the agent's sessions: reading the stored ones failed", "workspace", c.workspace, "err", err)
			break
		}
		for _, info := range resp.Sessions {
			// The filter is the agent's to apply; a session of another directory could not
			// be opened on this process anyway.
			if info.Cwd != c.workspace || info.SessionId == "" || known[string(info.SessionId)] {
				continue
			}
			if err := p.importSession(ctx, c.workspace, info); err != nil {
				p.log.Warn("cannot import an agent session", "acp_session_id", info.SessionId, "err", err)
				continue
			}
			known[string(info.SessionId)] = true // a page may list it twice
			imported++
		}
		if resp.NextCursor == nil || *resp.NextCursor == "" || (cursor != nil && *cursor == *resp.NextCursor) {
			break
		}
		cursor = resp.NextCursor
	}
	if imported > 0 {
		p.log.Info("imported the agent's sessions", "workspace", c.workspace, "count", imported)
	}
}

// knownAgentSessions are those of the listed sessions agenticd has stored, in any
// workspace: an agent session id names one session of the agent.
func (p *Presenter) knownAgentSessions(ctx context.Context, listed []sdk.SessionInfo) (map[string]bool, error) {
	ids := make([]string, 0, len(listed))
	for _, info := range listed {
		ids = append(ids, string(info.SessionId))
	}
	return p.deps.Store.KnownAgentSessions(ctx, p.cfg.ID, ids)
}

// importSession records one agent session: its conversation (title, time), its
// additional directories (reopened through the workspace roots when it is loaded) and its
// owner, last, so that ListSessions shows only what is whole.
func (p *Presenter) importSession(ctx context.Context, workspace string, info sdk.SessionInfo) error {
	updated := time.Now()
	if info.UpdatedAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *info.UpdatedAt); err == nil {
			updated = t
		}
	}
	id := p.newID()
	conv := store.Conversation{ID: id, AgentID: p.cfg.ID, AgentSessionID: string(info.SessionId), Workspace: workspace,
		Title: deref(info.Title), CreatedAt: updated, UpdatedAt: updated, Closed: true}
	if err := p.deps.Store.CreateConversation(ctx, conv); err != nil {
		return err
	}
	if len(info.AdditionalDirectories) > 0 {
		if err := p.deps.Store.SaveSessionSetup(ctx, store.SessionSetup{SessionID: id, AdditionalDirectories: info.AdditionalDirectories}); err != nil {
			return err
		}
	}
	return p.deps.Store.AddSessionOwner(ctx, store.SessionOwner{SessionID: id, AgentID: p.cfg.ID, Workspace: workspace, CreatedUnixNano: updated.UnixNano()})
}

// DeleteSession ends the session if it is live (as CloseSession) and deletes the agent's
// own copy (session/delete) when the agent offers that; otherwise nothing more. The
// service deletes what agenticd stored of it afterwards. A session whose agent copy
// cannot be deleted (the agent refuses, or cannot start) fails, so that it can be
// retried: with import_sessions, a copy left behind would come back.
func (p *Presenter) DeleteSession(ctx context.Context, sessionID string) error {
	s, err := p.session(ctx, sessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	conn, acpID, workspace := s.conn, s.acpID, s.conv.Workspace
	s.mu.Unlock()
	if err := s.close(ctx); err != nil {
		return err
	}
	p.forget(s)

	p.mu.Lock()
	offers, known := p.caps.SessionCapabilities.Delete != nil, p.initialized
	p.mu.Unlock()
	if known && !offers {
		return nil
	}
	if conn == nil || !conn.alive() {
		ws, err := presenters.ReopenWorkspace(p.deps.Roots, sessionID, workspace)
		if err != nil {
			s.log.Warn("the agent's copy of the session is not deleted: its workspace cannot be used any more", "err", err)
			return nil
		}
		if conn, err = p.ensureConn(ctx, procScope{workspace: ws.Root()}); err != nil {
			return fmt.Errorf("deleting the agent's copy of session %s: %w", sessionID, err)
		}
	}
	if conn.init.AgentCapabilities.SessionCapabilities.Delete == nil {
		return nil
	}
	if _, err := conn.rpc.UnstableDeleteSession(ctx, sdk.UnstableDeleteSessionRequest{SessionId: acpID}); err != nil {
		var re *sdk.RequestError
		if errors.As(err, &re) && (re.Code == -32601 || re.Code == codeResourceNotFound) {
			// Gone already, or the method is missing after all: nothing is left to delete.
			s.log.Info("the agent has no copy of the session to delete", "err", agentErrorText(s.log, err))
			return nil
		}
		return s.agentCallError(conn, "session/delete", err)
	}
	s.log.Info("the agent deleted its copy of the session")
	return nil
}

// Logout logs the agent out of its account (logout, when the agent offers it), in every
// process that runs; with none running, a process is started for it in an empty
// directory of its own. presenters.ErrUnsupported when the agent does not offer logout.
func (p *Presenter) Logout(ctx context.Context) error {
	p.mu.Lock()
	offers, known := p.caps.Auth.Logout != nil, p.initialized
	conns := make([]*agentConn, 0, len(p.conns))
	for _, c := range p.conns {
		if c.alive() {
			conns = append(conns, c)
		}
	}
	p.mu.Unlock()
	if known && !offers {
		return presenters.WithDetail(fmt.Errorf("agent %s does not offer logout: %w", p.cfg.ID, presenters.ErrUnsupported), "unsupported", "logout")
	}
	if len(conns) == 0 {
		dir, err := os.MkdirTemp("", "agenticd-logout-")
		if err != nil {
			return fmt.Errorf("logging agent %s out: %w", p.cfg.ID, err)
		}
		defer os.RemoveAll(dir)
		c, err := p.ensureConn(ctx, procScope{workspace: dir})
		if err != nil {
			return err
		}
		defer func() {
			p.mu.Lock()
			if p.conns[c.key] == c {
				delete(p.conns, c.key)
			}
			p.mu.Unlock()
			c.stop(context.WithoutCancel(ctx))
		}()
		conns = append(conns, c)
	}
	for _, c := range conns {
		if c.init.AgentCapabilities.Auth.Logout == nil {
			return presenters.WithDetail(fmt.Errorf("agent %s does not offer logout: %w", p.cfg.ID, presenters.ErrUnsupported), "unsupported", "logout")
		}
		if _, err := c.rpc.Logout(ctx, sdk.LogoutRequest{}); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("logout: %w", presenters.ErrCancelled)
			}
			return fmt.Errorf("%w: agent %s refused logout: %s", presenters.ErrAgentUnavailable, p.cfg.ID, c.failReason(ctx, err))
		}
	}
	p.log.Info("agent logged out", "processes", len(conns))
	return nil
}

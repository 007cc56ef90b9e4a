package acp

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/acpmodels"
	"github.com/agenticd/agenticd/presenters"
)

var _ presenters.SessionForker = (*Presenter)(nil)

// ForkSession asks the agent for a copy of a live session (session/fork, which the
// SDK has only in its unstable types, so it is sent as agenticd's own request) in the
// source's workspace, directories and MCP servers, and makes it a new session in the
// source's mode. agenticd's stored history of the fork starts empty: the history it
// was forked with is the agent's.
func (p *Presenter) ForkSession(ctx context.Context, sessionID string) (presenters.SessionInfo, error) {
	src, err := p.liveSession(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	src.mu.Lock()
	conn, srcACP, err := src.liveConnLocked()
	cfg := presenters.SessionConfig{Workspace: src.ws, AdditionalDirectories: src.extra, MCPServers: src.mcp,
		ModeID: src.info.CurrentModeID}
	if src.info.Title != "" {
		cfg.Title = "Fork of " + src.info.Title
	}
	src.mu.Unlock()
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	caps := conn.init.AgentCapabilities
	if caps.SessionCapabilities.Fork == nil {
		return presenters.SessionInfo{}, presenters.WithDetail(
			fmt.Errorf("agent %s cannot fork sessions: %w", p.cfg.ID, presenters.ErrUnsupported), "unsupported", sdk.AgentMethodSessionFork)
	}
	plan := planMCP(p.mergedMCPServers(cfg.MCPServers), caps)
	dirs := sessionDirs{ws: cfg.Workspace, extra: cfg.AdditionalDirectories}
	params := struct {
		SessionID             sdk.SessionId   `json:"sessionId"`
		Cwd                   string          `json:"cwd"`
		McpServers            []sdk.McpServer `json:"mcpServers"`
		AdditionalDirectories []string        `json:"additionalDirectories,omitempty"`
	}{srcACP, cfg.Workspace.Root(), plan.servers, dirs.forAgent(caps)}
	if params.McpServers == nil {
		params.McpServers = []sdk.McpServer{}
	}
	p.importMu.RLock()
	raw, err := conn.legacy.call(ctx, conn.stdin, conn.rpc.Done(), sdk.AgentMethodSessionFork, params)
	if err != nil {
		p.importMu.RUnlock()
		return presenters.SessionInfo{}, p.sessionCallError(conn, sdk.AgentMethodSessionFork, err)
	}
	var resp struct {
		SessionID     sdk.SessionId             `json:"sessionId"`
		Modes         *sdk.SessionModeState     `json:"modes"`
		Models        *acpmodels.State          `json:"models"`
		ConfigOptions []sdk.SessionConfigOption `json:"configOptions"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || resp.SessionID == "" {
		p.importMu.RUnlock()
		return presenters.SessionInfo{}, fmt.Errorf("%w: agent %s answered session/fork without a session id", presenters.ErrAgentUnavailable, p.cfg.ID)
	}
	if resp.Modes == nil || !modeOffered(resp.Modes, cfg.ModeID) {
		cfg.ModeID = "" // the fork's modes are its own: its asking mode, if known, as for a new session
	}
	s, err := p.adopt(ctx, conn, cfg, plan, resp.SessionID, sessionState{resp.Modes, resp.Models, resp.ConfigOptions})
	p.importMu.RUnlock()
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	return p.settle(ctx, s, cfg)
}

func modeOffered(m *sdk.SessionModeState, id string) bool {
	for _, mode := range m.AvailableModes {
		if string(mode.Id) == id {
			return true
		}
	}
	return false
}

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/acp"
)

// acpPresenters builds the ACP agents of the config, then one for every known ACP agent
// found on PATH (claude-code-acp, claude-agent-acp, codex-acp, gemini, opencode, qwen,
// copilot) that the config does not already register, by id, by command or by launching
// it some other way (npx, a node script). Agents start on first use.
func acpPresenters(ctx context.Context, cfg Config, deps Deps) ([]presenters.Presenter, error) {
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	acpDeps := acp.Deps{Publisher: deps.Publisher, Roots: deps.Roots, Store: deps.Store, Logger: logger}
	var out []presenters.Presenter
	ids := map[string]bool{}
	commands := map[string]bool{}
	known := map[string]bool{} // the known agents the config launches, however
	for _, a := range cfg.Agents {
		if a.Type != presenters.AgentTypeACP {
			continue
		}
		c := acp.Config{
			ID: a.ID, Command: a.Command, Args: a.Args, Env: a.Env, AuthMethod: a.AuthMethod,
			PermissionTimeout: a.PermissionTimeout, PolicyMode: a.PolicyMode, StartTimeout: a.StartupTimeout,
			IdleTimeout: a.IdleTimeout, ReadPaths: a.ReadPaths, WritePaths: a.WritePaths,
			Name: a.Name, Description: a.Description, Source: cfg.source(),
			ImportSessions: a.ImportSessions,
		}
		if a.APIKeyEnv != "" {
			c.KeepEnv = append(c.KeepEnv, a.APIKeyEnv)
		}
		var err error
		if c.Limits, err = cfg.agentLimits(a); err != nil {
			return out, fmt.Errorf("agent %q: %w", a.ID, err)
		}
		if c.Network, err = a.Network.network(); err != nil {
			return out, fmt.Errorf("agent %q: %w", a.ID, err)
		}
		for _, m := range a.MCPServers {
			c.MCPServers = append(c.MCPServers, acp.MCPServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env, URL: m.URL, Headers: m.Headers})
		}
		p, err := acp.New(c, acpDeps)
		if err != nil {
			return out, err
		}
		out = append(out, p)
		ids[a.ID] = true
		commands[commandName(a.Command)] = true
		known[acp.Recognize(a.Command, a.Args)] = true
	}
	for _, c := range acp.Discover(exec.LookPath) {
		if ids[c.ID] || commands[commandName(c.Command)] || known[c.ID] {
			continue
		}
		c.Source = "found on PATH: " + c.Command
		p, err := acp.New(c, acpDeps)
		if err != nil {
			return out, err
		}
		logger.Info("registered an ACP agent found on PATH", "agent_id", c.ID, "command", c.Command)
		out = append(out, p)
	}
	return out, nil
}

// commandName is a command's program name, so that /usr/bin/gemini and gemini match.
func commandName(cmd string) string { return filepath.Base(cmd) }

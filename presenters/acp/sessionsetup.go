package acp

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// What a session works with beyond its workspace: additional directories and MCP
// servers, and the agent process they call for.

// procScope is what one agent process is confined to: a workspace and the sorted
// additional directories of its sessions. Landlock rules cannot be widened or narrowed
// in a running process, so a process can serve only sessions that were given exactly
// its directories: one with fewer would reach directories it was not given, one with
// more could not reach its own. Sessions therefore share a process when they share the
// workspace and the set of additional directories.
type procScope struct {
	workspace string
	extra     []string // sorted, without duplicates or the workspace itself
	// mcp is what the session's own stdio MCP servers, which the agent starts inside its
	// boundary, need beyond what the agent's configuration gives it.
	mcp launchPaths
}

func newProcScope(ws *sandbox.Workspace, extra []*sandbox.Workspace) procScope {
	sc := procScope{workspace: ws.Root()}
	for _, d := range extra {
		if d.Root() != sc.workspace {
			sc.extra = append(sc.extra, d.Root())
		}
	}
	slices.Sort(sc.extra)
	sc.extra = slices.Compact(sc.extra)
	return sc
}

// key names the process in Presenter.conns: the workspace root alone when there are no
// additional directories.
func (sc procScope) key() string {
	key := sc.workspace
	if len(sc.extra) > 0 {
		key += "\x00" + strings.Join(sc.extra, "\x00")
	}
	if len(sc.mcp.read)+len(sc.mcp.state) > 0 {
		key += "\x00mcp"
		for _, r := range sc.mcp.read {
			key += "\x00r" + r
		}
		for _, s := range sc.mcp.state {
			key += "\x00w" + s.Path
		}
	}
	return key
}

// sessionDirs are a session's workspace and its additional directories, in the order the
// client gave them.
type sessionDirs struct {
	ws    *sandbox.Workspace
	extra []*sandbox.Workspace
}

// scope is the process a session with these directories and its own MCP servers uses:
// one whose boundary admits what those servers need that cfg does not give already.
func (d sessionDirs) scope(cfg Config, own []presenters.MCPServer) procScope {
	sc := newProcScope(d.ws, d.extra)
	need := mcpPaths(own, cfg.Env["HOME"], false)
	for _, r := range need.read {
		if !slices.Contains(cfg.ReadPaths, r) {
			sc.mcp.read = append(sc.mcp.read, r)
		}
	}
	for _, s := range need.state {
		if !slices.Contains(cfg.WritePaths, s.Path) {
			sc.mcp.state = append(sc.mcp.state, s)
		}
	}
	slices.Sort(sc.mcp.read)
	slices.SortFunc(sc.mcp.state, func(a, b StatePath) int { return strings.Compare(a.Path, b.Path) })
	return sc
}

// extraRoots are the additional directories' roots, in the client's order.
func (d sessionDirs) extraRoots() []string {
	var out []string
	for _, w := range d.extra {
		out = append(out, w.Root())
	}
	return out
}

// forAgent is additionalDirectories as the agent gets it: the directories when it
// advertises the capability, else none. The process may use them either way (the client
// granted them, and fs/* requests there are served), but only an agent with the
// capability is told.
func (d sessionDirs) forAgent(caps sdk.AgentCapabilities) []string {
	if caps.SessionCapabilities.AdditionalDirectories == nil {
		return nil
	}
	return d.extraRoots()
}

// within returns the session's directory that holds path, the deepest when several do
// (by lexical prefix; the directory's own checks then decide), the workspace when none
// does (a relative path is the workspace's).
func (d sessionDirs) within(path string) *sandbox.Workspace {
	best, depth := d.ws, -1
	if sandbox.Within(d.ws.Root(), path) {
		depth = len(d.ws.Root())
	}
	for _, w := range d.extra {
		if sandbox.Within(w.Root(), path) && len(w.Root()) > depth {
			best, depth = w, len(w.Root())
		}
	}
	return best
}

// reopenDirs opens a stored session's additional directories again, as its workspace is
// (presenters.ReopenWorkspace): one that cannot be used fails the reopening.
func (p *Presenter) reopenDirs(sessionID string, dirs []string) ([]*sandbox.Workspace, error) {
	out := make([]*sandbox.Workspace, 0, len(dirs))
	for _, dir := range dirs {
		w, err := p.deps.Roots.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("the additional directory %s of session %s cannot be used any more (%v); start a new session without it: %w",
				dir, sessionID, err, presenters.ErrWorkspaceGone)
		}
		out = append(out, w)
	}
	return out, nil
}

// mergedMCPServers are the agent's configured MCP servers with the session's own
// (presenters.MergeMCPServers).
func (p *Presenter) mergedMCPServers(own []presenters.MCPServer) []presenters.MCPServer {
	return presenters.MergeMCPServers(p.cfg.MCPServers, own)
}

// mcpPlan is the MCP servers a session passes to the agent, and the ones it had to
// leave out because the agent cannot take them, each with why.
type mcpPlan struct {
	servers []sdk.McpServer // never nil: agents reject a null mcpServers
	names   []string
	left    []string
}

// planMCP renders servers for an agent with caps. An http server goes as http when
// the agent takes MCP over http; otherwise it is left out (sse is another transport, not
// a stand-in for streamable http).
func planMCP(servers []presenters.MCPServer, caps sdk.AgentCapabilities) mcpPlan {
	plan := mcpPlan{servers: []sdk.McpServer{}}
	for _, m := range servers {
		if m.IsHTTP() {
			if !caps.McpCapabilities.Http {
				plan.left = append(plan.left, fmt.Sprintf("MCP server %q (%s) was left out: the agent does not take MCP servers over http; give it as a command (stdio) instead", m.Name, m.URL))
				continue
			}
			headers := []sdk.HttpHeader{}
			for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
				headers = append(headers, sdk.HttpHeader{Name: k, Value: m.Headers[k]})
			}
			plan.servers = append(plan.servers, sdk.McpServer{Http: &sdk.McpServerHttpInline{Name: m.Name, Url: m.URL, Type: "http", Headers: headers}})
			plan.names = append(plan.names, m.Name)
			continue
		}
		env := []sdk.EnvVariable{}
		for _, k := range slices.Sorted(maps.Keys(m.Env)) {
			env = append(env, sdk.EnvVariable{Name: k, Value: m.Env[k]})
		}
		args := m.Args
		if args == nil {
			args = []string{}
		}
		plan.servers = append(plan.servers, sdk.McpServer{Stdio: &sdk.McpServerStdio{Name: m.Name, Command: m.Command, Args: args, Env: env}})
		plan.names = append(plan.names, m.Name)
	}
	return plan
}

// reportLeftOut tells the session's subscribers and the log which MCP servers the agent
// could not take.
func (s *session) reportLeftOut(plan mcpPlan) {
	for _, why := range plan.left {
		s.log.Warn(why)
		s.emit.Error(presenters.ErrorPayload{Code: "mcp_server_left_out", Message: why})
	}
}

// storedSetup reads what a stored session was created with (store.SessionSetup).
func (p *Presenter) storedSetup(ctx context.Context, sessionID string) ([]string, []presenters.MCPServer, error) {
	setup, err := p.deps.Store.SessionSetup(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	return setup.AdditionalDirectories, setup.MCPServers, nil
}

// Resolve resolves path in the session's directory that holds it (see within), else in
// any other of them: the session's directories as one workspace for the permission
// policy (workspaceResolver).
func (d sessionDirs) Resolve(path string) (string, error) {
	first := d.within(path)
	resolved, firstErr := first.Resolve(path)
	if firstErr == nil {
		return resolved, nil
	}
	for _, w := range append([]*sandbox.Workspace{d.ws}, d.extra...) {
		if w == first {
			continue
		}
		if resolved, err := w.Resolve(path); err == nil {
			return resolved, nil
		}
	}
	return "", firstErr
}

// Root is the workspace's root: the one the policy names in its reasons.
func (d sessionDirs) Root() string { return d.ws.Root() }

// dirFor is the directory an fs/* request for path goes to: ws (the session's
// workspace) or one of the session's additional directories.
func (s *session) dirFor(ws *sandbox.Workspace, path string) *sandbox.Workspace {
	s.mu.Lock()
	extra := s.extra
	s.mu.Unlock()
	return sessionDirs{ws: ws, extra: extra}.within(path)
}

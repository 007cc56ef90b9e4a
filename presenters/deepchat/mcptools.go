package deepchat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/mcp"
)

// sessionTools is a session's MCP client and the tool list its turns offer; guarded by
// session.mu.
type sessionTools struct {
	set *mcp.Set // nil until the first turn of a session with MCP servers
	// defs are the built-in tools and the MCP tools as last listed, by listedFor's turn.
	defs      []toolDef
	specs     map[string]*toolSpec // the MCP tools of defs by qualified name
	listedFor *turn
}

// detachTools takes the session's MCP client away, to be closed; s.mu is held.
func (s *session) detachTools() *mcp.Set {
	set := s.tools.set
	s.tools = sessionTools{}
	return set
}

func serverNames(servers []mcp.Server) []string {
	names := make([]string, len(servers))
	for i, m := range servers {
		names[i] = m.Name
	}
	return names
}

// mcpSet returns the session's MCP client, making it on first use; nil when the session
// has no MCP servers.
func (r *turnRun) mcpSet() *mcp.Set {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools.set == nil {
		servers := mcp.Merge(r.p.cfg.MCPServers, s.servers)
		if len(servers) == 0 {
			return nil
		}
		// Stdio servers run in the workspace of the turn that starts the client, the
		// session's own directory, under its boundary.
		s.tools.set = mcp.NewSet(servers, r.ws, r.p.log.With("session_id", s.conv.ID))
	}
	return s.tools.set
}

// toolDefs are the tools offered to the model in this round: the built-in ones and
// every MCP server's. The MCP servers are asked for their tools in the first round of
// each turn (a server not running yet is started then) and again when one announced a
// new list; a server that fails is reported with an ERROR event and its tools left out.
func (r *turnRun) toolDefs(ctx context.Context) []toolDef {
	set := r.mcpSet()
	if set == nil {
		return toolDefs
	}
	r.s.mu.Lock()
	defs, listed := r.s.tools.defs, r.s.tools.listedFor == r.t
	r.s.mu.Unlock()
	if listed && !set.Changed() {
		return defs
	}
	tools, errs := set.Tools(ctx)
	if ctx.Err() != nil {
		return toolDefs
	}
	for _, err := range errs {
		r.mcpFailed(err, "Its tools are not offered in this turn; agenticd starts it again at the next message.")
	}
	defs = slices.Clone(toolDefs)
	specs := make(map[string]*toolSpec, len(tools))
	for _, t := range tools {
		spec := mcpToolSpec(set, t)
		specs[spec.name] = spec
		defs = append(defs, toolDef{Type: "function", Function: functionDef{Name: spec.name, Description: spec.description, Parameters: t.InputSchema}})
	}
	r.s.mu.Lock()
	r.s.tools.defs, r.s.tools.specs, r.s.tools.listedFor = defs, specs, r.t
	r.s.mu.Unlock()
	return defs
}

// mcpFailed reports a server that could not be started, reached or kept running; then
// says what follows.
func (r *turnRun) mcpFailed(err error, then string) {
	r.log.Warn("MCP server failed", "err", err)
	r.em.Error(presenters.ErrorPayload{Code: "mcp_server_failed", MessageID: r.reply.ID, Retryable: true,
		Message: err.Error() + ". " + then + " The server log has its output."})
}

// spec returns the tool the model named: a built-in one or an MCP tool of the last
// listing.
func (r *turnRun) spec(name string) *toolSpec {
	if spec := toolsByName[name]; spec != nil {
		return spec
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.tools.specs[name]
}

// availableTools names the tools the model may call now.
func (r *turnRun) availableTools() string {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	names := make([]string, 0, len(r.s.tools.specs))
	for name := range r.s.tools.specs {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(append([]string{toolNames()}, names...), ", ")
}

// mcpToolSpec is an MCP tool as a tool of the turn. Its annotations, the server's own
// word about it, choose how the permission policy treats it:
//
//	read-only            a read (low risk): balanced and permissive let it run
//	not destructive      a write (medium risk): permissive lets it run
//	destructive          a write (high risk) that every mode asks for
//	no annotations       a tool of unknown kind: every mode asks
func mcpToolSpec(set *mcp.Set, t mcp.Tool) *toolSpec {
	spec := &toolSpec{name: t.QualifiedName, server: t.Server, kind: presenters.ToolOther, permission: presenters.PermissionAll,
		risk: presenters.RiskMedium}
	nature := "of unknown kind (no annotations)"
	switch h := t.Hints; {
	case !h.Annotated:
	case h.ReadOnly:
		spec.kind, spec.permission, spec.risk, nature = presenters.ToolRead, presenters.PermissionRead, presenters.RiskLow, "read-only"
	case h.Destructive:
		spec.kind, spec.permission, spec.risk, spec.alwaysAsk, nature = presenters.ToolEdit, presenters.PermissionWrite, presenters.RiskHigh, true, "destructive"
	default:
		spec.kind, spec.permission, nature = presenters.ToolEdit, presenters.PermissionWrite, "not destructive"
	}
	if t.Hints.OpenWorld {
		nature += ", reaches outside"
	}
	spec.description = fmt.Sprintf("[MCP server %s] %s", t.Server, t.Description)
	title := t.Title
	if title == "" {
		title = t.Name
	}
	spec.prepare = func(r *turnRun, args json.RawMessage) (toolPlan, error) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			return toolPlan{}, errors.New("the arguments must be a JSON object")
		}
		return toolPlan{
			title:       title + " (" + t.Server + ")",
			description: fmt.Sprintf("call %s of MCP server %s (%s, as the server declares it)", t.Name, t.Server, nature),
			run: func(ctx context.Context, _ func([]presenters.ToolContent)) (toolOutput, error) {
				res, err := set.Call(ctx, t, args)
				if err != nil {
					if errors.Is(err, mcp.ErrServerFailed) && ctx.Err() == nil {
						r.mcpFailed(err, "The model was told the call failed.")
					}
					return toolOutput{}, err
				}
				out := toolOutput{text: res.Text, content: res.Content}
				for _, ui := range res.UIResources {
					out.blocks = append(out.blocks, presenters.Block{Type: presenters.BlockMcpUIResource, McpUIResource: &ui})
				}
				if res.IsError {
					return out, errors.New("the tool reported an error")
				}
				return out, nil
			},
		}, nil
	}
	return spec
}

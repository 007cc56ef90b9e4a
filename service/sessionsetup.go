package service

import (
	"fmt"
	"slices"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// maxAdditionalDirectories and maxMCPServers bound what one session may name.
const (
	maxAdditionalDirectories = 32
	maxMCPServers            = 32
)

// mcpServersFromPB converts and checks a session's MCP servers.
func mcpServersFromPB(in []*pb.McpServer) ([]presenters.MCPServer, error) {
	if len(in) > maxMCPServers {
		return nil, invalidField("config.mcp_servers", "config.mcp_servers has %d servers, more than %d", len(in), maxMCPServers)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]presenters.MCPServer, len(in))
	for i, m := range in {
		out[i] = presenters.MCPServer{Name: m.GetName()}
		switch t := m.GetTransport().(type) {
		case *pb.McpServer_Stdio:
			out[i].Command, out[i].Args, out[i].Env = t.Stdio.GetCommand(), t.Stdio.GetArgs(), t.Stdio.GetEnv()
		case *pb.McpServer_Http:
			out[i].URL, out[i].Headers = t.Http.GetUrl(), t.Http.GetHeaders()
		}
	}
	if err := presenters.CheckMCPServers("config.mcp_servers", out); err != nil {
		return nil, inField("config.mcp_servers", err)
	}
	return out, nil
}

// openAdditionalDirectories admits a session's further directories as its workspace is
// admitted (sandbox.Roots.Open): each under a workspace root, none twice, none the
// workspace itself.
func (s *Service) openAdditionalDirectories(dirs []string, workspace *sandbox.Workspace) ([]*sandbox.Workspace, error) {
	if len(dirs) > maxAdditionalDirectories {
		return nil, invalidField("config.additional_directories", "config.additional_directories has %d directories, more than %d", len(dirs), maxAdditionalDirectories)
	}
	if len(dirs) == 0 {
		return nil, nil
	}
	out := make([]*sandbox.Workspace, 0, len(dirs))
	seen := []string{workspace.Root()}
	for i, d := range dirs {
		field := fmt.Sprintf("config.additional_directories[%d]", i)
		if d == "" {
			return nil, invalidField(field, "%s is empty: give an absolute directory under one of the server's workspace_roots", field)
		}
		ws, err := s.roots.Open(d)
		if err != nil {
			return nil, &fieldError{field: field, err: err}
		}
		if slices.Contains(seen, ws.Root()) {
			return nil, invalidField(field, "%s (%s) is the workspace or another of the directories: name each once", field, ws.Root())
		}
		seen = append(seen, ws.Root())
		out = append(out, ws)
	}
	return out, nil
}

// supportsSetup refuses what the agent cannot use: MCP servers for an agent without MCP,
// further directories for one that cannot work in them.
func supportsSetup(agent presenters.AgentInfo, servers []presenters.MCPServer, dirs []*sandbox.Workspace) error {
	if len(servers) > 0 && !agent.Capabilities.SupportsMCP {
		return presenters.WithDetail(fmt.Errorf("agent %s cannot use MCP servers (capabilities.supports_mcp is false): leave config.mcp_servers empty: %w", agent.ID, presenters.ErrUnsupported), "unsupported", "mcp_servers")
	}
	if len(dirs) > 0 && !agent.Capabilities.SupportsAdditionalDirectories {
		return presenters.WithDetail(fmt.Errorf("agent %s cannot work in additional directories (capabilities.supports_additional_directories is false): leave config.additional_directories empty: %w", agent.ID, presenters.ErrUnsupported), "unsupported", "additional_directories")
	}
	return nil
}

// setupOf is what the store keeps of a session's setup.
func setupOf(sessionID string, dirs []*sandbox.Workspace, servers []presenters.MCPServer) store.SessionSetup {
	setup := store.SessionSetup{SessionID: sessionID, MCPServers: servers}
	for _, d := range dirs {
		setup.AdditionalDirectories = append(setup.AdditionalDirectories, d.Root())
	}
	return setup
}

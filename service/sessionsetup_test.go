package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

func stdioServer(name, command string) *pb.McpServer {
	return &pb.McpServer{Name: name, Transport: &pb.McpServer_Stdio{Stdio: &pb.McpStdioServer{Command: command, Args: []string{"-v"}, Env: map[string]string{"K": "v"}}}}
}

// A session's MCP servers and further directories reach an agent that can use them, are
// stored for loading it again, and are refused for an agent that cannot.
func TestCreateSessionSetup(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	e.fake.caps = presenters.Capabilities{SupportsMCP: true, SupportsAdditionalDirectories: true}
	var got presenters.SessionConfig
	e.fake.createFn = func(_ context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
		got = cfg
		return presenters.SessionInfo{SessionID: "with-setup", Workspace: cfg.Workspace.Root()}, nil
	}
	extra := t.TempDir()
	e2 := newEnv(t, envOptions{}) // a second env's root is no root of e's
	servers := []*pb.McpServer{
		stdioServer("files", "mcp-files"),
		{Name: "web", Transport: &pb.McpServer_Http{Http: &pb.McpHttpServer{Url: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}}},
	}
	sub := mkdir(t, e.root, "sub")
	resp, err := e.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{
		Workspace: e.root, McpServers: servers, AdditionalDirectories: []string{sub},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []presenters.MCPServer{
		{Name: "files", Command: "mcp-files", Args: []string{"-v"}, Env: map[string]string{"K": "v"}},
		{Name: "web", URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}
	if !reflect.DeepEqual(got.MCPServers, want) {
		t.Errorf("presenter got servers %+v, want %+v", got.MCPServers, want)
	}
	if len(got.AdditionalDirectories) != 1 || got.AdditionalDirectories[0].Root() != sub {
		t.Errorf("presenter got directories %v, want %s opened", got.AdditionalDirectories, sub)
	}
	setup, err := e.store.SessionSetup(ctx, resp.GetSession().GetSessionId())
	if err != nil || !reflect.DeepEqual(setup.MCPServers, want) || !reflect.DeepEqual(setup.AdditionalDirectories, []string{sub}) {
		t.Errorf("stored setup %+v, %v", setup, err)
	}

	bad := []struct {
		name   string
		agent  string
		cfg    *pb.SessionConfig
		code   codes.Code
		reason pb.ErrorReason
		field  string
		keys   []string
	}{
		{"no MCP", otherID, &pb.SessionConfig{Workspace: e.root, McpServers: servers[:1]}, codes.FailedPrecondition, pb.ErrorReason_ERROR_REASON_UNSUPPORTED, "", []string{"unsupported"}},
		{"no directories", otherID, &pb.SessionConfig{Workspace: e.root, AdditionalDirectories: []string{sub}}, codes.FailedPrecondition, pb.ErrorReason_ERROR_REASON_UNSUPPORTED, "", []string{"unsupported"}},
		{"server without a name", fakeID, &pb.SessionConfig{Workspace: e.root, McpServers: []*pb.McpServer{stdioServer("", "x")}}, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "config.mcp_servers[0]", nil},
		{"server name twice", fakeID, &pb.SessionConfig{Workspace: e.root, McpServers: []*pb.McpServer{stdioServer("a", "x"), stdioServer("a", "y")}}, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "config.mcp_servers[1]", nil},
		{"server without transport", fakeID, &pb.SessionConfig{Workspace: e.root, McpServers: []*pb.McpServer{{Name: "a"}}}, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "config.mcp_servers[0]", nil},
		{"directory outside the roots", fakeID, &pb.SessionConfig{Workspace: e.root, AdditionalDirectories: []string{e2.root}}, workspaceNotAllowed, pb.ErrorReason_ERROR_REASON_WORKSPACE_NOT_ALLOWED, "config.additional_directories[0]", nil},
		{"directory not there", fakeID, &pb.SessionConfig{Workspace: e.root, AdditionalDirectories: []string{extra + "/nope"}}, workspaceNotAllowed, pb.ErrorReason_ERROR_REASON_WORKSPACE_NOT_ALLOWED, "config.additional_directories[0]", nil},
		{"the workspace again", fakeID, &pb.SessionConfig{Workspace: e.root, AdditionalDirectories: []string{e.root}}, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "config.additional_directories[0]", nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: tc.agent, Config: tc.cfg})
			wantReason(t, err, tc.code, tc.reason, tc.field, tc.keys...)
		})
	}
}

// workspaceNotAllowed is the code of a directory the workspace roots do not admit.
var workspaceNotAllowed = reasonCodes[pb.ErrorReason_ERROR_REASON_WORKSPACE_NOT_ALLOWED]

// DeleteSession removes what the server stored of a session and tells subscribers; a
// repeat with the same request_id is answered as the first, one without is NOT_FOUND.
func TestDeleteSession(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	info := e.createSession(t, fakeID)
	id := info.GetSessionId()
	if _, err := e.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: textContent("hi")}); err != nil {
		t.Fatal(err)
	}
	stream := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(e.hub.LastSequence())})
	req := &pb.DeleteSessionRequest{SessionId: id, RequestId: "3b2f7d8e-0c7a-4d0e-9b6a-2f1e5c4d3a21"}
	if _, err := e.client.DeleteSession(ctx, req); err != nil {
		t.Fatal(err)
	}
	// The agent's own SESSION_CLOSED comes first (the session was open), then the
	// server's, which says the session is gone.
	for {
		ev, err := stream.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetSessionClosed().GetReason() == deletedReason {
			break
		}
	}
	if _, err := e.store.SessionOwner(ctx, id); !errors.Is(err, presenters.ErrNotFound) {
		t.Errorf("owner after delete: %v", err)
	}
	if n, err := e.store.CountMessages(ctx, id); err == nil && n != 0 {
		t.Errorf("%d messages left", n)
	}
	if _, err := e.client.DeleteSession(ctx, req); err != nil {
		t.Errorf("the same request again: %v, want the first answer", err)
	}
	_, err := e.client.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: id})
	wantReason(t, err, codes.NotFound, pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, "", "session_id")
}

// deletingFake deletes the agent's own copy of a session and can log out.
type deletingFake struct {
	*fakePresenter
	deleted   []string
	loggedOut bool
}

func (d *deletingFake) DeleteSession(ctx context.Context, sessionID string) error {
	d.deleted = append(d.deleted, sessionID)
	return d.fakePresenter.CloseSession(ctx, sessionID)
}

func (d *deletingFake) Logout(context.Context) error {
	d.loggedOut = true
	return nil
}

var (
	_ sessionDeleter = (*deletingFake)(nil)
	_ agentLogout    = (*deletingFake)(nil)
)

// An agent that deletes its own copy is asked to; LogoutAgent reaches an agent that can
// log out and is UNSUPPORTED for one that cannot.
func TestDeleteAndLogoutReachTheAgent(t *testing.T) {
	ctx := context.Background()
	var d *deletingFake
	e := newEnv(t, envOptions{wrapOther: func(f *fakePresenter) presenters.Presenter {
		d = &deletingFake{fakePresenter: f}
		return d
	}})
	id := e.createSession(t, otherID).GetSessionId()
	if _, err := e.client.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.deleted, []string{id}) {
		t.Errorf("the agent deleted %v, want [%s]", d.deleted, id)
	}
	resp, err := e.client.LogoutAgent(ctx, &pb.LogoutAgentRequest{AgentId: otherID})
	if err != nil || !d.loggedOut || resp.GetAgent().GetAgentId() != otherID {
		t.Errorf("LogoutAgent: %v, %v; logged out %v", resp, err, d.loggedOut)
	}
	_, err = e.client.LogoutAgent(ctx, &pb.LogoutAgentRequest{AgentId: fakeID})
	wantReason(t, err, codes.FailedPrecondition, pb.ErrorReason_ERROR_REASON_UNSUPPORTED, "", "unsupported")
	_, err = e.client.LogoutAgent(ctx, &pb.LogoutAgentRequest{})
	wantReason(t, err, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "agent_id")
}

// mkdir makes a directory under parent and returns its path.
func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

func TestHealthServing(t *testing.T) {
	s := startServer(t, daemon.Config{})
	for _, svc := range []string{"", "agentic.v1.AgenticService"} {
		resp, err := healthpb.NewHealthClient(s.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health check %q: %v", svc, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, want SERVING", svc, resp.GetStatus())
		}
	}
	if _, err := os.Stat(filepath.Join(s.Cfg.DataDir, daemon.DatabaseFile)); err != nil {
		t.Errorf("database file under the data dir: %v", err)
	}
}

func TestListAgentsMatchesRegistration(t *testing.T) {
	s := startServer(t, daemon.Config{})
	resp, err := s.Client.ListAgents(context.Background(), &agenticv1.ListAgentsRequest{})
	if err != nil {
		t.Fatalf("ListAgents: %v", err)
	}
	seen := map[string]bool{}
	for _, a := range resp.GetAgents() {
		if a.GetAgentId() == "" || seen[a.GetAgentId()] {
			t.Errorf("agent id %q empty or listed twice", a.GetAgentId())
		}
		seen[a.GetAgentId()] = true
		if a.GetType() == agenticv1.AgentType_AGENT_TYPE_UNSPECIFIED || a.GetStatus() == agenticv1.AgentStatus_AGENT_STATUS_UNSPECIFIED {
			t.Errorf("agent %s: type %v, status %v; both must be set", a.GetAgentId(), a.GetType(), a.GetStatus())
		}
	}
}

func TestCreateSessionRefusesWorkspaceOutsideRoots(t *testing.T) {
	s := startServer(t, daemon.Config{})
	outside := t.TempDir() // a real directory, but not under the server's root
	_, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
		AgentId: "deepchat.default",
		Config:  &agenticv1.SessionConfig{Workspace: outside},
	})
	if status.Code(err) != codes.InvalidArgument || reasonOf(err) != "WORKSPACE_NOT_ALLOWED" {
		t.Fatalf("CreateSession outside the roots: %v (reason %q), want INVALID_ARGUMENT WORKSPACE_NOT_ALLOWED", err, reasonOf(err))
	}
	if msg := status.Convert(err).Message(); !containsAll(msg, outside, s.Cfg.WorkspaceRoots[0]) {
		t.Errorf("message %q should name the workspace and the allowed roots", msg)
	}
}

func TestCreateSessionUnknownAgent(t *testing.T) {
	s := startServer(t, daemon.Config{})
	_, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
		AgentId: "acp.nobody.nothing",
		Config:  &agenticv1.SessionConfig{Workspace: s.Cfg.WorkspaceRoots[0]},
	})
	if status.Code(err) != codes.NotFound || reasonOf(err) != "AGENT_NOT_FOUND" {
		t.Fatalf("CreateSession with an unknown agent: %v (reason %q), want NOT_FOUND AGENT_NOT_FOUND", err, reasonOf(err))
	}
}

func TestReflectionListsServices(t *testing.T) {
	s := startServer(t, daemon.Config{})
	stream, err := reflectionpb.NewServerReflectionClient(s.Conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	defer func() { _ = stream.CloseSend() }()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{"agentic.v1.AgenticService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v; missing %s", names, want)
		}
	}
}

func TestTokenRequiredExceptHealth(t *testing.T) {
	s := startServer(t, daemon.Config{Token: "s3cret-0123456789abcdef"})
	if _, err := s.Client.ListAgents(context.Background(), &agenticv1.ListAgentsRequest{}); err != nil {
		t.Fatalf("ListAgents with the token: %v", err)
	}
	bare, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bare.Close() }()
	_, err = agenticv1.NewAgenticServiceClient(bare).ListAgents(context.Background(), &agenticv1.ListAgentsRequest{})
	if status.Code(err) != codes.Unauthenticated || reasonOf(err) != "TOKEN_INVALID" {
		t.Errorf("ListAgents without a token: %v (reason %q), want UNAUTHENTICATED TOKEN_INVALID", err, reasonOf(err))
	}
	if _, err := healthpb.NewHealthClient(bare).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a token: %v, want it to answer", err)
	}
}

func TestRefusesNonLoopbackWithoutToken(t *testing.T) {
	_, err := daemon.Start(context.Background(), daemon.Config{
		Listen:         "0.0.0.0:0",
		DataDir:        t.TempDir(),
		WorkspaceRoots: []string{t.TempDir()},
	}, nil)
	if err == nil {
		t.Fatal("agenticd started on 0.0.0.0 without a token")
	}
	if !containsAll(err.Error(), "token", "0.0.0.0") {
		t.Errorf("refusal %q should say why (no token) and where", err)
	}
}

// A subscriber is told where to resume when the server stops; after the restart that point
// predates what the new process holds, so resuming there is OUT_OF_RANGE, and a point
// from the new process is accepted.
func TestRestartSubscribeResume(t *testing.T) {
	s := startServer(t, daemon.Config{})
	events := s.Subscribe(t, &agenticv1.SubscribeRequest{})
	s.Stop()
	if err := events.Err(t); status.Code(err) != codes.Unavailable || reasonOf(err) != "SHUTTING_DOWN" {
		t.Fatalf("stream at shutdown ended with %v (reason %q), want UNAVAILABLE SHUTTING_DOWN", err, reasonOf(err))
	}
	events.CaughtUp(t) // also a live-only stream says where live starts
	s.Restart(t)

	stream, err := s.Client.Subscribe(context.Background(), subscribeAfter(1))
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.OutOfRange || reasonOf(err) != "RESUME_POINT_EXPIRED" {
		t.Fatalf("resume at a pre-restart point: %v (reason %q), want OUT_OF_RANGE RESUME_POINT_EXPIRED", err, reasonOf(err))
	}
	stream, err = s.Client.Subscribe(context.Background(), subscribeAfter(1<<40))
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.OutOfRange || reasonOf(err) != "RESUME_POINT_UNKNOWN" {
		t.Fatalf("resume at a future point: %v (reason %q), want OUT_OF_RANGE RESUME_POINT_UNKNOWN", err, reasonOf(err))
	}

	// A point of the new process, before any event of it, is accepted; the stream then
	// carries what happens next.
	created, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
		AgentId: "deepchat.default",
		Config:  &agenticv1.SessionConfig{Workspace: s.Cfg.WorkspaceRoots[0]},
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	point := created.GetSession().GetLastSequence()
	events = s.Subscribe(t, subscribeAfter(point, created.GetSession().GetSessionId()))
	if caughtUp := events.CaughtUp(t); caughtUp < point {
		t.Errorf("resumed after %d, caught up at %d: before the resume point", point, caughtUp)
	}
	if _, err := s.Client.CloseSession(context.Background(), &agenticv1.CloseSessionRequest{SessionId: created.GetSession().GetSessionId()}); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	closed := events.Until(t, IsType(agenticv1.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CLOSED))
	if closed[0].GetSequence() != point+1 {
		t.Errorf("resumed at %d, first event %d; want %d (no gap)", point, closed[0].GetSequence(), point+1)
	}
}

// With the default workspace root (the home directory), which holds agenticd's data dir
// and config file, sessions still cannot work in them.
func TestServersOwnFilesAreNoWorkspace(t *testing.T) {
	home := t.TempDir()
	cfg := daemon.Config{
		WorkspaceRoots: []string{home},
		DataDir:        filepath.Join(home, ".local", "share", "agenticd"),
		File:           filepath.Join(home, "agenticd.yaml"),
	}
	if err := os.WriteFile(cfg.File, []byte("token: secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	for _, dir := range []string{cfg.DataDir, filepath.Join(home, ".local", "share", "agenticd", "..", "agenticd")} {
		_, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
			AgentId: "deepchat.default",
			Config:  &agenticv1.SessionConfig{Workspace: dir},
		})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "agenticd's own data") {
			t.Errorf("a session in %s: %v, want INVALID_ARGUMENT naming agenticd's own data", dir, err)
		}
	}
	// The home directory itself holds them: its processes could write its whole
	// workspace, so it is refused too; a project inside it is fine.
	_, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
		AgentId: "deepchat.default",
		Config:  &agenticv1.SessionConfig{Workspace: home},
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "holds agenticd's own files") {
		t.Errorf("a session in the home directory itself: %v, want INVALID_ARGUMENT naming agenticd's files", err)
	}
	project := filepath.Join(home, "src", "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
		AgentId: "deepchat.default",
		Config:  &agenticv1.SessionConfig{Workspace: project},
	}); err != nil {
		t.Errorf("a session in a project below the home directory: %v", err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

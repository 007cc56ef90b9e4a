package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// A gRPC core client (Python, Ruby, C++) refuses response headers over 8 KiB and reports
// INTERNAL "RST_STREAM" instead of the status; status messages stay well below it.
const statusMessageLimit = 2048

// Overlong ids and paths are echoed shortened over a real loopback connection: the code is
// the real one and the message small.
func TestOverlongValuesGetBoundedStatus(t *testing.T) {
	s := startServer(t, daemon.Config{})
	ctx := context.Background()
	longID := strings.Repeat("i", 9000)
	_, err := s.Client.GetSession(ctx, &agenticv1.GetSessionRequest{SessionId: longID})
	if st := status.Convert(err); st.Code() != codes.NotFound || len(st.Message()) > statusMessageLimit || !strings.Contains(st.Message(), "unknown session") ||
		reasonOf(err) != "SESSION_NOT_FOUND" {
		t.Fatalf("GetSession with a 9000-character id: %v %s, %d bytes: %.300q", st.Code(), reasonOf(err), len(st.Message()), st.Message())
	}
	workspace := filepath.Join(s.Cfg.WorkspaceRoots[0], strings.Repeat("w", 4000))
	_, err = s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: "deepchat.default", Config: &agenticv1.SessionConfig{Workspace: workspace}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || len(st.Message()) > statusMessageLimit {
		t.Fatalf("CreateSession with a 4000-character workspace: %v, %d bytes: %.300q", st.Code(), len(st.Message()), st.Message())
	}

	// The client that failed: Debian's Python grpcio with the generated stubs.
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import grpc").Run(); err != nil {
		t.Skipf("no grpcio for %s (%v): the Python client check needs python3-grpcio", python, err)
	}
	script := `
import sys
import grpc
from agentic.v1 import service_pb2, service_pb2_grpc
stub = service_pb2_grpc.AgenticServiceStub(grpc.insecure_channel(sys.argv[1]))
for call, req in [
        (stub.GetSession, service_pb2.GetSessionRequest(session_id="i" * 9000)),
        (stub.CreateSession, service_pb2.CreateSessionRequest(agent_id="deepchat.default",
            config=service_pb2.SessionConfig(workspace=sys.argv[2]))),
]:
    try:
        call(req, timeout=30, metadata=[("authorization", "Bearer " + sys.argv[3])])
        print("OK")
    except grpc.RpcError as e:
        print(e.code().name)
`
	cmd := exec.Command(python, "-c", script, s.Addr, workspace, s.Token)
	cmd.Env = append(cmd.Environ(), "PYTHONPATH="+filepath.Join("..", "gen", "python", "src"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "NOT_FOUND INVALID_ARGUMENT" {
		t.Fatalf("the Python client saw %q, want NOT_FOUND and INVALID_ARGUMENT", out)
	}
}

// A session's history outlives its agent's removal from the config: after a restart
// without the agent, GetMessages returns what was said, GetSession shows the session
// closed and why, and a new message is FAILED_PRECONDITION naming the agent.
func TestHistoryOutlivesRemovedAgent(t *testing.T) {
	s, llm, ws := startDeepChat(t)
	sid := dcSession(t, s, ws, "balanced")
	events := dcSubscribe(t, s, sid)
	llm.script(dcText("Hello ", "there."))
	sent := dcSend(t, s, sid, "hi")
	events.Until(t, dcIsEnd(sent.GetMessageId()))
	events.Close()
	before := dcMessages(t, s, sid)

	s.Stop()
	s.Cfg.Agents[0].ID = "deepchat.fake.renamed"
	s.Restart(t)

	after := dcMessages(t, s, sid)
	if len(after) != 2 || len(after) != len(before) {
		t.Fatalf("%d messages after the agent went, %d before", len(after), len(before))
	}
	for i := range before {
		if !proto.Equal(before[i], after[i]) {
			t.Fatalf("message %d changed:\n%v\n%v", i, before[i], after[i])
		}
	}
	got, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sid})
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	info := got.GetSession()
	if info.GetStatus() != agenticv1.SessionStatus_SESSION_STATUS_CLOSED || !strings.Contains(info.GetStatusReason(), dcAgent) ||
		info.GetMessageCount() != 2 || info.GetCurrentModeId() != "balanced" {
		t.Fatalf("session = %v", info)
	}
	_, err = s.Client.SendMessage(context.Background(), &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("more")})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), dcAgent) {
		t.Fatalf("SendMessage: %v %q, want FAILED_PRECONDITION naming %s", st.Code(), st.Message(), dcAgent)
	}
	if reason := reasonOf(err); reason != "AGENT_NOT_CONFIGURED" {
		t.Fatalf("SendMessage: reason %q, want AGENT_NOT_CONFIGURED", reason)
	}
}

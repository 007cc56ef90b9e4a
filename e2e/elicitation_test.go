package e2e

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// An ACP agent asks for input through the real daemon: a form, answered by a client
// after a refused attempt (content not matching the schema), and a URL the agent itself
// reports complete. Every subscriber sees both asked and resolved, and GetSession lists
// what waits.
func TestACPElicitationOverGRPC(t *testing.T) {
	root, ws := workspaceUnder(t)
	const id = "acp.test.scripted"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, id, `{"turns": [[
	 {"elicit": {"message": "Which port?", "toolCallId": "cfg-1",
	   "schema": {"type": "object", "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}, "tls": {"type": "boolean"}}, "required": ["port"]}}},
	 {"elicit": {"mode": "url", "message": "Log in", "url": "https://example.com/login", "id": "login-1", "completeAfter": "50ms"}}
	]]}`)}})
	ctx := context.Background()
	created, err := s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sid := created.GetSession().GetSessionId()
	if !created.GetSession().GetCapabilities().GetSupportsElicitation() {
		t.Errorf("capabilities %v: want supports_elicitation", created.GetSession().GetCapabilities())
	}
	after := lastSequence(t, s, sid)
	if _, err := s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("configure")}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	var resolutions []*agenticv1.ElicitationResolved
	var said []string
	follow(t, s, sid, after, func(ev *agenticv1.AgenticEvent) bool {
		if r := ev.GetElicitationRequired().GetRequest(); r != nil && r.GetMode() == agenticv1.ElicitationMode_ELICITATION_MODE_FORM {
			answerForm(t, s, sid, r)
		}
		if r := ev.GetElicitationResolved(); r != nil {
			resolutions = append(resolutions, r)
		}
		if d := ev.GetMessageDelta(); d != nil && d.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			said = append(said, d.GetText())
		}
		return ev.GetStatusChanged().GetStatus() == agenticv1.SessionStatus_SESSION_STATUS_IDLE
	})
	if want := []string{`elicitation: accept {"port":8443,"tls":true}`, "elicitation: accept"}; !slices.Equal(said, want) {
		t.Fatalf("the agent said %q, want %q", said, want)
	}
	if len(resolutions) != 2 || resolutions[0].GetDecidedBy() != agenticv1.ElicitationDecider_ELICITATION_DECIDER_USER || resolutions[0].GetToolId() != "cfg-1" ||
		resolutions[1].GetDecidedBy() != agenticv1.ElicitationDecider_ELICITATION_DECIDER_AGENT ||
		resolutions[1].GetAction() != agenticv1.ElicitationAction_ELICITATION_ACTION_ACCEPT {
		t.Fatalf("resolutions %v: want the form by the user, the URL by the agent", resolutions)
	}
	got, err := s.Client.GetSession(ctx, &agenticv1.GetSessionRequest{SessionId: sid})
	if err != nil || len(got.GetSession().GetPendingElicitations()) != 0 {
		t.Fatalf("after the turn: %v pending, %v", got.GetSession().GetPendingElicitations(), err)
	}
}

// answerForm checks that GetSession lists the form, answers it wrongly (refused, naming
// the field), then rightly.
func answerForm(t *testing.T, s *testServer, sid string, r *agenticv1.ElicitationRequest) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Client.GetSession(ctx, &agenticv1.GetSessionRequest{SessionId: sid})
	if pending := got.GetSession().GetPendingElicitations(); err != nil || len(pending) != 1 || pending[0].GetElicitationId() != r.GetElicitationId() {
		t.Errorf("GetSession while asked: %v, pending %v", err, pending)
	}
	req := &agenticv1.RespondElicitationRequest{SessionId: sid, ElicitationId: r.GetElicitationId(), Action: agenticv1.ElicitationAction_ELICITATION_ACTION_ACCEPT,
		Content: mustStruct(t, map[string]any{"port": 70000})}
	_, err = s.Client.RespondElicitation(ctx, req)
	if status.Code(err) != codes.InvalidArgument || badField(err) != "content.port" {
		t.Errorf("port 70000: %v (field %q), want INVALID_ARGUMENT on content.port", err, badField(err))
	}
	req.Content = mustStruct(t, map[string]any{"port": 8443, "tls": true})
	resp, err := s.Client.RespondElicitation(ctx, req)
	if err != nil || resp.GetResolution().GetAction() != agenticv1.ElicitationAction_ELICITATION_ACTION_ACCEPT {
		t.Errorf("RespondElicitation: %v, %v", resp, err)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// badField is the field an INVALID_ARGUMENT's BadRequest names.
func badField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

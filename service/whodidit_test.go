package service

import (
	"cmp"
	"context"
	"encoding/json"
	"testing"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// The events that answer a person name the principal that answered (the user message's
// end, a permission's decision, an elicitation's resolution, the session's load and
// close), and every audit entry names who acted: the creator, the one who loaded or
// closed the session, and for what the agent did in a turn the principal whose message
// started it.
func TestEventsAndAuditNameThePrincipal(t *testing.T) {
	e := principalsEnv(t)
	conn := dialListener(t, e.lis, aliceToken)
	defer conn.Close()
	alice := pb.NewAgenticServiceClient(conn)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	e.fake.sendFn = func(_ context.Context, id string, _ presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
		res := presenters.SendResult{MessageID: cmp.Or(opts.MessageID, "m1"), UserMessageID: opts.UserMessageID}
		em := presenters.NewEmitter(e.hub, fakeID, id)
		em.MessageDelta(res.UserMessageID, presenters.RoleUser, "hi")
		em.MessageEnd(presenters.MessageEndPayload{MessageID: res.UserMessageID, Role: presenters.RoleUser})
		run := presenters.ToolCall{ToolID: "t1", Title: "Run tests", Kind: presenters.ToolExecute, Status: presenters.ToolInProgress,
			Arguments: json.RawMessage(`{"command":"go test ./..."}`)}
		em.ToolStart(res.MessageID, run)
		run.Status = presenters.ToolCompleted
		em.ToolEnd(res.MessageID, run)
		em.MessageEnd(presenters.MessageEndPayload{MessageID: res.MessageID, StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant})
		return res, nil
	}
	stream, err := alice.Subscribe(ctx, &pb.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	created, err := alice.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	if _, err := alice.SendMessage(bg, textMessage(id, "hi")); err != nil {
		t.Fatal(err)
	}
	askPermission(e, id, "p1")
	if _, err := alice.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "p1",
		Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "allow"}}); err != nil {
		t.Fatal(err)
	}
	askForm(e, id, "f1")
	if _, err := alice.RespondElicitation(bg, &pb.RespondElicitationRequest{SessionId: id, ElicitationId: "f1",
		Action: pb.ElicitationAction_ELICITATION_ACTION_DECLINE}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CloseSession(bg, &pb.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}

	named := map[pb.AgenticEventType]string{}
	for closed := false; !closed; {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if ev.GetSessionId() != id {
				continue
			}
			switch p := ev.GetPayload().(type) {
			case *pb.AgenticEvent_SessionCreated:
				named[ev.GetType()] = p.SessionCreated.GetSession().GetOwner()
			case *pb.AgenticEvent_MessageEnd:
				if p.MessageEnd.GetRole() == pb.MessageRole_MESSAGE_ROLE_USER {
					named[ev.GetType()] = p.MessageEnd.GetPrincipal()
				}
			case *pb.AgenticEvent_ToolPermissionGranted:
				named[ev.GetType()] = p.ToolPermissionGranted.GetPrincipal()
			case *pb.AgenticEvent_ElicitationResolved:
				named[ev.GetType()] = p.ElicitationResolved.GetPrincipal()
			case *pb.AgenticEvent_SessionClosed:
				named[ev.GetType()] = p.SessionClosed.GetPrincipal()
				closed = true
			}
		}
	}
	for _, typ := range []pb.AgenticEventType{
		pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CREATED, pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END,
		pb.AgenticEventType_AGENTIC_EVENT_TYPE_TOOL_PERMISSION_GRANTED, pb.AgenticEventType_AGENTIC_EVENT_TYPE_ELICITATION_RESOLVED,
		pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CLOSED,
	} {
		if named[typ] != "alice" {
			t.Errorf("%s names %q; want alice", typ, named[typ])
		}
	}

	want := []pb.AuditKind{
		pb.AuditKind_AUDIT_KIND_SESSION_CREATED, pb.AuditKind_AUDIT_KIND_COMMAND,
		pb.AuditKind_AUDIT_KIND_PERMISSION_REQUESTED, pb.AuditKind_AUDIT_KIND_PERMISSION_DECIDED,
		pb.AuditKind_AUDIT_KIND_ELICITATION_REQUESTED, pb.AuditKind_AUDIT_KIND_ELICITATION_RESOLVED,
		pb.AuditKind_AUDIT_KIND_SESSION_CLOSED,
	}
	got := auditEntries(t, e, &pb.ListAuditEventsRequest{SessionIds: []string{id}}, len(want))
	if len(got) != len(want) {
		t.Fatalf("entries %v; want %v", kinds(got), want)
	}
	for i, entry := range got {
		if entry.GetKind() != want[i] || entry.GetPrincipal() != "alice" {
			t.Errorf("entry %d: %s of principal %q; want %s of alice", i, entry.GetKind(), entry.GetPrincipal(), want[i])
		}
	}
}

package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// wantReason checks a status as a client reads it: the code, the ErrorInfo's domain,
// reason and metadata keys (exactly these), and for INVALID_ARGUMENT a BadRequest naming
// field. It returns the metadata.
func wantReason(t *testing.T, err error, code codes.Code, reason pb.ErrorReason, field string, keys ...string) map[string]string {
	t.Helper()
	st := wantCode(t, err, code)
	info := errorInfo(st)
	if info == nil {
		t.Fatalf("%v %q carries no ErrorInfo", st.Code(), st.Message())
	}
	if want := strings.TrimPrefix(reason.String(), "ERROR_REASON_"); info.GetReason() != want || info.GetDomain() != "agenticd" {
		t.Fatalf("ErrorInfo %s/%s, want agenticd/%s (message %q)", info.GetDomain(), info.GetReason(), want, st.Message())
	}
	var got []string
	for k := range info.GetMetadata() {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		t.Errorf("%s metadata %v, want keys %v", info.GetReason(), info.GetMetadata(), keys)
	}
	var violations []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			violations = append(violations, br.GetFieldViolations()...)
		}
	}
	switch {
	case code != codes.InvalidArgument && len(violations) > 0:
		t.Errorf("%v carries a BadRequest: %v", code, violations)
	case code == codes.InvalidArgument && (len(violations) != 1 || violations[0].GetField() != field || violations[0].GetDescription() == ""):
		t.Errorf("BadRequest %v, want one violation of %q", violations, field)
	}
	return info.GetMetadata()
}

// reason is shorthand for a reason's enum value.
func reason(name string) pb.ErrorReason {
	return pb.ErrorReason(pb.ErrorReason_value["ERROR_REASON_"+name])
}

// Every reason a status can carry, reached over gRPC the way a client meets it, with its
// code, metadata and, for INVALID_ARGUMENT, the field at fault.
func TestEveryStatusReason(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	send := func() error {
		_, err := e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: sid, Content: textContent("hi")})
		return err
	}
	// failSend makes the agent refuse turns with err, for the test that calls it.
	failSend := func(t *testing.T, err error) {
		e.fake.sendFn = func(context.Context, string, presenters.MessageContent, presenters.SendOptions) (presenters.SendResult, error) {
			return presenters.SendResult{}, err
		}
		t.Cleanup(func() { e.fake.sendFn = nil })
	}

	t.Run("INVALID_ARGUMENT", func(t *testing.T) {
		_, err := e.client.SendMessage(bg, &pb.SendMessageRequest{Content: textContent("hi")})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "session_id")
		_, err = e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: sid, Content: &pb.MessageContent{Parts: []*pb.ContentPart{
			{Part: &pb.ContentPart_Text{Text: "look"}}, {Part: &pb.ContentPart_Text{Text: "at"}},
			{Part: &pb.ContentPart_Image{Image: &pb.ImageContent{MimeType: "image/png"}}},
		}}})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "content.parts[2].image")
		_, err = e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: sid, Content: textContent("hi"), MessageId: "no spaces"})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "message_id")
		_, err = e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: sid, Content: textContent("hi"), UserMessageId: strings.Repeat("u", 129)})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "user_message_id")
		_, err = e.client.SetModel(bg, &pb.SetModelRequest{SessionId: sid, ModelId: "huge"})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "model_id")
		_, err = e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: sid, Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "allow"}})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "permission_id")
		_, err = e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}, RequestId: strings.Repeat("r", 129)})
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "request_id")
		// A presenter refusing an argument: the handler names the field it came from.
		failSend(t, fmt.Errorf("the model cannot read images: %w", presenters.ErrInvalidArgument))
		wantReason(t, send(), codes.InvalidArgument, reason("INVALID_ARGUMENT"), "content")
	})
	t.Run("REQUEST_ID_REUSED", func(t *testing.T) {
		req := &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root, Title: "first"}, RequestId: requestUUID("reused-1")}
		if _, err := e.client.CreateSession(bg, req); err != nil {
			t.Fatal(err)
		}
		req.Config.Title = "second"
		_, err := e.client.CreateSession(bg, req)
		md := wantReason(t, err, codes.InvalidArgument, reason("REQUEST_ID_REUSED"), "request_id", "method")
		if md["method"] != "CreateSession" {
			t.Errorf("method %q", md["method"])
		}
		_, err = e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: sid, Content: textContent("hi"), RequestId: requestUUID("reused-1")})
		if md := wantReason(t, err, codes.InvalidArgument, reason("REQUEST_ID_REUSED"), "request_id", "method"); md["method"] != "CreateSession" {
			t.Errorf("another method: method %q, want the first one", md["method"])
		}
	})
	t.Run("WORKSPACE_NOT_ALLOWED", func(t *testing.T) {
		_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: t.TempDir()}})
		wantReason(t, err, codes.InvalidArgument, reason("WORKSPACE_NOT_ALLOWED"), "config.workspace")
	})
	t.Run("PATH_OUTSIDE_WORKSPACE", func(t *testing.T) {
		failSend(t, fmt.Errorf("image /etc/passwd: %w", sandbox.ErrOutsideWorkspace))
		wantReason(t, send(), codes.InvalidArgument, reason("PATH_OUTSIDE_WORKSPACE"), "content")
	})
	t.Run("TOKEN_INVALID", func(t *testing.T) {
		guarded := newEnv(t, envOptions{token: "s3cret"})
		conn := dialListener(t, guarded.lis, "")
		defer func() { _ = conn.Close() }()
		_, err := pb.NewAgenticServiceClient(conn).ListAgents(bg, &pb.ListAgentsRequest{})
		wantReason(t, err, codes.Unauthenticated, reason("TOKEN_INVALID"), "")
		wrong := dialListener(t, guarded.lis, "guess")
		defer func() { _ = wrong.Close() }()
		_, err = pb.NewAgenticServiceClient(wrong).Subscribe(bg, &pb.SubscribeRequest{})
		if err == nil {
			var stream pb.AgenticService_SubscribeClient
			stream, _ = pb.NewAgenticServiceClient(wrong).Subscribe(bg, &pb.SubscribeRequest{})
			_, err = stream.Recv()
		}
		wantReason(t, err, codes.Unauthenticated, reason("TOKEN_INVALID"), "")
	})
	t.Run("AGENT_NOT_FOUND", func(t *testing.T) {
		_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: "acp.no.such", Config: &pb.SessionConfig{Workspace: e.root}})
		if md := wantReason(t, err, codes.NotFound, reason("AGENT_NOT_FOUND"), "", "agent_id"); md["agent_id"] != "acp.no.such" {
			t.Errorf("agent_id %q", md["agent_id"])
		}
	})
	t.Run("SESSION_NOT_FOUND", func(t *testing.T) {
		_, err := e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: "nope", Content: textContent("hi")})
		if md := wantReason(t, err, codes.NotFound, reason("SESSION_NOT_FOUND"), "", "session_id"); md["session_id"] != "nope" {
			t.Errorf("session_id %q", md["session_id"])
		}
	})
	t.Run("MESSAGE_NOT_FOUND", func(t *testing.T) {
		_, err := e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: sid, MessageId: "m-nope"})
		if md := wantReason(t, err, codes.NotFound, reason("MESSAGE_NOT_FOUND"), "", "message_id"); md["message_id"] != "m-nope" {
			t.Errorf("message_id %q", md["message_id"])
		}
	})
	t.Run("PERMISSION_NOT_PENDING", func(t *testing.T) {
		_, err := e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: sid, PermissionId: "p-nope",
			Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "allow"}})
		if md := wantReason(t, err, codes.NotFound, reason("PERMISSION_NOT_PENDING"), "", "permission_id"); md["permission_id"] != "p-nope" {
			t.Errorf("permission_id %q", md["permission_id"])
		}
	})
	t.Run("SESSION_BUSY", func(t *testing.T) {
		em := presenters.NewEmitter(e.hub, fakeID, sid)
		em.MessageDelta("m-running", presenters.RoleAssistant, "working")
		defer em.MessageEnd(presenters.MessageEndPayload{MessageID: "m-running", Role: presenters.RoleAssistant})
		failSend(t, fmt.Errorf("a turn runs: %w", presenters.ErrSessionBusy))
		if md := wantReason(t, send(), codes.FailedPrecondition, reason("SESSION_BUSY"), "", "message_id"); md["message_id"] != "m-running" {
			t.Errorf("message_id %q, want the running turn", md["message_id"])
		}
	})
	t.Run("SESSION_CLOSED", func(t *testing.T) {
		failSend(t, presenters.WithDetail(fmt.Errorf("session %s is closed; reopen it with LoadSession: %w", sid, presenters.ErrSessionClosed), "session_id", sid))
		if md := wantReason(t, send(), codes.FailedPrecondition, reason("SESSION_CLOSED"), "", "session_id"); md["session_id"] != sid {
			t.Errorf("session_id %q, want %s", md["session_id"], sid)
		}
	})
	t.Run("PRECONDITION_FAILED", func(t *testing.T) {
		failSend(t, fmt.Errorf("agent %s needs an LLM provider; set OPENAI_BASE_URL: %w", fakeID, presenters.ErrFailedPrecondition))
		wantReason(t, send(), codes.FailedPrecondition, reason("PRECONDITION_FAILED"), "")
	})
	t.Run("AGENT_NOT_CONFIGURED", func(t *testing.T) {
		e.storeSessions(t, "deepchat.gone", "orphan")
		_, err := e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: "orphan", Content: textContent("hi")})
		if md := wantReason(t, err, codes.FailedPrecondition, reason("AGENT_NOT_CONFIGURED"), "", "agent_id"); md["agent_id"] != "deepchat.gone" {
			t.Errorf("agent_id %q", md["agent_id"])
		}
	})
	t.Run("AGENT_AUTH_REQUIRED", func(t *testing.T) {
		failSend(t, &presenters.AuthRequiredError{AgentID: fakeID, Methods: []presenters.AuthMethod{{ID: "oauth"}, {ID: "api-key"}}})
		md := wantReason(t, send(), codes.FailedPrecondition, reason("AGENT_AUTH_REQUIRED"), "", "agent_id", "auth_methods")
		if md["agent_id"] != fakeID || md["auth_methods"] != "oauth,api-key" {
			t.Errorf("metadata %v", md)
		}
	})
	t.Run("UNSUPPORTED", func(t *testing.T) {
		e.fake.loadFn = func(context.Context, string, presenters.LoadContext) (presenters.SessionInfo, error) {
			return presenters.SessionInfo{}, presenters.WithDetail(fmt.Errorf("agent cannot load sessions: %w", presenters.ErrUnsupported), "unsupported", "session/load")
		}
		defer func() { e.fake.loadFn = nil }()
		_, err := e.client.LoadSession(bg, &pb.LoadSessionRequest{SessionId: sid})
		if md := wantReason(t, err, codes.FailedPrecondition, reason("UNSUPPORTED"), "", "unsupported"); md["unsupported"] != "session/load" {
			t.Errorf("unsupported %q, want session/load", md["unsupported"])
		}
	})
	t.Run("PERMISSION_ALREADY_DECIDED", func(t *testing.T) {
		askPermission(e, sid, "p-decided")
		allow := &pb.RespondPermissionRequest{SessionId: sid, PermissionId: "p-decided",
			Answer: &pb.RespondPermissionRequest_OptionKind{OptionKind: pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE}}
		if _, err := e.client.RespondPermission(bg, allow); err != nil {
			t.Fatal(err)
		}
		_, err := e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: sid, PermissionId: "p-decided",
			Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "reject"}})
		md := wantReason(t, err, codes.FailedPrecondition, reason("PERMISSION_ALREADY_DECIDED"), "", "option_id", "decided_by")
		if md["option_id"] != "allow" || md["decided_by"] != pb.PermissionDecider_PERMISSION_DECIDER_USER.String() {
			t.Errorf("metadata %v", md)
		}
	})
	t.Run("MESSAGE_NOT_RUNNING", func(t *testing.T) {
		e.fake.cancelFn = func(context.Context, string, string) (string, error) {
			return "", fmt.Errorf("message m-old is not running: %w", presenters.ErrMessageNotRunning)
		}
		defer func() { e.fake.cancelFn = nil }()
		_, err := e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: sid, MessageId: "m-old"})
		wantReason(t, err, codes.FailedPrecondition, reason("MESSAGE_NOT_RUNNING"), "", "message_id")
	})
	t.Run("WORKSPACE_GONE", func(t *testing.T) {
		gone := filepath.Join(e.root, "gone")
		if err := os.Mkdir(gone, 0o700); err != nil {
			t.Fatal(err)
		}
		roots, err := sandbox.NewRoots([]string{e.root}, sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(gone); err != nil {
			t.Fatal(err)
		}
		_, reopenErr := presenters.ReopenWorkspace(roots, sid, gone)
		failSend(t, reopenErr)
		wantReason(t, send(), codes.FailedPrecondition, reason("WORKSPACE_GONE"), "")
	})
	t.Run("MESSAGE_ID_IN_USE", func(t *testing.T) {
		failSend(t, presenters.WithDetail(fmt.Errorf("message id m1 is taken in session %s: %w", sid, presenters.ErrMessageIDInUse), "message_id", "m1"))
		if md := wantReason(t, send(), codes.AlreadyExists, reason("MESSAGE_ID_IN_USE"), "", "message_id"); md["message_id"] != "m1" {
			t.Errorf("message_id %q, want m1", md["message_id"])
		}
	})
	t.Run("RESUME_POINT_EXPIRED and RESUME_POINT_UNKNOWN", func(t *testing.T) {
		small := newEnv(t, envOptions{hub: HubOptions{Capacity: 4}})
		publishDeltas(small.hub, fakeID, "s", 10)
		small.storeSessions(t, fakeID, "s")
		_, err := small.subscribe(t, &pb.SubscribeRequest{Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: 1}}).Recv()
		md := wantReason(t, err, codes.OutOfRange, reason("RESUME_POINT_EXPIRED"), "", "oldest_sequence", "newest_sequence")
		if md["newest_sequence"] != fmt.Sprint(small.hub.LastSequence()) {
			t.Errorf("metadata %v, newest is %d", md, small.hub.LastSequence())
		}
		ahead := small.hub.LastSequence() + 100
		_, err = small.subscribe(t, &pb.SubscribeRequest{Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: ahead}}).Recv()
		wantReason(t, err, codes.OutOfRange, reason("RESUME_POINT_UNKNOWN"), "", "newest_sequence")
	})
	t.Run("SUBSCRIBER_TOO_SLOW", func(t *testing.T) {
		slow := newEnv(t, envOptions{hub: HubOptions{SubscriberQueue: 2}})
		stream := slow.subscribe(t, &pb.SubscribeRequest{Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: slow.hub.LastSequence()}})
		em := presenters.NewEmitter(slow.hub, fakeID, "s")
		big := strings.Repeat("x", 64<<10)
		var err error
		for err == nil {
			em.MessageDelta("m", presenters.RoleAssistant, big)
			_, err = stream.Recv() // one frame read per 1 MiB published: the queue fills up
			for range 15 {
				em.MessageDelta("m", presenters.RoleAssistant, big)
			}
		}
		wantReason(t, err, codes.ResourceExhausted, reason("SUBSCRIBER_TOO_SLOW"), "", "last_sequence")
	})
	t.Run("TOO_MANY_TERMINALS", func(t *testing.T) {
		failSend(t, fmt.Errorf("start a terminal: %w", sandbox.ErrTooManyTerminals))
		wantReason(t, send(), codes.ResourceExhausted, reason("TOO_MANY_TERMINALS"), "")
	})
	t.Run("AGENT_UNAVAILABLE", func(t *testing.T) {
		failSend(t, fmt.Errorf("the agent's process exited: %w", presenters.ErrAgentUnavailable))
		wantReason(t, send(), codes.Unavailable, reason("AGENT_UNAVAILABLE"), "")
	})
	t.Run("SHUTTING_DOWN", func(t *testing.T) {
		closing := newEnv(t, envOptions{})
		stream := closing.subscribe(t, &pb.SubscribeRequest{})
		if _, err := stream.Header(); err != nil {
			t.Fatal(err)
		}
		closing.hub.Close()
		var err error
		for err == nil {
			_, err = stream.Recv()
		}
		wantReason(t, err, codes.Unavailable, reason("SHUTTING_DOWN"), "", "last_sequence")
		_, err = closing.subscribe(t, &pb.SubscribeRequest{}).Recv()
		wantReason(t, err, codes.Unavailable, reason("SHUTTING_DOWN"), "")
	})
	t.Run("ELICITATION_NOT_PENDING", func(t *testing.T) {
		_, err := e.client.RespondElicitation(bg, &pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "never-asked",
			Action: pb.ElicitationAction_ELICITATION_ACTION_DECLINE})
		wantReason(t, err, codes.NotFound, reason("ELICITATION_NOT_PENDING"), "", "elicitation_id")
	})
	t.Run("ELICITATION_ALREADY_RESOLVED", func(t *testing.T) {
		presenters.NewEmitter(e.hub, fakeID, sid).ElicitationResolved(presenters.ElicitationResolvedPayload{ElicitationID: "gone",
			Action: presenters.ElicitationCancel, DecidedBy: presenters.ElicitationByCancelled})
		_, err := e.client.RespondElicitation(bg, &pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "gone",
			Action: pb.ElicitationAction_ELICITATION_ACTION_DECLINE})
		wantReason(t, err, codes.FailedPrecondition, reason("ELICITATION_ALREADY_RESOLVED"), "", "action", "decided_by")
	})
	t.Run("REQUEST_TOO_LARGE", func(t *testing.T) {
		_, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: strings.Repeat("a", maxRequestBytes)})
		wantReason(t, err, codes.ResourceExhausted, reason("REQUEST_TOO_LARGE"), "", "limit_bytes")
	})
	t.Run("CANCELLED", func(t *testing.T) {
		failSend(t, fmt.Errorf("the turn was cancelled: %w", presenters.ErrCancelled))
		wantReason(t, send(), codes.Canceled, reason("CANCELLED"), "")
	})
	t.Run("DEADLINE_EXCEEDED", func(t *testing.T) {
		failSend(t, fmt.Errorf("the agent did not answer in time: %w", context.DeadlineExceeded))
		wantReason(t, send(), codes.DeadlineExceeded, reason("DEADLINE_EXCEEDED"), "")
	})
	t.Run("INTERNAL", func(t *testing.T) {
		failSend(t, errors.New("disk on fire at /var/secret"))
		err := send()
		md := wantReason(t, err, codes.Internal, reason("INTERNAL"), "", "correlation_id")
		if msg := status.Convert(err).Message(); !strings.Contains(msg, md["correlation_id"]) || strings.Contains(msg, "secret") {
			t.Errorf("message %q should name correlation id %s and nothing of the error", msg, md["correlation_id"])
		}
	})
}

// Every reason a status can carry is in TestEveryStatusReason: the reasons of the
// proto with a code are exactly the reasons with a code here.
func TestEveryReasonHasACode(t *testing.T) {
	for v, name := range pb.ErrorReason_name {
		r := pb.ErrorReason(v)
		_, mapped := reasonCodes[r]
		statusReason := v > 0 && v < 40
		if mapped != statusReason {
			t.Errorf("%s: has a code %v, want %v (values 1-39 are status reasons)", name, mapped, statusReason)
		}
	}
}

// askPermission emits a permission request with an allow and a reject option.
func askPermission(e *testEnv, sessionID, permissionID string) {
	presenters.NewEmitter(e.hub, fakeID, sessionID).PermissionRequired(presenters.PermissionRequest{
		RequestID: permissionID, ToolName: "write",
		Options: []presenters.PermissionOption{{ID: "allow", Kind: presenters.AllowOnce}, {ID: "reject", Kind: presenters.RejectOnce}},
	})
}

// The same answer again after the decision is OK with the decision, whichever way it
// names the option; a different one is refused.
func TestRespondPermissionAgain(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	askPermission(e, sid, "p1")
	byID := &pb.RespondPermissionRequest{SessionId: sid, PermissionId: "p1", Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "allow"}}
	first, err := e.client.RespondPermission(bg, byID)
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.PermissionDecision{PermissionId: "p1", OptionId: "allow", OptionKind: pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE,
		Granted: true, DecidedBy: pb.PermissionDecider_PERMISSION_DECIDER_USER}
	if d := first.GetDecision(); d.String() != want.String() {
		t.Fatalf("decision %v, want %v", d, want)
	}
	byKind := &pb.RespondPermissionRequest{SessionId: sid, PermissionId: "p1",
		Answer: &pb.RespondPermissionRequest_OptionKind{OptionKind: pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE}}
	for _, again := range []*pb.RespondPermissionRequest{byID, byKind} {
		resp, err := e.client.RespondPermission(bg, again)
		if err != nil || resp.GetDecision().String() != want.String() {
			t.Fatalf("the same answer again: %v, %v", resp, err)
		}
	}
	if n := len(e.fake.answered()); n != 1 {
		t.Errorf("the agent got %d answers, want 1", n)
	}
	// Cancelled by the server: no answer is the same.
	presenters.NewEmitter(e.hub, fakeID, sid).PermissionDenied(presenters.PermissionDecision{RequestID: "p2", DecidedBy: presenters.DecidedByCancelled})
	_, err = e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: sid, PermissionId: "p2", Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "reject"}})
	md := wantReason(t, err, codes.FailedPrecondition, reason("PERMISSION_ALREADY_DECIDED"), "", "option_id", "decided_by")
	if md["option_id"] != "" || md["decided_by"] != pb.PermissionDecider_PERMISSION_DECIDER_CANCELLED.String() {
		t.Errorf("metadata %v", md)
	}
}

// CancelMessage answers with the message it cancelled.
func TestCancelMessageNamesTheCancelledMessage(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	e.fake.cancelFn = func(_ context.Context, _, messageID string) (string, error) {
		if messageID == "" {
			return "m-running", nil
		}
		return messageID, nil
	}
	for named, want := range map[string]string{"": "m-running", "m-named": "m-named"} {
		resp, err := e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: sid, MessageId: named})
		if err != nil || resp.GetMessageId() != want {
			t.Errorf("cancel %q: %v, %v; want %s", named, resp, err, want)
		}
	}
}

// A repeat of a request_id gets the first call's answer: one session for two
// CreateSession calls, also when the second arrives while the first still waits for the
// agent; one turn for two SendMessage calls; the first call's error again.
func TestRequestIDRepeatsGetTheFirstAnswer(t *testing.T) {
	e := newEnv(t, envOptions{})
	var creates atomic.Int32
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll() // also when the test fails, so that no handler stays blocked
	entered := make(chan struct{}, 2)
	e.fake.createFn = func(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
		n := creates.Add(1)
		select {
		case entered <- struct{}{}:
		case <-ctx.Done():
		}
		<-release
		info := presenters.SessionInfo{SessionID: fmt.Sprintf("created-%d", n), AgentID: fakeID, Status: presenters.SessionIdle, Workspace: cfg.Workspace.Root()}
		e.fake.mu.Lock()
		e.fake.sessions[info.SessionID] = &info
		e.fake.mu.Unlock()
		e.fake.emitter(info.SessionID).SessionCreated(info)
		return info, nil
	}
	req := &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}, RequestId: requestUUID("0b7c7f4e-create")}
	type result struct {
		resp *pb.CreateSessionResponse
		err  error
	}
	results := make(chan result, 2)
	go func() {
		resp, err := e.client.CreateSession(bg, req)
		results <- result{resp, err}
	}()
	<-entered // the first waits for the agent
	go func() {
		resp, err := e.client.CreateSession(bg, req)
		results <- result{resp, err}
	}()
	// The second waits for the first rather than asking the agent.
	select {
	case <-entered:
		t.Fatal("the repeat reached the agent while the first call ran")
	case <-time.After(200 * time.Millisecond):
	}
	releaseAll()
	a, b := <-results, <-results
	if a.err != nil || b.err != nil || a.resp.GetSession().GetSessionId() != b.resp.GetSession().GetSessionId() {
		t.Fatalf("two answers: %v %v / %v %v", a.resp, a.err, b.resp, b.err)
	}
	// A repeat after the first returned gets the same answer too.
	c, err := e.client.CreateSession(bg, req)
	if err != nil || c.GetSession().GetSessionId() != a.resp.GetSession().GetSessionId() || creates.Load() != 1 {
		t.Fatalf("third call: %v, %v; %d creations, want 1", c, err, creates.Load())
	}

	var sends atomic.Int32
	e.fake.sendFn = func(_ context.Context, _ string, _ presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
		n := sends.Add(1)
		return presenters.SendResult{MessageID: fmt.Sprintf("m%d", n), UserMessageID: fmt.Sprintf("u%d", n)}, nil
	}
	send := &pb.SendMessageRequest{SessionId: a.resp.GetSession().GetSessionId(), RequestId: requestUUID("send-1"),
		Content: textContent("hi")}
	first, err := e.client.SendMessage(bg, send)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.client.SendMessage(bg, send)
	if err != nil || again.GetMessageId() != first.GetMessageId() || sends.Load() != 1 {
		t.Fatalf("repeat: %v, %v; %d turns, want 1", again, err, sends.Load())
	}

	// An error is an answer too.
	e.fake.sendFn = func(context.Context, string, presenters.MessageContent, presenters.SendOptions) (presenters.SendResult, error) {
		sends.Add(1)
		return presenters.SendResult{}, fmt.Errorf("no such model: %w", presenters.ErrInvalidArgument)
	}
	send.RequestId = requestUUID("send-2")
	for range 2 {
		_, err := e.client.SendMessage(bg, send)
		wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), "content")
	}
	if sends.Load() != 2 {
		t.Errorf("%d turns asked for, want 2 (the refused one once)", sends.Load())
	}

	// An error that says to try again is not remembered: a busy session, an agent that
	// is starting. The repeat does the work.
	busy := true
	e.fake.sendFn = func(context.Context, string, presenters.MessageContent, presenters.SendOptions) (presenters.SendResult, error) {
		sends.Add(1)
		if busy {
			return presenters.SendResult{}, fmt.Errorf("busy: %w", presenters.ErrSessionBusy)
		}
		return presenters.SendResult{MessageID: "m-later", UserMessageID: "u-later"}, nil
	}
	send.RequestId = requestUUID("send-3")
	_, err = e.client.SendMessage(bg, send)
	wantReason(t, err, codes.FailedPrecondition, reason("SESSION_BUSY"), "")
	busy = false
	if later, err := e.client.SendMessage(bg, send); err != nil || later.GetMessageId() != "m-later" || sends.Load() != 4 {
		t.Errorf("a repeat after SESSION_BUSY: %v, %v, %d turns asked for, want the work done (4)", later, err, sends.Load())
	}
	e.fake.sendFn = func(context.Context, string, presenters.MessageContent, presenters.SendOptions) (presenters.SendResult, error) {
		sends.Add(1)
		return presenters.SendResult{}, fmt.Errorf("agent starting: %w", presenters.ErrAgentUnavailable)
	}
	send.RequestId = requestUUID("send-4")
	for range 2 {
		_, err := e.client.SendMessage(bg, send)
		wantReason(t, err, codes.Unavailable, reason("AGENT_UNAVAILABLE"), "")
	}
	if sends.Load() != 6 {
		t.Errorf("%d turns asked for, want 6: UNAVAILABLE is not remembered", sends.Load())
	}
}

// A repeat whose own client gives up first gets DEADLINE_EXCEEDED and leaves the first
// call alone; a first call whose client gives up is not remembered, so its repeat does
// the work.
func TestRequestIDWaitersAndAbandonedCalls(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var sends atomic.Int32
	e.fake.sendFn = func(ctx context.Context, _ string, _ presenters.MessageContent, _ presenters.SendOptions) (presenters.SendResult, error) {
		n := sends.Add(1)
		select {
		case entered <- struct{}{}:
		case <-ctx.Done():
		}
		select {
		case <-release:
			return presenters.SendResult{MessageID: fmt.Sprintf("m%d", n)}, nil
		case <-ctx.Done():
			return presenters.SendResult{}, ctx.Err()
		}
	}
	sid := e.createSession(t, fakeID).GetSessionId()
	send := &pb.SendMessageRequest{SessionId: sid, RequestId: requestUUID("wait-1"),
		Content: textContent("hi")}
	firstDone := make(chan error, 1)
	var firstID string
	go func() {
		resp, err := e.client.SendMessage(bg, send)
		firstID = resp.GetMessageId()
		firstDone <- err
	}()
	<-entered
	short, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	_, err := e.client.SendMessage(short, send)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the impatient repeat: %v", err)
	}
	close(release)
	if err := <-firstDone; err != nil || firstID != "m1" {
		t.Fatalf("the first call: %q, %v", firstID, err)
	}

	// The first call's client gives up: nothing is remembered, the repeat runs.
	e.fake.sendFn = func(ctx context.Context, _ string, _ presenters.MessageContent, _ presenters.SendOptions) (presenters.SendResult, error) {
		if n := sends.Add(1); n == 3 {
			return presenters.SendResult{MessageID: "m3"}, nil
		}
		select {
		case entered <- struct{}{}:
		case <-ctx.Done():
		}
		<-ctx.Done()
		return presenters.SendResult{}, ctx.Err()
	}
	send.RequestId = requestUUID("abandon-1")
	short, cancelShort := context.WithCancel(bg)
	go func() {
		<-entered
		cancelShort()
	}()
	if _, err := e.client.SendMessage(short, send); status.Code(err) != codes.Canceled {
		t.Fatalf("the abandoned call: %v", err)
	}
	bounded, cancelBounded := context.WithTimeout(bg, streamWait)
	defer cancelBounded()
	resp, err := e.client.SendMessage(bounded, send)
	if err != nil || resp.GetMessageId() != "m3" || sends.Load() != 3 {
		t.Fatalf("the repeat of an abandoned call: %v, %v after %d calls; want the work done (m3)", resp, err, sends.Load())
	}
}

// A cancel repeated after its first call's client left gets OK for the turn it named
// when that turn ended cancelled; a turn that ended otherwise is MESSAGE_NOT_RUNNING.
func TestCancelOfATurnThatEndedCancelled(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	e.fake.cancelFn = func(_ context.Context, _, messageID string) (string, error) {
		return "", fmt.Errorf("message %s is not running: %w", messageID, presenters.ErrMessageNotRunning)
	}
	e.fake.messagesFn = func(_ context.Context, _ string, q presenters.MessageQuery) ([]presenters.Message, error) {
		status := map[string]presenters.MessageStatus{"m-cancelled": presenters.MessageCancelled, "m-done": presenters.MessageComplete}[q.MessageID]
		if status == "" {
			return nil, nil
		}
		return []presenters.Message{{ID: q.MessageID, SessionID: sid, Role: presenters.RoleAssistant, Status: status}}, nil
	}
	resp, err := e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: sid, MessageId: "m-cancelled", RequestId: requestUUID("c-1")})
	if err != nil || resp.GetMessageId() != "m-cancelled" {
		t.Errorf("cancel of a turn that ended cancelled: %v, %v", resp, err)
	}
	_, err = e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: sid, MessageId: "m-done"})
	wantReason(t, err, codes.FailedPrecondition, reason("MESSAGE_NOT_RUNNING"), "", "message_id")
	_, err = e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: sid, MessageId: "m-unknown"})
	wantReason(t, err, codes.FailedPrecondition, reason("MESSAGE_NOT_RUNNING"), "", "message_id")
}

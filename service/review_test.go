package service

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// A presenter that describes sessions in batches is asked once per ListSessions page, not
// once per session; sessions it does not know are listed with why.
func TestListSessionsAsksBatchingAgentsOnce(t *testing.T) {
	e := newEnv(t, envOptions{batching: true})
	var batched []string
	for range 3 {
		batched = append(batched, e.createSession(t, otherID).GetSessionId())
	}
	single := e.createSession(t, fakeID).GetSessionId()
	e.batching.mu.Lock()
	delete(e.batching.sessions, batched[0])
	e.batching.mu.Unlock()
	e.batching.gets.Store(0)
	e.fake.gets.Store(0)

	resp, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{View: pb.SessionView_SESSION_VIEW_FULL})
	if err != nil {
		t.Fatal(err)
	}
	if n, gets := e.batching.batches.Load(), e.batching.gets.Load(); n != 1 || gets != 0 {
		t.Errorf("the batching agent got %d batches and %d GetSession calls, want 1 and 0", n, gets)
	}
	if gets := e.fake.gets.Load(); gets != 1 {
		t.Errorf("the other agent got %d GetSession calls, want 1", gets)
	}
	byID := map[string]*pb.SessionInfo{}
	for _, s := range resp.GetSessions() {
		byID[s.GetSessionId()] = s
	}
	if len(resp.GetSessions()) != 4 || resp.GetSessions()[0].GetSessionId() != single {
		t.Fatalf("listed %v", resp.GetSessions())
	}
	if s := byID[batched[0]]; s.GetStatus() != pb.SessionStatus_SESSION_STATUS_ERROR || !strings.Contains(s.GetStatusReason(), "no longer has") {
		t.Errorf("a session the agent lost: %v", s)
	}
	for _, id := range batched[1:] {
		if s := byID[id]; s.GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE || len(s.GetAvailableModes()) != 2 || s.GetLastSequence() == 0 {
			t.Errorf("a batched session: %v", s)
		}
	}
	e.batching.batchErr = errors.New("database is locked at /secret")
	resp, err = e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: otherID})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range resp.GetSessions() {
		if s.GetStatus() != pb.SessionStatus_SESSION_STATUS_ERROR || s.GetStatusReason() == "" || strings.Contains(s.GetStatusReason(), "secret") {
			t.Errorf("after a failed batch: %v", s)
		}
	}
}

// A session id another agent already owns is refused, and the new session closed: the
// first owner keeps it.
func TestCreateSessionRefusesAnotherAgentsSessionID(t *testing.T) {
	e := newEnv(t, envOptions{})
	taken := e.createSession(t, fakeID).GetSessionId()
	e.other.createFn = func(_ context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
		info := presenters.SessionInfo{SessionID: taken, AgentID: otherID, Status: presenters.SessionIdle, Workspace: cfg.Workspace.Root()}
		e.other.mu.Lock()
		e.other.sessions[taken] = &info
		e.other.mu.Unlock()
		return info, nil
	}
	_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: otherID, Config: &pb.SessionConfig{Workspace: e.root}})
	st := wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "already belongs to agent "+fakeID) {
		t.Errorf("message %q", st.Message())
	}
	if info, _ := e.other.GetSession(bg, taken); info.Status != presenters.SessionClosed {
		t.Errorf("the refused session is %s, want closed", info.Status)
	}
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: taken})
	if err != nil || got.GetSession().GetAgentId() != fakeID {
		t.Errorf("the first owner lost its session: %v, %v", got, err)
	}
}

// RFC 6750: the scheme is case-insensitive.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	e := newEnv(t, envOptions{token: "t0ken"})
	conn := dialListener(t, e.lis, "")
	defer func() { _ = conn.Close() }()
	client := pb.NewAgenticServiceClient(conn)
	for value, want := range map[string]codes.Code{
		"Bearer t0ken": codes.OK, "bearer t0ken": codes.OK, "BEARER t0ken": codes.OK, "Bearer  t0ken": codes.OK,
		"Basic t0ken": codes.Unauthenticated, "Bearer": codes.Unauthenticated, "Bearert0ken": codes.Unauthenticated, "bearer T0KEN": codes.Unauthenticated,
	} {
		ctx := metadata.AppendToOutgoingContext(bg, "authorization", value)
		_, err := client.ListAgents(ctx, &pb.ListAgentsRequest{})
		if status.Code(err) != want {
			t.Errorf("authorization %q: %v, want %v", value, err, want)
		} else if err != nil {
			wantReason(t, err, codes.Unauthenticated, pb.ErrorReason_ERROR_REASON_TOKEN_INVALID, "")
		}
	}
}

// GetSession gives the sequence of the first event of the message in flight: a client
// that reconnects mid-turn replays the whole message from there.
func TestGetSessionGivesInFlightFirstSequence(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	first := em.MessageDelta("m1", presenters.RoleAssistant, "Hel")
	em.MessageDelta("m1", presenters.RoleAssistant, "lo")
	em.MessageEnd(presenters.MessageEndPayload{MessageID: "m0", Role: presenters.RoleAssistant}) // a replayed old message
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	s := got.GetSession()
	if s.GetMessageInFlight() != "m1" || s.GetMessageInFlightFirstSequence() != first {
		t.Fatalf("in flight %q from %d, want m1 from %d", s.GetMessageInFlight(), s.GetMessageInFlightFirstSequence(), first)
	}
	stream := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{id},
		Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: s.GetMessageInFlightFirstSequence() - 1}})
	var text string
	for _, ev := range recvN(t, stream, 2) {
		text += ev.GetMessageDelta().GetText()
	}
	if text != "Hello" {
		t.Errorf("replayed %q, want the whole message", text)
	}
}

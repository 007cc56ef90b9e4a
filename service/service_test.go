package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

var bg = context.Background()

func TestListAgents(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp, err := e.client.ListAgents(bg, &pb.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetAgents()) != 2 {
		t.Fatalf("agents = %v, want the two fakes", resp.GetAgents())
	}
	a := resp.GetAgents()[0]
	if a.GetAgentId() != fakeID || a.GetType() != pb.AgentType_AGENT_TYPE_DEEPCHAT || a.GetStatus() != pb.AgentStatus_AGENT_STATUS_READY ||
		!a.GetCapabilities().GetSupportsModes() || a.GetAuthMethods()[0].GetId() != "login" {
		t.Errorf("first agent = %v", a)
	}
	if resp.GetAgents()[1].GetAgentId() != otherID {
		t.Errorf("agents not in registration order: %v", resp.GetAgents())
	}
}

func TestCreateSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	var gotCfg presenters.SessionConfig
	create := e.fake.CreateSession
	e.fake.createFn = func(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
		gotCfg = cfg
		e.fake.createFn = nil
		defer func() { e.fake.createFn = create }()
		return e.fake.CreateSession(ctx, cfg)
	}
	// A symlink to the root is admitted, and the presenter gets the real directory.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(e.root, link); err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{
		AgentId: fakeID,
		Config:  &pb.SessionConfig{Workspace: link, ModelId: "large", ModeId: "code", Title: "t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg.Workspace == nil || gotCfg.Workspace.Root() != e.root {
		t.Errorf("presenter got workspace %v, want %s opened", gotCfg.Workspace, e.root)
	}
	gotCfg.Workspace = nil
	if want := (presenters.SessionConfig{ModelID: "large", ModeID: "code", Title: "t", Creator: "owner"}); !reflect.DeepEqual(gotCfg, want) {
		t.Errorf("presenter got %+v, want %+v", gotCfg, want)
	}
	info := resp.GetSession()
	if info.GetSessionId() == "" || info.GetAgentId() != fakeID || info.GetWorkspace() != e.root {
		t.Errorf("session = %v", info)
	}
	// last_sequence is that of the SESSION_CREATED event, so a subscriber resumes after it.
	if info.GetLastSequence() != e.hub.LastSequence() {
		t.Errorf("last_sequence = %d, want %d", info.GetLastSequence(), e.hub.LastSequence())
	}
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: info.GetSessionId()})
	if err != nil || got.GetSession().GetSessionId() != info.GetSessionId() {
		t.Fatalf("GetSession after create: %v, %v", got, err)
	}
}

func TestCreateSessionErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	outside := t.TempDir()
	file := filepath.Join(e.root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		req     *pb.CreateSessionRequest
		code    codes.Code
		mention string
	}{
		{"no agent", &pb.CreateSessionRequest{Config: &pb.SessionConfig{Workspace: e.root}}, codes.InvalidArgument, "agent_id"},
		{"no config", &pb.CreateSessionRequest{AgentId: fakeID}, codes.InvalidArgument, "config.workspace"},
		{"relative workspace", &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: "src"}}, codes.InvalidArgument, "absolute"},
		{"outside the roots", &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: outside}}, codes.InvalidArgument, e.root},
		{"a file", &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: file}}, codes.InvalidArgument, "not a directory"},
		{"missing dir", &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: filepath.Join(e.root, "nope")}}, codes.InvalidArgument, "does not exist"},
		{"unknown agent", &pb.CreateSessionRequest{AgentId: "acp.x.y", Config: &pb.SessionConfig{Workspace: e.root}}, codes.NotFound, fakeID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.client.CreateSession(bg, c.req)
			st := wantCode(t, err, c.code)
			if !strings.Contains(st.Message(), c.mention) {
				t.Errorf("message %q should mention %q", st.Message(), c.mention)
			}
		})
	}
}

// countingRoots records the directories the service opens as workspaces (called from
// one goroutine: the test calls the handler directly).
type countingRoots struct {
	roots  *sandbox.Roots
	opened []string
	last   *sandbox.Workspace
}

func (c *countingRoots) Open(dir string) (*sandbox.Workspace, error) {
	ws, err := c.roots.Open(dir)
	c.opened = append(c.opened, dir)
	c.last = ws
	return ws, err
}

// The service turns the client's path into a workspace once, and the presenter gets
// that very workspace; a path it refuses never reaches the presenter, and fails with
// INVALID_ARGUMENT naming the roots.
func TestCreateSessionOpensTheWorkspaceOnce(t *testing.T) {
	e := newEnv(t, envOptions{noAgents: true})
	sandboxRoots, err := sandbox.NewRoots([]string{e.root}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	roots := &countingRoots{roots: sandboxRoots}
	fake := newFake(fakeID, e.hub)
	var given []*sandbox.Workspace
	create := fake.CreateSession
	fake.createFn = func(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
		given = append(given, cfg.Workspace)
		fake.createFn = nil
		defer func() { fake.createFn = create }()
		return fake.CreateSession(ctx, cfg)
	}
	registry, err := NewRegistry(e.store, []presenters.Presenter{fake})
	if err != nil {
		t.Fatal(err)
	}
	svc := New(Options{Registry: registry, Hub: e.hub, Roots: roots, Logger: discard})

	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(e.root, link); err != nil {
		t.Fatal(err)
	}
	resp, err := svc.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: link}})
	if err != nil {
		t.Fatal(err)
	}
	if len(roots.opened) != 1 || roots.opened[0] != link {
		t.Errorf("the service opened %q, want the client's path once", roots.opened)
	}
	if len(given) != 1 || given[0] != roots.last {
		t.Errorf("the presenter got %v, want the workspace the service opened (%v)", given, roots.last)
	}
	if got := resp.GetSession().GetWorkspace(); got != e.root {
		t.Errorf("session workspace %q, want %q", got, e.root)
	}

	outside := t.TempDir()
	_, err = svc.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: outside}})
	st := wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), e.root) || !strings.Contains(st.Message(), outside) {
		t.Errorf("message %q should name the workspace %s and the root %s", st.Message(), outside, e.root)
	}
	if len(roots.opened) != 2 || len(given) != 1 {
		t.Errorf("after a refused workspace: opened %q, presenter called %d times; want one more open and no call", roots.opened, len(given))
	}
}

// Every presenter sentinel reaches the client as its documented code, with the
// presenter's message; an unknown error is INTERNAL and does not leak.
func TestPresenterErrorsMapToCodes(t *testing.T) {
	e := newEnv(t, envOptions{})
	cases := []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("no such session: %w", presenters.ErrNotFound), codes.NotFound},
		{fmt.Errorf("mode x not offered: %w", presenters.ErrInvalidArgument), codes.InvalidArgument},
		{fmt.Errorf("a turn runs; wait or cancel it: %w", presenters.ErrSessionBusy), codes.FailedPrecondition},
		{fmt.Errorf("no provider configured: %w", presenters.ErrFailedPrecondition), codes.FailedPrecondition},
		{fmt.Errorf("cannot load: %w", presenters.ErrUnsupported), codes.FailedPrecondition},
		{fmt.Errorf("agent exited: %w", presenters.ErrAgentUnavailable), codes.Unavailable},
		{fmt.Errorf("stopped: %w", presenters.ErrCancelled), codes.Canceled},
		{fmt.Errorf("needs login: %w", presenters.ErrAuthRequired), codes.FailedPrecondition},
	}
	for _, c := range cases {
		e.fake.createFn = func(context.Context, presenters.SessionConfig) (presenters.SessionInfo, error) {
			return presenters.SessionInfo{}, c.err
		}
		_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
		st := wantCode(t, err, c.code)
		if st.Message() != c.err.Error() {
			t.Errorf("message %q, want the presenter's %q", st.Message(), c.err.Error())
		}
	}

	e.fake.createFn = func(context.Context, presenters.SessionConfig) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{}, &presenters.AuthRequiredError{AgentID: fakeID, Methods: []presenters.AuthMethod{{ID: "oauth"}, {ID: "api-key"}}}
	}
	_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
	st := wantCode(t, err, codes.FailedPrecondition)
	info := errorInfo(st)
	if !strings.Contains(st.Message(), "oauth, api-key") || info == nil || info.GetMetadata()["auth_methods"] != "oauth,api-key" {
		t.Errorf("auth error %q, details %v: want the methods in both", st.Message(), info)
	}

	e.fake.createFn = func(context.Context, presenters.SessionConfig) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{}, errors.New("sql: database is locked at /secret/path")
	}
	_, err = e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
	st = wantCode(t, err, codes.Internal)
	if strings.Contains(st.Message(), "secret") {
		t.Errorf("internal detail leaked: %q", st.Message())
	}
}

// textContent is a message of one text part.
func textContent(text string) *pb.MessageContent {
	return &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: text}}}}
}

// Every RPC that names a session: empty id INVALID_ARGUMENT, unknown id NOT_FOUND.
func TestSessionRPCsValidateSessionID(t *testing.T) {
	e := newEnv(t, envOptions{})
	calls := map[string]func(id string) error{
		"GetSession": func(id string) error {
			_, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
			return err
		},
		"LoadSession": func(id string) error {
			_, err := e.client.LoadSession(bg, &pb.LoadSessionRequest{SessionId: id})
			return err
		},
		"CloseSession": func(id string) error {
			_, err := e.client.CloseSession(bg, &pb.CloseSessionRequest{SessionId: id})
			return err
		},
		"SendMessage": func(id string) error {
			_, err := e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: id, Content: textContent("hi")})
			return err
		},
		"CancelMessage": func(id string) error {
			_, err := e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: id})
			return err
		},
		"SetModel": func(id string) error {
			_, err := e.client.SetModel(bg, &pb.SetModelRequest{SessionId: id, ModelId: "small"})
			return err
		},
		"SetMode": func(id string) error {
			_, err := e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id, ModeId: "ask"})
			return err
		},
		"RespondPermission": func(id string) error {
			_, err := e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "r", Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "o"}})
			return err
		},
		"ListMessages": func(id string) error {
			_, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id})
			return err
		},
		"GetMessage": func(id string) error {
			_, err := e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: id, MessageId: "m1"})
			return err
		},
		"WaitMessage": func(id string) error {
			_, err := e.client.WaitMessage(bg, &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			st := wantCode(t, call(""), codes.InvalidArgument)
			if !strings.Contains(st.Message(), "session_id") {
				t.Errorf("message %q should name session_id", st.Message())
			}
			st = wantCode(t, call("no-such-session"), codes.NotFound)
			if !strings.Contains(st.Message(), "no-such-session") {
				t.Errorf("message %q should name the session", st.Message())
			}
		})
	}
}

func TestGetSessionMergesHubProjection(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.createSession(t, fakeID)
	id := s.GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	em.MessageDelta("m7", presenters.RoleAssistant, "working")
	seq := em.PermissionRequired(presenters.PermissionRequest{RequestID: "r1", ToolName: "write",
		Options: []presenters.PermissionOption{{ID: "yes", Kind: presenters.AllowOnce}, {ID: "no", Kind: presenters.RejectOnce}}})

	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	info := got.GetSession()
	if info.GetMessageInFlight() != "m7" || len(info.GetPendingPermissions()) != 1 ||
		info.GetPendingPermissions()[0].GetPermissionId() != "r1" || info.GetLastSequence() != seq {
		t.Fatalf("snapshot = in flight %q, pending %v, last %d; want m7, [r1], %d",
			info.GetMessageInFlight(), info.GetPendingPermissions(), info.GetLastSequence(), seq)
	}
	// What the presenter reports wins over the projection.
	e.fake.getFn = func(context.Context, string) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{SessionID: id, MessageInFlight: "m8", PendingPermissions: []presenters.PermissionRequest{{RequestID: "r9"}}}, nil
	}
	got, err = e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSession().GetMessageInFlight() != "m8" || got.GetSession().GetPendingPermissions()[0].GetPermissionId() != "r9" {
		t.Errorf("presenter's values were overridden: %v", got.GetSession())
	}
	e.fake.getFn = nil
	em.MessageEnd(presenters.MessageEndPayload{MessageID: "m7", Role: presenters.RoleAssistant})
	got, err = e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSession().GetMessageInFlight() != "" || len(got.GetSession().GetPendingPermissions()) != 0 {
		t.Errorf("after MESSAGE_END: %v", got.GetSession())
	}
}

func TestListSessionsPagesMostRecentFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	var want []string
	for range 5 {
		want = append([]string{e.createSession(t, fakeID).GetSessionId()}, want...)
	}
	otherSession := e.createSession(t, otherID).GetSessionId()

	var got []string
	token := ""
	for pages := 0; ; pages++ {
		resp, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: fakeID, PageSize: 2, PageToken: token, View: pb.SessionView_SESSION_VIEW_FULL})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.GetSessions() {
			got = append(got, s.GetSessionId())
			if s.GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE || len(s.GetAvailableModes()) != 2 {
				t.Errorf("listed session is not the presenter's: %v", s)
			}
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("listed %v, want %v", got, want)
	}
	all, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.GetSessions()) != 6 || all.GetSessions()[0].GetSessionId() != otherSession {
		t.Errorf("unfiltered list = %v", all.GetSessions())
	}
}

// A session its agent cannot describe is still listed, with why.
func TestListSessionsDegradesPerSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	gone := e.createSession(t, fakeID).GetSessionId()
	broken := e.createSession(t, fakeID).GetSessionId()
	fine := e.createSession(t, fakeID).GetSessionId()
	e.fake.getFn = func(_ context.Context, id string) (presenters.SessionInfo, error) {
		switch id {
		case gone:
			return presenters.SessionInfo{}, presenters.ErrNotFound
		case broken:
			return presenters.SessionInfo{}, errors.New("disk on fire at /secret")
		}
		return presenters.SessionInfo{SessionID: id, Status: presenters.SessionIdle}, nil
	}
	resp, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*pb.SessionInfo{}
	for _, s := range resp.GetSessions() {
		byID[s.GetSessionId()] = s
	}
	if s := byID[gone]; s.GetStatus() != pb.SessionStatus_SESSION_STATUS_ERROR || !strings.Contains(s.GetStatusReason(), "no longer has") || s.GetWorkspace() != e.root {
		t.Errorf("gone session = %v", s)
	}
	if s := byID[broken]; s.GetStatus() != pb.SessionStatus_SESSION_STATUS_ERROR || strings.Contains(s.GetStatusReason(), "secret") || s.GetStatusReason() == "" {
		t.Errorf("broken session = %v", s)
	}
	if s := byID[fine]; s.GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE {
		t.Errorf("fine session = %v", s)
	}
}

func TestListSessionsErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{PageSize: -1})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.ListSessions(bg, &pb.ListSessionsRequest{PageToken: "garbage!"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: "acp.x.y"})
	wantCode(t, err, codes.NotFound)
}

// Sessions survive a restart through the store; one whose agent is gone is still listed
// and described, closed, with the reason.
func TestSessionsSurviveRestart(t *testing.T) {
	store := openStore(t)
	first := newEnv(t, envOptions{store: store})
	s := first.createSession(t, fakeID)

	second := newEnv(t, envOptions{store: store})
	second.fake.sessions = first.fake.sessions // the agent's own storage survived too
	got, err := second.client.GetSession(bg, &pb.GetSessionRequest{SessionId: s.GetSessionId()})
	if err != nil {
		t.Fatalf("GetSession after restart: %v", err)
	}
	if got.GetSession().GetWorkspace() != first.root {
		t.Errorf("session after restart = %v", got.GetSession())
	}

	orphaned := newEnv(t, envOptions{store: store, noAgents: true})
	list, err := orphaned.client.ListSessions(bg, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetSessions()) != 1 || list.GetSessions()[0].GetStatus() != pb.SessionStatus_SESSION_STATUS_CLOSED ||
		!strings.Contains(list.GetSessions()[0].GetStatusReason(), fakeID) {
		t.Errorf("orphaned session listed as %v", list.GetSessions())
	}
	got, err = orphaned.client.GetSession(bg, &pb.GetSessionRequest{SessionId: s.GetSessionId()})
	if err != nil || got.GetSession().GetStatus() != pb.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("orphaned session: %v, %v", got, err)
	}
}

// A CreateSession repeated with its request_id after a restart gets the first answer,
// not a second session.
func TestRequestIDSurvivesRestart(t *testing.T) {
	store := openStore(t)
	first := newEnv(t, envOptions{store: store})
	req := &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: first.root}, RequestId: requestUUID("create-once")}
	created, err := first.client.CreateSession(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	second := newEnv(t, envOptions{store: store})
	second.fake.sessions = first.fake.sessions
	req.Config.Workspace = first.root
	again, err := second.client.CreateSession(bg, req)
	if err != nil || again.GetSession().GetSessionId() != created.GetSession().GetSessionId() {
		t.Fatalf("the repeat after a restart: %v, %v; want session %s", again.GetSession().GetSessionId(), err, created.GetSession().GetSessionId())
	}
	if n := len(second.fake.sessions); n != 1 {
		t.Errorf("%d sessions after the repeat, want 1", n)
	}
}

func TestLoadSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.createSession(t, fakeID)
	var got presenters.LoadContext
	e.fake.loadFn = func(ctx context.Context, id string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
		got = lc
		return e.fake.GetSession(ctx, id)
	}
	resp, err := e.client.LoadSession(bg, &pb.LoadSessionRequest{SessionId: s.GetSessionId(), MaxHistory: 7, IncludeSystemMessages: true})
	if err != nil {
		t.Fatal(err)
	}
	if got != (presenters.LoadContext{MaxHistory: 7, IncludeSystemMessages: true}) || resp.GetSession().GetSessionId() != s.GetSessionId() {
		t.Errorf("load context %+v, response %v", got, resp)
	}
	_, err = e.client.LoadSession(bg, &pb.LoadSessionRequest{SessionId: s.GetSessionId(), MaxHistory: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestCloseSessionEmitsClosed(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.createSession(t, fakeID)
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{s.GetSessionId()}})
	if _, err := e.client.CloseSession(bg, &pb.CloseSessionRequest{SessionId: s.GetSessionId()}); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, stream); ev.GetType() != pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CLOSED || ev.GetSessionClosed().GetReason() == "" {
		t.Errorf("event after close = %v", ev)
	}
}

func TestSendMessageStreamsReply(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.createSession(t, fakeID)
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{s.GetSessionId()}})
	resp, err := e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: s.GetSessionId(), Content: textContent("hi")})
	if err != nil {
		t.Fatal(err)
	}
	// The service chooses the user message's id, so that its sender is recorded first.
	if _, uerr := uuid.Parse(resp.GetUserMessageId()); resp.GetMessageId() != "m1" || uerr != nil {
		t.Errorf("response = %v", resp)
	}
	evs := recvN(t, stream, 2)
	if evs[0].GetMessageDelta().GetText() != "echo: hi" || evs[0].GetMessageDelta().GetRole() != pb.MessageRole_MESSAGE_ROLE_ASSISTANT ||
		evs[1].GetMessageEnd().GetStopReason() != pb.StopReason_STOP_REASON_END_TURN || evs[1].GetSequence() != evs[0].GetSequence()+1 {
		t.Errorf("events = %v", evs)
	}
}

func TestSendMessageBusy(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.createSession(t, fakeID)
	e.fake.sendFn = func(context.Context, string, presenters.MessageContent, presenters.SendOptions) (presenters.SendResult, error) {
		return presenters.SendResult{}, fmt.Errorf("a turn is running; cancel it or wait for MESSAGE_END: %w", presenters.ErrSessionBusy)
	}
	_, err := e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: s.GetSessionId(), Content: textContent("x")})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestCancelMessage(t *testing.T) {
	e := newEnv(t, envOptions{})
	s := e.createSession(t, fakeID)
	var got string
	e.fake.cancelFn = func(_ context.Context, _, messageID string) (string, error) {
		got = messageID
		return messageID, nil
	}
	if _, err := e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: s.GetSessionId(), MessageId: "m3"}); err != nil {
		t.Fatal(err)
	}
	if got != "m3" {
		t.Errorf("presenter cancelled %q, want m3", got)
	}
}

func TestSetModelAndMode(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	model, err := e.client.SetModel(bg, &pb.SetModelRequest{SessionId: id, ModelId: "large"})
	if err != nil || model.GetSession().GetCurrentModelId() != "large" {
		t.Fatalf("SetModel: %v, %v", model, err)
	}
	mode, err := e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id, ModeId: "code"})
	if err != nil || mode.GetSession().GetCurrentModeId() != "code" {
		t.Fatalf("SetMode: %v, %v", mode, err)
	}

	_, err = e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id, ModeId: "yolo"})
	st := wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "ask, code") {
		t.Errorf("bad mode message %q should list the modes", st.Message())
	}
	_, err = e.client.SetModel(bg, &pb.SetModelRequest{SessionId: id, ModelId: "huge"})
	st = wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "small, large") {
		t.Errorf("bad model message %q should list the models", st.Message())
	}
	_, err = e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.SetModel(bg, &pb.SetModelRequest{SessionId: id})
	wantCode(t, err, codes.InvalidArgument)

	e.fake.getFn = func(context.Context, string) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{SessionID: id}, nil
	}
	_, err = e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id, ModeId: "ask"})
	st = wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "offers no modes") {
		t.Errorf("message %q", st.Message())
	}
}

// Config options are listed in SessionInfo and set through the presenter; a session
// without any, or an agent that has none, cannot set one.
func TestSetConfigOption(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	_, err := e.client.SetConfigOption(bg, &pb.SetConfigOptionRequest{SessionId: id, ConfigId: "effort", Value: "high"})
	if st := wantCode(t, err, codes.FailedPrecondition); !strings.Contains(st.Message(), "no config options") {
		t.Errorf("message %q", st.Message())
	}

	e.fake.mu.Lock()
	e.fake.sessions[id].ConfigOptions = []presenters.ConfigOption{{ID: "effort", Name: "Effort", Category: "thought_level",
		Type: presenters.ConfigSelect, CurrentValue: "low", Choices: []presenters.ConfigChoice{{Value: "low", Name: "Low"}, {Value: "high", Name: "High", Group: "More"}}}}
	e.fake.mu.Unlock()
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.ConfigOption{Id: "effort", Name: "Effort", Category: "thought_level", Type: pb.ConfigOptionType_CONFIG_OPTION_TYPE_SELECT,
		CurrentValue: "low", Choices: []*pb.ConfigChoice{{Value: "low", Name: "Low"}, {Value: "high", Name: "High", Group: "More"}}}
	if opts := got.GetSession().GetConfigOptions(); len(opts) != 1 || !proto.Equal(opts[0], want) {
		t.Fatalf("config options %v", opts)
	}
	set, err := e.client.SetConfigOption(bg, &pb.SetConfigOptionRequest{SessionId: id, ConfigId: "effort", Value: "high"})
	if err != nil || set.GetSession().GetConfigOptions()[0].GetCurrentValue() != "high" {
		t.Fatalf("SetConfigOption: %v, %v", set, err)
	}
	_, err = e.client.SetConfigOption(bg, &pb.SetConfigOptionRequest{SessionId: id, ConfigId: "effort"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.SetConfigOption(bg, &pb.SetConfigOptionRequest{SessionId: id, Value: "x"})
	wantCode(t, err, codes.InvalidArgument)
}

// A fork is a new session of the caller's, recorded like a created one, with the
// source's setup; the source stays.
func TestForkSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	if _, err := e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id, ModeId: "code"}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.ForkSession(bg, &pb.ForkSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	fork := resp.GetSession()
	if fork.GetSessionId() == "" || fork.GetSessionId() == id || fork.GetCurrentModeId() != "code" || fork.GetAgentId() != fakeID {
		t.Fatalf("fork %v", fork)
	}
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: fork.GetSessionId()})
	if err != nil || got.GetSession().GetWorkspace() != fork.GetWorkspace() {
		t.Fatalf("GetSession of the fork: %v, %v", got, err)
	}
	if _, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id}); err != nil {
		t.Errorf("the source after the fork: %v", err)
	}
	_, err = e.client.ForkSession(bg, &pb.ForkSessionRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.ForkSession(bg, &pb.ForkSessionRequest{SessionId: "nope"})
	wantCode(t, err, codes.NotFound)
}

func TestRespondPermission(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	options := []presenters.PermissionOption{{ID: "ok-1", Kind: presenters.AllowOnce}, {ID: "never", Kind: presenters.RejectAlways}}
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r1", Options: options})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r2", Options: options})

	byKind := func(reqID string, k pb.PermissionOptionKind) error {
		_, err := e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: reqID,
			Answer: &pb.RespondPermissionRequest_OptionKind{OptionKind: k}})
		return err
	}
	// The kind resolves to the request's option id.
	if err := byKind("r1", pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE); err != nil {
		t.Fatal(err)
	}
	// An option id goes through as given.
	if _, err := e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "r2",
		Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "never"}}); err != nil {
		t.Fatal(err)
	}
	want := []presenters.PermissionResponse{{RequestID: "r1", OptionID: "ok-1"}, {RequestID: "r2", OptionID: "never"}}
	if got := e.fake.answered(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("presenter got %v, want %v", got, want)
	}
	// A request never asked is NOT_FOUND, naming it.
	st := wantCode(t, byKind("r9", pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE), codes.NotFound)
	if !strings.Contains(st.Message(), "r9") {
		t.Errorf("message %q", st.Message())
	}

	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r3", Options: options})
	st = wantCode(t, byKind("r3", pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ONCE), codes.InvalidArgument)
	if !strings.Contains(st.Message(), "ok-1 (allow_once), never (reject_always)") {
		t.Errorf("message %q should list the options", st.Message())
	}
	wantCode(t, byKind("r3", pb.PermissionOptionKind_PERMISSION_OPTION_KIND_UNSPECIFIED), codes.InvalidArgument)
	_, err := e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "r3"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "x"}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "r3", Answer: &pb.RespondPermissionRequest_OptionId{}})
	wantCode(t, err, codes.InvalidArgument)

	// A request only the presenter knows about (e.g. asked before a restart) resolves too.
	e.fake.getFn = func(context.Context, string) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{SessionID: id, PendingPermissions: []presenters.PermissionRequest{{RequestID: "old", Options: options}}}, nil
	}
	if err := byKind("old", pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ALWAYS); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.answered(); got[len(got)-1] != (presenters.PermissionResponse{RequestID: "old", OptionID: "never"}) {
		t.Errorf("last answer %v", got[len(got)-1])
	}
}

func TestTokenInterceptor(t *testing.T) {
	e := newEnv(t, envOptions{token: "t0ken"})
	if _, err := e.client.ListAgents(bg, &pb.ListAgentsRequest{}); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	for name, token := range map[string]string{"missing": "", "wrong": "nope"} {
		t.Run(name, func(t *testing.T) {
			conn := dialListener(t, e.lis, token)
			defer func() { _ = conn.Close() }()
			_, err := pb.NewAgenticServiceClient(conn).ListAgents(bg, &pb.ListAgentsRequest{})
			st := wantCode(t, err, codes.Unauthenticated)
			if !strings.Contains(st.Message(), "credentials") && !strings.Contains(st.Message(), "bearer token") {
				t.Errorf("message %q", st.Message())
			}
			stream, err := pb.NewAgenticServiceClient(conn).Subscribe(bg, &pb.SubscribeRequest{})
			if err == nil {
				_, err = stream.Recv()
			}
			wantCode(t, err, codes.Unauthenticated)
			if _, err := healthpb.NewHealthClient(conn).Check(bg, &healthpb.HealthCheckRequest{}); err != nil {
				t.Errorf("health needs no token, got %v", err)
			}
		})
	}
}

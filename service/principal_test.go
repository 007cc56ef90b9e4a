package service

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// Tokens of the static principals of principalsEnv.
const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef"
	carolToken = "carol-token-0123456789abcdef"
)

func staticPrincipal(name, token string, scopes Scopes) StaticPrincipal {
	sum := sha256.Sum256([]byte(token))
	return StaticPrincipal{Name: name, TokenSHA256: sum[:], Scopes: scopes}
}

// principalsEnv has alice and bob (read, write) and carol (read).
func principalsEnv(t *testing.T) *testEnv {
	return newEnv(t, envOptions{eventLog: true, principals: []StaticPrincipal{
		staticPrincipal("alice", aliceToken, ScopeRead|ScopeWrite),
		staticPrincipal("bob", bobToken, ScopeRead|ScopeWrite),
		staticPrincipal("carol", carolToken, ScopeRead),
	}})
}

// protocolClient calls the env's server in one protocol with one principal's token:
// native gRPC (HTTP/2, which the splitter hands to grpc-go), Connect or gRPC-Web (the
// HTTP gateway).
type protocolClient struct {
	http  *http.Client
	opts  []connect.ClientOption
	token string
}

var protocols = []struct {
	name string
	h2c  bool
	opts []connect.ClientOption
}{
	{"grpc", true, []connect.ClientOption{connect.WithGRPC()}},
	{"connect", false, nil},
	{"grpc-web", false, []connect.ClientOption{connect.WithGRPCWeb()}},
}

func call[Req, Resp any](t *testing.T, c protocolClient, method string, req *Req) (*Resp, error) {
	t.Helper()
	cl := connect.NewClient[Req, Resp](c.http, rpcURL(method), c.opts...)
	r := connect.NewRequest(req)
	r.Header().Set("Authorization", "Bearer "+c.token)
	resp, err := cl.CallUnary(bg, r)
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// wantRefused checks a connect error's code, reason and ErrorInfo metadata.
func wantRefused(t *testing.T, err error, code connect.Code, reason pb.ErrorReason, md map[string]string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code {
		t.Fatalf("error %v; want %v", err, code)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok {
			if info.GetReason() != reasonName(reason) {
				t.Fatalf("reason %s; want %s (%v)", info.GetReason(), reasonName(reason), err)
			}
			for k, want := range md {
				if info.GetMetadata()[k] != want {
					t.Fatalf("metadata %s = %q; want %q (%v)", k, info.GetMetadata()[k], want, info.GetMetadata())
				}
			}
			return
		}
	}
	t.Fatalf("%v carries no ErrorInfo", err)
}

// Two principals do not see each other's sessions; a read principal cannot write; after
// sharing, the other reads but does not write: in every protocol.
func TestPrincipalsKeepToTheirSessions(t *testing.T) {
	e := principalsEnv(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			hc := e.anonymousHTTPClient(t, p.h2c)
			alice := protocolClient{hc, p.opts, aliceToken}
			bob := protocolClient{hc, p.opts, bobToken}
			carol := protocolClient{hc, p.opts, carolToken}
			created, err := call[pb.CreateSessionRequest, pb.CreateSessionResponse](t, alice, "CreateSession",
				&pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
			if err != nil {
				t.Fatal(err)
			}
			id := created.GetSession().GetSessionId()
			if created.GetSession().GetOwner() != "alice" {
				t.Fatalf("owner %q; want alice", created.GetSession().GetOwner())
			}
			// Bob neither lists nor reaches it; it is as unknown to him as a made-up id.
			list, err := call[pb.ListSessionsRequest, pb.ListSessionsResponse](t, bob, "ListSessions", &pb.ListSessionsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list.GetSessions() {
				if s.GetSessionId() == id || len(s.GetAcl()) == 0 {
					t.Fatalf("bob lists %s of %s, not shared with him", s.GetSessionId(), s.GetOwner())
				}
			}
			_, err = call[pb.GetSessionRequest, pb.GetSessionResponse](t, bob, "GetSession", &pb.GetSessionRequest{SessionId: id})
			wantRefused(t, err, connect.CodeNotFound, pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, map[string]string{"session_id": id})
			_, err = call[pb.SendMessageRequest, pb.SendMessageResponse](t, bob, "SendMessage", textMessage(id, "hi"))
			wantRefused(t, err, connect.CodeNotFound, pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, nil)
			_, err = call[pb.WaitMessageRequest, pb.WaitMessageResponse](t, bob, "WaitMessage", &pb.WaitMessageRequest{SessionId: id, MessageId: "m1"})
			wantRefused(t, err, connect.CodeNotFound, pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, map[string]string{"session_id": id})
			// Carol may not write at all: the scope is named.
			_, err = call[pb.SendMessageRequest, pb.SendMessageResponse](t, carol, "SendMessage", textMessage(id, "hi"))
			wantRefused(t, err, connect.CodePermissionDenied, pb.ErrorReason_ERROR_REASON_SCOPE_MISSING, map[string]string{"scope": "write", "principal": "carol"})
			// Only the owner shares.
			share := &pb.ShareSessionRequest{SessionId: id, Acl: []*pb.SessionGrant{{Grantee: &pb.SessionGrant_Principal{Principal: "bob"}, Access: pb.SessionAccess_SESSION_ACCESS_READ}}}
			_, err = call[pb.ShareSessionRequest, pb.ShareSessionResponse](t, bob, "ShareSession", share)
			wantRefused(t, err, connect.CodeNotFound, pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, nil)
			shared, err := call[pb.ShareSessionRequest, pb.ShareSessionResponse](t, alice, "ShareSession", share)
			if err != nil {
				t.Fatal(err)
			}
			if acl := shared.GetSession().GetAcl(); len(acl) != 1 || acl[0].GetPrincipal() != "bob" || acl[0].GetAccess() != pb.SessionAccess_SESSION_ACCESS_READ {
				t.Fatalf("acl %v", acl)
			}
			if _, err := call[pb.GetSessionRequest, pb.GetSessionResponse](t, bob, "GetSession", &pb.GetSessionRequest{SessionId: id}); err != nil {
				t.Fatalf("bob reads the shared session: %v", err)
			}
			_, err = call[pb.SendMessageRequest, pb.SendMessageResponse](t, bob, "SendMessage", textMessage(id, "hi"))
			wantRefused(t, err, connect.CodePermissionDenied, pb.ErrorReason_ERROR_REASON_SCOPE_MISSING, map[string]string{"scope": "write", "session_id": id})
			_, err = call[pb.DeleteSessionRequest, pb.DeleteSessionResponse](t, bob, "DeleteSession", &pb.DeleteSessionRequest{SessionId: id})
			wantRefused(t, err, connect.CodePermissionDenied, pb.ErrorReason_ERROR_REASON_SCOPE_MISSING, map[string]string{"scope": "admin"})
			if _, err := call[pb.SendMessageRequest, pb.SendMessageResponse](t, alice, "SendMessage", textMessage(id, "hi")); err != nil {
				t.Fatalf("alice writes to her session: %v", err)
			}
			info, err := call[pb.GetServerInfoRequest, pb.GetServerInfoResponse](t, carol, "GetServerInfo", &pb.GetServerInfoRequest{})
			if err != nil || info.GetCaller().GetPrincipal() != "carol" || info.GetSessionCount() != 0 {
				t.Fatalf("carol's server info %v, %v; want caller carol and no session", info, err)
			}
		})
	}
}

func textMessage(sessionID, text string) *pb.SendMessageRequest {
	return &pb.SendMessageRequest{SessionId: sessionID, Content: textContent(text)}
}

// A stream without a filter and the audit log show a principal only its own sessions.
func TestPrincipalsSeeOnlyTheirEventsAndAudit(t *testing.T) {
	e := principalsEnv(t)
	aliceConn := dialListener(t, e.lis, aliceToken)
	defer aliceConn.Close()
	bobConn := dialListener(t, e.lis, bobToken)
	defer bobConn.Close()
	alice, bob := pb.NewAgenticServiceClient(aliceConn), pb.NewAgenticServiceClient(bobConn)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	stream, err := alice.Subscribe(ctx, &pb.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	create := func(c pb.AgenticServiceClient) string {
		resp, err := c.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SendMessage(bg, textMessage(resp.GetSession().GetSessionId(), "hi")); err != nil {
			t.Fatal(err)
		}
		return resp.GetSession().GetSessionId()
	}
	bobs := create(bob)
	alices := create(alice)
	// Bob's events came first: alice's stream reaches her turn's end without them.
	for ended := false; !ended; {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if ev.GetSessionId() != alices && ev.GetSessionId() != "warm-up" {
				t.Fatalf("alice's stream shows an event of %s: %v", ev.GetSessionId(), ev)
			}
			ended = ended || ev.GetMessageEnd().GetRole() == pb.MessageRole_MESSAGE_ROLE_ASSISTANT
		}
	}
	// The audit log: each sees its own session's creation, not the other's.
	for _, c := range []struct {
		client     pb.AgenticServiceClient
		own, other string
	}{{alice, alices, bobs}, {bob, bobs, alices}} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := c.client.ListAuditEvents(bg, &pb.ListAuditEventsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			own := false
			for _, a := range resp.GetEvents() {
				if a.GetSessionId() == c.other {
					t.Fatalf("audit entry of %s shown to another principal: %v", c.other, a)
				}
				own = own || a.GetSessionId() == c.own
			}
			if own {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no audit entry of %s", c.own)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The owner, an admin, sees both.
	resp, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{})
	if err != nil || len(resp.GetSessions()) != 2 {
		t.Fatalf("the owner lists %v, %v; want both sessions", resp, err)
	}
}

// Every method of the service has a scope of its own choosing.
func TestEveryMethodHasAScope(t *testing.T) {
	for _, m := range pb.AgenticService_ServiceDesc.Methods {
		if _, ok := methodScopes["/"+pb.AgenticService_ServiceDesc.ServiceName+"/"+m.MethodName]; !ok {
			t.Errorf("%s has no scope in methodScopes", m.MethodName)
		}
	}
}

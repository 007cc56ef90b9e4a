package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/pgtest"
)

// Tokens of the static principals of the replica tests.
const (
	aliceReplicaToken = "alice-replica-token-0123456789"
	bobReplicaToken   = "bob-replica-token-0123456789"
)

func tokenPrincipal(name, token string, scopes ...string) PrincipalConfig {
	sum := sha256.Sum256([]byte(token))
	return PrincipalConfig{Name: name, TokenSHA256: hex.EncodeToString(sum[:]), Scopes: scopes}
}

// dialAs is a client of the replica at addr with a principal's token.
func dialAs(t *testing.T, addr, token string) pb.AgenticServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewAgenticServiceClient(conn)
}

// principalReplicas starts two replicas on one Postgres with the principals alice and
// bob (read, write).
func principalReplicas(t *testing.T, reply string) (cfgA Config, addrA, addrB string) {
	t.Helper()
	_, dsn := pgtest.StartForTest(t)
	llm := newFakeLLM(t, reply)
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1", EnvOpenAIModel: "local-model", EnvOllamaHost: closedAddr(t)})
	principals := []PrincipalConfig{
		tokenPrincipal("alice", aliceReplicaToken, "read", "write"),
		tokenPrincipal("bob", bobReplicaToken, "read", "write"),
	}
	cfgA = testConfig(t)
	cfgA.Database, cfgA.Token, cfgA.Principals = dsn, replicaToken, principals
	cfgB := testConfig(t)
	cfgB.Database, cfgB.Token, cfgB.Principals = dsn, replicaToken, principals
	cfgB.WorkspaceRoots = cfgA.WorkspaceRoots
	_, addrA, _ = startReplica(t, cfgA)
	_, addrB, _ = startReplica(t, cfgB)
	return cfgA, addrA, addrB
}

// untilEnd reads an unfiltered stream until the MESSAGE_END of messageID and returns the
// sessions whose events it saw and the sender the user message's MESSAGE_END names.
func untilEnd(t *testing.T, stream pb.AgenticService_SubscribeClient, messageID string) (seen map[string]bool, sender string) {
	t.Helper()
	seen = map[string]bool{}
	for {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for the end of %s: %v", messageID, err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if ev.GetSessionId() != "" {
				seen[ev.GetSessionId()] = true
			}
			if end := ev.GetMessageEnd(); end.GetRole() == pb.MessageRole_MESSAGE_ROLE_USER {
				sender = end.GetPrincipal()
			}
			if ev.GetMessageEnd().GetMessageId() == messageID {
				return seen, sender
			}
		}
	}
}

// Two principals on two replicas of one Postgres: each sees its own sessions, events
// and audit entries only, whichever replica it asks and whichever owns the session; a
// call forwarded to the owner runs as the caller, not as the replica that forwarded it.
func TestReplicasKeepPrincipalsApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, addrA, addrB := principalReplicas(t, "hello")
	aliceA, aliceB := dialAs(t, addrA, aliceReplicaToken), dialAs(t, addrB, aliceReplicaToken)
	bobA, bobB := dialAs(t, addrA, bobReplicaToken), dialAs(t, addrB, bobReplicaToken)
	create := func(c pb.AgenticServiceClient) string {
		t.Helper()
		created, err := c.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: DefaultDeepChatID, Config: &pb.SessionConfig{Workspace: cfg.WorkspaceRoots[0]}})
		if err != nil {
			t.Fatal(err)
		}
		return created.GetSession().GetSessionId()
	}
	alices, bobs := create(aliceA), create(bobB) // owned by A and by B
	send := func(c pb.AgenticServiceClient, id string) string {
		t.Helper()
		sent, err := c.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "hi"}}}}})
		if err != nil {
			t.Fatalf("SendMessage to %s: %v", id, err)
		}
		return sent.GetMessageId()
	}

	// Unfiltered streams, each on the replica that does not own the principal's session.
	aliceStream, err := aliceB.Subscribe(ctx, &pb.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	bobStream, err := bobA.Subscribe(ctx, &pb.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []pb.AgenticService_SubscribeClient{aliceStream, bobStream} {
		if _, err := s.Header(); err != nil {
			t.Fatal(err)
		}
	}
	// Each sends through the replica that does not own its session: forwarded.
	aliceMsg := send(aliceB, alices)
	seen, sender := untilEnd(t, aliceStream, aliceMsg)
	if seen[bobs] {
		t.Errorf("alice's unfiltered stream on B showed bob's session %s", bobs)
	}
	if sender != "alice" {
		t.Errorf("alice's message, forwarded by B, names the sender %q; want alice", sender)
	}
	bobMsg := send(bobA, bobs)
	if seen, sender := untilEnd(t, bobStream, bobMsg); seen[alices] || !seen[bobs] || sender != "bob" {
		t.Errorf("bob's unfiltered stream on A saw sessions %v and sender %q; want his %s and not alice's %s, sent by bob", seen, sender, bobs, alices)
	}

	for _, c := range []struct {
		name   string
		client pb.AgenticServiceClient
		own    string
		other  string
	}{
		{"alice on A", aliceA, alices, bobs}, {"alice on B", aliceB, alices, bobs},
		{"bob on A", bobA, bobs, alices}, {"bob on B", bobB, bobs, alices},
	} {
		list, err := c.client.ListSessions(ctx, &pb.ListSessionsRequest{})
		if err != nil {
			t.Fatalf("%s: ListSessions: %v", c.name, err)
		}
		if got := list.GetSessions(); len(got) != 1 || got[0].GetSessionId() != c.own {
			t.Errorf("%s: ListSessions: %v; want its own session %s only", c.name, got, c.own)
		}
		info, err := c.client.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
		if err != nil {
			t.Fatalf("%s: GetServerInfo: %v", c.name, err)
		}
		if info.GetSessionCount() != 1 {
			t.Errorf("%s: session_count %d; want 1", c.name, info.GetSessionCount())
		}
		if _, err := c.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: c.other}); status.Code(err) != codes.NotFound {
			t.Errorf("%s: GetSession of the other's session: %v; want NOT_FOUND", c.name, err)
		}
		audit, err := c.client.ListAuditEvents(ctx, &pb.ListAuditEventsRequest{})
		if err != nil {
			t.Fatalf("%s: ListAuditEvents: %v", c.name, err)
		}
		if len(audit.GetEvents()) == 0 {
			t.Errorf("%s: no audit entries; want its session's", c.name)
		}
		for _, e := range audit.GetEvents() {
			if e.GetSessionId() != c.own {
				t.Errorf("%s: audit entry %s of session %q; want its own session's only", c.name, e.GetKind(), e.GetSessionId())
			}
		}
	}

	// A close forwarded by B is recorded by A, the owner, under alice's name.
	if _, err := aliceB.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: alices}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		audit, err := aliceB.ListAuditEvents(ctx, &pb.ListAuditEventsRequest{SessionIds: []string{alices}})
		if err != nil {
			t.Fatal(err)
		}
		got := audit.GetEvents()
		if n := len(got); n > 0 && got[n-1].GetKind() == pb.AuditKind_AUDIT_KIND_SESSION_CLOSED {
			for _, e := range got {
				if e.GetPrincipal() != "alice" {
					t.Errorf("audit entry %s names %q; want alice", e.GetKind(), e.GetPrincipal())
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SESSION_CLOSED entry after the forwarded CloseSession: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A client cannot name its principal itself: agenticd-principal counts only beside the
// replicas' shared token and the forwarded mark, which a replica's forwarding sets.
func TestReplicasPrincipalHeaderIsNotForgeable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, addrA, addrB := principalReplicas(t, "hello")
	aliceA := dialAs(t, addrA, aliceReplicaToken)
	created, err := aliceA.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: DefaultDeepChatID, Config: &pb.SessionConfig{Workspace: cfg.WorkspaceRoots[0]}})
	if err != nil {
		t.Fatal(err)
	}
	alices := created.GetSession().GetSessionId()
	// What a replica would send for an admin named alice.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"n":"alice","s":7}`))
	withHeaders := func(pairs ...string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, pairs...)
	}
	for _, c := range []struct {
		name string
		addr string
		ctx  context.Context
	}{
		{"principal alone, on the owner", addrA, withHeaders("agenticd-principal", forged)},
		{"principal and forwarded mark, on the owner", addrA, withHeaders("agenticd-principal", forged, "agenticd-forwarded", "replica-x")},
		{"principal alone, forwarded", addrB, withHeaders("agenticd-principal", forged)},
	} {
		bob := dialAs(t, c.addr, bobReplicaToken)
		info, err := bob.GetServerInfo(c.ctx, &pb.GetServerInfoRequest{})
		if err != nil {
			t.Fatalf("%s: GetServerInfo: %v", c.name, err)
		}
		if p := info.GetCaller().GetPrincipal(); p != "bob" || len(info.GetCaller().GetScopes()) != 2 {
			t.Errorf("%s: caller %v; want bob with his own scopes", c.name, info.GetCaller())
		}
		if _, err := bob.GetSession(c.ctx, &pb.GetSessionRequest{SessionId: alices}); status.Code(err) != codes.NotFound {
			t.Errorf("%s: bob's GetSession of alice's session: %v; want NOT_FOUND", c.name, err)
		}
		list, err := bob.ListSessions(c.ctx, &pb.ListSessionsRequest{})
		if err != nil || len(list.GetSessions()) != 0 {
			t.Errorf("%s: bob's ListSessions: %v, %v; want none", c.name, list.GetSessions(), err)
		}
	}
	// The shared token with the principal but no forwarded mark is the owner's call.
	owner := dialAs(t, addrA, replicaToken)
	info, err := owner.GetServerInfo(withHeaders("agenticd-principal", forged), &pb.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if p := info.GetCaller().GetPrincipal(); p != "owner" {
		t.Errorf("the shared token without the forwarded mark: caller %q; want owner", p)
	}
}

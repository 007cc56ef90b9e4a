package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

// Queued messages run for the principal that sent them, whenever and wherever they
// start, and a session's queue goes on through a restart and an agent that stops.

// waitTurn says "Working.", waits until the file .go is in the workspace (a shell inside
// the agent, so that a test holds the turn as long as it likes), then ends.
const waitTurn = `[{"text": "Working."}, {"shell": "while [ ! -e {cwd}/.go ]; do sleep 0.05; done"}, {"text": " Done."}]`

// aliceToken is the token of the static principal alice (read, write) of senderConfig.
const aliceToken = "alice-queue-token-0123456789"

func alicePrincipal() []daemon.PrincipalConfig {
	sum := sha256.Sum256([]byte(aliceToken))
	return []daemon.PrincipalConfig{{Name: "alice", TokenSHA256: hex.EncodeToString(sum[:]), Scopes: []string{"read", "write"}}}
}

// clientAs is a gRPC client of the agenticd at addr calling with token; it closes with
// the test.
func clientAs(t *testing.T, addr, token string) agenticv1.AgenticServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerToken(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return agenticv1.NewAgenticServiceClient(conn)
}

// sendersOver lists a session's messages through client (gRPC) and through Connect with
// token, as message id -> principal, and fails the test unless both agree.
func sendersOver(t *testing.T, client agenticv1.AgenticServiceClient, addr, token, sessionID string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	req := &agenticv1.ListMessagesRequest{SessionId: sessionID, PageSize: 100}
	viaGRPC, err := client.ListMessages(ctx, req)
	if err != nil {
		t.Fatalf("ListMessages over gRPC: %v", err)
	}
	cl := connect.NewClient[agenticv1.ListMessagesRequest, agenticv1.ListMessagesResponse](http.DefaultClient,
		"http://"+addr+"/agentic.v1.AgenticService/ListMessages")
	r := connect.NewRequest(req)
	r.Header().Set("Authorization", "Bearer "+token)
	viaConnect, err := cl.CallUnary(ctx, r)
	if err != nil {
		t.Fatalf("ListMessages over Connect: %v", err)
	}
	senders := func(msgs []*agenticv1.SessionMessage) map[string]string {
		out := map[string]string{}
		for _, m := range msgs {
			out[m.GetMessageId()] = m.GetPrincipal()
		}
		return out
	}
	g, c := senders(viaGRPC.GetMessages()), senders(viaConnect.Msg.GetMessages())
	if fmt.Sprint(g) != fmt.Sprint(c) {
		t.Fatalf("senders over gRPC %v, over Connect %v", g, c)
	}
	return g
}

// userEnd reports whether ev is the MESSAGE_END of the user message id.
func userEnd(id string) func(*agenticv1.AgenticEvent) bool {
	return func(ev *agenticv1.AgenticEvent) bool {
		e := ev.GetMessageEnd()
		return e != nil && e.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_USER && e.GetMessageId() == id
	}
}

// A message alice queued before a restart runs after it by itself, in an ACP session
// that is not loaded yet (the queue opens it again), and for alice: the user message's
// MESSAGE_END, ListMessages and GetMessage name her.
func TestQueuedMessageRunsForItsSenderAfterARestart(t *testing.T) {
	root, ws := workspaceUnder(t)
	agent := scriptedAgent(t, "acp.test.wait", `{"turns": [`+waitTurn+`]}`)
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{agent}, Principals: alicePrincipal()})
	ctx := context.Background()
	alice := clientAs(t, s.Addr, aliceToken)
	created, err := alice.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent.ID, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()
	events := subscribe(t, alice, &agenticv1.SubscribeRequest{SessionIds: []string{sid}, UnmergedDeltas: true})
	events.CaughtUp(t)
	first, err := alice.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("first")})
	if err != nil {
		t.Fatal(err)
	}
	events.Until(t, isAssistantText("Working."))
	later, err := alice.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("later"),
		Delivery: agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE})
	if err != nil || later.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED {
		t.Fatalf("SendMessage(QUEUE) = %v, %v", later, err)
	}
	info, err := alice.GetSession(ctx, &agenticv1.GetSessionRequest{SessionId: sid})
	if err != nil {
		t.Fatal(err)
	}
	if q := info.GetSession().GetQueuedMessages(); len(q) != 1 || q[0].GetPrincipal() != "alice" {
		t.Fatalf("queue = %v; want later, from alice", q)
	}
	events.Close()

	s.Restart(t)
	alice = clientAs(t, s.Addr, aliceToken)
	if err := os.WriteFile(filepath.Join(ws, ".go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	events = subscribe(t, alice, subscribeAfter(0, sid))
	got := events.Until(t, dcIsEnd(later.GetMessageId()))
	if end := got[len(got)-1].GetMessageEnd(); end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN {
		t.Fatalf("the queued turn ended %v", end)
	}
	at := slices.IndexFunc(got, userEnd(later.GetUserMessageId()))
	if at < 0 || got[at].GetMessageEnd().GetPrincipal() != "alice" {
		t.Fatalf("the queued user message's MESSAGE_END (at %d) does not name alice: %v", at, got[max(at, 0)])
	}
	if !slices.ContainsFunc(got, isDequeued(later.GetMessageId(), agenticv1.DequeueReason_DEQUEUE_REASON_STARTED)) {
		t.Fatal("no MESSAGE_DEQUEUED(started) of the queued message")
	}

	senders := sendersOver(t, alice, s.Addr, aliceToken, sid)
	want := map[string]string{first.GetUserMessageId(): "alice", later.GetUserMessageId(): "alice", first.GetMessageId(): "", later.GetMessageId(): ""}
	for id, principal := range want {
		if got, ok := senders[id]; !ok || got != principal {
			t.Errorf("message %s: principal %q (listed %v), want %q; all: %v", id, got, ok, principal, senders)
		}
	}
	one, err := alice.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: sid, MessageId: later.GetUserMessageId()})
	if err != nil || one.GetMessage().GetPrincipal() != "alice" {
		t.Errorf("GetMessage(queued user message) = %v, %v; want alice's", one, err)
	}
}

// A queued message whose agent cannot start for a while stays queued and is tried again
// until it can, then runs.
func TestQueuedMessageWaitsForItsAgentToStartAgain(t *testing.T) {
	root, ws := workspaceUnder(t)
	starts, down := filepath.Join(ws, ".starts"), filepath.Join(ws, ".down")
	// The first turn ends with a crash once .go is there; the agent then cannot start
	// while .down is there. Each start is a line in .starts.
	script := fmt.Sprintf(`{"agent": {"startShell": "echo start >> %s; test ! -e %s"}, "turns": [[
		{"text": "Working."}, {"shell": "while [ ! -e {cwd}/.go ]; do sleep 0.05; done"}, {"crashOnce": "{cwd}/.crashed"}, {"text": " Done."}]]}`,
		starts, down)
	agent := scriptedAgent(t, "acp.test.restarting", script)
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{agent}})
	ctx := context.Background()
	created, err := s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent.ID, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()
	events := dcSubscribe(t, s, sid)
	first := dcSend(t, s, sid, "first")
	events.Until(t, isAssistantText("Working."))
	later := dcDeliver(t, s, sid, "later", agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE)
	if later.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED {
		t.Fatalf("answer = %v", later)
	}
	for _, f := range []string{down, filepath.Join(ws, ".go")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := events.Until(t, dcIsEnd(first.GetMessageId()))
	if !slices.ContainsFunc(got, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetError().GetReason() == agenticv1.ErrorReason_ERROR_REASON_AGENT_CRASHED
	}) {
		t.Fatalf("the first turn did not end with the agent's crash: %v", got)
	}

	// Two failed starts after the crash's (the first line is the session's own start).
	for deadline := time.Now().Add(eventWait); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(starts)
		if n := strings.Count(string(b), "start"); n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent was not started again twice within %s (%q)", eventWait, b)
		}
	}
	if q := dcQueued(t, s, sid); len(q) != 1 || q[0].GetMessageId() != later.GetMessageId() {
		t.Fatalf("queue while the agent cannot start = %v; want the message still queued", q)
	}
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	got = events.Until(t, dcIsEnd(later.GetMessageId()))
	if end := got[len(got)-1].GetMessageEnd(); end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN {
		t.Fatalf("the queued turn ended %v", end)
	}
	for _, ev := range got {
		if d := ev.GetMessageDequeued(); d != nil && d.GetReason() != agenticv1.DequeueReason_DEQUEUE_REASON_STARTED {
			t.Fatalf("the queued message left the queue %v before it started", d)
		}
	}
}

// Every user message names the principal that sent it, as soon as SendMessage has
// answered; a send that reuses a message's id (refused) leaves that message's sender.
func TestMessageSenderStaysWithItsMessage(t *testing.T) {
	llm := newDCLLM(t)
	root := t.TempDir()
	ws := filepath.Join(root, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Principals: alicePrincipal(), Agents: []daemon.AgentConfig{{
		ID: dcAgent, Type: presenters.AgentTypeDeepChat, Provider: "fake", BaseURL: llm.srv.URL + "/v1", Models: []string{"fake-model"}}}})
	ctx := context.Background()
	alice := clientAs(t, s.Addr, aliceToken)
	created, err := alice.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: dcAgent, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()
	events := dcSubscribe(t, s, sid)
	llm.script(dcText("one"), dcText("two"))
	const mine = "01a23000-0000-7000-8000-00000000a11c"
	first, err := alice.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("hi"), UserMessageId: mine})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := alice.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: sid, MessageId: mine}); err != nil || m.GetMessage().GetPrincipal() != "alice" {
		t.Errorf("GetMessage right after SendMessage = %v, %v; want alice's", m, err)
	}
	events.Until(t, dcIsEnd(first.GetMessageId()))
	// The owner (an admin) may write to alice's session, but not under her message's id.
	_, err = s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("me too"), UserMessageId: mine})
	if reasonOf(err) != "MESSAGE_ID_IN_USE" {
		t.Fatalf("SendMessage under alice's message id: %v; want MESSAGE_ID_IN_USE", err)
	}
	second := dcSend(t, s, sid, "hello")
	events.Until(t, dcIsEnd(second.GetMessageId()))
	senders := sendersOver(t, alice, s.Addr, aliceToken, sid)
	if senders[mine] != "alice" || senders[second.GetUserMessageId()] != "owner" {
		t.Errorf("senders %v; want %s alice's and %s the owner's", senders, mine, second.GetUserMessageId())
	}
}

package daemon

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/pgtest"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// startReplica starts a replica on the database; stop stops it gracefully (once).
func startReplica(t *testing.T, cfg Config) (client pb.AgenticServiceClient, addr string, stop func()) {
	t.Helper()
	srv, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Addr(), clientOptions(srv)...)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = conn.Close()
		if err := srv.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	return pb.NewAgenticServiceClient(conn), srv.Addr(), stop
}

// replicaSession starts a replica on a new Postgres database, with DeepChat answering
// from llmURL (a closed address when "") and the given lease ttl (default when 0), and
// opens a DeepChat session through it.
func replicaSession(t *testing.T, llmURL string, ttl time.Duration) (client pb.AgenticServiceClient, cfg Config, sessionID string, stop func()) {
	t.Helper()
	_, dsn := pgtest.StartForTest(t)
	base := closedAddr(t)
	if llmURL != "" {
		base = llmURL + "/v1"
	}
	setEnv(t, map[string]string{EnvOpenAIBaseURL: base, EnvOpenAIModel: "local-model", EnvOllamaHost: closedAddr(t)})
	cfg = testConfig(t)
	cfg.Database = dsn
	cfg.Token = replicaToken
	cfg.Replica.LeaseTTL = ttl
	client, _, stop = startReplica(t, cfg)
	created, err := client.CreateSession(context.Background(), &pb.CreateSessionRequest{AgentId: DefaultDeepChatID, Config: &pb.SessionConfig{Workspace: cfg.WorkspaceRoots[0]}})
	if err != nil {
		t.Fatal(err)
	}
	return client, cfg, created.GetSession().GetSessionId(), stop
}

// replyOn reads a stream until the message's MESSAGE_END and returns its assistant text,
// checking that the session's sequences rise.
func replyOn(t *testing.T, stream pb.AgenticService_SubscribeClient, messageID string, last *uint64) string {
	t.Helper()
	var reply strings.Builder
	for {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for the reply to %s (%q so far): %v", messageID, reply.String(), err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if ev.GetSequence() <= *last {
				t.Fatalf("event %d (%s) after %d: the session's sequences must rise", ev.GetSequence(), ev.GetType(), *last)
			}
			*last = ev.GetSequence()
			if d := ev.GetMessageDelta(); d.GetMessageId() == messageID {
				reply.WriteString(d.GetText())
			}
			if ev.GetMessageEnd().GetMessageId() == messageID {
				return reply.String()
			}
		}
	}
}

// Two replicas on one Postgres: a session created through A is served through B, which
// forwards its calls to A and reads its events from the log; once A has stopped (giving
// up its leases), B takes the session over on its next call.
func TestReplicasForwardAndTakeOver(t *testing.T) {
	_, dsn := pgtest.StartForTest(t)
	llm := newFakeLLM(t, "from the owner")
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1", EnvOpenAIModel: "local-model", EnvOllamaHost: closedAddr(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfgA := testConfig(t)
	cfgA.Database = dsn
	cfgA.Token = replicaToken
	cfgB := testConfig(t)
	cfgB.Database = dsn
	cfgB.Token = replicaToken
	cfgB.WorkspaceRoots = cfgA.WorkspaceRoots // storage both replicas see
	a, _, stopA := startReplica(t, cfgA)
	b, addrB, _ := startReplica(t, cfgB)

	created, err := a.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: DefaultDeepChatID, Config: &pb.SessionConfig{Workspace: cfgA.WorkspaceRoots[0]}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	stream, err := b.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	send := func(c pb.AgenticServiceClient, text string) string {
		t.Helper()
		sent, err := c.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: text}}}}})
		if err != nil {
			t.Fatalf("SendMessage %q: %v", text, err)
		}
		return sent.GetMessageId()
	}
	var last uint64
	if got := replyOn(t, stream, send(b, "first"), &last); got != "from the owner" {
		t.Fatalf("reply through B, run by A: %q", got)
	}
	got, err := b.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSession().GetLastSequence() < last {
		t.Errorf("GetSession through B: last_sequence %d, below the %d the stream reached: it was not the owner's view", got.GetSession().GetLastSequence(), last)
	}

	// A browser's call (Connect over HTTP/1.1, with its transport's headers) forwarded
	// to the owner gets the owner's answer: nothing runs, nothing to cancel.
	body := strings.NewReader(`{"sessionId":"` + id + `"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addrB+"/agentic.v1.AgenticService/CancelMessage", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+replicaToken)
	req.Header.Set("Connection", "keep-alive")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(answer)) != `{"messageId":""}` {
		t.Errorf("CancelMessage over Connect through B: %s %s; want the owner's answer, 200 OK with no message cancelled", resp.Status, answer)
	}

	stopA()
	if got := replyOn(t, stream, send(b, "second"), &last); got != "from the owner" {
		t.Fatalf("reply through B after A stopped: %q", got)
	}
	msgs, err := b.ListMessages(ctx, &pb.ListMessagesRequest{SessionId: id, Order: pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs.GetMessages() {
		texts = append(texts, m.GetRole().String()+":"+m.GetStatus().String())
	}
	want := "MESSAGE_ROLE_USER:MESSAGE_STATUS_COMPLETE MESSAGE_ROLE_ASSISTANT:MESSAGE_STATUS_COMPLETE MESSAGE_ROLE_USER:MESSAGE_STATUS_COMPLETE MESSAGE_ROLE_ASSISTANT:MESSAGE_STATUS_COMPLETE"
	if strings.Join(texts, " ") != want {
		t.Errorf("history: %v; want %s", texts, want)
	}
}

// A session whose lease is held by a replica that does not answer is
// SESSION_OWNER_UNAVAILABLE, naming the owner and when its lease ends, for calls that
// need it live; reads are answered from the database.
func TestReplicaOwnerUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cfg, id, stopC := replicaSession(t, "", 0)
	dsn := cfg.Database
	stopC() // gives up its lease

	st, err := store.OpenOnPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gone := closedAddr(t)
	if _, err := st.AcquireLease(ctx, id, "gone", gone, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A third replica, which never held the session, meets the dead owner's lease.
	cfg3 := testConfig(t)
	cfg3.Database = dsn
	cfg3.Token = replicaToken
	cfg3.WorkspaceRoots = cfg.WorkspaceRoots
	third, _, _ := startReplica(t, cfg3)
	// A read is answered from the database meanwhile...
	if got, err := third.GetSession(ctx, &pb.GetSessionRequest{SessionId: id}); err != nil || got.GetSession().GetSessionId() != id {
		t.Fatalf("GetSession while the owner is gone: %v, %v; want the stored session", got, err)
	}
	// ... a call that needs the session live waits for the lease to end.
	_, err = third.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "hi"}}}}})
	st2 := status.Convert(err)
	var info *errdetails.ErrorInfo
	for _, d := range st2.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if st2.Code() != codes.Unavailable || info.GetReason() != "SESSION_OWNER_UNAVAILABLE" || info.GetMetadata()["owner"] != gone ||
		info.GetMetadata()["lease_expires"] == "" || !strings.Contains(st2.Message(), "retry") {
		t.Fatalf("SendMessage to a session whose owner is gone: %v (%v); want UNAVAILABLE SESSION_OWNER_UNAVAILABLE naming %s and its lease's end", err, info, gone)
	}
}

// A turn a dead replica left running ends visibly within a lease's ttl, with no call for
// its session: a live replica takes the lapsed session over and its subscribers see the
// reply end with OWNER_LOST.
func TestReplicaEndsOrphanedTurns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cfg, id, stopFirst := replicaSession(t, "", time.Second)
	dsn := cfg.Database
	stopFirst()

	// What a replica killed mid-turn leaves: its lease (lapsing within a second) and a
	// reply in progress.
	st, err := store.OpenOnPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AcquireLease(ctx, id, "dead", closedAddr(t), time.Second); err != nil {
		t.Fatal(err)
	}
	reply := presenters.Message{ID: "reply-1", SessionID: id, Role: presenters.RoleAssistant, Status: store.StatusInProgress,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "half a"}}}
	if err := st.SaveMessage(ctx, reply); err != nil {
		t.Fatal(err)
	}

	cfg2 := testConfig(t)
	cfg2.Database = dsn
	cfg2.Token = replicaToken
	cfg2.WorkspaceRoots = cfg.WorkspaceRoots
	cfg2.Replica.LeaseTTL = time.Second
	live, _, _ := startReplica(t, cfg2)
	stream, err := live.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	var sawError bool
	for {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for the orphaned reply to end (error event seen: %v): %v", sawError, err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if e := ev.GetError(); e != nil && e.GetMessageId() == reply.ID && e.GetReason() == pb.ErrorReason_ERROR_REASON_OWNER_LOST {
				sawError = true
			}
			if end := ev.GetMessageEnd(); end.GetMessageId() == reply.ID {
				if !sawError {
					t.Errorf("the orphaned reply ended without an OWNER_LOST error before it")
				}
				msgs, err := live.ListMessages(ctx, &pb.ListMessagesRequest{SessionId: id})
				if err != nil || len(msgs.GetMessages()) != 1 || msgs.GetMessages()[0].GetStatus() != pb.MessageStatus_MESSAGE_STATUS_INCOMPLETE {
					t.Fatalf("stored after the take-over: %v, %v; want the reply, incomplete", msgs, err)
				}
				return
			}
		}
	}
}

// A replica that goes on running a session another replica has taken over (its lease
// lapsed while it stalled) is fenced: its events of the session do not reach the log,
// so no subscriber sees them.
func TestReplicaFencedOutOfATakenSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cfg, id, _ := replicaSession(t, newFakeLLM(t, "some words").URL, 0)
	db, err := sql.Open("pgx", cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	setHolder := func(replica string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `UPDATE session_leases SET replica = $1 WHERE session_id = $2`, replica, id); err != nil {
			t.Fatal(err)
		}
	}
	turn := func() string {
		t.Helper()
		sent, err := c.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "hi"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, err := c.GetMessage(ctx, &pb.GetMessageRequest{SessionId: id, MessageId: sent.GetMessageId()})
			if err == nil && got.GetMessage().GetStatus() == pb.MessageStatus_MESSAGE_STATUS_COMPLETE {
				return sent.GetMessageId()
			}
			if time.Now().After(deadline) {
				t.Fatalf("the turn did not end: %v, %v", got, err)
			}
		}
	}
	loggedOf := func(messageID string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM event_log WHERE session_id = $1 AND message_id = $2`, id, messageID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// While the lease is this replica's, a turn's events are logged.
	normal := turn()
	for deadline := time.Now().Add(10 * time.Second); loggedOf(normal) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a turn's events never reached the log while the lease was this replica's")
		}
	}
	// Another replica takes the session, as after a stall of this one longer than the
	// lease; this replica still routes the session to itself for the rest of its ttl, but
	// the store refuses its writes of the session (fenced): the turn does not start, and
	// the caller is told to try again, which then reaches the new owner.
	before, err := c.ListMessages(ctx, &pb.ListMessagesRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	setHolder("thief")
	_, err = c.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "hi"}}}}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("SendMessage for a session another replica took: %v, want UNAVAILABLE", err)
	}
	var stored int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE conversation_id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != len(before.GetMessages()) {
		t.Errorf("%d messages stored after a fenced SendMessage, want %d as before", stored, len(before.GetMessages()))
	}
}

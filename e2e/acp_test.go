package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

// buildTestAgent builds internal/testagent (the scripted ACP agent) for one test.
func buildTestAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testagent")
	out, err := exec.Command("go", "build", "-o", bin, "../internal/testagent").CombinedOutput()
	if err != nil {
		t.Fatalf("building the test agent: %v\n%s", err, out)
	}
	return bin
}

// scriptedAgent is the agent config of the scripted test agent running script.
func scriptedAgent(t *testing.T, id, script string) daemon.AgentConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return daemon.AgentConfig{ID: id, Type: presenters.AgentTypeACP, Command: buildTestAgent(t), Env: map[string]string{"TESTAGENT_SCRIPT": path},
		ReadPaths: []string{filepath.Dir(path)}}
}

// workspaceUnder makes a workspace directory inside a new root and returns both.
func workspaceUnder(t *testing.T) (root, ws string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(root, "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, ws
}

// lastSequence is where a session's event stream stands now.
func lastSequence(t *testing.T, s *testServer, sessionID string) uint64 {
	t.Helper()
	resp, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	return resp.GetSession().GetLastSequence()
}

// follow reads a session's events after a sequence until done says so, resuming the
// stream when the server ends it for a slow reader (RESOURCE_EXHAUSTED): that is the
// documented policy, and resuming must lose and repeat nothing. It returns the events
// and how many times it resumed. Deltas come one by one, as published, so that a test
// can compare the events exactly.
func follow(t *testing.T, s *testServer, sessionID string, after uint64, done func(*agenticv1.AgenticEvent) bool) ([]*agenticv1.AgenticEvent, int) {
	t.Helper()
	return followStream(t, s, sessionID, after, true, done)
}

// followMerged is follow with the server's default: the deltas of one message that wait
// together come as one.
func followMerged(t *testing.T, s *testServer, sessionID string, after uint64, done func(*agenticv1.AgenticEvent) bool) ([]*agenticv1.AgenticEvent, int) {
	t.Helper()
	return followStream(t, s, sessionID, after, false, done)
}

func followStream(t *testing.T, s *testServer, sessionID string, after uint64, unmerged bool, done func(*agenticv1.AgenticEvent) bool) ([]*agenticv1.AgenticEvent, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var events []*agenticv1.AgenticEvent
	resumes := 0
	last := after
	for {
		req := subscribeAfter(last, sessionID)
		req.UnmergedDeltas = unmerged
		stream, err := s.Client.Subscribe(ctx, req)
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		for {
			frame, err := stream.Recv()
			if status.Code(err) == codes.ResourceExhausted && reasonOf(err) == "SUBSCRIBER_TOO_SLOW" {
				resumes++
				break
			}
			if err != nil {
				t.Fatalf("event stream after %d events: %v", len(events), err)
			}
			for _, ev := range frame.GetEvents().GetEvents() {
				if ev.GetSequence() <= last && last != 0 {
					t.Fatalf("event %d after %d: repeated or out of order", ev.GetSequence(), last)
				}
				last = ev.GetSequence()
				events = append(events, ev)
				if done(ev) {
					return events, resumes
				}
			}
			// A bookmark is a resume point too: the filtered events before it are seen.
			if b := frame.GetBookmark(); b != nil && b.GetSequence() > last {
				last = b.GetSequence()
			}
		}
	}
}

// turnEnd matches the end of an assistant message.
func turnEnd(messageID string) func(*agenticv1.AgenticEvent) bool {
	return func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetMessageEnd() != nil && ev.GetMessageEnd().GetMessageId() == messageID
	}
}

// short cuts a long text for a summary line.
func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// assistantDelta is the summary line of an assistant text chunk.
func assistantDelta(text string) string { return fmt.Sprintf("DELTA ASSISTANT %q", short(text)) }

// summarize renders events compactly; long texts are cut.
func summarize(evs []*agenticv1.AgenticEvent) []string {
	out := make([]string, 0, len(evs))
	tool := func(name string, tc *agenticv1.ToolCall) string {
		return fmt.Sprintf("%s %s %s %s", name, tc.GetToolId(),
			strings.TrimPrefix(tc.GetKind().String(), "TOOL_KIND_"), strings.TrimPrefix(tc.GetStatus().String(), "TOOL_STATUS_"))
	}
	for _, ev := range evs {
		var line string
		switch {
		case ev.GetMessageDelta() != nil:
			d := ev.GetMessageDelta()
			line = fmt.Sprintf("DELTA %s %q", strings.TrimPrefix(d.GetRole().String(), "MESSAGE_ROLE_"), short(d.GetText()))
		case ev.GetMessageEnd() != nil:
			e := ev.GetMessageEnd()
			line = fmt.Sprintf("END %s %s", strings.TrimPrefix(e.GetRole().String(), "MESSAGE_ROLE_"), strings.TrimPrefix(e.GetStopReason().String(), "STOP_REASON_"))
		case ev.GetToolStart() != nil:
			line = tool("TOOL_START", ev.GetToolStart().GetTool())
		case ev.GetToolRunning() != nil:
			line = tool("TOOL_RUNNING", ev.GetToolRunning().GetTool())
		case ev.GetToolEnd() != nil:
			line = tool("TOOL_END", ev.GetToolEnd().GetTool())
		case ev.GetToolPermissionRequired() != nil:
			r := ev.GetToolPermissionRequired().GetRequest()
			line = fmt.Sprintf("PERMISSION_REQUIRED %s %v", r.GetToolId(), r.GetPaths())
		case ev.GetToolPermissionGranted() != nil:
			g := ev.GetToolPermissionGranted()
			line = fmt.Sprintf("PERMISSION_GRANTED %s %s by %s", g.GetToolId(), g.GetOptionId(), strings.TrimPrefix(g.GetDecidedBy().String(), "PERMISSION_DECIDER_"))
		case ev.GetToolPermissionDenied() != nil:
			d := ev.GetToolPermissionDenied()
			line = fmt.Sprintf("PERMISSION_DENIED %s %s by %s", d.GetToolId(), d.GetOptionId(), strings.TrimPrefix(d.GetDecidedBy().String(), "PERMISSION_DECIDER_"))
		case ev.GetStatusChanged() != nil:
			line = "STATUS " + strings.TrimPrefix(ev.GetStatusChanged().GetStatus().String(), "SESSION_STATUS_")
		case ev.GetSessionUpdated() != nil:
			line = "SESSION_UPDATED " + strings.Join(ev.GetSessionUpdated().GetUpdateMask().GetPaths(), ",")
		case ev.GetError() != nil:
			line = "ERROR " + strings.TrimPrefix(ev.GetError().GetReason().String(), "ERROR_REASON_")
		default:
			line = strings.TrimPrefix(ev.GetType().String(), "AGENTIC_EVENT_TYPE_")
		}
		out = append(out, line)
	}
	return out
}

func agentStatus(t *testing.T, s *testServer, id string) *agenticv1.AgentInfo {
	t.Helper()
	resp, err := s.Client.ListAgents(context.Background(), &agenticv1.ListAgentsRequest{})
	if err != nil {
		t.Fatalf("ListAgents: %v", err)
	}
	for _, a := range resp.GetAgents() {
		if a.GetAgentId() == id {
			return a
		}
	}
	t.Fatalf("agent %s not listed", id)
	return nil
}

// A whole turn through gRPC: deltas stream, a permission is answered by kind, the turn
// ends; after a restart the session is listed and its history is there.
func TestACPTurnOverGRPC(t *testing.T) {
	root, ws := workspaceUnder(t)
	const id = "acp.test.scripted"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, id, `{"turns": [[
	 {"text": "Hello"}, {"text": " there"},
	 {"update": {"sessionUpdate": "tool_call", "toolCallId": "w1", "title": "Write notes.txt", "kind": "edit", "status": "pending", "locations": [{"path": "{cwd}/notes.txt"}]}},
	 {"permission": {"toolCall": {"toolCallId": "w1"}, "report": true,
	   "onAllow": [{"write": {"path": "{cwd}/notes.txt", "content": "hi"}}, {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "w1", "status": "completed"}}]}},
	 {"stop": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}}
	]]}`)}})
	ctx := context.Background()
	if st := agentStatus(t, s, id).GetStatus(); st != agenticv1.AgentStatus_AGENT_STATUS_NOT_STARTED {
		t.Fatalf("agent status before use %v", st)
	}
	createReq := &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}, RequestId: uuid.NewString()}
	created, err := s.Client.CreateSession(ctx, createReq)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sid := created.GetSession().GetSessionId()
	// A retry of the same request gets the first answer, not a second session.
	if again, err := s.Client.CreateSession(ctx, createReq); err != nil || again.GetSession().GetSessionId() != sid {
		t.Fatalf("CreateSession repeated with request_id %s: %v, session %q; want the first answer %q", createReq.GetRequestId(), err, again.GetSession().GetSessionId(), sid)
	}
	if a := agentStatus(t, s, id); a.GetStatus() != agenticv1.AgentStatus_AGENT_STATUS_READY || a.GetImplementation().GetName() == "" {
		t.Fatalf("agent after CreateSession %v", a)
	}
	after := lastSequence(t, s, sid)
	// The reply's id is the client's: known before any event of the turn.
	const messageID = "e2e-turn-1"
	sent, err := s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("write notes"),
		RequestId: uuid.NewString(), MessageId: messageID})
	if err != nil || sent.GetMessageId() != messageID {
		t.Fatalf("SendMessage: %v, message id %q; want %q", err, sent.GetMessageId(), messageID)
	}
	// A second message during the turn waits in the queue; taken out again, it never runs.
	queued, err := s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("again")})
	if err != nil || queued.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED {
		t.Fatalf("second SendMessage during the turn: %v, outcome %v; want it queued", err, queued.GetOutcome())
	}
	if _, err := s.Client.CancelMessage(ctx, &agenticv1.CancelMessageRequest{SessionId: sid, MessageId: queued.GetMessageId()}); err != nil {
		t.Fatalf("CancelMessage of the queued message: %v", err)
	}
	var permissionID string
	events, _ := follow(t, s, sid, after, func(ev *agenticv1.AgenticEvent) bool {
		if r := ev.GetToolPermissionRequired(); r != nil {
			permissionID = r.GetRequest().GetPermissionId()
			resp, err := s.Client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{SessionId: sid, PermissionId: permissionID,
				Answer: &agenticv1.RespondPermissionRequest_OptionKind{OptionKind: agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE}})
			if err != nil || !resp.GetDecision().GetGranted() || resp.GetDecision().GetOptionId() != "allow" {
				t.Errorf("RespondPermission: %v, decision %v; want allow granted", err, resp.GetDecision())
			}
		}
		return ev.GetStatusChanged() != nil && ev.GetStatusChanged().GetStatus() == agenticv1.SessionStatus_SESSION_STATUS_IDLE
	})
	// The queue's events come when the client acts, between the turn's: checked apart.
	var queueEvents []string
	events = slices.DeleteFunc(events, func(ev *agenticv1.AgenticEvent) bool {
		switch {
		case ev.GetMessageQueued() != nil:
			queueEvents = append(queueEvents, "QUEUED "+ev.GetMessageQueued().GetMessage().GetMessageId())
		case ev.GetMessageDequeued() != nil:
			queueEvents = append(queueEvents, "DEQUEUED "+ev.GetMessageDequeued().GetMessageId()+" "+ev.GetMessageDequeued().GetReason().String())
		default:
			return false
		}
		return true
	})
	if want := []string{"QUEUED " + queued.GetMessageId(), "DEQUEUED " + queued.GetMessageId() + " DEQUEUE_REASON_CANCELLED"}; !reflect.DeepEqual(queueEvents, want) {
		t.Errorf("queue events %v, want %v", queueEvents, want)
	}
	got := summarize(events)
	want := []string{
		`DELTA USER "write notes"`, `END USER UNSPECIFIED`, `SESSION_UPDATED title,update_time`, `STATUS GENERATING`,
		`DELTA ASSISTANT "Hello"`, `DELTA ASSISTANT " there"`,
		`TOOL_START w1 EDIT PENDING`,
		`PERMISSION_REQUIRED w1 [` + filepath.Join(ws, "notes.txt") + `]`, `STATUS PAUSED`,
		`PERMISSION_GRANTED w1 allow by USER`, `STATUS GENERATING`,
		`DELTA ASSISTANT "permission: allow_once allow"`, `DELTA ASSISTANT "write ok"`,
		`TOOL_END w1 EDIT COMPLETED`,
		`END ASSISTANT END_TURN`, `SESSION_UPDATED usage`, `STATUS IDLE`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	if end := events[len(events)-3].GetMessageEnd(); end.GetMessageId() != sent.GetMessageId() || end.GetUsage().GetTotalTokens() != 7 {
		t.Fatalf("MESSAGE_END %v", end)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "hi" {
		t.Fatalf("notes.txt = %q", b)
	}
	// After the decision: the same answer again is the decision; another is refused with it.
	if resp, err := s.Client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{SessionId: sid, PermissionId: permissionID,
		Answer: &agenticv1.RespondPermissionRequest_OptionId{OptionId: "allow"}}); err != nil || resp.GetDecision().GetOptionId() != "allow" {
		t.Errorf("the same answer again: %v, decision %v; want OK with the decision", err, resp.GetDecision())
	}
	_, err = s.Client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{SessionId: sid, PermissionId: permissionID,
		Answer: &agenticv1.RespondPermissionRequest_OptionKind{OptionKind: agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ONCE}})
	if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != "PERMISSION_ALREADY_DECIDED" {
		t.Errorf("another answer after the decision: %v (reason %q), want FAILED_PRECONDITION PERMISSION_ALREADY_DECIDED", err, reasonOf(err))
	}
	// The turn is over: naming it in a cancel says so; the id stays taken.
	_, err = s.Client.CancelMessage(ctx, &agenticv1.CancelMessageRequest{SessionId: sid, MessageId: messageID})
	if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != "MESSAGE_NOT_RUNNING" {
		t.Errorf("CancelMessage of the ended turn: %v (reason %q), want FAILED_PRECONDITION MESSAGE_NOT_RUNNING", err, reasonOf(err))
	}
	_, err = s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("again"), MessageId: messageID})
	if status.Code(err) != codes.AlreadyExists || reasonOf(err) != "MESSAGE_ID_IN_USE" {
		t.Errorf("SendMessage reusing message id %s: %v (reason %q), want ALREADY_EXISTS MESSAGE_ID_IN_USE", messageID, err, reasonOf(err))
	}

	s.Restart(t)
	list, err := s.Client.ListSessions(ctx, &agenticv1.ListSessionsRequest{AgentId: id})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetSessionId() != sid {
		t.Fatalf("ListSessions after a restart: %v %v", err, list)
	}
	// One message a page, newest first: the reply, then the user's message, then the end.
	var pages [][]*agenticv1.SessionMessage
	for token := ""; ; {
		msgs, err := s.Client.ListMessages(ctx, &agenticv1.ListMessagesRequest{SessionId: sid, PageSize: 1, PageToken: token,
			Order: agenticv1.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST})
		if err != nil || len(pages) > 2 {
			t.Fatalf("ListMessages after a restart, page %d: %v %v", len(pages)+1, err, msgs)
		}
		pages = append(pages, msgs.GetMessages())
		if token = msgs.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(pages) != 2 || len(pages[0]) != 1 || len(pages[1]) != 1 || pages[1][0].GetRole() != agenticv1.MessageRole_MESSAGE_ROLE_USER {
		t.Fatalf("ListMessages pages of one, newest first: %v", pages)
	}
	reply := pages[0][0]
	if reply.GetMessageId() != messageID || reply.GetStatus() != agenticv1.MessageStatus_MESSAGE_STATUS_COMPLETE ||
		reply.GetBlocks()[0].GetText().GetText() != "Hello there" || reply.GetBlocks()[1].GetTool().GetStatus() != agenticv1.ToolStatus_TOOL_STATUS_COMPLETED {
		t.Fatalf("stored reply %v", reply)
	}
	got1, err := s.Client.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: sid, MessageId: messageID})
	if err != nil || got1.GetMessage().GetBlocks()[0].GetText().GetText() != "Hello there" {
		t.Fatalf("GetMessage %s: %v %v", messageID, err, got1)
	}
	_, err = s.Client.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: sid, MessageId: "no-such-message"})
	if status.Code(err) != codes.NotFound || reasonOf(err) != "MESSAGE_NOT_FOUND" {
		t.Errorf("GetMessage of an unknown id: %v (reason %q), want NOT_FOUND MESSAGE_NOT_FOUND", err, reasonOf(err))
	}
}

// Flow control over gRPC: floods of 100,000 64-byte and 20,000 1 KiB chunks, a flood
// with a permission request in the middle, and a 50,000-message session/load replay
// each reach a subscriber exactly once and in order; the session stays usable.
func TestACPFloodsReachSubscribersWhole(t *testing.T) {
	root, ws := workspaceUnder(t)
	const id = "acp.test.flood"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, EventBuffer: 400_000, Agents: []daemon.AgentConfig{scriptedAgent(t, id, `{
	 "agent": {"loadSession": true},
	 "load": [{"replay": {"messages": 50000, "size": 64}}],
	 "turns": [
	  [{"flood": {"count": 100000, "size": 64}}],
	  [{"flood": {"count": 20000, "size": 1024}}],
	  [{"flood": {"count": 100000, "size": 64, "permissionAt": 50000}}],
	  [{"text": "00000000|after the floods"}]]}`)}})
	ctx := context.Background()
	created, err := s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sid := created.GetSession().GetSessionId()

	for _, f := range []struct {
		name        string
		count, size int
		permission  bool
	}{{"100000x64", 100_000, 64, false}, {"20000x1024", 20_000, 1024, false}, {"100000x64 with a permission", 100_000, 64, true}, {"second turn", 1, len("00000000|after the floods"), false}} {
		after := lastSequence(t, s, sid)
		sent, err := s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("flood")})
		if err != nil {
			t.Fatalf("%s: SendMessage: %v", f.name, err)
		}
		// Deltas come merged (the default) as they wait, so the chunks are cut out of the
		// text: each must be whole, in order, and the agent's one line about the
		// permission may sit between two of them.
		next, granted, pending := 0, false, ""
		events, resumes := followMerged(t, s, sid, after, func(ev *agenticv1.AgenticEvent) bool {
			if r := ev.GetToolPermissionRequired(); r != nil {
				if _, err := s.Client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{SessionId: sid, PermissionId: r.GetRequest().GetPermissionId(),
					Answer: &agenticv1.RespondPermissionRequest_OptionId{OptionId: "allow"}}); err != nil {
					t.Errorf("RespondPermission: %v", err)
				}
			}
			granted = granted || ev.GetToolPermissionGranted() != nil
			if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == sent.GetMessageId() {
				pending += d.GetText()
				if strings.HasPrefix(pending, "permission: ") {
					cut := strings.Index(pending, fmt.Sprintf("%08d|", next))
					if cut < 0 {
						cut = len(pending)
					}
					pending = pending[cut:]
				}
				for len(pending) >= f.size {
					chunk := pending[:f.size]
					if idx, err := strconv.Atoi(strings.SplitN(chunk, "|", 2)[0]); err != nil || idx != next {
						t.Fatalf("%s: chunk %d is %.20q: want chunk %d of %d bytes", f.name, next, chunk, next, f.size)
					}
					next++
					pending = pending[f.size:]
				}
			}
			return turnEnd(sent.GetMessageId())(ev)
		})
		if pending != "" {
			t.Fatalf("%s: the reply ended with %d bytes that are not a whole chunk: %.40q", f.name, len(pending), pending)
		}
		t.Logf("%s: %d events, the stream was resumed %d times", f.name, len(events), resumes)
		if next != f.count {
			t.Fatalf("%s: %d chunks arrived, want %d", f.name, next, f.count)
		}
		if stop := events[len(events)-1].GetMessageEnd().GetStopReason(); stop != agenticv1.StopReason_STOP_REASON_END_TURN {
			t.Fatalf("%s: turn ended with %v", f.name, stop)
		}
		if f.permission && !granted {
			t.Fatalf("%s: the permission was not granted", f.name)
		}
	}

	// session/load replays the agent's 50,000-message history.
	if _, err := s.Client.CloseSession(ctx, &agenticv1.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	after := lastSequence(t, s, sid)
	loaded := make(chan error, 1)
	go func() {
		_, err := s.Client.LoadSession(ctx, &agenticv1.LoadSessionRequest{SessionId: sid})
		loaded <- err
	}()
	n := 0
	events, resumes := follow(t, s, sid, after, func(ev *agenticv1.AgenticEvent) bool {
		if d := ev.GetMessageDelta(); d != nil {
			if !ev.GetReplay() {
				t.Fatalf("replayed message %d is not marked replay: %v", n, ev)
			}
			prefix := "u"
			if n%2 == 1 {
				prefix = "a"
			}
			if !strings.HasPrefix(d.GetText(), fmt.Sprintf("%s%08d|", prefix, n)) {
				t.Fatalf("replayed message %d is %.20q", n, d.GetText())
			}
			n++
		}
		return ev.GetSessionReady() != nil
	})
	if err := <-loaded; err != nil {
		t.Fatalf("LoadSession: %v", err)
	}
	t.Logf("replay: %d events, resumed %d times", len(events), resumes)
	if ready := events[len(events)-1].GetSessionReady(); n != 50_000 || ready.GetMessageCount() != 50_000 {
		t.Fatalf("replayed %d messages, SESSION_READY says %d; want 50000", n, ready.GetMessageCount())
	}
}

// An agent that crashes mid-turn: the session fails with ERROR and STATUS_CHANGED, the
// agent is listed as crashed with the reason, and the next call restarts it.
func TestACPAgentCrashOverGRPC(t *testing.T) {
	root, ws := workspaceUnder(t)
	const id = "acp.test.crashy"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, id,
		`{"turns": [[{"text": "going down"}, {"crash": 7}]]}`)}})
	ctx := context.Background()
	created, err := s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sid := created.GetSession().GetSessionId()
	after := lastSequence(t, s, sid)
	if _, err := s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("crash")}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	events, _ := follow(t, s, sid, after, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetStatusChanged() != nil && ev.GetStatusChanged().GetStatus() == agenticv1.SessionStatus_SESSION_STATUS_ERROR
	})
	got := summarize(events)
	if tail := got[len(got)-4:]; !reflect.DeepEqual(tail, []string{`DELTA ASSISTANT "going down"`, `ERROR AGENT_CRASHED`, `END ASSISTANT ERROR`, `STATUS ERROR`}) {
		t.Fatalf("crash events %q", got)
	}
	if a := agentStatus(t, s, id); a.GetStatus() != agenticv1.AgentStatus_AGENT_STATUS_CRASHED || !strings.Contains(a.GetStatusReason(), "exited with status 7") {
		t.Fatalf("agent after the crash %v", a)
	}
	_, err = s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("x")})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("SendMessage to the failed session: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}}); err != nil {
		t.Fatalf("CreateSession after the crash (restart): %v", err)
	}
	if st := agentStatus(t, s, id).GetStatus(); st != agenticv1.AgentStatus_AGENT_STATUS_READY {
		t.Fatalf("agent after the restart %v", st)
	}
}

func TestACPAgentThatNeedsAuthOverGRPC(t *testing.T) {
	root, ws := workspaceUnder(t)
	const id = "acp.test.locked"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, id,
		`{"agent": {"requireAuth": true, "authMethods": [{"id": "login", "name": "Log in", "description": "run the agent's login"}]}}`)}})
	_, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: ws}})
	if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != "AGENT_AUTH_REQUIRED" || !strings.Contains(status.Convert(err).Message(), "login") {
		t.Fatalf("CreateSession: %v (reason %q), want FAILED_PRECONDITION AGENT_AUTH_REQUIRED naming the method", err, reasonOf(err))
	}
	if a := agentStatus(t, s, id); a.GetStatus() != agenticv1.AgentStatus_AGENT_STATUS_NEEDS_AUTH || len(a.GetAuthMethods()) != 1 {
		t.Fatalf("agent %v", a)
	}
}

// exampleAgentPath finds the npm ACP SDK's example agent, installed by `make test`.
func exampleAgentPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("AGENTICD_ACP_EXAMPLE_AGENT")
	if path == "" {
		path, _ = filepath.Abs("../node_modules/@agentclientprotocol/sdk/dist/examples/agent.js")
	}
	_, statErr := os.Stat(path)
	_, nodeErr := exec.LookPath("node")
	if err := errors.Join(statErr, nodeErr); err != nil {
		msg := fmt.Sprintf("the npm example agent (@agentclientprotocol/sdk@1.9.0, dist/examples/agent.js) is not runnable: %v; run `npm ci` at the repo root (make test does)", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// exampleWorkspace is /home/user/project: the npm example agent asks to edit
// /home/user/project/config.json whatever the session's cwd. With any other workspace
// the server's policy denies that edit (tested below); to see it allowed, the session
// must really work in that directory.
//
// The directory is shared with the machine, so the test is careful with it: an
// exclusive lock (flock on exampleLockPath) keeps concurrent test processes apart; the
// directories are created only if missing, and a marker file records that this test
// created them; cleanup removes only what it created (the project directory, holding
// only the marker and what the agent wrote, and /home/user if it was made here and is
// then empty). A directory that existed before is used as it is and left alone.
func exampleWorkspace(t *testing.T) string {
	t.Helper()
	const dir, parent = "/home/user/project", "/home/user"
	skip := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	lock, err := os.OpenFile(exampleLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		skip("cannot open the lock %s for %s: %v", exampleLockPath, dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		skip("cannot lock %s: %v", exampleLockPath, err)
	}
	t.Cleanup(func() { _ = lock.Close() }) // closing releases the lock, after the removal below
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	_, err = os.Stat(parent)
	createdParent := errors.Is(err, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		skip("cannot create %s for the npm example agent's edit: %v", dir, err)
	}
	marker := filepath.Join(dir, exampleMarker)
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		_ = os.Remove(dir)
		skip("cannot mark %s as made by this test: %v", dir, err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(marker); err != nil {
			return // not ours any more: leave it
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s, which this test created: %v", dir, err)
		}
		if createdParent {
			_ = os.Remove(parent) // only if empty
		}
	})
	return dir
}

// exampleLockPath serializes test processes that use /home/user/project;
// exampleMarker marks the directory as created by one of them.
const (
	exampleLockPath = "/tmp/agenticd-e2e-home-user-project.lock"
	exampleMarker   = ".agenticd-e2e-created"
)

// The real third-party example agent from npm, driven through agenticd over gRPC: a
// whole turn with its read and edit tool calls, the edit allowed by a user, denied by
// a user, and denied by the server's workspace policy; each exact event sequence.
func TestNPMExampleAgentOverGRPC(t *testing.T) {
	agentJS := exampleAgentPath(t)
	home := exampleWorkspace(t)
	otherRoot, otherWS := workspaceUnder(t)
	const id = "acp.npm.example"
	s := startServer(t, daemon.Config{
		WorkspaceRoots: []string{home, otherRoot},
		Agents:         []daemon.AgentConfig{{ID: id, Type: presenters.AgentTypeACP, Command: "node", Args: []string{agentJS}}},
	})
	// The example agent's texts (dist/examples/agent.js).
	var (
		intro    = assistantDelta("I'll help you with that. Let me start by reading some files to understand the current situation.")
		between  = assistantDelta(" Now I understand the project structure. I need to make some changes to improve it.")
		applied  = assistantDelta(" Perfect! I've successfully updated the configuration. The changes have been applied.")
		declined = assistantDelta(" I understand you prefer not to make that change. I'll skip the configuration update.")
	)
	start := []string{`DELTA USER "change the config"`, `END USER UNSPECIFIED`, `SESSION_UPDATED title,update_time`, `STATUS GENERATING`,
		intro, `TOOL_START call_1 READ PENDING`, `TOOL_END call_1 READ COMPLETED`, between,
		`TOOL_START call_2 EDIT PENDING`, `TOOL_RUNNING call_2 EDIT PENDING`}
	for _, tc := range []struct {
		name, workspace, answer string
		want                    []string
	}{
		{"allowed", home, "allow", []string{
			`PERMISSION_REQUIRED call_2 [/home/user/project/config.json]`, `STATUS PAUSED`,
			`PERMISSION_GRANTED call_2 allow by USER`, `STATUS GENERATING`,
			`TOOL_END call_2 EDIT COMPLETED`,
			applied,
			`END ASSISTANT END_TURN`, `STATUS IDLE`}},
		{"denied by a user", home, "reject", []string{
			`PERMISSION_REQUIRED call_2 [/home/user/project/config.json]`, `STATUS PAUSED`,
			`PERMISSION_DENIED call_2 reject by USER`, `STATUS GENERATING`,
			declined,
			`TOOL_END call_2 EDIT FAILED`, // the agent never ends it: the turn's end does, as denied
			`END ASSISTANT END_TURN`, `STATUS IDLE`}},
		{"denied by the workspace policy", otherWS, "", []string{
			`PERMISSION_DENIED call_2 reject by POLICY`,
			declined,
			`TOOL_END call_2 EDIT FAILED`,
			`END ASSISTANT END_TURN`, `STATUS IDLE`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			created, err := s.Client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: id, Config: &agenticv1.SessionConfig{Workspace: tc.workspace}})
			if err != nil {
				t.Fatalf("CreateSession: %v", err)
			}
			sid := created.GetSession().GetSessionId()
			after := lastSequence(t, s, sid)
			if _, err := s.Client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("change the config")}); err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			var reason string
			events, _ := follow(t, s, sid, after, func(ev *agenticv1.AgenticEvent) bool {
				if r := ev.GetToolPermissionRequired(); r != nil {
					if _, err := s.Client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{SessionId: sid, PermissionId: r.GetRequest().GetPermissionId(),
						Answer: &agenticv1.RespondPermissionRequest_OptionId{OptionId: tc.answer}}); err != nil {
						t.Errorf("RespondPermission: %v", err)
					}
				}
				if d := ev.GetToolPermissionDenied(); d != nil {
					reason = d.GetReason()
				}
				return ev.GetStatusChanged() != nil && ev.GetStatusChanged().GetStatus() == agenticv1.SessionStatus_SESSION_STATUS_IDLE
			})
			want := append(append([]string(nil), start...), tc.want...)
			if got := summarize(events); !reflect.DeepEqual(got, want) {
				t.Fatalf("events:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
			}
			if tc.answer == "" && !strings.Contains(reason, "outside the session's workspace") {
				t.Fatalf("policy denial reason %q", reason)
			}
		})
	}
}

package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// auditEntries waits until the audit log holds at least n entries matching req (the log
// writer appends a few milliseconds after publishing) and returns them.
func auditEntries(t *testing.T, e *testEnv, req *pb.ListAuditEventsRequest, n int) []*pb.AuditEvent {
	t.Helper()
	deadline := time.Now().Add(streamWait)
	for {
		resp, err := e.client.ListAuditEvents(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetEvents()) >= n || time.Now().After(deadline) {
			return resp.GetEvents()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func kinds(entries []*pb.AuditEvent) []pb.AuditKind {
	out := make([]pb.AuditKind, len(entries))
	for i, e := range entries {
		out[i] = e.GetKind()
	}
	return out
}

// A session's life, its tool calls and its permissions leave audit entries: the files
// written with their size and hash, the command with its exit code and duration, the
// request and who answered it (address and token fingerprint, never the token), a policy
// denial, and the end.
func TestAuditRecordsASession(t *testing.T) {
	const token = "a-test-token-of-some-length"
	ctx := context.Background()
	e := newEnv(t, envOptions{token: token, eventLog: true})
	id := e.createSession(t, fakeID).GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	exit := 3
	run := presenters.ToolCall{ToolID: "t1", Title: "Run tests", Kind: presenters.ToolExecute, Status: presenters.ToolInProgress,
		Arguments: json.RawMessage(`{"command":"go test ./...","cwd":"/w"}`)}
	em.ToolStart("m1", run)
	run.Status = presenters.ToolCompleted
	run.Content = []presenters.ToolContent{{Terminal: &presenters.TerminalBlock{TerminalID: "term", Command: "go test ./...", ExitCode: &exit}}}
	em.ToolEnd("m1", run)
	edit := presenters.ToolCall{ToolID: "t2", Title: "Edit main.go", Kind: presenters.ToolEdit, Status: presenters.ToolCompleted,
		Content: []presenters.ToolContent{{Diff: &presenters.DiffBlock{Path: "/w/main.go", OldText: "a", NewText: "package main\n"}}}}
	em.ToolStart("m1", edit)
	em.ToolEnd("m1", edit)
	askPermission(e, id, "p1")
	if _, err := e.client.RespondPermission(ctx, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "p1",
		Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "allow"}}); err != nil {
		t.Fatal(err)
	}
	em.PermissionDenied(presenters.PermissionDecision{RequestID: "p2", ToolID: "t3", DecidedBy: presenters.DecidedByPolicy, Reason: "path /etc/passwd is outside the workspace"})
	if _, err := e.client.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}

	want := []pb.AuditKind{
		pb.AuditKind_AUDIT_KIND_SESSION_CREATED, pb.AuditKind_AUDIT_KIND_COMMAND, pb.AuditKind_AUDIT_KIND_FILE_WRITE,
		pb.AuditKind_AUDIT_KIND_PERMISSION_REQUESTED, pb.AuditKind_AUDIT_KIND_PERMISSION_DECIDED,
		pb.AuditKind_AUDIT_KIND_PERMISSION_DECIDED, pb.AuditKind_AUDIT_KIND_POLICY_DENIAL, pb.AuditKind_AUDIT_KIND_SESSION_CLOSED,
	}
	got := auditEntries(t, e, &pb.ListAuditEventsRequest{SessionIds: []string{id}}, len(want))
	if len(got) != len(want) {
		t.Fatalf("entries %v, want %v", kinds(got), want)
	}
	for i, k := range want {
		if got[i].GetKind() != k {
			t.Fatalf("entries %v, want %v", kinds(got), want)
		}
		if i > 0 && got[i].GetId() <= got[i-1].GetId() {
			t.Errorf("ids not rising: %d after %d", got[i].GetId(), got[i-1].GetId())
		}
		if got[i].GetSource() != pb.AuditSource_AUDIT_SOURCE_OBSERVED || got[i].GetAgentId() != fakeID || got[i].GetEventSequence() == 0 {
			t.Errorf("entry %d: %v", i, got[i])
		}
	}
	cmd := got[1].GetCommand()
	if cmd.GetCommandLine() != "go test ./..." || cmd.GetCwd() != "/w" || cmd.ExitCode == nil || cmd.GetExitCode() != 3 || cmd.GetDuration() == nil || cmd.GetDenied() {
		t.Errorf("command entry %v", cmd)
	}
	sum := sha256.Sum256([]byte("package main\n"))
	if w := got[2].GetFileWrite(); w.GetPath() != "/w/main.go" || w.GetBytes() != int64(len("package main\n")) || w.GetSha256() != hex.EncodeToString(sum[:]) {
		t.Errorf("file write entry %v", w)
	}
	answered := got[4].GetPermission()
	if !answered.GetGranted() || answered.GetOptionId() != "allow" || answered.GetDecidedBy() != pb.PermissionDecider_PERMISSION_DECIDER_USER ||
		answered.GetClientAddress() == "" || answered.GetClientIdentity() != "owner (token)" || strings.Contains(answered.GetClientIdentity(), token) ||
		got[4].GetPrincipal() != "owner" {
		t.Errorf("decision entry %v", answered)
	}
	if d := got[6].GetDenial(); d.GetPermissionId() != "p2" || !strings.Contains(d.GetReason(), "outside the workspace") {
		t.Errorf("denial entry %v", d)
	}

	// Filters and paging.
	only := auditEntries(t, e, &pb.ListAuditEventsRequest{Kinds: []pb.AuditKind{pb.AuditKind_AUDIT_KIND_FILE_WRITE}}, 1)
	if len(only) != 1 || only[0].GetFileWrite() == nil {
		t.Errorf("kinds filter: %v", kinds(only))
	}
	page, err := e.client.ListAuditEvents(ctx, &pb.ListAuditEventsRequest{SessionIds: []string{id}, PageSize: 3})
	if err != nil || len(page.GetEvents()) != 3 || !page.GetMore() {
		t.Fatalf("first page: %v, %v", page, err)
	}
	rest, err := e.client.ListAuditEvents(ctx, &pb.ListAuditEventsRequest{SessionIds: []string{id}, AfterId: page.GetEvents()[2].GetId()})
	if err != nil || len(rest.GetEvents()) != len(want)-3 || rest.GetMore() {
		t.Errorf("the rest after id %d: %d entries, more %v, %v", page.GetEvents()[2].GetId(), len(rest.GetEvents()), rest.GetMore(), err)
	}
	// The same pages through page_token, which continues with the filters it was issued
	// for and only those.
	var tokened []*pb.AuditEvent
	req := &pb.ListAuditEventsRequest{SessionIds: []string{id}, PageSize: 3}
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("no end after %d pages", pages)
		}
		p, err := e.client.ListAuditEvents(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		tokened = append(tokened, p.GetEvents()...)
		if p.GetMore() != (p.GetNextPageToken() != "") {
			t.Fatalf("more %v with next_page_token %q", p.GetMore(), p.GetNextPageToken())
		}
		if p.GetNextPageToken() == "" {
			break
		}
		req.PageToken = p.GetNextPageToken()
	}
	if len(tokened) != len(want) || tokened[3].GetId() != rest.GetEvents()[0].GetId() {
		t.Errorf("paged with page_token: %v, want %v", kinds(tokened), want)
	}
	for _, bad := range []*pb.ListAuditEventsRequest{
		{PageToken: page.GetNextPageToken()}, // issued for other filters
		{SessionIds: []string{id}, PageToken: "nope"},
		{SessionIds: []string{id}, PageToken: encodeSessionPageToken(store.SessionCursor{UpdatedUnixNano: 1, SessionID: id}, "")},
	} {
		_, err := e.client.ListAuditEvents(ctx, bad)
		wantCode(t, err, codes.InvalidArgument)
		if f := violatedField(err); f != "page_token" {
			t.Errorf("page_token %q: BadRequest names %q", bad.GetPageToken(), f)
		}
	}
	for _, ev := range tokened {
		//lint:ignore SA1019 the deprecated name must stay filled
		old := ev.GetTime()
		if ev.GetEventTime() == nil || !proto.Equal(ev.GetEventTime(), old) {
			t.Errorf("entry %d: event_time %v, time %v; want both, equal", ev.GetId(), ev.GetEventTime(), old)
		}
	}
	future, err := e.client.ListAuditEvents(ctx, &pb.ListAuditEventsRequest{StartTime: timestamppb.New(time.Now().Add(time.Hour))})
	if err != nil || len(future.GetEvents()) != 0 {
		t.Errorf("entries from the future: %v, %v", future, err)
	}
}

// A command whose permission was denied never ran, and its entry says so, whether the
// request came before its tool call (as ACP agents ask) or during it.
func TestAuditMarksADeniedCommand(t *testing.T) {
	e := newEnv(t, envOptions{eventLog: true})
	id := e.createSession(t, fakeID).GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	for _, before := range []bool{true, false} {
		toolID := fmt.Sprint("before-", before)
		run := presenters.ToolCall{ToolID: toolID, Kind: presenters.ToolExecute, Status: presenters.ToolPending,
			Arguments: json.RawMessage(`{"command":"rm -rf build"}`)}
		deny := func() {
			em.PermissionDenied(presenters.PermissionDecision{RequestID: "p-" + toolID, ToolID: toolID, OptionID: "reject", DecidedBy: presenters.DecidedByUser})
		}
		if before {
			deny()
		}
		em.ToolStart("m1", run)
		if !before {
			deny()
		}
		run.Status = presenters.ToolFailed
		em.ToolEnd("m1", run)
	}
	got := auditEntries(t, e, &pb.ListAuditEventsRequest{SessionIds: []string{id}, Kinds: []pb.AuditKind{pb.AuditKind_AUDIT_KIND_COMMAND}}, 2)
	if len(got) != 2 {
		t.Fatalf("command entries %v", got)
	}
	for _, entry := range got {
		if c := entry.GetCommand(); !c.GetDenied() || c.GetDuration() != nil || c.GetCommandLine() != "rm -rf build" {
			t.Errorf("denied command entry %v", c)
		}
	}
}

func TestListAuditEventsValidation(t *testing.T) {
	e := newEnv(t, envOptions{eventLog: true})
	ctx := context.Background()
	now := time.Now()
	for _, tc := range []struct {
		req   *pb.ListAuditEventsRequest
		field string
	}{
		{&pb.ListAuditEventsRequest{Kinds: []pb.AuditKind{pb.AuditKind_AUDIT_KIND_UNSPECIFIED}}, "kinds[0]"},
		{&pb.ListAuditEventsRequest{Kinds: []pb.AuditKind{pb.AuditKind_AUDIT_KIND_COMMAND, 99}}, "kinds[1]"},
		{&pb.ListAuditEventsRequest{StartTime: timestamppb.New(now), EndTime: timestamppb.New(now.Add(-time.Second))}, "end_time"},
		{&pb.ListAuditEventsRequest{StartTime: &timestamppb.Timestamp{Nanos: -1}}, "start_time"},
		{&pb.ListAuditEventsRequest{PageSize: -1}, "page_size"},
	} {
		_, err := e.client.ListAuditEvents(ctx, tc.req)
		wantReason(t, err, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, tc.field)
	}
}

// An ACP agent's tool calls are what it reported, not what agenticd saw.
func TestAuditSourceOfACPAgents(t *testing.T) {
	if got := sourceOf("acp.anthropic.claude"); got != pb.AuditSource_AUDIT_SOURCE_REPORTED {
		t.Errorf("ACP agent: %v", got)
	}
	if got := sourceOf("deepchat.default"); got != pb.AuditSource_AUDIT_SOURCE_OBSERVED {
		t.Errorf("DeepChat: %v", got)
	}
}

// An elicitation leaves a request entry and a resolution entry with who answered; the
// values the user entered stay out of the audit log, only the fields answered are named.
func TestAuditRecordsElicitations(t *testing.T) {
	const token = "a-test-token-of-some-length"
	e := newEnv(t, envOptions{token: token, eventLog: true})
	id := e.createSession(t, fakeID).GetSessionId()
	askForm(e, id, "f1")
	if _, err := e.client.RespondElicitation(context.Background(), &pb.RespondElicitationRequest{SessionId: id, ElicitationId: "f1",
		Action: pb.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content(t, map[string]any{"name": "s3cr3t", "age": 36})}); err != nil {
		t.Fatal(err)
	}
	got := auditEntries(t, e, &pb.ListAuditEventsRequest{SessionIds: []string{id}, Kinds: []pb.AuditKind{
		pb.AuditKind_AUDIT_KIND_ELICITATION_REQUESTED, pb.AuditKind_AUDIT_KIND_ELICITATION_RESOLVED}}, 2)
	if len(got) != 2 {
		t.Fatalf("entries %v, want the request and its resolution", kinds(got))
	}
	if r := got[0].GetElicitation(); r.GetElicitationId() != "f1" || r.GetMode() != pb.ElicitationMode_ELICITATION_MODE_FORM || r.GetMessage() != "Tell me about you" {
		t.Errorf("request entry %v", r)
	}
	d := got[1].GetElicitation()
	if d.GetAction() != pb.ElicitationAction_ELICITATION_ACTION_ACCEPT || d.GetDecidedBy() != pb.ElicitationDecider_ELICITATION_DECIDER_USER ||
		strings.Join(d.GetAnsweredFields(), ",") != "age,name" || d.GetClientAddress() == "" || d.GetClientIdentity() != "owner (token)" || got[1].GetPrincipal() != "owner" {
		t.Errorf("resolution entry %v", d)
	}
	if raw := got[1].String(); strings.Contains(raw, "s3cr3t") {
		t.Errorf("the audit entry holds what the user entered: %s", raw)
	}
}

// failingOnce is an event log store whose second append fails, as a disk filling up
// would.
type failingOnce struct {
	EventLogStore
	tries [][]store.AuditEntry
}

func (f *failingOnce) AppendFenced(ctx context.Context, batch []store.LoggedEvent, audit []store.AuditEntry, replica string) ([]string, error) {
	f.tries = append(f.tries, audit)
	if len(f.tries) == 2 {
		return nil, errors.New("disk full")
	}
	return f.EventLogStore.AppendFenced(ctx, batch, audit, replica)
}

// The log writer tries a failed batch again; its audit entries are the ones made the
// first time, not made again without what the first making took (here the start of a
// command logged in an earlier batch, for its duration).
func TestAuditEntriesOfARetriedBatch(t *testing.T) {
	f := &failingOnce{EventLogStore: openStore(t)}
	l := &eventLog{st: f, audit: newAuditor(), logger: discard}
	start := time.Now()
	tool := presenters.ToolCall{ToolID: "t1", Kind: presenters.ToolExecute, Status: presenters.ToolInProgress,
		Arguments: json.RawMessage(`{"command":"make"}`)}
	logged := func(seq uint64, at time.Time, p presenters.Payload) []events.LoggedEvent {
		ev := presenters.Event{Sequence: seq, SessionID: "s", AgentID: fakeID, Time: at, Payload: p}
		return []events.LoggedEvent{{Sequence: seq, SessionID: "s", AgentID: fakeID, Type: p.EventType(), Time: at, Data: wire.Encode(ev, discard).Bytes()}}
	}
	if err := l.AppendEvents(context.Background(), logged(1, start, presenters.ToolStartPayload{MessageID: "m", Tool: tool})); err != nil {
		t.Fatal(err)
	}
	end := logged(2, start.Add(2*time.Second), presenters.ToolEndPayload{MessageID: "m", Tool: tool})
	if err := l.AppendEvents(context.Background(), end); err == nil {
		t.Fatal("the second append did not fail")
	}
	if err := l.AppendEvents(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	if len(f.tries) != 3 || len(f.tries[2]) != 1 {
		t.Fatalf("entries per try %v, want the command's on the retry", f.tries)
	}
	var e pb.AuditEvent
	if err := proto.Unmarshal(f.tries[2][0].Data, &e); err != nil {
		t.Fatal(err)
	}
	if d := e.GetCommand().GetDuration().AsDuration(); d != 2*time.Second {
		t.Errorf("the retried command's duration %v, want 2s", d)
	}
}

// An entry stored before event_time existed has only time: it is listed with both.
func TestAuditTimesFilled(t *testing.T) {
	at := timestamppb.New(time.Unix(1700000000, 5))
	old := &pb.AuditEvent{Time: at} //lint:ignore SA1019 an entry as stored before event_time
	fillAuditTimes(old)
	if !proto.Equal(old.GetEventTime(), at) {
		t.Errorf("event_time %v, want %v", old.GetEventTime(), at)
	}
	current := &pb.AuditEvent{EventTime: at}
	fillAuditTimes(current)
	//lint:ignore SA1019 the deprecated name must stay filled
	if got := current.GetTime(); !proto.Equal(got, at) {
		t.Errorf("time %v, want %v", got, at)
	}
}

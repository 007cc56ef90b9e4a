package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// storedHistory gives a fake session n stored messages m0..m(n-1), each with the text
// made by text(i), and makes the fake read its history from the store as the real
// presenters do.
func (e *testEnv) storedHistory(t *testing.T, sessionID string, n int, text func(i int) string) {
	t.Helper()
	now := time.Now()
	if err := e.store.CreateConversation(bg, store.Conversation{ID: sessionID, AgentID: fakeID, Workspace: e.root, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]presenters.Message, n)
	for i := range msgs {
		msgs[i] = presenters.Message{ID: fmt.Sprintf("m%d", i), SessionID: sessionID, Role: presenters.RoleUser,
			Status: presenters.MessageComplete, CreatedAt: now, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text(i)}}}
	}
	if err := e.store.SaveMessages(bg, msgs...); err != nil {
		t.Fatal(err)
	}
	e.fake.messagesFn = func(ctx context.Context, id string, q presenters.MessageQuery) ([]presenters.Message, error) {
		return e.store.Messages(ctx, id, q)
	}
}

// listAllMessages walks a history page by page and returns the ids in the order read
// and the number of pages.
func (e *testEnv) listAllMessages(t *testing.T, req *pb.ListMessagesRequest) (ids []string, pages int) {
	t.Helper()
	for {
		resp, err := e.client.ListMessages(bg, req)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range resp.GetMessages() {
			ids = append(ids, m.GetMessageId())
		}
		if resp.GetNextPageToken() == "" {
			return ids, pages
		}
		if pages > 20 {
			t.Fatal("paging does not end")
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

func TestListMessagesPagesBothOrders(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	e.storedHistory(t, id, 7, func(i int) string { return fmt.Sprint("text ", i) })
	oldest := "m0,m1,m2,m3,m4,m5,m6"
	for _, c := range []struct {
		order pb.MessageOrder
		want  string
	}{
		{pb.MessageOrder_MESSAGE_ORDER_UNSPECIFIED, oldest},
		{pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST, oldest},
		{pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST, "m6,m5,m4,m3,m2,m1,m0"},
	} {
		ids, pages := e.listAllMessages(t, &pb.ListMessagesRequest{SessionId: id, PageSize: 3, Order: c.order})
		if strings.Join(ids, ",") != c.want || pages != 3 {
			t.Errorf("%s: read %v in %d pages, want %s in 3", c.order, ids, pages, c.want)
		}
	}
	// A page exactly as large as what is left is the last.
	ids, pages := e.listAllMessages(t, &pb.ListMessagesRequest{SessionId: id, PageSize: 7})
	if strings.Join(ids, ",") != oldest || pages != 1 {
		t.Errorf("page of 7: read %v in %d pages", ids, pages)
	}
	// The default page holds them all.
	ids, pages = e.listAllMessages(t, &pb.ListMessagesRequest{SessionId: id})
	if strings.Join(ids, ",") != oldest || pages != 1 {
		t.Errorf("default page: read %v in %d pages", ids, pages)
	}
	resp, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id, PageSize: 2})
	if err != nil || resp.GetMessages()[0].GetBlocks()[0].GetText().GetText() != "text 0" {
		t.Errorf("first page: %v, %v", resp, err)
	}
}

// A page larger than what the store is read in at a time (messageReadChunk) is read in
// several pieces that meet with no gap and no duplicate, in both orders.
func TestListMessagesPagesAcrossReadChunks(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	n := 2*messageReadChunk + 5
	e.storedHistory(t, id, n, func(i int) string { return fmt.Sprint("text ", i) })
	var oldest, newest []string
	for i := range n {
		oldest = append(oldest, fmt.Sprint("m", i))
		newest = append(newest, fmt.Sprint("m", n-1-i))
	}
	for order, want := range map[pb.MessageOrder][]string{
		pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST: oldest,
		pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST: newest,
	} {
		ids, pages := e.listAllMessages(t, &pb.ListMessagesRequest{SessionId: id, PageSize: int32(messageReadChunk + 3), Order: order})
		if strings.Join(ids, ",") != strings.Join(want, ",") || pages != 2 {
			t.Errorf("%s: read %v in %d pages, want %v in 2", order, ids, pages, want)
		}
	}
}

// A page stops before max_response_bytes and gives a token for the rest.
func TestListMessagesPageEndsAtByteCap(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	big := maxResponseBytes * 2 / 5 // two fit in a page, three do not
	e.storedHistory(t, id, 5, func(i int) string { return strings.Repeat(string(rune('a'+i)), big) })
	for _, order := range []pb.MessageOrder{pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST, pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST} {
		var sizes []int
		req := &pb.ListMessagesRequest{SessionId: id, Order: order}
		var ids []string
		for {
			resp, err := e.client.ListMessages(bg, req)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(resp.GetMessages()))
			for _, m := range resp.GetMessages() {
				ids = append(ids, m.GetMessageId())
				if len(m.GetBlocks()[0].GetText().GetText()) != big {
					t.Fatalf("message %s was cut", m.GetMessageId())
				}
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		want := []string{"m0", "m1", "m2", "m3", "m4"}
		if order == pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST {
			slices.Reverse(want)
		}
		if !slices.Equal(sizes, []int{2, 2, 1}) || !slices.Equal(ids, want) {
			t.Errorf("%s: pages of %v holding %v, want pages of [2 2 1] holding %v", order, sizes, ids, want)
		}
	}
}

func TestListMessagesRefusesBadRequests(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	e.storedHistory(t, id, 4, func(i int) string { return "x" })
	other := e.createSession(t, fakeID).GetSessionId()
	first, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id, PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	token := first.GetNextPageToken()
	for _, c := range []struct {
		name    string
		req     *pb.ListMessagesRequest
		mention string
	}{
		{"garbage token", &pb.ListMessagesRequest{SessionId: id, PageToken: "garbage!"}, "next_page_token"},
		{"another session's token", &pb.ListMessagesRequest{SessionId: other, PageToken: token}, "belongs to session"},
		{"another order's token", &pb.ListMessagesRequest{SessionId: id, PageToken: token, Order: pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST}, "order"},
		{"forged position", &pb.ListMessagesRequest{SessionId: id, PageToken: encodeMessagePageToken(id, pb.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST, "nope")}, "does not hold"},
		{"negative page size", &pb.ListMessagesRequest{SessionId: id, PageSize: -1}, "page_size"},
		{"unknown order", &pb.ListMessagesRequest{SessionId: id, Order: 9}, "order"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.client.ListMessages(bg, c.req)
			st := wantCode(t, err, codes.InvalidArgument)
			if !strings.Contains(st.Message(), c.mention) {
				t.Errorf("message %q should mention %q", st.Message(), c.mention)
			}
		})
	}
	// The token still works for its own listing.
	if next, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id, PageSize: 1, PageToken: token}); err != nil || next.GetMessages()[0].GetMessageId() != "m1" {
		t.Errorf("second page: %v, %v", next, err)
	}
}

func TestGetMessage(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	e.storedHistory(t, id, 3, func(i int) string { return fmt.Sprint("text ", i) })
	resp, err := e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: id, MessageId: "m1"})
	if err != nil || resp.GetMessage().GetMessageId() != "m1" || resp.GetMessage().GetBlocks()[0].GetText().GetText() != "text 1" {
		t.Fatalf("GetMessage: %v, %v", resp, err)
	}
	_, err = e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: id, MessageId: "m9"})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "m9") || !strings.Contains(st.Message(), "ListMessages") {
		t.Errorf("message %q should name the message and how to list them", st.Message())
	}
	_, err = e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: id})
	wantCode(t, err, codes.InvalidArgument)
}

// The error a missing message fails with is recognisable as such (MESSAGE_NOT_FOUND),
// and still a not-found; a missing session is not one.
func TestMissingMessageErrorIsTyped(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	e.storedHistory(t, id, 1, func(int) string { return "x" })
	svc := New(Options{Registry: mustRegistry(t, e.store, e.fake), Hub: e.hub, Logger: discard})
	if m, _, err := svc.readMessage(bg, id, "m0"); err != nil || m.ID != "m0" {
		t.Fatalf("readMessage: %v, %v", m, err)
	}
	var notFound *messageNotFoundError
	_, _, err := svc.readMessage(bg, id, "nope")
	if !errors.As(err, &notFound) || notFound.MessageID != "nope" || !errors.Is(err, presenters.ErrNotFound) {
		t.Errorf("missing message: %v (%T)", err, err)
	}
	_, _, err = svc.readMessage(bg, "no-such-session", "m0")
	if errors.As(err, &notFound) || !errors.Is(err, presenters.ErrNotFound) {
		t.Errorf("missing session: %v (%T)", err, err)
	}
}

func mustRegistry(t *testing.T, st *store.Store, ps ...presenters.Presenter) *Registry {
	t.Helper()
	r, err := NewRegistry(st, ps)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// listSessionIDs walks a listing page by page and returns the ids in the order read.
func (e *testEnv) listSessionIDs(t *testing.T, req *pb.ListSessionsRequest) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		resp, err := e.client.ListSessions(bg, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.GetSessions() {
			ids = append(ids, s.GetSessionId())
		}
		if resp.GetNextPageToken() == "" {
			return ids
		}
		if pages > 50 {
			t.Fatal("paging does not end")
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

func TestListSessionsFiltersAndOrder(t *testing.T) {
	e := newEnv(t, envOptions{})
	sub := filepath.Join(e.root, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	a := e.createSession(t, fakeID).GetSessionId()
	b := e.createSession(t, fakeID).GetSessionId()
	resp, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: sub}})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetSession().GetSessionId()
	d := e.createSession(t, otherID).GetSessionId()
	if _, err := e.client.CloseSession(bg, &pb.CloseSessionRequest{SessionId: b}); err != nil {
		t.Fatal(err)
	}
	// a was updated last, long after the others were created.
	updated := time.Unix(1_800_000_000, 0)
	if err := e.store.CreateConversation(bg, store.Conversation{ID: a, AgentID: fakeID, Workspace: e.root, CreatedAt: time.Unix(1_700_000_000, 0), UpdatedAt: updated}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *pb.ListSessionsRequest
		want []string
	}{
		{"all, updated first", &pb.ListSessionsRequest{}, []string{a, d, c, b}},
		{"agent", &pb.ListSessionsRequest{AgentId: fakeID}, []string{a, c, b}},
		{"workspace", &pb.ListSessionsRequest{Workspace: sub}, []string{c}},
		{"workspace not clean", &pb.ListSessionsRequest{Workspace: sub + "/"}, []string{c}},
		{"status", &pb.ListSessionsRequest{Statuses: []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_CLOSED}}, []string{b}},
		{"statuses", &pb.ListSessionsRequest{Statuses: []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_CLOSED, pb.SessionStatus_SESSION_STATUS_IDLE}, AgentId: fakeID}, []string{a, c, b}},
		{"updated after", &pb.ListSessionsRequest{UpdatedAfter: timestamppb.New(updated.Add(-time.Second))}, []string{a}},
		{"all in pages of one", &pb.ListSessionsRequest{PageSize: 1}, []string{a, d, c, b}},
		{"idle in pages of one", &pb.ListSessionsRequest{PageSize: 1, Statuses: []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_IDLE}}, []string{a, d, c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.listSessionIDs(t, tc.req); !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
	first, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{PageSize: 1, AgentId: fakeID})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	for name, req := range map[string]*pb.ListSessionsRequest{
		"other agent":    {AgentId: otherID},
		"other status":   {AgentId: fakeID, Statuses: []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_IDLE}},
		"other updated":  {AgentId: fakeID, UpdatedAfter: timestamppb.New(updated)},
		"other worspace": {AgentId: fakeID, Workspace: sub},
	} {
		req.PageToken = first.GetNextPageToken()
		_, err := e.client.ListSessions(bg, req)
		st := wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(st.Message(), "filters") {
			t.Errorf("%s: message %q should say the filters changed", name, st.Message())
		}
	}
	// Page size and view may change between pages.
	if _, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: fakeID, PageSize: 5, View: pb.SessionView_SESSION_VIEW_FULL, PageToken: first.GetNextPageToken()}); err != nil {
		t.Errorf("next page with another size and view: %v", err)
	}
	for name, req := range map[string]*pb.ListSessionsRequest{
		"relative workspace": {Workspace: "sub"},
		"unspecified status": {Statuses: []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_UNSPECIFIED}},
		"unknown view":       {View: 7},
		"bad time":           {UpdatedAfter: &timestamppb.Timestamp{Nanos: -1}},
	} {
		_, err := e.client.ListSessions(bg, req)
		if st := wantCode(t, err, codes.InvalidArgument); st.Message() == "" {
			t.Errorf("%s: no message", name)
		}
	}
}

func TestListSessionsViews(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r1", Options: []presenters.PermissionOption{{ID: "yes", Kind: presenters.AllowOnce}}})
	e.fake.mu.Lock()
	e.fake.sessions[id].Usage = presenters.TokenUsage{}
	e.fake.sessions[id].Capabilities = presenters.Capabilities{SupportsModes: true}
	e.fake.sessions[id].AvailableCommands = []presenters.Command{{Name: "plan"}}
	e.fake.mu.Unlock()
	basic, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	full, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{View: pb.SessionView_SESSION_VIEW_FULL})
	if err != nil {
		t.Fatal(err)
	}
	f := full.GetSessions()[0]
	if len(f.GetAvailableModes()) != 2 || len(f.GetAvailableModels()) != 2 || len(f.GetAvailableCommands()) != 1 ||
		f.GetCapabilities() == nil || len(f.GetPendingPermissions()) != 1 {
		t.Errorf("FULL view = %v", f)
	}
	b := basic.GetSessions()[0]
	if len(b.GetAvailableModes()) != 0 || len(b.GetAvailableModels()) != 0 || len(b.GetAvailableCommands()) != 0 ||
		b.GetCapabilities() != nil || b.GetUsage() != nil || len(b.GetPendingPermissions()) != 0 {
		t.Errorf("BASIC view carries what it leaves out: %v", b)
	}
	if b.GetSessionId() != id || b.GetCurrentModeId() != "ask" || b.GetCurrentModelId() != "small" || b.GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE ||
		b.GetWorkspace() != e.root || b.GetLastSequence() == 0 {
		t.Errorf("BASIC view lacks what it keeps: %v", b)
	}
}

// A status filter describes at most maxSessionsScanned sessions per call: past them, a
// page comes back short (here empty) with a token to go on.
func TestListSessionsStatusScanIsBounded(t *testing.T) {
	e := newEnv(t, envOptions{})
	idle := e.createSession(t, fakeID).GetSessionId() // the oldest
	var ids []string
	for i := range maxSessionsScanned + 50 {
		ids = append(ids, fmt.Sprintf("gone-%04d", i))
	}
	e.storeSessions(t, fakeID, ids...) // the fake does not know them: listed as ERROR
	req := &pb.ListSessionsRequest{Statuses: []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_IDLE}}
	first, err := e.client.ListSessions(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.GetSessions()) != 0 || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %d sessions, token %q; want none and a token", len(first.GetSessions()), first.GetNextPageToken())
	}
	req.PageToken = first.GetNextPageToken()
	second, err := e.client.ListSessions(bg, req)
	if err != nil || len(second.GetSessions()) != 1 || second.GetSessions()[0].GetSessionId() != idle || second.GetNextPageToken() != "" {
		t.Fatalf("second page: %v, %v; want the idle session, last", second, err)
	}
}

func TestListSessionsUnknownAgent(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: "acp.x.y"})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "acp.x.y") || !strings.Contains(st.Message(), fakeID) {
		t.Errorf("message %q should name the agent and the configured ones", st.Message())
	}
	// A configured agent without sessions has an empty list.
	if resp, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: otherID}); err != nil || len(resp.GetSessions()) != 0 {
		t.Errorf("agent without sessions: %v, %v", resp, err)
	}
}

func TestGetAgent(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp, err := e.client.GetAgent(bg, &pb.GetAgentRequest{AgentId: otherID})
	if err != nil || resp.GetAgent().GetAgentId() != otherID || resp.GetAgent().GetName() != "Fake "+otherID ||
		resp.GetAgent().GetStatus() != pb.AgentStatus_AGENT_STATUS_READY {
		t.Fatalf("GetAgent: %v, %v", resp, err)
	}
	_, err = e.client.GetAgent(bg, &pb.GetAgentRequest{AgentId: "acp.x.y"})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "acp.x.y") || !strings.Contains(st.Message(), "ListAgents") {
		t.Errorf("message %q", st.Message())
	}
	_, err = e.client.GetAgent(bg, &pb.GetAgentRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

func TestGetServerInfo(t *testing.T) {
	e := newEnv(t, envOptions{})
	publishDeltas(e.hub, fakeID, "s", 3)
	resp, err := e.client.GetServerInfo(bg, &pb.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.GetVersion(), "agenticd ") {
		t.Errorf("version %q", resp.GetVersion())
	}
	l := resp.GetLimits()
	if l.GetMaxEventBytes() != wire.MaxEventBytes || l.GetDefaultPageSize() != defaultPageSize || l.GetMaxPageSize() != maxPageSize ||
		l.GetMaxResponseBytes() != maxResponseBytes || l.GetRequestIdTtl().AsDuration() != requestIDTTL ||
		l.GetHeartbeatInterval().AsDuration() != e.hub.HeartbeatInterval() || l.GetSubscriberQueue() != int32(e.hub.SubscriberQueue()) || l.GetSubscriberQueue() == 0 {
		t.Errorf("limits = %v", l)
	}
	if resp.GetOldestSequence() == 0 || resp.GetNewestSequence() != e.hub.LastSequence() || resp.GetOldestSequence() > resp.GetNewestSequence() {
		t.Errorf("held range %d..%d, newest issued %d", resp.GetOldestSequence(), resp.GetNewestSequence(), e.hub.LastSequence())
	}
	for _, f := range []string{"request_id", "event_batches", "merged_deltas", "bookmarks", "heartbeats", "replay_marks", "agent_status_events"} {
		if !slices.Contains(resp.GetFeatures(), f) {
			t.Errorf("features %v lack %q", resp.GetFeatures(), f)
		}
	}
	if roots := resp.GetWorkspaceRoots(); len(roots) != 1 || roots[0] != e.root {
		t.Errorf("workspace roots %q, want [%q]", roots, e.root)
	}
	// The test roots do not confine.
	if slices.Contains(resp.GetFeatures(), confinementFeature) {
		t.Errorf("features %v claim confinement", resp.GetFeatures())
	}
	svc := New(Options{Registry: mustRegistry(t, e.store), Hub: e.hub, Roots: confiningRoots{}, Logger: discard})
	if info, _ := svc.GetServerInfo(bg, &pb.GetServerInfoRequest{}); !slices.Contains(info.GetFeatures(), confinementFeature) {
		t.Errorf("features %v of confining roots lack confinement", info.GetFeatures())
	}
}

// confiningRoots are workspace roots that report confinement (and open nothing).
type confiningRoots struct{ WorkspaceRoots }

func (confiningRoots) ConfinesFiles() bool { return true }

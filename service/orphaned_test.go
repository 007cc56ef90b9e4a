package service

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// A session whose agent was removed from the config keeps its history readable: GetSession
// and ListSessions describe it from the store, closed, saying why; ListMessages and GetMessage read its
// messages from the store; whatever needs the agent is FAILED_PRECONDITION naming it.
func TestHistoryOutlivesItsAgent(t *testing.T) {
	history := openStore(t)
	first := newEnv(t, envOptions{store: history})
	id := first.createSession(t, fakeID).GetSessionId()
	// What the agent stored of the session, as the presenters store it.
	now := time.Now()
	if err := history.CreateConversation(bg, store.Conversation{ID: id, AgentID: fakeID, Workspace: first.root,
		Title: "old work", ModelID: "large", ModeID: "code", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	stored := []presenters.Message{
		{ID: "u1", SessionID: id, Role: presenters.RoleUser, Status: presenters.MessageComplete, CreatedAt: now,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hello"}}},
		{ID: "a1", SessionID: id, Role: presenters.RoleAssistant, Status: presenters.MessageComplete, StopReason: presenters.StopEndTurn, CreatedAt: now,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi there"}}},
	}
	if err := history.SaveMessages(bg, stored...); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, envOptions{store: history, noAgents: true})
	msgs, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ListMessages: %v", err)
	}
	if len(msgs.GetMessages()) != 2 || msgs.GetMessages()[0].GetBlocks()[0].GetText().GetText() != "hello" ||
		msgs.GetMessages()[1].GetBlocks()[0].GetText().GetText() != "hi there" {
		t.Fatalf("messages = %v", msgs.GetMessages())
	}
	// Its history pages as a live agent's does.
	newest, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id, PageSize: 1, Order: pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST})
	if err != nil || len(newest.GetMessages()) != 1 || newest.GetMessages()[0].GetMessageId() != "a1" || newest.GetNextPageToken() == "" {
		t.Fatalf("first page, newest first: %v, %v", newest, err)
	}
	page, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id, PageSize: 1, Order: pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST, PageToken: newest.GetNextPageToken()})
	if err != nil || len(page.GetMessages()) != 1 || page.GetMessages()[0].GetMessageId() != "u1" || page.GetNextPageToken() != "" {
		t.Fatalf("second page, newest first: %v, %v", page, err)
	}
	one, err := e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: id, MessageId: "a1"})
	if err != nil || one.GetMessage().GetBlocks()[0].GetText().GetText() != "hi there" {
		t.Fatalf("GetMessage: %v, %v", one, err)
	}
	_, err = e.client.GetMessage(bg, &pb.GetMessageRequest{SessionId: id, MessageId: "nope"})
	wantCode(t, err, codes.NotFound)
	// Filtered by its agent, which is no longer configured, the session is still listed.
	byAgent, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{AgentId: fakeID})
	if err != nil || len(byAgent.GetSessions()) != 1 || byAgent.GetSessions()[0].GetSessionId() != id {
		t.Fatalf("ListSessions of the removed agent: %v, %v", byAgent, err)
	}

	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	info := got.GetSession()
	if info.GetStatus() != pb.SessionStatus_SESSION_STATUS_CLOSED || !strings.Contains(info.GetStatusReason(), fakeID+" is no longer configured") ||
		info.GetTitle() != "old work" || info.GetCurrentModelId() != "large" || info.GetMessageCount() != 2 ||
		info.GetWorkspace() != first.root || info.GetLastSequence() == 0 {
		t.Fatalf("session = %v", info)
	}
	list, err := e.client.ListSessions(bg, &pb.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetStatus() != pb.SessionStatus_SESSION_STATUS_CLOSED ||
		list.GetSessions()[0].GetTitle() != "old work" {
		t.Fatalf("ListSessions: %v, %v", list, err)
	}

	mutating := map[string]error{}
	_, mutating["SendMessage"] = e.client.SendMessage(bg, &pb.SendMessageRequest{SessionId: id, Content: textContent("more")})
	_, mutating["LoadSession"] = e.client.LoadSession(bg, &pb.LoadSessionRequest{SessionId: id})
	_, mutating["CloseSession"] = e.client.CloseSession(bg, &pb.CloseSessionRequest{SessionId: id})
	_, mutating["CancelMessage"] = e.client.CancelMessage(bg, &pb.CancelMessageRequest{SessionId: id})
	_, mutating["SetMode"] = e.client.SetMode(bg, &pb.SetModeRequest{SessionId: id, ModeId: "ask"})
	_, mutating["RespondPermission"] = e.client.RespondPermission(bg, &pb.RespondPermissionRequest{SessionId: id, PermissionId: "r",
		Answer: &pb.RespondPermissionRequest_OptionId{OptionId: "o"}})
	for method, err := range mutating {
		st := wantCode(t, err, codes.FailedPrecondition)
		if !strings.Contains(st.Message(), `agent "`+fakeID+`"`) || !strings.Contains(st.Message(), "add the agent") {
			t.Errorf("%s: message %q should name the agent and what to do", method, st.Message())
		}
	}

	// A session whose agent kept no history has no messages, and an unknown session is
	// still NOT_FOUND.
	bare := first.createSession(t, fakeID).GetSessionId()
	if msgs, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: bare}); err != nil || len(msgs.GetMessages()) != 0 {
		t.Errorf("ListMessages of a session without history: %v, %v", msgs, err)
	}
	_, err = e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: "no-such-session"})
	wantCode(t, err, codes.NotFound)
}

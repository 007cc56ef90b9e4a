package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

func TestSessionSetupRoundTrip(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		st, _ := e.openStore(t)
		empty, err := st.SessionSetup(ctx, "none")
		if err != nil || len(empty.AdditionalDirectories) != 0 || len(empty.MCPServers) != 0 {
			t.Fatalf("a session without a setup: %+v, %v; want it empty, no error", empty, err)
		}
		want := SessionSetup{
			SessionID:             "s1",
			AdditionalDirectories: []string{"/w/a", "/w/b"},
			MCPServers: []presenters.MCPServer{
				{Name: "files", Command: "mcp-files", Args: []string{"--root", "/w"}, Env: map[string]string{"K": "v"}},
				{Name: "web", URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
			},
		}
		if err := st.SaveSessionSetup(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := st.SessionSetup(ctx, "s1")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %+v, %v; want %+v", got, err, want)
		}
		want.AdditionalDirectories = []string{"/w/c"}
		want.MCPServers = nil
		if err := st.SaveSessionSetup(ctx, want); err != nil {
			t.Fatal(err)
		}
		if got, err := st.SessionSetup(ctx, "s1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after replacing: %+v, %v; want %+v", got, err, want)
		}
	})
}

// DeleteSession leaves nothing of the session and everything of the others.
func TestDeleteSession(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		st, _ := e.openStore(t)
		for _, id := range []string{"gone", "kept"} {
			if err := st.AddSessionOwner(ctx, SessionOwner{SessionID: id, AgentID: "a", Workspace: "/w", CreatedUnixNano: time.Now().UnixNano()}); err != nil {
				t.Fatal(err)
			}
			if err := st.CreateConversation(ctx, Conversation{ID: id, AgentID: "a", Workspace: "/w"}); err != nil {
				t.Fatal(err)
			}
			if err := st.SaveMessage(ctx, presenters.Message{ID: id + "-m", SessionID: id, Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
				Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hello"}}}); err != nil {
				t.Fatal(err)
			}
			if err := st.SaveSessionSetup(ctx, SessionSetup{SessionID: id, AdditionalDirectories: []string{"/w/x"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.AppendEvents(ctx, []LoggedEvent{
			{Sequence: 1, SessionID: "gone", AgentID: "a", Type: 1, Data: []byte("x")},
			{Sequence: 2, SessionID: "kept", AgentID: "a", Type: 1, Data: []byte("y")},
		}); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteSession(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SessionOwner(ctx, "gone"); !errors.Is(err, presenters.ErrNotFound) {
			t.Errorf("owner after delete: %v, want ErrNotFound", err)
		}
		if _, err := st.GetConversation(ctx, "gone"); err == nil {
			t.Error("the conversation is still there")
		}
		if setup, _ := st.SessionSetup(ctx, "gone"); len(setup.AdditionalDirectories) != 0 {
			t.Errorf("setup after delete: %+v", setup)
		}
		if err := st.CheckMessageIDsFree(ctx, "another", "gone-m"); err != nil {
			t.Errorf("the deleted message's id is still taken: %v", err)
		}
		evs, err := st.ReadEvents(ctx, 0, 0, EventFilter{}, 10)
		if err != nil || len(evs) != 1 || evs[0].SessionID != "kept" {
			t.Errorf("event log after delete: %+v, %v; want only the kept session's", evs, err)
		}
		if _, err := st.SessionOwner(ctx, "kept"); err != nil {
			t.Errorf("the other session's owner: %v", err)
		}
		if msgs, err := st.Messages(ctx, "kept", presenters.MessageQuery{}); err != nil || len(msgs) != 1 {
			t.Errorf("the other session's messages: %d, %v", len(msgs), err)
		}
		if err := st.DeleteSession(ctx, "gone"); err != nil {
			t.Errorf("deleting again: %v, want no error", err)
		}
	})
}

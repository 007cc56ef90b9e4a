package deepchat

import (
	"context"
	"reflect"
	"testing"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// GetSessions describes each of the agent's sessions exactly as GetSession does (open,
// closed, with and without messages), and leaves out other agents' and unknown ids.
func TestGetSessionsMatchesGetSession(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	empty := h.createSession("").SessionID
	withMessages := h.createSession(ModeStrict).SessionID
	closed := h.createSession("").SessionID
	for _, id := range []string{"m1", "m2"} {
		err := h.store.SaveMessage(ctx, presenters.Message{ID: id, SessionID: withMessages, Role: presenters.RoleUser,
			Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := h.p.CloseSession(ctx, closed); err != nil {
		t.Fatal(err)
	}
	other := "other-agents-session"
	if err := h.store.CreateConversation(ctx, store.Conversation{ID: other, AgentID: "deepchat.other", Workspace: h.workspace}); err != nil {
		t.Fatal(err)
	}
	got, err := h.p.GetSessions(ctx, []string{empty, withMessages, closed, other, "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]presenters.SessionInfo{}
	for _, info := range got {
		byID[info.SessionID] = info
	}
	if len(got) != 3 || len(byID) != 3 {
		t.Fatalf("GetSessions returned %d sessions (%v), want the agent's 3", len(got), byID)
	}
	for _, id := range []string{empty, withMessages, closed} {
		want, err := h.p.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(byID[id], want) {
			t.Errorf("session %s:\nGetSessions %+v\nGetSession  %+v", id, byID[id], want)
		}
	}
	if byID[withMessages].MessageCount != 2 || byID[closed].Status != presenters.SessionClosed {
		t.Errorf("message count %d, closed status %q", byID[withMessages].MessageCount, byID[closed].Status)
	}
}

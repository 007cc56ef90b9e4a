package store

import (
	"context"
	"fmt"
	"testing"
)

// KnownAgentSessions finds the agent's sessions by their conversations alone (no owner
// rows), of that agent only, also beyond one query's worth of ids.
func TestKnownAgentSessions(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, c := range []Conversation{
			{ID: "s1", AgentID: "a", AgentSessionID: "acp-1", Workspace: "/w"},
			{ID: "s2", AgentID: "a", AgentSessionID: "acp-2", Workspace: "/other"},
			{ID: "s3", AgentID: "b", AgentSessionID: "acp-3", Workspace: "/w"},
			{ID: "s4", AgentID: "a", AgentSessionID: "acp-1", Workspace: "/w"},
		} {
			if err := s.CreateConversation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		ids := []string{"acp-1", "acp-3", "acp-4"}
		for i := range idBatch {
			ids = append(ids, fmt.Sprintf("unknown-%d", i))
		}
		// acp-2 in the second query; s1 is the id agenticd minted, not the agent's.
		ids = append(ids, "acp-2", "s1")
		known, err := s.KnownAgentSessions(ctx, "a", ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(known) != 2 || !known["acp-1"] || !known["acp-2"] {
			t.Fatalf("known %v; want acp-1 and acp-2", known)
		}
		if known, err := s.KnownAgentSessions(ctx, "a", nil); err != nil || len(known) != 0 {
			t.Fatalf("no ids: %v, %v", known, err)
		}
	})
}

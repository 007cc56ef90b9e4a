package store

import (
	"context"
	"reflect"
	"testing"
)

// Sessions' webhooks are stored, replaced, read all or by session, and forgotten with
// their session.
func TestSessionWebhooks(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, h := range []SessionWebhook{
			{SessionID: "s1", URL: "https://hooks.example/a"},
			{SessionID: "s2", URL: "https://hooks.example/b", Events: []string{"turn_ended"}},
			{SessionID: "s1", URL: "https://hooks.example/a2", Events: []string{"error", "session_closed"}},
		} {
			if err := s.SaveSessionWebhook(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.SessionWebhooks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []SessionWebhook{
			{SessionID: "s1", URL: "https://hooks.example/a2", Events: []string{"error", "session_closed"}},
			{SessionID: "s2", URL: "https://hooks.example/b", Events: []string{"turn_ended"}},
		}
		if !reflect.DeepEqual(all, want) {
			t.Fatalf("SessionWebhooks() = %+v, want %+v", all, want)
		}
		if one, err := s.SessionWebhooks(ctx, "s2", "none"); err != nil || !reflect.DeepEqual(one, want[1:]) {
			t.Fatalf("SessionWebhooks(s2, none) = %+v, %v", one, err)
		}
		if err := s.DeleteSessionWebhook(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSession(ctx, "s2"); err != nil {
			t.Fatal(err)
		}
		if left, err := s.SessionWebhooks(ctx); err != nil || len(left) != 0 {
			t.Fatalf("after DeleteSessionWebhook(s1) and DeleteSession(s2): %+v, %v", left, err)
		}
	})
}

package store

import (
	"context"
	"errors"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// Two sessions checking the same client-chosen id before either stores it: only the
// first gets it; the same session may check it again (a retried send). A save that still
// races past the check is ErrMessageIDInUse, not a bad argument.
func TestMessageIDClaimedAcrossSessions(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "a", "deepchat.default")
		mustCreate(t, s, "b", "deepchat.default")
		if err := s.CheckMessageIDsFree(ctx, "a", "m1"); err != nil {
			t.Fatal(err)
		}
		err := s.CheckMessageIDsFree(ctx, "b", "m1")
		if !errors.Is(err, presenters.ErrMessageIDInUse) {
			t.Errorf("the second session got the id too: %v", err)
		}
		if d := (*presenters.DetailError)(nil); !errors.As(err, &d) || d.Key != "message_id" || d.Value != "m1" {
			t.Errorf("the refusal does not name the id for the client: %#v", err)
		}
		if err := s.CheckMessageIDsFree(ctx, "a", "m1"); err != nil {
			t.Errorf("the session that claimed the id cannot check it again: %v", err)
		}
		if err := s.SaveMessage(ctx, presenters.Message{ID: "m1", SessionID: "a", Role: presenters.RoleUser, Status: presenters.MessageComplete}); err != nil {
			t.Fatal(err)
		}
		err = s.SaveMessage(ctx, presenters.Message{ID: "m1", SessionID: "b", Role: presenters.RoleUser, Status: presenters.MessageComplete})
		if !errors.Is(err, presenters.ErrMessageIDInUse) {
			t.Errorf("saving another session's id: %v, want ErrMessageIDInUse", err)
		}
	})
}

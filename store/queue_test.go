package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

func queued(sessionID, id, principal string) presenters.QueuedMessage {
	return presenters.QueuedMessage{SessionID: sessionID, MessageID: id, UserMessageID: "u-" + id, Principal: principal,
		Content: presenters.MessageContent{Parts: []presenters.ContentPart{{Text: "later"}}}, QueuedAt: time.Unix(1_700_000_000, 0)}
}

// A queued message keeps who sent it: its turn runs for that principal whenever and
// wherever it starts.
func TestQueuedMessagesKeepTheirSender(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, m := range []presenters.QueuedMessage{queued("s1", "m1", "alice"), queued("s1", "m2", "")} {
			if err := s.QueueMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.QueuedMessages(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Principal != "alice" || got[1].Principal != "" || got[0].Content.Parts[0].Text != "later" {
			t.Fatalf("QueuedMessages = %+v; want m1 from alice, then m2 from nobody named", got)
		}
	})
}

// The sender of a user message is claimed before its turn starts and read with the
// message; the first claim of an id stands, a released one is gone, and deleting the
// session deletes them.
func TestMessageSenders(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		claim := func(id, principal string, want bool) {
			t.Helper()
			if claimed, err := s.ClaimMessageSender(ctx, "c1", id, principal); err != nil || claimed != want {
				t.Fatalf("ClaimMessageSender(%s, %s) = %v, %v; want %v", id, principal, claimed, err, want)
			}
		}
		claim("u1", "alice", true)
		claim("u1", "mallory", false) // the id is alice's message
		claim("u2", "bob", true)
		if err := s.ReleaseMessageSender(ctx, "u2"); err != nil { // u2 did not start
			t.Fatal(err)
		}
		claim("u3", "carol", true)
		at := time.Unix(1_700_000_000, 0)
		for _, m := range []presenters.Message{
			{ID: "u1", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete, CreatedAt: at},
			{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete, CreatedAt: at},
			{ID: "u2", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete, CreatedAt: at},
			{ID: "u3", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete, CreatedAt: at},
		} {
			if err := s.SaveMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := s.Messages(ctx, "c1", presenters.MessageQuery{FromOldest: true})
		if err != nil {
			t.Fatal(err)
		}
		var senders []string
		for _, m := range msgs {
			senders = append(senders, m.ID+":"+m.Sender)
		}
		if want := []string{"u1:alice", "a1:", "u2:", "u3:carol"}; !slices.Equal(senders, want) {
			t.Errorf("senders = %v, want %v", senders, want)
		}
		one, err := s.Messages(ctx, "c1", presenters.MessageQuery{MessageID: "u1"})
		if err != nil || len(one) != 1 || one[0].Sender != "alice" {
			t.Errorf("Messages(u1) = %+v, %v; want alice's", one, err)
		}
		if err := s.DeleteSession(ctx, "c1"); err != nil {
			t.Fatal(err)
		}
		var left int64
		if err := db.Raw(`SELECT COUNT(*) FROM message_senders`).Scan(&left).Error; err != nil || left != 0 {
			t.Errorf("%d senders left after DeleteSession (%v)", left, err)
		}
	})
}

// A lapsed lease is unfinished work for another replica when its session has a reply in
// progress or queued messages; not when it has neither, nor while the lease runs.
func TestLapsedWithUnfinishedWork(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, id := range []string{"queued", "idle", "running"} {
			mustCreate(t, s, id, "acp.test.agent")
			if _, err := s.AcquireLease(ctx, id, "dead", "10.0.0.9:1", 50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AcquireLease(ctx, "fresh", "live", "10.0.0.8:1", time.Minute); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"queued", "fresh"} {
			if err := s.QueueMessage(ctx, queued(id, "m-"+id, "alice")); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SaveMessage(ctx, presenters.Message{ID: "r1", SessionID: "running", Role: presenters.RoleAssistant,
			Status: StatusInProgress, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"queued", "idle", "running"} {
			waitExpired(t, s, id)
		}
		ids, err := s.LapsedWithUnfinishedWork(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		if want := []string{"queued", "running"}; !slices.Equal(ids, want) {
			t.Errorf("LapsedWithUnfinishedWork = %v, want %v", ids, want)
		}
	})
}

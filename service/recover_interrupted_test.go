package service

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// interruptedLog logs events as the hub does: each one's encoded AgenticEvent, with its
// session, agent, type and message.
type interruptedLog struct {
	t    *testing.T
	st   *store.Store
	next uint64
}

func (l *interruptedLog) append(sessionID, messageID string, replay bool, p presenters.Payload) {
	l.t.Helper()
	l.next++
	ev := presenters.Event{Sequence: l.next, SessionID: sessionID, AgentID: "acp.x", Time: time.Now(), Replay: replay, Payload: p}
	data, err := wire.Encode(ev, discard).Bytes(), error(nil)
	if err != nil {
		l.t.Fatal(err)
	}
	err = l.st.AppendEvents(context.Background(), []store.LoggedEvent{{Sequence: ev.Sequence, SessionID: sessionID, AgentID: ev.AgentID,
		Type: int(p.EventType()), MessageID: messageID, Time: ev.Time, Data: data}})
	if err != nil {
		l.t.Fatalf("AppendEvents: %v", err)
	}
}

func (l *interruptedLog) delta(sessionID, messageID string, role presenters.MessageRole, text string) {
	l.t.Helper()
	l.append(sessionID, messageID, false, presenters.MessageDeltaPayload{MessageID: messageID, Text: text, Role: role})
}

// After a kill the stored replies hold their last checkpoint; start-up rebuilds each one's
// text from the log (its own assistant deltas, not replays, not other messages'), keeps
// it incomplete, and leaves alone a reply whose log does not begin with what is stored.
func TestRecoverInterruptedRepliesFromTheLog(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := st.CreateConversation(ctx, store.Conversation{ID: id, AgentID: "acp.x", Workspace: "/w"}); err != nil {
			t.Fatal(err)
		}
	}
	text := func(s string) []presenters.Block { return []presenters.Block{{Type: presenters.BlockText, Text: s}} }
	msgs := []presenters.Message{
		{ID: "u1", SessionID: "s1", Role: presenters.RoleUser, Status: presenters.MessageComplete, Blocks: text("go")},
		// The checkpoints: behind the log in s1, a log pruned past the reply's start in s2,
		// whole in s3, and a reply that finished (not interrupted) in s3.
		{ID: "a1", SessionID: "s1", Role: presenters.RoleAssistant, Status: store.StatusInProgress, Blocks: text("Hel")},
		{ID: "a2", SessionID: "s2", Role: presenters.RoleAssistant, Status: store.StatusInProgress, Blocks: text("abc")},
		{ID: "a3", SessionID: "s3", Role: presenters.RoleAssistant, Status: store.StatusInProgress, Blocks: text("whole")},
	}
	if err := st.SaveMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	log := &interruptedLog{t: t, st: st}
	log.delta("s1", "u1", presenters.RoleUser, "go")
	log.delta("s1", "a1", presenters.RoleAssistant, "Hel")
	log.delta("s2", "a2", presenters.RoleAssistant, "c, then more") // "ab" was pruned
	log.append("s1", "a1", false, presenters.MessageBlockPayload{MessageID: "a1", Role: presenters.RoleAssistant,
		Block: presenters.Block{Type: presenters.BlockReasoning, Text: "thinking"}})
	log.delta("s1", "a1", presenters.RoleAssistant, "lo, ")
	log.append("s1", "a1", true, presenters.MessageDeltaPayload{MessageID: "a1", Text: "REPLAYED", Role: presenters.RoleAssistant})
	log.delta("s3", "a3", presenters.RoleAssistant, "whole")
	log.delta("s1", "a1", presenters.RoleUser, "USER") // another role's text is not the reply's
	log.delta("s1", "a1", presenters.RoleAssistant, "world")

	interrupted, err := st.MarkInterrupted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := RecoverInterruptedReplies(ctx, st, interrupted, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("RecoverInterruptedReplies: %v", err)
	}
	want := map[string]string{"s1": "Hello, world", "s2": "abc", "s3": "whole"}
	for session, wantText := range want {
		got, err := st.Messages(ctx, session, presenters.MessageQuery{FromOldest: true})
		if err != nil {
			t.Fatal(err)
		}
		reply := got[len(got)-1]
		if reply.Role != presenters.RoleAssistant || reply.Status != presenters.MessageIncomplete {
			t.Errorf("%s: last message %s is %s %s, want the assistant's, incomplete", session, reply.ID, reply.Role, reply.Status)
		}
		var b strings.Builder
		for _, bl := range reply.Blocks {
			if bl.Type == presenters.BlockText {
				b.WriteString(bl.Text)
			}
		}
		if b.String() != wantText {
			t.Errorf("%s: reply text %q, want %q", session, b.String(), wantText)
		}
	}
	if got, _ := st.Messages(ctx, "s1", presenters.MessageQuery{MessageID: "u1"}); len(got) != 1 || got[0].Blocks[0].Text != "go" {
		t.Errorf("the user's message changed: %+v", got)
	}
	if !strings.Contains(logs.String(), "messages=1") {
		t.Errorf("the log should say one reply was rebuilt:\n%s", logs.String())
	}
}

// A logged event that does not decode leaves its reply as stored rather than storing a
// text with a hole in it.
func TestRecoverInterruptedRepliesKeepsAReplyWithAnUndecodableEvent(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if err := st.CreateConversation(ctx, store.Conversation{ID: "s1", AgentID: "acp.x", Workspace: "/w"}); err != nil {
		t.Fatal(err)
	}
	reply := presenters.Message{ID: "a1", SessionID: "s1", Role: presenters.RoleAssistant, Status: store.StatusInProgress,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "a"}}}
	if err := st.SaveMessage(ctx, reply); err != nil {
		t.Fatal(err)
	}
	log := &interruptedLog{t: t, st: st}
	log.delta("s1", "a1", presenters.RoleAssistant, "a")
	if err := st.AppendEvents(ctx, []store.LoggedEvent{{Sequence: 2, SessionID: "s1", AgentID: "acp.x",
		Type: int(presenters.EventMessageDelta), MessageID: "a1", Time: time.Now(), Data: []byte{0xff, 0xff, 0xff}}}); err != nil {
		t.Fatal(err)
	}
	log.next++
	log.delta("s1", "a1", presenters.RoleAssistant, "c")
	interrupted, err := st.MarkInterrupted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := RecoverInterruptedReplies(ctx, st, interrupted, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	got, err := st.Messages(ctx, "s1", presenters.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Blocks) != 1 || got[0].Blocks[0].Text != "a" {
		t.Errorf("reply after recovery: %+v, want its stored text \"a\"", got)
	}
	if !strings.Contains(logs.String(), "does not decode") {
		t.Errorf("no warning about the undecodable event:\n%s", logs.String())
	}
}

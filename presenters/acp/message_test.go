package acp

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// openTestStore opens a store in a temporary directory with one conversation, c1.
func openTestStore(t *testing.T) (*store.Store, *gorm.DB) {
	t.Helper()
	db, err := store.OpenSQLite(filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	st, err := store.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateConversation(context.Background(), store.Conversation{ID: "c1", AgentID: "acp.test"}); err != nil {
		t.Fatal(err)
	}
	return st, db
}

// storedBlocks reads message id's blocks back as "type:text" (a tool as "tool:<status>").
func storedBlocks(t *testing.T, st *store.Store, id string) []string {
	t.Helper()
	msgs, err := st.Messages(context.Background(), "c1", presenters.MessageQuery{MessageID: id})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("message %s: %v, %d read", id, err, len(msgs))
	}
	var out []string
	for _, b := range msgs[0].Blocks {
		if b.Tool != nil {
			out = append(out, "tool:"+string(b.Tool.Status))
			continue
		}
		out = append(out, string(b.Type)+":"+b.Text)
	}
	return out
}

// The builder's updates, stored in order, make the whole message, while the builder
// forgets every text it handed over.
func TestBuilderUpdatesMakeTheMessageAndForgetTheText(t *testing.T) {
	st, _ := openTestStore(t)
	m := newMessageBuilder("a1", "c1", presenters.RoleAssistant)
	save := func(status presenters.MessageStatus) {
		t.Helper()
		if err := st.UpdateMessages(context.Background(), m.update(status)); err != nil {
			t.Fatal(err)
		}
		if m.unsaved != 0 || len(m.texts) != 0 {
			t.Fatalf("the builder still holds %d bytes in %d blocks after an update", m.unsaved, len(m.texts))
		}
	}
	save(store.StatusInProgress) // the placeholder: no block yet
	m.appendText(presenters.BlockReasoning, "think ")
	m.appendText(presenters.BlockReasoning, "hard")
	long := strings.Repeat("0123456789abcdef", 40_000) // 640 KB: parts of the stored text
	m.appendText(presenters.BlockText, "Let me ")
	save(store.StatusInProgress)
	m.appendText(presenters.BlockText, long)
	tool := m.appendBlock(presenters.Block{Type: presenters.BlockTool, Tool: &presenters.ToolCall{ToolID: "t1", Status: presenters.ToolPending}})
	save(store.StatusInProgress)
	m.setTool(tool, presenters.ToolCall{ToolID: "t1", Status: presenters.ToolCompleted})
	m.appendText(presenters.BlockText, long)
	save(store.StatusInProgress)
	m.appendText(presenters.BlockText, " done.")
	save(presenters.MessageComplete)
	got := storedBlocks(t, st, "a1")
	want := []string{"reasoning:think hard", "text:Let me " + long, "tool:completed", "text:" + long + " done."}
	if len(got) != len(want) {
		t.Fatalf("stored %d blocks, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d stored with %d bytes %.40q, want %d bytes %.40q", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// In a flood the running turn checkpoints every checkpointBytes of text, not only every
// checkpointEvery: the builder holds less than that of the reply, the store the rest.
func TestFloodCheckpointsByBytes(t *testing.T) {
	const count, size = 5000, 1024 // ~5 MiB, delivered in well under checkpointEvery
	h := newHarness(t)
	p := h.presenter(h.config(fmt.Sprintf(`{"turns": [[{"flood": {"count": %d, "size": %d}}, {"waitCancel": true}]]}`, count, size)))
	s := h.create(p)
	res, from := h.send(p, s.SessionID, "flood")
	h.rec.waitFrom(t, from, "the last chunk", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		idx, err := strconv.Atoi(strings.SplitN(d.Text, "|", 2)[0])
		return ok && err == nil && idx == count-1
	})
	p.mu.Lock()
	sess := p.sessions[s.SessionID]
	p.mu.Unlock()
	sess.mu.Lock()
	held := sess.norm.msg.unsaved
	sess.mu.Unlock()
	if held >= checkpointBytes {
		t.Errorf("the builder holds %d bytes of the reply, want under %d", held, checkpointBytes)
	}
	deadline := time.Now().Add(waitLimit)
	for {
		msgs, err := p.GetMessages(testContext(t), s.SessionID, presenters.MessageQuery{MessageID: res.MessageID})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 && len(msgs[0].Blocks) == 1 && len(msgs[0].Blocks[0].Text) >= count*size-held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store does not hold the reply but what the builder holds: %+v", msgs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.CancelMessage(testContext(t), s.SessionID, res.MessageID); err != nil {
		t.Fatal(err)
	}
	h.finish(s.SessionID, res, from)
}

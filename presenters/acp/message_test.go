package acp

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// An update whose write fails is written with the next one: the builder no longer holds
// its text, so dropping it would leave a hole in the stored reply.
func TestFailedUpdateIsWrittenWithTheNext(t *testing.T) {
	st, db := openTestStore(t)
	for _, stmt := range []string{
		`CREATE TABLE fail_writes (x INTEGER)`,
		`CREATE TRIGGER fail_block_insert BEFORE INSERT ON blocks WHEN EXISTS (SELECT 1 FROM fail_writes) BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`,
		`CREATE TRIGGER fail_block_update BEFORE UPDATE ON blocks WHEN EXISTS (SELECT 1 FROM fail_writes) BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`,
	} {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	w := newPersister(st, slog.New(slog.DiscardHandler))
	m := newMessageBuilder("a1", "c1", presenters.RoleAssistant)
	checkpoint := func(text string) {
		m.appendText(presenters.BlockText, text)
		w.saveUpdate(m.update(store.StatusInProgress))
		w.flush(false)
	}
	checkpoint("one ")
	if err := db.Exec(`INSERT INTO fail_writes VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	checkpoint("two ")
	if got := storedBlocks(t, st, "a1"); len(got) != 1 || got[0] != "text:one " {
		t.Fatalf("stored %q while writes fail", got)
	}
	if err := db.Exec(`DELETE FROM fail_writes`).Error; err != nil {
		t.Fatal(err)
	}
	checkpoint("three")
	if got := storedBlocks(t, st, "a1"); len(got) != 1 || got[0] != "text:one two three" {
		t.Fatalf("stored %q, want the text whole", got)
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

// A failed write is tried again on its own, without waiting for another write to come,
// and the waiter of a turn's final state is told only once it is stored: MESSAGE_END
// waits for it.
func TestFailedWriteIsRetriedAloneAndWaitedFor(t *testing.T) {
	st, db := openTestStore(t)
	for _, stmt := range []string{
		`CREATE TABLE fail_writes (x INTEGER)`,
		`CREATE TRIGGER fail_block_insert BEFORE INSERT ON blocks WHEN EXISTS (SELECT 1 FROM fail_writes) BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`,
		`CREATE TRIGGER fail_block_update BEFORE UPDATE ON blocks WHEN EXISTS (SELECT 1 FROM fail_writes) BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`,
		`INSERT INTO fail_writes VALUES (1)`,
	} {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	retries := make(chan struct{}, 100)
	log := slog.New(&notingHandler{note: func(r slog.Record) {
		if strings.Contains(r.Message, "trying again") {
			select {
			case retries <- struct{}{}:
			default:
			}
		}
	}})
	w := newPersister(st, log)
	var running sync.WaitGroup
	running.Add(1)
	go func() { defer running.Done(); w.run() }()
	defer func() { w.close(); running.Wait() }()
	m := newMessageBuilder("a1", "c1", presenters.RoleAssistant)
	m.appendText(presenters.BlockText, "the whole reply")
	final := m.update(presenters.MessageComplete)
	done := w.saveUpdateWait(final)
	for range 2 { // the first write and a retry that no other write set off
		select {
		case <-retries:
		case <-time.After(waitLimit):
			t.Fatal("the failed write was not tried again")
		}
	}
	select {
	case <-done:
		t.Fatal("the waiter of the final state was told while its write fails")
	default:
	}
	if err := db.Exec(`DELETE FROM fail_writes`).Error; err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("the final state was not stored once writes work again")
	}
	if got := storedBlocks(t, st, "a1"); len(got) != 1 || got[0] != "text:the whole reply" {
		t.Fatalf("stored %q, want the reply once", got)
	}
}

// notingHandler hands every record to note.
type notingHandler struct{ note func(slog.Record) }

func (h *notingHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h *notingHandler) Handle(_ context.Context, r slog.Record) error { h.note(r); return nil }
func (h *notingHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h *notingHandler) WithGroup(string) slog.Handler                 { return h }

// A write that failed may have committed all the same (its answer lost with the
// connection): sent again, its appended text would be stored twice. The persister reads
// the message's stamp back first and sends only what did not land.
func TestWriteThatLandedIsNotSentAgain(t *testing.T) {
	st, _ := openTestStore(t)
	w := newPersister(st, slog.New(slog.DiscardHandler))
	m := newMessageBuilder("a1", "c1", presenters.RoleAssistant)
	m.appendText(presenters.BlockText, "one ")
	w.saveUpdate(m.update(store.StatusInProgress))
	w.flush(false)
	// The next write commits, but its writer is told it failed.
	m.appendText(presenters.BlockText, "two ")
	landed := m.update(store.StatusInProgress)
	landed.Stamp = time.Now().UnixNano()
	if err := st.UpdateMessages(context.Background(), landed); err != nil {
		t.Fatal(err)
	}
	m.appendText(presenters.BlockText, "three")
	job := &writeJob{msgs: []store.MessageUpdate{landed, m.update(presenters.MessageComplete)}, unsure: landed.Stamp, sent: 1}
	if err := w.write(job); err != nil {
		t.Fatal(err)
	}
	if got := storedBlocks(t, st, "a1"); len(got) != 1 || got[0] != "text:one two three" {
		t.Fatalf("stored %q, want each text once", got)
	}
	// One that did not land is sent again.
	m.appendText(presenters.BlockText, " four")
	lost := m.update(presenters.MessageComplete)
	if err := w.write(&writeJob{msgs: []store.MessageUpdate{lost}, unsure: 1, sent: 1}); err != nil {
		t.Fatal(err)
	}
	if got := storedBlocks(t, st, "a1"); len(got) != 1 || got[0] != "text:one two three four" {
		t.Fatalf("stored %q, want the write that did not land sent again", got)
	}
}

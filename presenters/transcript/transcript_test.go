package transcript

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit guards waits that a failure would make endless.
const waitLimit = 30 * time.Second

// openTestStore opens a store in a temporary directory with one conversation, c1, whose
// block writes fail while the table fail_writes has a row ("the disk is full").
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
	for _, stmt := range []string{
		`CREATE TABLE fail_writes (x INTEGER)`,
		`CREATE TRIGGER fail_block_insert BEFORE INSERT ON blocks WHEN EXISTS (SELECT 1 FROM fail_writes) BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`,
		`CREATE TRIGGER fail_block_update BEFORE UPDATE ON blocks WHEN EXISTS (SELECT 1 FROM fail_writes) BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`,
	} {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	return st, db
}

// failWrites makes block writes fail, or work again.
func failWrites(t *testing.T, db *gorm.DB, fail bool) {
	t.Helper()
	stmt := `DELETE FROM fail_writes`
	if fail {
		stmt = `INSERT INTO fail_writes VALUES (1)`
	}
	if err := db.Exec(stmt).Error; err != nil {
		t.Fatal(err)
	}
}

// storedText reads message id's text blocks back, joined.
func storedText(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	msgs, err := st.Messages(context.Background(), "c1", presenters.MessageQuery{MessageID: id})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("message %s: %v, %d read", id, err, len(msgs))
	}
	var b strings.Builder
	for _, bl := range msgs[0].Blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// reply is message a1 of c1 with one text block; appended says text follows what is
// stored.
func reply(text string, status presenters.MessageStatus, appended bool) store.MessageUpdate {
	u := store.MessageUpdate{Message: presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: status,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}}}
	if appended {
		u.Appended = []int{0}
	}
	return u
}

// running starts w, and closes it when the test ends.
func running(t *testing.T, w *Writer) {
	var wg sync.WaitGroup
	wg.Go(w.Run)
	t.Cleanup(func() { w.Close(); wg.Wait() })
}

// An update whose write fails is written with the next one: its writer no longer holds
// its text, so dropping it would leave a hole in the stored reply.
func TestFailedUpdateIsWrittenWithTheNext(t *testing.T) {
	st, db := openTestStore(t)
	w := New(st, slog.New(slog.DiscardHandler))
	w.SaveUpdate(reply("one ", store.StatusInProgress, false))
	w.flush(false)
	failWrites(t, db, true)
	w.SaveUpdate(reply("two ", store.StatusInProgress, true))
	w.flush(false)
	if got := storedText(t, st, "a1"); got != "one " {
		t.Fatalf("stored %q while writes fail", got)
	}
	failWrites(t, db, false)
	w.SaveUpdate(reply("three", store.StatusInProgress, true))
	w.flush(false)
	if got := storedText(t, st, "a1"); got != "one two three" {
		t.Fatalf("stored %q, want the text whole", got)
	}
}

// A failed write is tried again on its own, without waiting for another write to come,
// and the waiter of a turn's final state is told only once it is stored.
func TestFailedWriteIsRetriedAloneAndWaitedFor(t *testing.T) {
	st, db := openTestStore(t)
	failWrites(t, db, true)
	retries := make(chan struct{}, 100)
	log := slog.New(&notingHandler{note: func(r slog.Record) {
		if strings.Contains(r.Message, "trying again") {
			select {
			case retries <- struct{}{}:
			default:
			}
		}
	}})
	w := New(st, log)
	running(t, w)
	done := w.SaveUpdateWait(reply("the whole reply", presenters.MessageComplete, false))
	for range 2 { // the first write and a retry that no other write set off
		select {
		case <-retries:
		case <-time.After(waitLimit):
			t.Fatal("the failed write was not tried again")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the waiter of the final state was told (%v) while its write fails", err)
	default:
	}
	failWrites(t, db, false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiter was told %v once writes work again", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the final state was not stored once writes work again")
	}
	if got := storedText(t, st, "a1"); got != "the whole reply" {
		t.Fatalf("stored %q, want the reply once", got)
	}
}

// A whole message queued while an older version of it fails to be written replaces it,
// and is what its waiter waits for; a waiter of the older one is told with it.
func TestNewerWholeMessageReplacesAFailedOne(t *testing.T) {
	st, db := openTestStore(t)
	failWrites(t, db, true)
	w := New(st, slog.New(slog.DiscardHandler))
	older := w.SaveUpdateWait(reply("a checkpoint", store.StatusInProgress, false))
	w.flush(false)
	final := w.SaveUpdateWait(reply("a checkpoint and the rest", presenters.MessageComplete, false))
	failWrites(t, db, false)
	w.flush(false)
	for _, done := range []<-chan error{older, final} {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("a waiter was not told once the newer version was written")
		}
	}
	msgs, err := st.Messages(context.Background(), "c1", presenters.MessageQuery{MessageID: "a1"})
	if err != nil || len(msgs) != 1 || msgs[0].Status != presenters.MessageComplete || storedText(t, st, "a1") != "a checkpoint and the rest" {
		t.Fatalf("stored %+v (%v), want the newer version, complete", msgs, err)
	}
}

// Closing gives up a write that keeps failing and tells its waiter why; a write queued
// after the close happens at once, in its caller.
func TestCloseGivesUpFailingWrites(t *testing.T) {
	st, db := openTestStore(t)
	failWrites(t, db, true)
	w := New(st, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	wg.Go(w.Run)
	done := w.SaveUpdateWait(reply("the reply", presenters.MessageComplete, false))
	w.Close()
	wg.Wait()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the disk is full") {
		t.Fatalf("the waiter of a write given up at close was told %v, want its error", err)
	}
	failWrites(t, db, false)
	if err := <-w.SaveUpdateWait(reply("the reply", presenters.MessageComplete, false)); err != nil {
		t.Fatalf("a write after the close: %v", err)
	}
	if got := storedText(t, st, "a1"); got != "the reply" {
		t.Fatalf("stored %q after the close", got)
	}
}

// A write fenced out because another replica took the session over is dropped, not
// tried again.
func TestFencedWriteIsNotRetried(t *testing.T) {
	if retryable(store.ErrFenced) || retryable(presenters.ErrNotFound) || !retryable(store.ErrUnavailable) || !retryable(errors.New("the disk is full")) {
		t.Fatal("retryable: fenced and refused writes are dropped, others tried again")
	}
}

// notingHandler hands every record to note.
type notingHandler struct{ note func(slog.Record) }

func (h *notingHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h *notingHandler) Handle(_ context.Context, r slog.Record) error { h.note(r); return nil }
func (h *notingHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h *notingHandler) WithGroup(string) slog.Handler                 { return h }

// A write that failed may have committed all the same (its answer lost with the
// connection): sent again, its appended text would be stored twice. The writer reads
// the message's stamp back first and sends only what did not land.
func TestWriteThatLandedIsNotSentAgain(t *testing.T) {
	st, _ := openTestStore(t)
	w := New(st, slog.New(slog.DiscardHandler))
	w.SaveUpdate(reply("one ", store.StatusInProgress, false))
	w.flush(false)
	// The next write commits, but its writer is told it failed.
	landed := reply("two ", store.StatusInProgress, true)
	landed.Stamp = time.Now().UnixNano()
	if err := st.UpdateMessages(context.Background(), landed); err != nil {
		t.Fatal(err)
	}
	job := &writeJob{msgs: []store.MessageUpdate{landed, reply("three", presenters.MessageComplete, true)}, unsure: landed.Stamp, sent: 1}
	if err := w.write(job); err != nil {
		t.Fatal(err)
	}
	if got := storedText(t, st, "a1"); got != "one two three" {
		t.Fatalf("stored %q, want each text once", got)
	}
	// One that did not land is sent again.
	if err := w.write(&writeJob{msgs: []store.MessageUpdate{reply(" four", presenters.MessageComplete, true)}, unsure: 1, sent: 1}); err != nil {
		t.Fatal(err)
	}
	if got := storedText(t, st, "a1"); got != "one two three four" {
		t.Fatalf("stored %q, want the write that did not land sent again", got)
	}
}

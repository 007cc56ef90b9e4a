package store

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// countBlockWrites installs triggers that log the position of every block row inserted
// or updated, and returns a function that takes (and clears) that log.
func countBlockWrites(t *testing.T, db *gorm.DB) func() []int {
	t.Helper()
	stmts := []string{
		`CREATE TABLE block_writes (position INTEGER NOT NULL)`,
		`CREATE TRIGGER log_block_insert AFTER INSERT ON blocks BEGIN INSERT INTO block_writes VALUES (NEW.position); END`,
		`CREATE TRIGGER log_block_update AFTER UPDATE ON blocks BEGIN INSERT INTO block_writes VALUES (NEW.position); END`,
	}
	if dialectOf(db) == postgresDialect {
		stmts = []string{
			`CREATE TABLE block_writes (position BIGINT NOT NULL)`,
			`CREATE FUNCTION log_block_write() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN INSERT INTO block_writes VALUES (NEW.position); RETURN NULL; END $$`,
			`CREATE TRIGGER log_block_write AFTER INSERT OR UPDATE ON blocks FOR EACH ROW EXECUTE FUNCTION log_block_write()`,
		}
	}
	for _, stmt := range stmts {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	return func() []int {
		t.Helper()
		var positions []int
		if err := db.Raw(`SELECT position FROM block_writes`).Scan(&positions).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec(`DELETE FROM block_writes`).Error; err != nil {
			t.Fatal(err)
		}
		slices.Sort(positions)
		return positions
	}
}

func toolBlock(id string, status presenters.ToolStatus, diff string) presenters.Block {
	return presenters.Block{Type: presenters.BlockTool, Tool: &presenters.ToolCall{
		ToolID: id, ToolName: "edit_file", Kind: presenters.ToolEdit, Status: status,
		Arguments: json.RawMessage(`{"path":"f"}`),
		Content:   []presenters.ToolContent{{Diff: &presenters.DiffBlock{Path: "/w/f", OldText: diff, NewText: diff + "!"}}},
	}}
}

// TestCheckpointsWriteOnlyChangedBlocks saves a growing message in progress the way a
// turn checkpoints it and checks, with triggers on the blocks table, which rows each
// save writes, and that every save reads back whole.
func TestCheckpointsWriteOnlyChangedBlocks(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		writes := countBlockWrites(t, db)
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
		check := func(step string, want []int) {
			t.Helper()
			if err := s.SaveMessage(ctx, m); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if got := writes(); !slices.Equal(got, want) {
				t.Errorf("%s: wrote block rows %v, want %v", step, got, want)
			}
			got, err := s.Messages(ctx, "c1", presenters.MessageQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || len(got[0].Blocks) != len(m.Blocks) || len(m.Blocks) > 0 && !reflect.DeepEqual(got[0].Blocks, m.Blocks) {
				t.Fatalf("%s: read back %+v, want %+v", step, got[0].Blocks, m.Blocks)
			}
		}
		m.Blocks = []presenters.Block{{Type: presenters.BlockText, Text: "Editing. "}, toolBlock("c1", presenters.ToolInProgress, "one")}
		check("first save", []int{0, 1})
		m.Blocks[1] = toolBlock("c1", presenters.ToolCompleted, "one")
		check("tool finished", []int{1})
		check("nothing changed", nil)
		m.Blocks = append(m.Blocks, presenters.Block{Type: presenters.BlockText, Text: "Next"}, toolBlock("c2", presenters.ToolPending, "two"))
		check("two blocks added", []int{2, 3})
		m.Blocks[2].Text = "Next, the other file."
		check("open text grew", []int{2})
		m.Blocks = m.Blocks[:2]
		check("shrunk", nil)

		// A store that did not write the message (a restart) rewrites it whole once.
		other, err := New(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		m.Blocks = append(m.Blocks, presenters.Block{Type: presenters.BlockText, Text: "after restart"})
		if err := other.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		if got := writes(); !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("first save by another store wrote %v, want every row", got)
		}

		// A failed transaction forgets what it would have written; the next save is whole.
		m.Blocks[0].Text = "changed"
		bad := presenters.Message{ID: "x", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockTool}}}
		if err := s.SaveMessages(ctx, m, bad); err == nil {
			t.Fatal("a block without its payload was saved")
		}
		writes()
		m.Blocks[0].Text = "changed again"
		check("after a failed save", []int{0, 1, 2})

		// A final save ends the tracking: the message is done.
		m.Status = presenters.MessageComplete
		check("final", nil)
		if n := len(s.committed); n != 0 {
			t.Fatalf("%d messages still tracked after their final save", n)
		}
	})
}

// The same message twice in one SaveMessages: the second is compared with the first.
func TestSaveMessagesSameMessageTwice(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "v1"}}}
		if err := s.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		second := m
		second.Blocks = []presenters.Block{{Type: presenters.BlockText, Text: "v2"}}
		third := m // back to v1: equal to what was committed before, not to what the first wrote
		if err := s.SaveMessages(ctx, second, third); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Messages(ctx, "c1", presenters.MessageQuery{})
		if got[0].Blocks[0].Text != "v1" {
			t.Fatalf("stored %q, want the last save's v1", got[0].Blocks[0].Text)
		}
	})
}

// Invalid UTF-8 in a text column is stored as U+FFFD: what is read back goes to clients.
func TestInvalidUTF8IsStoredValid(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "deepchat.default")
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{
				{Type: presenters.BlockText, Text: "caf\xe9"},
				{Type: presenters.BlockTool, Tool: &presenters.ToolCall{ToolID: "id\xff", ToolName: "n\xfe", Status: presenters.ToolFailed, Error: "bad \xc3"}},
				{Type: presenters.BlockError, Error: &presenters.ErrorBlock{Message: "cut \xe2\x82", Code: "x"}},
			}}
		if err := s.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		got, err := s.Messages(ctx, "c1", presenters.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		b := got[0].Blocks
		for _, text := range []string{b[0].Text, b[1].Tool.ToolID, b[1].Tool.ToolName, b[1].Tool.Error, b[2].Error.Message} {
			if !utf8.ValidString(text) {
				t.Errorf("read back invalid UTF-8 %q", text)
			}
		}
		if b[0].Text != "caf\uFFFD" {
			t.Fatalf("text = %q", b[0].Text)
		}
	})
}

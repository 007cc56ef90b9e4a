package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// readText reads back block i of message id, failing the test when it is not there.
func readText(t *testing.T, s *Store, sessionID, id string, i int) string {
	t.Helper()
	got, err := s.Messages(context.Background(), sessionID, presenters.MessageQuery{MessageID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Blocks) <= i {
		t.Fatalf("message %s read back as %+v, want a block %d", id, got, i)
	}
	return got[0].Blocks[i].Text
}

// A text saved as appends reads back whole, each update writing only the part that was
// last and the new ones; the store keeps no more of the text than that last part.
func TestUpdatesAppendToStoredText(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, db := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "acp.test")
		writes := logTextWrites(t, db)
		L := textPartBytes
		text := largeText(6 * L)
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
		saved := 0
		step := func(name string, upTo int, want ...string) {
			t.Helper()
			upTo = len(validPrefix(text, upTo))
			u := MessageUpdate{Message: m, Appended: []int{0, 1}} // block 0 gained nothing
			u.Blocks = []presenters.Block{{Type: presenters.BlockReasoning}, {Type: presenters.BlockText, Text: text[saved:upTo]}}
			if err := s.UpdateMessages(ctx, u); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			saved = upTo
			checkStoredParts(t, db)
			if got := readText(t, s, "c1", "a1", 1); got != text[:saved] {
				t.Fatalf("%s: read back %d bytes, want %d (equal prefix %d)", name, len(got), saved, commonPrefix(got, text[:saved]))
			}
			if got := writes(); !slices.Equal(got, want) {
				t.Errorf("%s: wrote parts %v, want %v", name, got, want)
			}
			for _, r := range s.committed["a1"] {
				if len(r.row.Text) > L {
					t.Errorf("%s: the store holds %d bytes of block %d's text", name, len(r.row.Text), r.row.Position)
				}
			}
		}
		m.Blocks = []presenters.Block{{Type: presenters.BlockReasoning, Text: "hm"}, {Type: presenters.BlockText, Text: text[:100]}}
		if err := s.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		saved = 100
		writes()
		step("within the first part", L/2, "1.0")
		step("past the first part", 2*L+L/3, "1.0", "1.1", "1.2")
		step("nothing new", 2*L+L/3)
		step("grew by three parts", 5*L+L/4, "1.2", "1.3", "1.4", "1.5")

		// A store that did not write the message (a restart, a failed write) reads its tail.
		other, err := New(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		s = other
		step("after a restart", 5*L+L/2, "1.5")
		step("to the end", len(text), "1.5")
		if got := readText(t, s, "c1", "a1", 0); got != "hm" {
			t.Fatalf("the reasoning block reads %q after updates that left it alone", got)
		}

		// A whole save of a text known by its tail rewrites it whole and drops the rest.
		short := validPrefix(text, L+10)
		m.Blocks = []presenters.Block{{Type: presenters.BlockReasoning, Text: "hm"}, {Type: presenters.BlockText, Text: short}}
		if err := s.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		if got := readText(t, s, "c1", "a1", 1); got != short {
			t.Fatalf("whole save after updates read back %d bytes, want %d", len(got), len(short))
		}
		checkStoredParts(t, db)
		if got := partsOf(t, db, "a1", 1); !slices.Equal(got, []int{1}) {
			t.Fatalf("parts %v left after a whole save of two parts", got)
		}

		// The final save ends the tracking.
		m.Status = presenters.MessageComplete
		final := MessageUpdate{Message: m, Appended: []int{1}}
		final.Blocks = []presenters.Block{{Type: presenters.BlockReasoning, Text: "hm"}, {Type: presenters.BlockText, Text: "!"}}
		if err := s.UpdateMessages(ctx, final); err != nil {
			t.Fatal(err)
		}
		if got := readText(t, s, "c1", "a1", 1); got != short+"!" {
			t.Fatalf("final update read back %d bytes", len(got))
		}
		if len(s.committed) != 0 {
			t.Fatal("a finished message is still tracked")
		}
	})
}

// Appending to a block that is not stored as text of that type is refused, and nothing
// of the update is written.
func TestUpdateAppendingToNoTextIsRefused(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "acp.test")
		m := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "one"}}}
		if err := s.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		for name, u := range map[string]MessageUpdate{
			"another type":  {Message: withBlocks(m, presenters.Block{Type: presenters.BlockReasoning, Text: "x"}), Appended: []int{0}},
			"a new block":   {Message: withBlocks(m, presenters.Block{Type: presenters.BlockText, Text: "one"}, presenters.Block{Type: presenters.BlockText, Text: "x"}), Appended: []int{1}},
			"no such block": {Message: withBlocks(m, presenters.Block{Type: presenters.BlockText, Text: "x"}), Appended: []int{3}},
			"a stored tool": {Message: withBlocks(m, toolBlock("t1", presenters.ToolPending, "d")), Appended: []int{0}},
		} {
			err := s.UpdateMessages(ctx, u)
			if !errors.Is(err, presenters.ErrInvalidArgument) {
				t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
			}
			if got := readText(t, s, "c1", "a1", 0); got != "one" {
				t.Fatalf("%s: the refused update left %q", name, got)
			}
		}
	})
}

func withBlocks(m presenters.Message, blocks ...presenters.Block) presenters.Message {
	m.Blocks = blocks
	return m
}

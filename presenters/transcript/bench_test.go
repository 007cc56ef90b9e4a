package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// BenchmarkCheckpointedTurn saves a turn the way a presenter checkpoints it: after
// each of 40 tool calls (each with a 64 KiB diff) the whole message so far is saved
// again, then once more as finished. One op is one whole turn.
func BenchmarkCheckpointedTurn(b *testing.B) {
	const tools = 40
	s, _ := openStore(b)
	ctx := context.Background()
	mustCreate(b, s, "c1", "deepchat.bench")
	file := strings.Repeat("some line of a source file\n", (64<<10)/27)
	n := 0
	for b.Loop() {
		n++
		m := presenters.Message{ID: fmt.Sprintf("m%d", n), SessionID: "c1", Role: presenters.RoleAssistant, Status: StatusInProgress}
		for i := range tools {
			m.Blocks = append(m.Blocks, presenters.Block{Type: presenters.BlockText, Text: fmt.Sprintf("Step %d. ", i)})
			result, _ := json.Marshal(fmt.Sprintf("Replaced 1 occurrence(s) in f%d.go.", i))
			m.Blocks = append(m.Blocks, presenters.Block{Type: presenters.BlockTool, Tool: &presenters.ToolCall{
				ToolID: fmt.Sprintf("call_%d", i), ToolName: "edit_file", Kind: presenters.ToolEdit, Status: presenters.ToolCompleted,
				Arguments: json.RawMessage(`{"path":"f.go","old_string":"a","new_string":"b"}`), Result: result,
				Content: []presenters.ToolContent{{Diff: &presenters.DiffBlock{Path: "/w/f.go", OldText: file, NewText: file + "x"}}},
			}})
			if err := s.SaveMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		m.Status = presenters.MessageComplete
		if err := s.SaveMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

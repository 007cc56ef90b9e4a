package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// A reply cut short is stored as its last checkpoint had it; ExtendMessageText brings its
// text up to what was sent, on the last text block or a new one, leaving the rest alone.
func TestExtendMessageText(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		long := strings.Repeat("ü", textPartBytes) // two bytes a character: spans parts
		in, out := int64(3), int64(4)
		usage := &presenters.TokenUsage{InputTokens: &in, OutputTokens: &out}
		cases := []struct {
			name      string
			blocks    []presenters.Block
			text      string
			wantAdded int
			want      []presenters.Block
		}{
			{
				name:      "onto the last text block",
				blocks:    []presenters.Block{{Type: presenters.BlockReasoning, Text: "think"}, {Type: presenters.BlockText, Text: "Hello"}},
				text:      "Hello, world",
				wantAdded: len(", world"),
				want:      []presenters.Block{{Type: presenters.BlockReasoning, Text: "think"}, {Type: presenters.BlockText, Text: "Hello, world"}},
			},
			{
				name:      "after a tool call, a new text block",
				blocks:    []presenters.Block{{Type: presenters.BlockText, Text: "Editing. "}, toolBlock("t1", presenters.ToolCancelled, "one")},
				text:      "Editing. Done.",
				wantAdded: len("Done."),
				want: []presenters.Block{{Type: presenters.BlockText, Text: "Editing. "}, toolBlock("t1", presenters.ToolCancelled, "one"),
					{Type: presenters.BlockText, Text: "Done."}},
			},
			{
				name:      "text split by a tool call counts whole",
				blocks:    []presenters.Block{{Type: presenters.BlockText, Text: "a"}, toolBlock("t1", presenters.ToolCompleted, "one"), {Type: presenters.BlockText, Text: "b"}},
				text:      "abc",
				wantAdded: 1,
				want:      []presenters.Block{{Type: presenters.BlockText, Text: "a"}, toolBlock("t1", presenters.ToolCompleted, "one"), {Type: presenters.BlockText, Text: "bc"}},
			},
			{
				name:      "no block yet",
				text:      "first words",
				wantAdded: len("first words"),
				want:      []presenters.Block{{Type: presenters.BlockText, Text: "first words"}},
			},
			{
				name:      "a long text across its stored parts",
				blocks:    []presenters.Block{{Type: presenters.BlockText, Text: long[:textPartBytes-2]}},
				text:      long + "end",
				wantAdded: len(long) - (textPartBytes - 2) + len("end"),
				want:      []presenters.Block{{Type: presenters.BlockText, Text: long + "end"}},
			},
			{
				name:   "the stored text is already whole",
				blocks: []presenters.Block{{Type: presenters.BlockText, Text: "Hello"}},
				text:   "Hello",
				want:   []presenters.Block{{Type: presenters.BlockText, Text: "Hello"}},
			},
			{
				name:   "the stored text is longer",
				blocks: []presenters.Block{{Type: presenters.BlockText, Text: "Hello, world"}},
				text:   "Hello",
				want:   []presenters.Block{{Type: presenters.BlockText, Text: "Hello, world"}},
			},
			{
				name:   "text that does not begin with the stored text",
				blocks: []presenters.Block{{Type: presenters.BlockText, Text: "Hello"}},
				text:   "Goodbye, world",
				want:   []presenters.Block{{Type: presenters.BlockText, Text: "Hello"}},
			},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := e.openStore(t)
				ctx := context.Background()
				mustCreate(t, s, "c1", "acp.x")
				user := presenters.Message{ID: "u1", SessionID: "c1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
					Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "go"}}}
				reply := presenters.Message{ID: "a1", SessionID: "c1", Role: presenters.RoleAssistant, Status: presenters.MessageIncomplete,
					StopReason: presenters.StopCancelled, Usage: usage, Blocks: tc.blocks}
				if err := s.SaveMessages(ctx, user, reply); err != nil {
					t.Fatal(err)
				}
				added, err := s.ExtendMessageText(ctx, "c1", "a1", tc.text)
				if err != nil {
					t.Fatalf("ExtendMessageText: %v", err)
				}
				if added != tc.wantAdded {
					t.Errorf("added %d bytes, want %d", added, tc.wantAdded)
				}
				got, err := s.Messages(ctx, "c1", presenters.MessageQuery{FromOldest: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 2 || got[0].ID != "u1" || got[1].ID != "a1" {
					t.Fatalf("messages after the extension: %+v", got)
				}
				if !reflect.DeepEqual(got[0].Blocks, user.Blocks) {
					t.Errorf("the user's message changed: %+v", got[0].Blocks)
				}
				r := got[1]
				if r.Status != presenters.MessageIncomplete || r.StopReason != presenters.StopCancelled || !reflect.DeepEqual(r.Usage, usage) {
					t.Errorf("reply status %q, stop reason %q, usage %+v: want them as stored", r.Status, r.StopReason, r.Usage)
				}
				if len(r.Blocks) != len(tc.want) || len(tc.want) > 0 && !reflect.DeepEqual(r.Blocks, tc.want) {
					t.Errorf("reply blocks:\n got %s\nwant %s", describeBlocks(r.Blocks), describeBlocks(tc.want))
				}
			})
		}
	})
}

func describeBlocks(blocks []presenters.Block) string {
	var parts []string
	for _, b := range blocks {
		text := b.Text
		if len(text) > 40 {
			text = text[:20] + "..." + text[len(text)-20:]
		}
		parts = append(parts, string(b.Type)+":"+text)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func TestExtendMessageTextOfAnUnknownMessage(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustCreate(t, s, "c1", "acp.x")
		if _, err := s.ExtendMessageText(ctx, "c1", "nope", "text"); !errors.Is(err, presenters.ErrNotFound) {
			t.Errorf("unknown message: %v, want ErrNotFound", err)
		}
		if _, err := s.ExtendMessageText(ctx, "nope", "a1", "text"); !errors.Is(err, presenters.ErrNotFound) {
			t.Errorf("unknown session: %v, want ErrNotFound", err)
		}
	})
}

// MarkSessionInterrupted marks one session's replies in progress (and their unfinished
// tool calls) and leaves another session's running reply alone.
func TestMarkSessionInterrupted(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, c := range []string{"c1", "c2"} {
			mustCreate(t, s, c, "deepchat.default")
			m := presenters.Message{ID: c + "-a", SessionID: c, Role: presenters.RoleAssistant, Status: StatusInProgress,
				Blocks: []presenters.Block{{Type: presenters.BlockTool, Tool: &presenters.ToolCall{ToolID: "t", ToolName: "run", Status: presenters.ToolInProgress}}}}
			if err := s.SaveMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		marked, err := s.MarkSessionInterrupted(ctx, "c1")
		if err != nil || len(marked) != 1 || marked[0] != (InterruptedMessage{SessionID: "c1", MessageID: "c1-a", AgentID: "deepchat.default"}) {
			t.Fatalf("MarkSessionInterrupted(c1) = %+v, %v; want c1's reply", marked, err)
		}
		for c, want := range map[string]struct {
			status presenters.MessageStatus
			tool   presenters.ToolStatus
		}{"c1": {presenters.MessageIncomplete, presenters.ToolCancelled}, "c2": {presenters.MessageIncomplete, presenters.ToolInProgress}} { // readers see in_progress as incomplete
			msgs, err := s.Messages(ctx, c, presenters.MessageQuery{})
			if err != nil || len(msgs) != 1 {
				t.Fatalf("%s: %v, %v", c, msgs, err)
			}
			if got := msgs[0]; got.Status != want.status || got.Blocks[0].Tool.Status != want.tool {
				t.Errorf("%s: status %s, tool %s; want %s, %s", c, got.Status, got.Blocks[0].Tool.Status, want.status, want.tool)
			}
		}
		if marked, err := s.MarkSessionInterrupted(ctx, "c2"); err != nil || len(marked) != 1 || marked[0].MessageID != "c2-a" {
			t.Errorf("MarkSessionInterrupted(c2) = %+v, %v; want c2's reply, still in progress after c1's were marked", marked, err)
		}
		if _, err := s.MarkSessionInterrupted(ctx, ""); err == nil {
			t.Error("MarkSessionInterrupted with no session: no error (it would mark every session's)")
		}
	})
}

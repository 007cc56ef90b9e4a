package acp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// TOOL_RUNNING carries only the terminal output that is new since the tool call's
// previous event, at its offset: TOOL_START's output followed by every TOOL_RUNNING's
// is TOOL_END's. Once the byte limit cuts the output from the beginning, offsets still
// count everything the terminal printed, and merging by them ends with what TOOL_END
// holds, also when the output repeats itself (the offsets are counted, not guessed).
func TestTerminalOutputDeltasCarryOffsets(t *testing.T) {
	distinct := func(i int) string { return fmt.Sprintf("line %d\n", i) }
	repeated := func(int) string { return "same\n" }
	for _, c := range []struct {
		limit int
		line  func(int) string
	}{{1 << 20, distinct}, {64, distinct}, {64, repeated}} {
		limit, line := c.limit, c.line
		t.Run(fmt.Sprintf("limit %d %q", limit, line(1)), func(t *testing.T) {
			n := newTestNormalizer(t)
			terms := newSessionTerminals(nil)
			printed := ""
			n.terminals = terminalFunc(func(id string) (presenters.TerminalBlock, bool) {
				held, cut := printed, false
				if len(held) > limit {
					held, cut = held[len(held)-limit:], true
				}
				return terms.terminalState(id, sandbox.TerminalOutput{Output: held, Truncated: cut, Offset: uint64(len(printed) - len(held))})
			})
			var events []presenters.Payload
			emit := func(p presenters.Payload) { events = append(events, p) }
			n.startTurn("u", "a")
			printed = line(0)
			n.apply(update(t, `{"sessionUpdate":"tool_call","toolCallId":"run","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"t1"}]}`), emit)
			for i := 1; i < 30; i++ {
				printed += line(i)
				refreshShownTerminals(n, emit)
			}
			printed += "done\n"
			refreshShownTerminals(n, emit)
			n.apply(update(t, `{"sessionUpdate":"tool_call_update","toolCallId":"run","status":"completed"}`), emit)

			var merged strings.Builder // what a client holds, from mergedFrom on
			var mergedFrom uint64
			var concatenated strings.Builder
			var end *presenters.TerminalBlock
			for i, ev := range events {
				var tb *presenters.TerminalBlock
				switch p := ev.(type) {
				case presenters.ToolStartPayload:
					tb = p.Tool.Content[0].Terminal
				case presenters.ToolRunningPayload:
					tb = p.Tool.Content[0].Terminal
					want := line(i)
					if i == 30 {
						want = "done\n"
					}
					if limit > len(printed) && tb.Output != want {
						t.Fatalf("TOOL_RUNNING %d carries %q: want only the new line", i, tb.Output)
					}
				case presenters.ToolEndPayload:
					end = p.Tool.Content[0].Terminal
					continue
				default:
					t.Fatalf("unexpected %T", ev)
				}
				concatenated.WriteString(tb.Output)
				// The merge rule: keep what is held before the offset, append the output.
				held := merged.String()
				if tb.OutputOffset < mergedFrom || tb.OutputOffset > mergedFrom+uint64(len(held)) {
					t.Fatalf("event %d starts at %d, outside the %d bytes held from %d", i, tb.OutputOffset, len(held), mergedFrom)
				}
				merged.Reset()
				merged.WriteString(held[:tb.OutputOffset-mergedFrom] + tb.Output)
			}
			if end == nil {
				t.Fatal("no TOOL_END")
			}
			held := printed
			if len(held) > limit {
				held = held[len(held)-limit:]
			}
			if end.Output != held || end.OutputOffset != uint64(len(printed)-len(held)) {
				t.Fatalf("TOOL_END holds %d bytes from %d; want the %d held from %d", len(end.Output), end.OutputOffset, len(held), len(printed)-len(held))
			}
			if limit > len(printed) && concatenated.String() != end.Output {
				t.Fatalf("TOOL_START and TOOL_RUNNING outputs concatenated:\n%q\nTOOL_END:\n%q", concatenated.String(), end.Output)
			}
			if all := merged.String(); mergedFrom+uint64(len(all)) != uint64(len(printed)) || !strings.HasSuffix(all, end.Output) {
				t.Fatalf("merged output %q from %d; want it to end where the printing did, with what TOOL_END holds", all, mergedFrom)
			}
		})
	}
}

package acp

import (
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/textutil"
)

// Terminals an agent runs itself. codex-acp runs its commands in its own process, not
// through terminal/*: a tool call's content names a terminal agenticd does not know,
// and the output and exit arrive in the updates' _meta, as terminal_output_delta
// ({data, terminal_id}, appended) and terminal_exit ({exit_code, signal, terminal_id}).

// agentTerminalLimit bounds the output held for one such terminal; beyond it the
// beginning is dropped, as for agenticd's own terminals.
const agentTerminalLimit = 1 << 20

// agentTerminalMeta applies the terminal output and exit an update's _meta carries to
// the tool call's own terminals, and puts them into its content: in place of content
// that names the same terminal, else after it. It reports whether the meta named one.
func (st *toolState) agentTerminalMeta(meta map[string]any, toolID string) bool {
	delta, _ := meta["terminal_output_delta"].(map[string]any)
	exit, _ := meta["terminal_exit"].(map[string]any)
	if delta == nil && exit == nil && len(st.agentTerminals) == 0 {
		return false
	}
	if delta != nil {
		data, _ := delta["data"].(string)
		tb := st.agentTerminal(terminalIDOf(delta, toolID))
		tb.Output += data
		if len(tb.Output) > agentTerminalLimit {
			tail := textutil.Suffix(tb.Output, agentTerminalLimit)
			tb.OutputOffset += uint64(len(tb.Output) - len(tail))
			tb.Output, tb.Truncated = strings.Clone(tail), true
		}
	}
	if exit != nil {
		tb := st.agentTerminal(terminalIDOf(exit, toolID))
		if status, ok := exit["exit_code"].(float64); ok {
			n := int(status)
			tb.ExitCode = &n
		}
		tb.Signal, _ = exit["signal"].(string)
	}
	st.showAgentTerminals()
	return true
}

// terminalIDOf is the terminal a meta record names; codex names the tool call's id.
func terminalIDOf(record map[string]any, toolID string) string {
	if id, _ := record["terminal_id"].(string); id != "" {
		return id
	}
	return toolID
}

func (st *toolState) agentTerminal(id string) *presenters.TerminalBlock {
	if st.agentTerminals == nil {
		st.agentTerminals = map[string]*presenters.TerminalBlock{}
	}
	tb := st.agentTerminals[id]
	if tb == nil {
		tb = &presenters.TerminalBlock{TerminalID: id}
		st.agentTerminals[id] = tb
		st.agentTerminalOrder = append(st.agentTerminalOrder, id)
	}
	return tb
}

// showAgentTerminals puts the current state of the agent's terminals into the call's
// content (a replaced content shows them again).
func (st *toolState) showAgentTerminals() {
	// Content slices are shared with snapshots and events: copy, never mutate.
	content := append([]presenters.ToolContent(nil), st.call.Content...)
	for _, id := range st.agentTerminalOrder {
		tb := *st.agentTerminals[id]
		if cmd := commandOf(st.call.Arguments); cmd != "" {
			tb.Command = cmd
		}
		shown := false
		for i, c := range content {
			if c.Terminal != nil && c.Terminal.TerminalID == id {
				content[i], shown = presenters.ToolContent{Terminal: &tb}, true
			}
		}
		if !shown {
			content = append(content, presenters.ToolContent{Terminal: &tb})
		}
	}
	st.call.Content = content
}

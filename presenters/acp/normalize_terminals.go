package acp

import (
	"slices"

	"github.com/agenticd/agenticd/presenters"
)

// Terminals shown in tool calls: which of them the session follows while their tool
// calls run, and putting their current states into those calls.

// terminalReader gives a terminal's current state for tool content that shows it
// (false: unknown terminal). It is read under the session's lock.
type terminalReader interface {
	terminalBlock(id string) (presenters.TerminalBlock, bool)
}

// track keeps liveTerminals in step with a tool call that may have changed.
func (n *normalizer) track(st *toolState) {
	live := !st.call.Status.Finished() && slices.ContainsFunc(st.call.Content, func(c presenters.ToolContent) bool { return c.Terminal != nil })
	switch {
	case live && !st.liveTerminal:
		n.liveTerminals++
	case !live && st.liveTerminal:
		n.liveTerminals--
	}
	st.liveTerminal = live
}

// liveTerminalIDs lists the terminals shown by unfinished tool calls, in message order.
func (n *normalizer) liveTerminalIDs() []string {
	if n.liveTerminals == 0 {
		return nil
	}
	var ids []string
	for _, st := range n.sortedTools() {
		if !st.liveTerminal {
			continue
		}
		for _, c := range st.call.Content {
			if c.Terminal != nil && !slices.Contains(ids, c.Terminal.TerminalID) {
				ids = append(ids, c.Terminal.TerminalID)
			}
		}
	}
	return ids
}

// applyTerminals puts terminals' current states (read by the caller, possibly without
// the session's lock) into the tool calls that show them and emits TOOL_RUNNING
// (TOOL_END for ended ones) where a state changed. It reports whether a live terminal
// is still shown.
func (n *normalizer) applyTerminals(states map[string]presenters.TerminalBlock, emit emitFunc) bool {
	if n.msg == nil {
		return false
	}
	for _, st := range n.sortedTools() {
		if !setTerminals(&st.call, states) {
			continue
		}
		n.msg.setTool(st.block, st.call)
		if st.ended {
			emit(presenters.ToolEndPayload{MessageID: n.msg.id, Tool: st.call})
		} else {
			emit(presenters.ToolRunningPayload{MessageID: n.msg.id, Tool: st.liveView(true)})
		}
	}
	return n.showsLiveTerminal()
}

// refreshToolTerminals replaces the terminal contents of call with their current
// state; it reports whether any changed.
func (n *normalizer) refreshToolTerminals(call *presenters.ToolCall) bool {
	if n.terminals == nil {
		return false
	}
	states := map[string]presenters.TerminalBlock{}
	for _, c := range call.Content {
		if c.Terminal != nil {
			if now, ok := n.terminals.terminalBlock(c.Terminal.TerminalID); ok {
				states[c.Terminal.TerminalID] = now
			}
		}
	}
	return setTerminals(call, states)
}

// setTerminals replaces the terminal contents of call whose state in states differs;
// it reports whether any changed.
func setTerminals(call *presenters.ToolCall, states map[string]presenters.TerminalBlock) bool {
	changed := false
	for i, c := range call.Content {
		if c.Terminal == nil {
			continue
		}
		now, ok := states[c.Terminal.TerminalID]
		if !ok || sameTerminal(now, *c.Terminal) {
			continue
		}
		if !changed {
			// Content slices are shared with snapshots and events: copy, never mutate.
			call.Content = append([]presenters.ToolContent(nil), call.Content...)
			changed = true
		}
		call.Content[i] = presenters.ToolContent{Terminal: &now}
	}
	return changed
}

// showsLiveTerminal reports whether an unfinished tool call of the turn shows a
// terminal (whose output the session then follows). O(1): the session asks after
// every update.
func (n *normalizer) showsLiveTerminal() bool {
	return n.liveTerminals > 0
}

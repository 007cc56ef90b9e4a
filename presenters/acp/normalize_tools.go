package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// The tool calls of the message being built: their lifecycle (start, updates, end),
// and the re-check of a granted call's target paths when its updates name new ones.

// commandClassifier rates an execute tool's command line run in a workspace
// (presenters/risk).
type commandClassifier interface {
	Classify(command, workspace string) presenters.CommandInfo
}

// toolState is one tool call of the message being built.
type toolState struct {
	call  presenters.ToolCall
	block int  // index of its block in the message
	ended bool // TOOL_END was emitted
	// liveTerminal: the call is unfinished and shows a terminal (counted in
	// normalizer.liveTerminals).
	liveTerminal bool
	// grantedIn is the workspace a permission grant was checked against (nil: not
	// granted); checkedPaths are the target paths checked since.
	grantedIn    workspaceResolver
	checkedPaths []string
	// sent is, by terminal id, the offset up to which the call's live events carried
	// the terminal's output (liveView).
	sent map[string]uint64
	// agentTerminals are the terminals the agent runs itself and reports in _meta
	// (normalize_agentterminals.go), in the order first named.
	agentTerminals     map[string]*presenters.TerminalBlock
	agentTerminalOrder []string
}

// tool applies a tool_call, a tool_call_update or a permission request's tool call: a
// new id starts a tool call, a known one is updated (a repeated tool_call is an update).
func (n *normalizer) tool(u sdk.ToolCallUpdate, emit emitFunc) (presenters.ToolCall, bool) {
	msg := n.target(presenters.RoleAssistant, nil, emit)
	if msg == nil {
		n.drop("a tool call")
		return presenters.ToolCall{}, false
	}
	id := string(u.ToolCallId)
	st, known := n.tools[id]
	if !known {
		st = &toolState{call: presenters.ToolCall{ToolID: id, Kind: presenters.ToolOther, Status: presenters.ToolPending}}
		st.block = msg.appendBlock(presenters.Block{Type: presenters.BlockTool})
		n.tools[id] = st
	}
	before := st.call
	n.merge(&st.call, u)
	st.agentTerminalMeta(u.Meta, id)
	if u.Content == nil && st.call.Status.Finished() && !before.Status.Finished() {
		// TOOL_END and the stored message carry the terminals' final output.
		n.refreshToolTerminals(&st.call)
	}
	if known && sameToolCall(before, st.call) {
		return st.call, true // nothing changed (e.g. a permission request repeating it)
	}
	n.track(st)
	msg.setTool(st.block, st.call)
	finished := st.call.Status.Finished()
	switch {
	case !known:
		emit(presenters.ToolStartPayload{MessageID: msg.id, Tool: st.liveView(false)})
		if finished {
			emit(presenters.ToolEndPayload{MessageID: msg.id, Tool: st.call})
			st.ended = true
		}
	case finished || st.ended:
		emit(presenters.ToolEndPayload{MessageID: msg.id, Tool: st.call})
		st.ended = true
	default:
		emit(presenters.ToolRunningPayload{MessageID: msg.id, Tool: st.liveView(true)})
	}
	if targetsMayDiffer(before, st.call) {
		n.recheckGranted(st, emit)
	}
	return st.call, true
}

// targetsMayDiffer reports whether an update touched what targetPaths reads; the
// raw input is parsed only then.
func targetsMayDiffer(a, b presenters.ToolCall) bool {
	if !bytes.Equal(a.Arguments, b.Arguments) || !slices.Equal(a.Locations, b.Locations) || len(a.Content) != len(b.Content) {
		return true
	}
	for i := range a.Content {
		da, db := a.Content[i].Diff, b.Content[i].Diff
		if (da == nil) != (db == nil) || (da != nil && da.Path != db.Path) {
			return true
		}
	}
	return false
}

// granted remembers that a permission request for the tool call was granted after
// paths were checked against ws, and checks the paths its updates named meanwhile.
func (n *normalizer) granted(toolID string, paths []string, ws workspaceResolver, emit emitFunc) {
	st := n.tools[toolID]
	if st == nil {
		return
	}
	st.grantedIn, st.checkedPaths = ws, slices.Clone(paths)
	n.recheckGranted(st, emit)
}

// recheckGranted checks the target paths of a granted tool call that were not checked
// yet. The agent may name other paths after the grant; the tool ran or runs already,
// so an outside path cannot be refused any more, only reported as an ERROR. This reads
// the file system (symlinks) under the session's lock, but only for granted tool calls
// whose paths changed.
func (n *normalizer) recheckGranted(st *toolState, emit emitFunc) {
	if st.grantedIn == nil {
		return
	}
	paths, err := targetPaths(st.call)
	var unchecked []string
	for _, p := range paths {
		if !slices.Contains(st.checkedPaths, p) {
			unchecked = append(unchecked, p)
		}
	}
	st.checkedPaths = append(st.checkedPaths, unchecked...)
	reason := outsideReason(st.grantedIn, unchecked)
	if reason == "" && err != nil {
		reason = err.Error()
	}
	if reason == "" {
		return
	}
	n.log.Warn("a granted tool call names a path outside the workspace", "session_id", n.sessionID, "tool_id", st.call.ToolID, "reason", reason)
	e := presenters.ErrorPayload{
		Code: "policy_violation",
		Message: fmt.Sprintf("tool %s (%s, %q) was granted permission, then the agent named another target: %s; it may already have run",
			st.call.ToolName, st.call.ToolID, st.call.Title, reason),
	}
	if n.msg != nil {
		e.MessageID = n.msg.id
	}
	emit(e)
}

// merge applies the fields an update carries; ACP replaces collections whole.
func (n *normalizer) merge(call *presenters.ToolCall, u sdk.ToolCallUpdate) {
	if u.Title != nil {
		call.Title = *u.Title
	}
	if u.Kind != nil && *u.Kind != "" {
		call.Kind = presenters.ToolKind(*u.Kind)
	}
	if u.Status != nil && *u.Status != "" {
		call.Status = presenters.ToolStatus(*u.Status)
	}
	if u.Locations != nil {
		locs := make([]presenters.ToolLocation, 0, len(u.Locations))
		for _, l := range u.Locations {
			loc := presenters.ToolLocation{Path: l.Path}
			if l.Line != nil {
				loc.Line = *l.Line
			}
			locs = append(locs, loc)
		}
		call.Locations = locs
	}
	if u.RawInput != nil {
		call.Arguments = rawJSON(u.RawInput)
	}
	if u.RawOutput != nil {
		call.Result = rawJSON(u.RawOutput)
	}
	if u.Content != nil {
		content := make([]presenters.ToolContent, 0, len(u.Content))
		for _, c := range u.Content {
			if tc, ok := n.toolContent(c); ok {
				content = append(content, tc)
			}
		}
		call.Content = content
	}
	if name := toolName(u.Meta); name != "" {
		call.ToolName = name
	} else if call.ToolName == "" || call.ToolName == string(presenters.ToolOther) {
		call.ToolName = string(call.Kind)
	}
	if call.Kind == presenters.ToolExecute && n.classifier != nil {
		// Updates repeat the arguments; classifying reads the file system for the paths
		// a command names, so it runs again only when the command changed.
		if cmd := commandOf(call.Arguments); cmd != "" && (call.CommandInfo == nil || call.CommandInfo.Command != cmd) {
			info := n.classifier.Classify(cmd, n.workspace)
			call.CommandInfo = &info
		}
	}
	call.Error = ""
	if call.Status == presenters.ToolFailed {
		for _, c := range call.Content {
			if c.Text != "" {
				call.Error = c.Text
				break
			}
		}
		if call.Error == "" {
			call.Error = "the tool failed"
		}
	}
}

func (n *normalizer) toolContent(c sdk.ToolCallContent) (presenters.ToolContent, bool) {
	switch {
	case c.Content != nil:
		cb := c.Content.Content
		switch {
		case cb.Text != nil:
			return presenters.ToolContent{Text: cb.Text.Text}, true
		case cb.Image != nil:
			img := imageBlock(cb.Image)
			return presenters.ToolContent{Image: &img}, true
		case cb.ResourceLink != nil, cb.Resource != nil:
			r, _ := resourceBlock(cb)
			return presenters.ToolContent{Resource: &r}, true
		}
	case c.Diff != nil:
		return presenters.ToolContent{Diff: &presenters.DiffBlock{Path: c.Diff.Path, OldText: deref(c.Diff.OldText), NewText: c.Diff.NewText}}, true
	case c.Terminal != nil:
		tb := presenters.TerminalBlock{TerminalID: c.Terminal.TerminalId}
		if n.terminals != nil {
			if live, ok := n.terminals.terminalBlock(c.Terminal.TerminalId); ok {
				tb = live
			}
		}
		return presenters.ToolContent{Terminal: &tb}, true
	}
	return presenters.ToolContent{}, false
}

// denied records that a tool call's permission was denied (the call may not have
// been announced yet: some agents ask before their tool_call).
func (n *normalizer) denied(toolID, reason string) {
	if n.mode != modeTurn || toolID == "" {
		return
	}
	if n.deniedTools == nil {
		n.deniedTools = map[string]string{}
	}
	n.deniedTools[toolID] = reason
}

// endUnfinished ends every unfinished tool call of the turn: as failed when its
// permission was denied, as cancelled otherwise.
func (n *normalizer) endUnfinished(emit emitFunc) {
	if n.msg == nil {
		return
	}
	for _, st := range n.sortedTools() {
		if st.call.Status.Finished() {
			continue
		}
		if reason, ok := n.deniedTools[st.call.ToolID]; ok {
			st.call.Status = presenters.ToolFailed
			st.call.Error = "permission denied"
			if reason != "" {
				st.call.Error += ": " + reason
			}
		} else {
			st.call.Status = presenters.ToolCancelled
		}
		n.refreshToolTerminals(&st.call)
		n.track(st)
		n.msg.setTool(st.block, st.call)
		emit(presenters.ToolEndPayload{MessageID: n.msg.id, Tool: st.call})
		st.ended = true
	}
}

// sortedTools returns the tool states in message order.
func (n *normalizer) sortedTools() []*toolState {
	out := make([]*toolState, 0, len(n.tools))
	for _, st := range n.tools {
		out = append(out, st)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].block < out[j-1].block; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// toolNameMeta is the _meta key under which agentReader hands the normalizer a tool
// call's top-level name, a field the SDK's types do not have.
const toolNameMeta = "agenticd/name"

// toolName reads the tool's own name: the tool call's name, else where adapters put it
// before ACP had one (_meta.claudeCode.toolName, qwen's _meta.toolName, another
// vendor's _meta.*.toolName).
func toolName(meta map[string]any) string {
	if name, ok := meta[toolNameMeta].(string); ok && name != "" {
		return name
	}
	if cc, ok := meta["claudeCode"].(map[string]any); ok {
		if name, ok := cc["toolName"].(string); ok && name != "" {
			return name
		}
	}
	if name, ok := meta["toolName"].(string); ok && name != "" {
		return name
	}
	for _, v := range meta {
		if m, ok := v.(map[string]any); ok {
			if name, ok := m["toolName"].(string); ok && name != "" {
				return name
			}
		}
	}
	return ""
}

// commandOf reads the command line of an execute tool from its raw input: a string
// field, or an argv array (a `sh -c SCRIPT` wrapper is unwrapped to SCRIPT).
func commandOf(args json.RawMessage) string {
	if len(args) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return ""
	}
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		for _, key := range []string{"command", "cmd", "commandLine", "script"} {
			switch c := t[key].(type) {
			case string:
				return c
			case []any:
				return argvCommand(c)
			}
		}
	case []any:
		return argvCommand(t)
	}
	return ""
}

func argvCommand(argv []any) string {
	parts := make([]string, 0, len(argv))
	for _, a := range argv {
		s, ok := a.(string)
		if !ok {
			return ""
		}
		parts = append(parts, s)
	}
	if len(parts) == 3 && strings.HasSuffix(parts[0], "sh") && (parts[1] == "-c" || parts[1] == "-lc") {
		return parts[2]
	}
	return strings.Join(parts, " ")
}

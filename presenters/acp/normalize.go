package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// The normalizer maps one session's session/update notifications to presenters
// events and builds the messages they describe. It is not safe for concurrent use:
// its session's mutex guards it. It never blocks.

type normMode int

const (
	modeIdle   normMode = iota // no turn: message updates have nowhere to go
	modeTurn                   // a prompt runs: updates build its assistant message
	modeReplay                 // session/load streams history
)

// emitFunc publishes one payload of the normalizer's session.
type emitFunc func(presenters.Payload)

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
}

// sessionChange is what a session-level update changes; the session turns it into a
// SessionPatch (it alone knows the config options and current values).
type sessionChange struct {
	commands      *[]presenters.Command
	modeID        *string
	configOptions *[]sdk.SessionConfigOption
	title         *string
	updatedAt     *time.Time
	contextUsed   *int64
	contextSize   *int64
	cost          *sdk.Cost
}

type normalizer struct {
	log       *slog.Logger
	sessionID string
	workspace string
	// classify reads an execute tool's command (presenters/risk.Classify).
	classify func(command, workspace string) presenters.CommandInfo
	// terminal returns a terminal's current state for tool content that shows it.
	terminal func(id string) (presenters.TerminalBlock, bool)
	newID    func() string

	mode      normMode
	msg       *messageBuilder
	userMsgID string
	tools     map[string]*toolState
	// deniedTools maps the tool calls of this turn whose permission was denied to
	// why, so that a denied call the agent leaves unfinished ends as failed.
	deniedTools map[string]string
	// liveTerminals counts the tools whose liveTerminal is set: the session asks after
	// every update whether to follow terminals, which must not walk every tool.
	liveTerminals int

	replayed      int64  // replayed messages ended so far
	replayAgentID string // the agent's messageId of the replay message being built
	dropped       int    // message updates dropped since the last turn began
}

func (n *normalizer) startTurn(userMsgID, assistantMsgID string) {
	n.mode, n.dropped = modeTurn, 0
	n.userMsgID = userMsgID
	n.msg = newMessageBuilder(assistantMsgID, n.sessionID, presenters.RoleAssistant)
	n.resetTools()
}

// resetTools forgets the tool calls of the previous message.
func (n *normalizer) resetTools() {
	n.tools, n.liveTerminals, n.deniedTools = map[string]*toolState{}, 0, nil
}

// endTurn returns the turn's message builder and forgets the turn.
func (n *normalizer) endTurn() *messageBuilder {
	m := n.msg
	n.mode, n.msg, n.tools, n.userMsgID, n.liveTerminals, n.deniedTools = modeIdle, nil, nil, "", 0, nil
	return m
}

func (n *normalizer) startReplay() {
	n.mode = modeReplay
	n.msg, n.tools, n.liveTerminals, n.replayed, n.replayAgentID = nil, nil, 0, 0, ""
}

// endReplay closes the last replayed message and returns how many were replayed.
func (n *normalizer) endReplay(emit emitFunc) int64 {
	n.closeReplayMessage(emit)
	count := n.replayed
	n.mode, n.replayed = modeIdle, 0
	return count
}

func (n *normalizer) closeReplayMessage(emit emitFunc) {
	if n.msg == nil {
		return
	}
	end := presenters.MessageEndPayload{MessageID: n.msg.id, Role: n.msg.role}
	if n.msg.role == presenters.RoleAssistant {
		end.StopReason = presenters.StopEndTurn
	}
	emit(end)
	n.replayed++
	n.msg, n.tools, n.liveTerminals = nil, nil, 0
}

// replayMessage returns the replay message for role, starting a new one when the role
// or the agent's message id changes.
func (n *normalizer) replayMessage(role presenters.MessageRole, agentMsgID *string, emit emitFunc) *messageBuilder {
	id := ""
	if agentMsgID != nil {
		id = *agentMsgID
	}
	if n.msg != nil && n.msg.role == role && (id == "" || id == n.replayAgentID) {
		return n.msg
	}
	n.closeReplayMessage(emit)
	n.msg = newMessageBuilder(n.newID(), n.sessionID, role)
	n.resetTools()
	n.replayAgentID = id
	return n.msg
}

// target returns the message that updates of role go to, or nil when there is none.
func (n *normalizer) target(role presenters.MessageRole, agentMsgID *string, emit emitFunc) *messageBuilder {
	switch n.mode {
	case modeTurn:
		return n.msg
	case modeReplay:
		return n.replayMessage(role, agentMsgID, emit)
	}
	return nil
}

// apply normalizes one update. It returns the session-level change, if any.
func (n *normalizer) apply(u sdk.SessionUpdate, emit emitFunc) *sessionChange {
	switch {
	case u.UserMessageChunk != nil && u.UserMessageChunk.SessionUpdate == "user_message_chunk":
		c := u.UserMessageChunk
		if n.mode == modeTurn {
			// The user's message was stored and sent (with its MESSAGE_END) from
			// SendMessage; shown again, clients would show the prompt twice.
			n.log.Debug("dropping the agent's echo of the user's message", "session_id", n.sessionID, "message_id", n.userMsgID)
			return nil
		}
		n.content(presenters.RoleUser, c.MessageId, c.Content, false, emit)
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.SessionUpdate == "agent_message_chunk":
		c := u.AgentMessageChunk
		n.content(presenters.RoleAssistant, c.MessageId, c.Content, false, emit)
	case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.SessionUpdate == "agent_thought_chunk":
		c := u.AgentThoughtChunk
		n.content(presenters.RoleAssistant, c.MessageId, c.Content, true, emit)
	case u.ToolCall != nil && u.ToolCall.SessionUpdate == "tool_call":
		t := u.ToolCall
		n.tool(sdk.ToolCallUpdate{
			ToolCallId: t.ToolCallId, Title: &t.Title, Kind: nonEmpty(t.Kind), Status: nonEmpty(t.Status),
			Content: t.Content, Locations: t.Locations, RawInput: t.RawInput, RawOutput: t.RawOutput, Meta: t.Meta,
		}, emit)
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.SessionUpdate == "tool_call_update":
		t := u.ToolCallUpdate
		n.tool(sdk.ToolCallUpdate{
			ToolCallId: t.ToolCallId, Title: t.Title, Kind: t.Kind, Status: t.Status,
			Content: t.Content, Locations: t.Locations, RawInput: t.RawInput, RawOutput: t.RawOutput, Meta: t.Meta,
		}, emit)
	case u.Plan != nil && u.Plan.SessionUpdate == "plan":
		msg := n.target(presenters.RoleAssistant, nil, emit)
		if msg == nil {
			n.drop("plan")
			return nil
		}
		plan := presenters.PlanBlock{Entries: make([]presenters.PlanEntry, 0, len(u.Plan.Entries))}
		for _, e := range u.Plan.Entries {
			plan.Entries = append(plan.Entries, presenters.PlanEntry{Content: e.Content, Status: string(e.Status), Priority: string(e.Priority)})
		}
		msg.setPlan(plan)
		emit(presenters.MessageBlockPayload{MessageID: msg.id, Role: msg.role, Block: presenters.Block{Type: presenters.BlockPlan, Plan: &plan}})
	case u.AvailableCommandsUpdate != nil && u.AvailableCommandsUpdate.SessionUpdate == "available_commands_update":
		cmds := make([]presenters.Command, 0, len(u.AvailableCommandsUpdate.AvailableCommands))
		for _, c := range u.AvailableCommandsUpdate.AvailableCommands {
			cmd := presenters.Command{Name: c.Name, Description: c.Description}
			if c.Input != nil && c.Input.Unstructured != nil {
				cmd.InputHint = c.Input.Unstructured.Hint
			}
			cmds = append(cmds, cmd)
		}
		return &sessionChange{commands: &cmds}
	case u.CurrentModeUpdate != nil && u.CurrentModeUpdate.SessionUpdate == "current_mode_update":
		id := string(u.CurrentModeUpdate.CurrentModeId)
		return &sessionChange{modeID: &id}
	case u.ConfigOptionUpdate != nil && u.ConfigOptionUpdate.SessionUpdate == "config_option_update":
		opts := u.ConfigOptionUpdate.ConfigOptions
		return &sessionChange{configOptions: &opts}
	case u.SessionInfoUpdate != nil && u.SessionInfoUpdate.SessionUpdate == "session_info_update":
		ch := &sessionChange{}
		if t := u.SessionInfoUpdate.Title; t != nil {
			ch.title = t
		}
		if s := u.SessionInfoUpdate.UpdatedAt; s != nil {
			if at, err := time.Parse(time.RFC3339Nano, *s); err == nil {
				ch.updatedAt = &at
			}
		}
		return ch
	case u.UsageUpdate != nil && u.UsageUpdate.SessionUpdate == "usage_update":
		used, size := int64(u.UsageUpdate.Used), int64(u.UsageUpdate.Size)
		return &sessionChange{contextUsed: &used, contextSize: &size, cost: u.UsageUpdate.Cost}
	default:
		n.log.Info("skipping a session update of a kind this server does not know",
			"session_id", n.sessionID, "kind", updateKind(u))
	}
	return nil
}

// content handles a chunk of a user, agent or thought message.
func (n *normalizer) content(role presenters.MessageRole, agentMsgID *string, c sdk.ContentBlock, thought bool, emit emitFunc) {
	msg := n.target(role, agentMsgID, emit)
	if msg == nil {
		n.drop("message content")
		return
	}
	switch {
	case c.Text != nil:
		if c.Text.Text == "" {
			return // agents open with empty chunks
		}
		if thought {
			msg.appendText(presenters.BlockReasoning, c.Text.Text)
			emit(presenters.MessageBlockPayload{MessageID: msg.id, Role: role, Block: presenters.Block{Type: presenters.BlockReasoning, Text: c.Text.Text}})
			return
		}
		msg.appendText(presenters.BlockText, c.Text.Text)
		emit(presenters.MessageDeltaPayload{MessageID: msg.id, Text: c.Text.Text, Role: role})
	default:
		b, ok := contentBlock(c)
		if !ok {
			n.log.Info("skipping message content of a type this server does not carry", "session_id", n.sessionID)
			return
		}
		msg.appendBlock(b)
		emit(presenters.MessageBlockPayload{MessageID: msg.id, Role: role, Block: b})
	}
}

// drop logs an update that belongs to no turn (the agent answered its prompt, or the
// turn was given up): the first one, then every thousandth, not one line each.
func (n *normalizer) drop(what string) {
	n.dropped++
	if n.dropped == 1 || n.dropped%1000 == 0 {
		n.log.Warn("agent sent "+what+" outside a turn; dropped", "session_id", n.sessionID, "dropped_since_last_turn", n.dropped)
	}
}

// contentBlock converts non-text content to a block (audio has no block type).
func contentBlock(c sdk.ContentBlock) (presenters.Block, bool) {
	switch {
	case c.Text != nil:
		return presenters.Block{Type: presenters.BlockText, Text: c.Text.Text}, true
	case c.Image != nil:
		img := imageBlock(c.Image)
		return presenters.Block{Type: presenters.BlockImage, Image: &img}, true
	case c.ResourceLink != nil, c.Resource != nil:
		r, _ := resourceBlock(c)
		return presenters.Block{Type: presenters.BlockResource, Resource: &r}, true
	}
	return presenters.Block{}, false
}

func imageBlock(i *sdk.ContentBlockImage) presenters.ImageBlock {
	b := presenters.ImageBlock{MimeType: i.MimeType, Base64: i.Data}
	if i.Data == "" && i.Uri != nil {
		b.URL = *i.Uri
	}
	return b
}

func resourceBlock(c sdk.ContentBlock) (presenters.ResourceBlock, bool) {
	switch {
	case c.ResourceLink != nil:
		l := c.ResourceLink
		return presenters.ResourceBlock{URI: l.Uri, Name: l.Name, MimeType: deref(l.MimeType)}, true
	case c.Resource != nil && c.Resource.Resource.TextResourceContents != nil:
		t := c.Resource.Resource.TextResourceContents
		return presenters.ResourceBlock{URI: t.Uri, MimeType: deref(t.MimeType), Text: t.Text}, true
	case c.Resource != nil && c.Resource.Resource.BlobResourceContents != nil:
		b := c.Resource.Resource.BlobResourceContents
		return presenters.ResourceBlock{URI: b.Uri, MimeType: deref(b.MimeType), Blob: b.Blob}, true
	}
	return presenters.ResourceBlock{}, false
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
		emit(presenters.ToolStartPayload{MessageID: msg.id, Tool: liveView(st.call)})
		if finished {
			emit(presenters.ToolEndPayload{MessageID: msg.id, Tool: st.call})
			st.ended = true
		}
	case finished || st.ended:
		emit(presenters.ToolEndPayload{MessageID: msg.id, Tool: st.call})
		st.ended = true
	default:
		emit(presenters.ToolRunningPayload{MessageID: msg.id, Tool: liveView(st.call)})
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
	if call.Kind == presenters.ToolExecute && n.classify != nil {
		if cmd := commandOf(call.Arguments); cmd != "" {
			info := n.classify(cmd, n.workspace)
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
		if n.terminal != nil {
			if live, ok := n.terminal(c.Terminal.TerminalId); ok {
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
			emit(presenters.ToolRunningPayload{MessageID: n.msg.id, Tool: liveView(st.call)})
		}
	}
	return n.showsLiveTerminal()
}

// refreshToolTerminals replaces the terminal contents of call with their current
// state; it reports whether any changed.
func (n *normalizer) refreshToolTerminals(call *presenters.ToolCall) bool {
	if n.terminal == nil {
		return false
	}
	states := map[string]presenters.TerminalBlock{}
	for _, c := range call.Content {
		if c.Terminal != nil {
			if now, ok := n.terminal(c.Terminal.TerminalID); ok {
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

// updateKind is the sessionUpdate discriminator of whatever variant an update decoded to.
func updateKind(u sdk.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return u.UserMessageChunk.SessionUpdate
	case u.AgentMessageChunk != nil:
		return u.AgentMessageChunk.SessionUpdate
	case u.AgentThoughtChunk != nil:
		return u.AgentThoughtChunk.SessionUpdate
	case u.ToolCall != nil:
		return u.ToolCall.SessionUpdate
	case u.ToolCallUpdate != nil:
		return u.ToolCallUpdate.SessionUpdate
	case u.Plan != nil:
		return u.Plan.SessionUpdate
	case u.AvailableCommandsUpdate != nil:
		return u.AvailableCommandsUpdate.SessionUpdate
	case u.CurrentModeUpdate != nil:
		return u.CurrentModeUpdate.SessionUpdate
	case u.ConfigOptionUpdate != nil:
		return u.ConfigOptionUpdate.SessionUpdate
	case u.SessionInfoUpdate != nil:
		return u.SessionInfoUpdate.SessionUpdate
	case u.UsageUpdate != nil:
		return u.UsageUpdate.SessionUpdate
	}
	return ""
}

// toolName reads the tool's own name where adapters put it (_meta.claudeCode.toolName).
func toolName(meta map[string]any) string {
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

// rawJSON keeps an agent's raw value as JSON (object, array or plain string).
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nonEmpty[T ~string](v T) *T {
	if v == "" {
		return nil
	}
	return &v
}

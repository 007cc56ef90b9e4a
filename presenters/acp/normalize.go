package acp

import (
	"encoding/json"
	"log/slog"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// The normalizer maps one session's session/update notifications to presenters
// events and builds the messages they describe. It is not safe for concurrent use:
// its session's mutex guards it. It never blocks.
//
// Dependencies point one way: the session calls the normalizer, never the reverse.
// The normalizer is given what it reads as small interfaces implemented elsewhere
// (a command classifier, the session's terminal states), an id source, and an emit
// function bound to the session's event emitter; what it cannot decide alone (a
// session-level change, whether terminals need following) it returns or reports
// for the session to act on.

type normMode int

const (
	modeIdle   normMode = iota // no turn: message updates have nowhere to go
	modeTurn                   // a prompt runs: updates build its assistant message
	modeReplay                 // session/load streams history
)

// emitFunc publishes one payload of the normalizer's session.
type emitFunc func(presenters.Payload)

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
	// classifier rates execute tools' commands; nil leaves them unrated.
	classifier commandClassifier
	// terminals gives the current state of terminals that tool content shows; nil
	// shows them by id only.
	terminals terminalReader
	newID     func() string // ids of replayed messages

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
	// compactionSummaries gathers the summary chunks of compactions not yet reported.
	compactionSummaries map[string]string
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
		if c.Content.Text != nil && informationalNotice(c.Meta) {
			n.ext(extUpdate{Kind: updateNotice, Title: c.Content.Text.Text}, emit)
			return nil
		}
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

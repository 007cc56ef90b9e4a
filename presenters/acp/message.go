package acp

import (
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// messageBuilder accumulates one message's blocks as updates stream in. Text and
// reasoning chunks append to the last block of their kind as a list of the chunk
// strings, which the decoder has already allocated: a growing strings.Builder would
// copy a 20 MB reply about five times over while it grows (1.25x steps) and keep up to
// a quarter of it as slack. snapshot joins the list once and keeps the joined string
// as its first part, so the next snapshot copies the text once more, not every chunk.
// Tool and plan blocks are updated in place.
type messageBuilder struct {
	id        string
	sessionID string
	role      presenters.MessageRole
	createdAt time.Time

	blocks []presenters.Block
	texts  map[int][]string // block index -> text parts of a text/reasoning block
	plan   int              // index of the plan block, -1 when none
	dirty  bool             // changed since the last snapshot
}

func newMessageBuilder(id, sessionID string, role presenters.MessageRole) *messageBuilder {
	return &messageBuilder{id: id, sessionID: sessionID, role: role, createdAt: time.Now(),
		texts: map[int][]string{}, plan: -1}
}

// appendText adds a chunk to the last block if it is of the same type (text or
// reasoning), else starts a new block.
func (m *messageBuilder) appendText(t presenters.BlockType, chunk string) {
	m.dirty = true
	last := len(m.blocks) - 1
	if last >= 0 && m.blocks[last].Type == t {
		m.texts[last] = append(m.texts[last], chunk)
		return
	}
	m.blocks = append(m.blocks, presenters.Block{Type: t})
	m.texts[len(m.blocks)-1] = []string{chunk}
}

func (m *messageBuilder) appendBlock(b presenters.Block) int {
	m.dirty = true
	m.blocks = append(m.blocks, b)
	return len(m.blocks) - 1
}

// setTool replaces the tool block at i with a copy of call.
func (m *messageBuilder) setTool(i int, call presenters.ToolCall) {
	m.dirty = true
	c := call
	m.blocks[i] = presenters.Block{Type: presenters.BlockTool, Tool: &c}
}

// setPlan replaces the message's plan (ACP plans are sent whole each time).
func (m *messageBuilder) setPlan(p presenters.PlanBlock) {
	m.dirty = true
	b := presenters.Block{Type: presenters.BlockPlan, Plan: &p}
	if m.plan >= 0 {
		m.blocks[m.plan] = b
		return
	}
	m.plan = m.appendBlock(b)
}

// snapshot is the message as it stands; it shares nothing mutable with the builder
// (tool and plan blocks are replaced, never changed in place).
func (m *messageBuilder) snapshot(status presenters.MessageStatus) presenters.Message {
	blocks := make([]presenters.Block, len(m.blocks))
	copy(blocks, m.blocks)
	for i, parts := range m.texts {
		if len(parts) > 1 {
			parts = []string{strings.Join(parts, "")}
			m.texts[i] = parts
		}
		blocks[i].Text = parts[0]
	}
	return presenters.Message{ID: m.id, SessionID: m.sessionID, Role: m.role, Status: status,
		Blocks: blocks, CreatedAt: m.createdAt}
}

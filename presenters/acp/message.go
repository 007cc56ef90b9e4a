package acp

import (
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// messageBuilder accumulates one message's blocks as updates stream in. Text and
// reasoning chunks append to the last block of their kind (a strings.Builder, so a
// 100k-chunk message costs linear time); tool and plan blocks are updated in place.
type messageBuilder struct {
	id        string
	sessionID string
	role      presenters.MessageRole
	createdAt time.Time

	blocks []presenters.Block
	texts  map[int]*strings.Builder // block index -> text of a text/reasoning block
	plan   int                      // index of the plan block, -1 when none
	dirty  bool                     // changed since the last snapshot
}

func newMessageBuilder(id, sessionID string, role presenters.MessageRole) *messageBuilder {
	return &messageBuilder{id: id, sessionID: sessionID, role: role, createdAt: time.Now(),
		texts: map[int]*strings.Builder{}, plan: -1}
}

// appendText adds a chunk to the last block if it is of the same type (text or
// reasoning), else starts a new block.
func (m *messageBuilder) appendText(t presenters.BlockType, chunk string) {
	m.dirty = true
	last := len(m.blocks) - 1
	if last >= 0 && m.blocks[last].Type == t {
		m.texts[last].WriteString(chunk)
		return
	}
	sb := &strings.Builder{}
	sb.WriteString(chunk)
	m.blocks = append(m.blocks, presenters.Block{Type: t})
	m.texts[len(m.blocks)-1] = sb
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
	for i, sb := range m.texts {
		blocks[i].Text = sb.String()
	}
	return presenters.Message{ID: m.id, SessionID: m.sessionID, Role: m.role, Status: status,
		Blocks: blocks, CreatedAt: m.createdAt}
}

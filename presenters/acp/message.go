package acp

import (
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// messageBuilder accumulates one message's blocks as updates stream in. Text and
// reasoning chunks append to the last block of their kind as a list of the chunk
// strings, which the decoder has already allocated (a growing strings.Builder would copy
// a long reply several times over while it grows). The builder keeps only the text it has
// not handed to the store yet: update gives the store each text block's new chunks, joined,
// to append to what it holds, and forgets them. A long reply therefore costs memory for
// what arrived since the last checkpoint, not for the whole reply: the store, and the
// event log, hold the rest. Tool and plan blocks are updated in place.
type messageBuilder struct {
	id        string
	sessionID string
	role      presenters.MessageRole
	createdAt time.Time

	blocks []presenters.Block // a text or reasoning block's Text is kept empty: see texts
	texts  map[int][]string   // block index -> its chunks not handed to the store yet
	// handed is how many of blocks were in an update already: the store holds their text
	// up to texts, and the next update appends to it.
	handed  int
	unsaved int // bytes in texts
	plan    int // index of the plan block, -1 when none
	dirty   bool
}

func newMessageBuilder(id, sessionID string, role presenters.MessageRole) *messageBuilder {
	return &messageBuilder{id: id, sessionID: sessionID, role: role, createdAt: time.Now(),
		texts: map[int][]string{}, plan: -1}
}

// appendText adds a chunk to the last block if it is of the same type (text or
// reasoning), else starts a new block.
func (m *messageBuilder) appendText(t presenters.BlockType, chunk string) {
	m.dirty = true
	m.unsaved += len(chunk)
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

// update is the message as the store must take it now (store.UpdateMessages): every
// block, a text block already handed over carrying only its new text. The builder then
// forgets that text: the updates it returns must reach the store in order, every one.
// It shares nothing mutable with the builder (tool and plan blocks are replaced, never
// changed in place).
func (m *messageBuilder) update(status presenters.MessageStatus) store.MessageUpdate {
	blocks := make([]presenters.Block, len(m.blocks))
	copy(blocks, m.blocks)
	var appended []int
	for i := range blocks {
		if blocks[i].Type != presenters.BlockText && blocks[i].Type != presenters.BlockReasoning {
			continue
		}
		blocks[i].Text = strings.Join(m.texts[i], "")
		if i < m.handed {
			appended = append(appended, i)
		}
	}
	clear(m.texts)
	m.handed, m.unsaved, m.dirty = len(m.blocks), 0, false
	return store.MessageUpdate{Appended: appended, Message: presenters.Message{ID: m.id, SessionID: m.sessionID,
		Role: m.role, Status: status, Blocks: blocks, CreatedAt: m.createdAt}}
}

package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// ErrFenced is the error of a message write for a session whose lease names another
// replica: that replica took the session over, and what this one writes of it is stale.
var ErrFenced = errors.New("another replica took the session over")

// FenceMessages makes the store a replica's: from then on a write of a session's messages
// or conversation whose lease row names another replica fails with ErrFenced, as that
// replica's event log appends leave the session's events out (AppendFenced). Call it
// before any write.
func (s *Store) FenceMessages(replica string) {
	s.fence = replica
}

// SaveMessage upserts one whole message and its blocks in one transaction. The
// conversation must exist (presenters.ErrNotFound otherwise). A message keeps the place
// in its conversation it got when it was first saved.
func (s *Store) SaveMessage(ctx context.Context, m presenters.Message) error {
	return s.SaveMessages(ctx, m)
}

// SaveMessages upserts several whole messages in one transaction (all or none).
func (s *Store) SaveMessages(ctx context.Context, msgs ...presenters.Message) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	return s.writeMessages(ctx, wholeMessages(msgs), nil)
}

// SaveTurn writes the conversation (as UpdateConversation does) and upserts messages in
// one transaction, so a turn's end costs one commit.
func (s *Store) SaveTurn(ctx context.Context, c Conversation, msgs ...presenters.Message) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	return s.writeMessages(ctx, wholeMessages(msgs), func(tx *gorm.DB) error { return updateConversation(tx, c) })
}

// MessageUpdate is a save of a message that carries, for some of its text blocks, only
// the text they gained since the message was last saved: the block at each index in
// Appended (a text or reasoning block stored with that type) holds in its Text what
// follows its stored text, possibly nothing. Everything else is as SaveMessage takes it.
// A presenter writing a long reply so keeps only the text it has not saved yet, and a
// save writes only the last stored part of such a text and the new ones.
type MessageUpdate struct {
	presenters.Message
	Appended []int
	// Stamp, when set, is the message's stored updated_at after the save (Unix
	// nanoseconds) instead of the time of the save: a writer whose write failed without
	// knowing whether it committed (the connection lost the answer) reads it back
	// (MessageStamp) to learn whether it did, and does not append its text twice.
	Stamp int64
}

// UpdateMessages saves updates in order in one transaction (all or none); an update
// without Appended is a whole save, as SaveMessage.
func (s *Store) UpdateMessages(ctx context.Context, updates ...MessageUpdate) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	return s.writeMessages(ctx, updates, nil)
}

func wholeMessages(msgs []presenters.Message) []MessageUpdate {
	updates := make([]MessageUpdate, len(msgs))
	for i, m := range msgs {
		updates[i] = MessageUpdate{Message: m}
	}
	return updates
}

// writeMessages runs first (if any) and saves updates in one transaction, then records
// what was committed.
func (s *Store) writeMessages(ctx context.Context, updates []MessageUpdate, first func(tx *gorm.DB) error) error {
	defer s.observeWrite("messages", time.Now())
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	saved := make(map[string][]storedRow, len(updates)) // what this transaction wrote, by message
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.checkFence(tx, updates); err != nil {
			return err
		}
		if first != nil {
			if err := first(tx); err != nil {
				return err
			}
		}
		for _, u := range updates {
			prev, ok := saved[u.ID]
			if !ok {
				prev = s.committed[u.ID]
			}
			rows, err := saveMessage(tx, u, prev)
			if err != nil {
				return err
			}
			saved[u.ID] = rows
		}
		return nil
	})
	for _, u := range updates { // the last save of a message decides
		if err == nil && u.Status == StatusInProgress {
			s.committed[u.ID] = saved[u.ID]
		} else {
			delete(s.committed, u.ID)
		}
	}
	return err
}

// checkFence fails with ErrFenced when a session of updates is leased by another
// replica than the store's fence. It locks the sessions' lease rows until tx ends, so a
// take-over, which must update them, comes after the write: the replica taking over then
// reads what it wrote (and marks it interrupted), never the other way round.
func (s *Store) checkFence(tx *gorm.DB, updates []MessageUpdate) error {
	var ids []string
	for _, u := range updates {
		if !slices.Contains(ids, u.SessionID) {
			ids = append(ids, u.SessionID)
		}
	}
	return s.checkFenceOf(tx, ids)
}

// checkFenceOf is checkFence for the sessions ids.
func (s *Store) checkFenceOf(tx *gorm.DB, ids []string) error {
	if s.fence == "" || s.dialect != postgresDialect || len(ids) == 0 {
		return nil
	}
	var leases []struct{ SessionID, Replica string }
	if err := tx.Raw(`SELECT session_id, replica FROM session_leases WHERE session_id IN ? ORDER BY session_id FOR SHARE`, ids).
		Scan(&leases).Error; err != nil {
		return fmt.Errorf("check the sessions' leases: %w", err)
	}
	for _, l := range leases {
		if l.Replica != s.fence {
			return fmt.Errorf("session %s: %w (replica %s)", l.SessionID, ErrFenced, l.Replica)
		}
	}
	return nil
}

// saveMessage upserts u and its blocks. prev is what is stored of its blocks when known
// (nil: unknown; a whole save rewrites them all, an update reads them first); it returns
// the rows as stored now.
func saveMessage(tx *gorm.DB, u MessageUpdate, prev []storedRow) ([]storedRow, error) {
	m := u.Message
	if m.ID == "" || m.SessionID == "" || m.Role == "" || m.Status == "" {
		return nil, fmt.Errorf("save message %q: id, session id, role and status are required: %w", m.ID, presenters.ErrInvalidArgument)
	}
	rows := make([]blockRow, len(m.Blocks))
	for i, b := range m.Blocks {
		row, err := encodeBlock(m.ID, i, b)
		if err != nil {
			return nil, fmt.Errorf("save message %s: %w", m.ID, err)
		}
		rows[i] = row
	}
	appended := make([]bool, len(rows))
	for _, i := range u.Appended {
		if i < 0 || i >= len(rows) {
			return nil, fmt.Errorf("save message %s: appended block %d: it has blocks 0 to %d: %w", m.ID, i, len(rows)-1, presenters.ErrInvalidArgument)
		}
		appended[i] = true
	}
	if prev == nil && len(u.Appended) > 0 {
		var err error
		if prev, err = readStoredRows(tx, m.ID); err != nil {
			return nil, fmt.Errorf("save message %s: read its stored blocks: %w", m.ID, err)
		}
	}
	var usage *string
	if m.Usage != nil {
		u, err := encodeUsage(*m.Usage)
		if err != nil {
			return nil, fmt.Errorf("save message %s: usage: %w", m.ID, err)
		}
		usage = &u
	}
	now := time.Now()
	created := m.CreatedAt
	if created.IsZero() {
		created = now
	}
	res := tx.Exec(`INSERT INTO messages (id, conversation_id, role, status, stop_reason, usage, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET role = excluded.role, status = excluded.status,
			stop_reason = excluded.stop_reason, usage = excluded.usage, updated_at = excluded.updated_at
		WHERE messages.conversation_id = excluded.conversation_id`,
		m.ID, m.SessionID, string(m.Role), string(m.Status), string(m.StopReason), usage,
		created.UnixNano(), cmp.Or(u.Stamp, now.UnixNano()))
	if isMissingReference(res.Error) {
		return nil, fmt.Errorf("save message %s: session %s: %w", m.ID, m.SessionID, presenters.ErrNotFound)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("save message %s: %w", m.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, presenters.WithDetail(fmt.Errorf("save message %s: it belongs to another session than %s: %w", m.ID, m.SessionID, presenters.ErrMessageIDInUse), "message_id", m.ID)
	}
	w, stored, err := planBlockWrites(rows, appended, prev)
	if err != nil {
		return nil, fmt.Errorf("save message %s: %w", m.ID, err)
	}
	if prev == nil {
		// Deleting a block deletes its text's parts (foreign key cascade).
		if err := tx.Exec(`DELETE FROM blocks WHERE message_id = ?`, m.ID).Error; err != nil {
			return nil, fmt.Errorf("save message %s: %w", m.ID, err)
		}
	} else if len(prev) > len(rows) {
		if err := tx.Exec(`DELETE FROM blocks WHERE message_id = ? AND position >= ?`, m.ID, len(rows)).Error; err != nil {
			return nil, fmt.Errorf("save message %s: %w", m.ID, err)
		}
	}
	if err := writeBlocks(tx, m.ID, w); err != nil {
		return nil, fmt.Errorf("save message %s: blocks: %w", m.ID, err)
	}
	touch := `UPDATE conversations SET updated_at = ` + dialectOf(tx).greatest() + `(updated_at, ?) WHERE id = ?`
	if err := tx.Exec(touch, now.UnixNano(), m.SessionID).Error; err != nil {
		return nil, fmt.Errorf("save message %s: %w", m.ID, err)
	}
	return stored, nil
}

// readStoredRows reads a message's block rows as committed, each text known by its count
// of parts and its last part.
func readStoredRows(tx *gorm.DB, messageID string) ([]storedRow, error) {
	var heads []struct {
		Position, TextParts                      int
		Type, Text, ToolID, ToolName, ToolStatus string
		RawArguments, RawResult                  []byte
		Payload                                  string
	}
	err := tx.Raw(`SELECT position, text_parts, type, text, tool_id, tool_name, tool_status, raw_arguments, raw_result, payload
		FROM blocks WHERE message_id = ? ORDER BY position`, messageID).Scan(&heads).Error
	if err != nil {
		return nil, err
	}
	out := make([]storedRow, 0, len(heads))
	for i, h := range heads {
		if h.Position != i {
			return nil, fmt.Errorf("message %s lacks its block %d: the history database is damaged; restore it from a backup", messageID, i)
		}
		r := storedRow{row: blockRow{MessageID: messageID, Position: i, Type: h.Type, Text: h.Text, ToolID: h.ToolID,
			ToolName: h.ToolName, ToolStatus: h.ToolStatus, RawArguments: h.RawArguments, RawResult: h.RawResult, Payload: h.Payload}}
		if h.TextParts > 0 {
			var last []string
			if err := tx.Raw(`SELECT text FROM block_text_parts WHERE message_id = ? AND position = ? AND part = ?`,
				messageID, i, h.TextParts).Scan(&last).Error; err != nil {
				return nil, err
			}
			if len(last) != 1 {
				return nil, fmt.Errorf("stored text of block %d of message %s lacks its part %d: the history database is damaged; restore it from a backup",
					i, messageID, h.TextParts)
			}
			r.tailOnly, r.parts, r.row.Text = true, h.TextParts+1, last[0]
		}
		out = append(out, r)
	}
	return out, nil
}

// writeBlocks makes the writes of one message's blocks; the blocks rows go before the
// text parts, which refer to them.
func writeBlocks(tx *gorm.DB, messageID string, w blockWrites) error {
	for _, t := range w.trims {
		if err := tx.Exec(`DELETE FROM block_text_parts WHERE message_id = ? AND position = ? AND part >= ?`,
			messageID, t.Position, t.Keep).Error; err != nil {
			return err
		}
	}
	for _, c := range w.counts {
		if err := tx.Exec(`UPDATE blocks SET text_parts = ? WHERE message_id = ? AND position = ?`,
			c.TextParts, messageID, c.Position).Error; err != nil {
			return err
		}
	}
	for batch := range statements(w.heads, blockHead.size) {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO blocks (message_id, position, type, text, text_parts, tool_id, tool_name, tool_status, raw_arguments, raw_result, payload) VALUES `)
		args := make([]any, 0, len(batch)*11)
		for i, h := range batch {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, CAST(? AS TEXT), ?, ?, ?, ?, ?, ?, CAST(? AS TEXT))")
			r := h.row
			args = append(args, r.MessageID, r.Position, r.Type, textArg(h.text), h.textParts, r.ToolID, r.ToolName, r.ToolStatus,
				nilIfEmpty(r.RawArguments), nilIfEmpty(r.RawResult), textArg(r.Payload))
		}
		sb.WriteString(` ON CONFLICT (message_id, position) DO UPDATE SET type = excluded.type, text = excluded.text,
			text_parts = excluded.text_parts, tool_id = excluded.tool_id, tool_name = excluded.tool_name,
			tool_status = excluded.tool_status, raw_arguments = excluded.raw_arguments,
			raw_result = excluded.raw_result, payload = excluded.payload`)
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			return err
		}
	}
	for batch := range statements(w.parts, textPart.size) {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO block_text_parts (message_id, position, part, text) VALUES `)
		args := make([]any, 0, len(batch)*4)
		for i, p := range batch {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, CAST(? AS TEXT))")
			args = append(args, p.MessageID, p.Position, p.Part, textArg(p.Text))
		}
		sb.WriteString(` ON CONFLICT (message_id, position, part) DO UPDATE SET text = excluded.text`)
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// nilIfEmpty stores an absent raw value as NULL rather than an empty blob.
func nilIfEmpty(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Messages returns the messages of a conversation that q selects, oldest first.
// presenters.ErrNotFound for an unknown session, or an after- or before-message the
// session does not hold.
func (s *Store) Messages(ctx context.Context, sessionID string, q presenters.MessageQuery) (_ []presenters.Message, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var limit any = q.Limit
	if q.Limit <= 0 {
		limit = s.dialect.noLimit()
	}
	// One statement, so the page is one consistent snapshot even while a turn writes: a
	// text's parts are read with its block. Each block row (part 0) is followed by the
	// rows of its text's further parts. The range is picked from the end the limit keeps
	// (messages_by_conversation serves both directions).
	query := `WITH m AS MATERIALIZED (SELECT seq, id, role, status, stop_reason, usage, created_at,
				COALESCE((SELECT principal FROM message_senders WHERE message_id = messages.id), '') AS sender
			FROM messages WHERE conversation_id = ? %s ORDER BY seq %s LIMIT ?)
		SELECT m.seq AS seq, m.id, m.role, m.status, m.stop_reason, m.usage, m.created_at, m.sender,
			b.position AS position, 0 AS part, b.type, b.text, b.text_parts, b.tool_id, b.tool_name, b.tool_status,
			b.raw_arguments, b.raw_result, b.payload
		FROM m LEFT JOIN blocks AS b ON b.message_id = m.id
		UNION ALL
		SELECT m.seq, m.id, m.role, m.status, m.stop_reason, m.usage, m.created_at, m.sender,
			p.position, p.part, NULL, p.text, NULL, NULL, NULL, NULL, NULL, NULL, NULL
		FROM m JOIN block_text_parts AS p ON p.message_id = m.id
		ORDER BY seq, position, part`
	args := []any{sessionID}
	var where strings.Builder
	// A bound the session does not hold compares with NULL and selects nothing;
	// explainEmpty then says which.
	if q.AfterMessageID != "" {
		where.WriteString(` AND seq > (SELECT seq FROM messages WHERE id = ? AND conversation_id = ?)`)
		args = append(args, q.AfterMessageID, sessionID)
	}
	if q.BeforeMessageID != "" {
		where.WriteString(` AND seq < (SELECT seq FROM messages WHERE id = ? AND conversation_id = ?)`)
		args = append(args, q.BeforeMessageID, sessionID)
	}
	if q.MessageID != "" {
		where.WriteString(` AND id = ?`)
		args = append(args, q.MessageID)
	}
	direction := "DESC"
	if q.FromOldest {
		direction = "ASC"
	}
	args = append(args, limit)
	rows, err := s.db.WithContext(ctx).Raw(fmt.Sprintf(query, where.String(), direction), args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("read messages of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []presenters.Message
	var lastSeq int64 = -1
	var long longText
	for rows.Next() {
		var (
			seq, part                            int64
			id, role, status, stopReason, sender string
			usage                                sql.NullString
			created                              int64
			position, textParts                  sql.NullInt64
			typ, text, toolID, toolName          sql.NullString
			toolStatus, payload                  sql.NullString
			rawArguments, rawResult              []byte
		)
		if err := rows.Scan(&seq, &id, &role, &status, &stopReason, &usage, &created, &sender,
			&position, &part, &typ, &text, &textParts, &toolID, &toolName, &toolStatus, &rawArguments, &rawResult, &payload); err != nil {
			return nil, fmt.Errorf("read messages of session %s: %w", sessionID, err)
		}
		if part > 0 {
			long.add(seq, int(position.Int64), int(part), text.String)
			continue
		}
		if err := long.finish(); err != nil {
			return nil, err
		}
		if seq != lastSeq {
			m := presenters.Message{
				ID: id, SessionID: sessionID, Role: presenters.MessageRole(role),
				Status: presenters.MessageStatus(status), StopReason: presenters.StopReason(stopReason),
				CreatedAt: time.Unix(0, created), Sender: sender,
			}
			if m.Status == StatusInProgress {
				m.Status = presenters.MessageIncomplete
			}
			if usage.Valid {
				if m.Usage, err = decodeUsage(id, usage.String); err != nil {
					return nil, err
				}
			}
			out = append(out, m)
			lastSeq = seq
		}
		if !position.Valid {
			continue // a message without blocks
		}
		b, err := decodeBlock(blockRow{
			MessageID: id, Position: int(position.Int64), Type: typ.String, Text: text.String,
			ToolID: toolID.String, ToolName: toolName.String, ToolStatus: toolStatus.String,
			RawArguments: rawArguments, RawResult: rawResult, Payload: payload.String,
		})
		if err != nil {
			return nil, err
		}
		m := &out[len(out)-1]
		m.Blocks = append(m.Blocks, b)
		if textParts.Int64 > 0 {
			long.start(&m.Blocks[len(m.Blocks)-1], id, seq, int(position.Int64), int(textParts.Int64))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read messages of session %s: %w", sessionID, err)
	}
	if err := long.finish(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		if err := s.explainEmpty(ctx, sessionID, q.AfterMessageID, q.BeforeMessageID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// explainEmpty tells an empty page from an unknown session or bounding message.
func (s *Store) explainEmpty(ctx context.Context, sessionID string, bounds ...string) error {
	if _, err := s.GetConversation(ctx, sessionID); err != nil {
		return err
	}
	for _, id := range bounds {
		if id == "" {
			continue
		}
		var n int64
		if err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM messages WHERE id = ? AND conversation_id = ?`, id, sessionID).Scan(&n).Error; err != nil {
			return fmt.Errorf("read messages of session %s: %w", sessionID, err)
		}
		if n == 0 {
			return fmt.Errorf("message %s in session %s: %w", id, sessionID, presenters.ErrNotFound)
		}
	}
	return nil
}

// CountMessages returns how many messages a conversation holds (0 for an unknown one).
func (s *Store) CountMessages(ctx context.Context, sessionID string) (_ int64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var n int64
	if err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM messages WHERE conversation_id = ?`, sessionID).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count messages of session %s: %w", sessionID, err)
	}
	return n, nil
}

// MessageStamp returns the stored updated_at of a message (Unix nanoseconds), which a
// save with a MessageUpdate.Stamp sets to that stamp; 0 when the message is not stored.
func (s *Store) MessageStamp(ctx context.Context, messageID string) (_ int64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var stamps []int64
	if err := s.db.WithContext(ctx).Raw(`SELECT updated_at FROM messages WHERE id = ?`, messageID).Scan(&stamps).Error; err != nil {
		return 0, fmt.Errorf("read the stamp of message %s: %w", messageID, err)
	}
	if len(stamps) == 0 {
		return 0, nil
	}
	return stamps[0], nil
}

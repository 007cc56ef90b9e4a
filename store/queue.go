package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// contentJSON is the stored form of a message's content; its field names are the stored
// format's, independent of the Go types'.
type contentJSON struct {
	Parts []contentPartJSON `json:"parts"`
}

type contentPartJSON struct {
	Text     string               `json:"text,omitempty"`
	Image    *presenters.Image    `json:"image,omitempty"`
	File     *presenters.File     `json:"file,omitempty"`
	Resource *presenters.Resource `json:"resource,omitempty"`
}

// ErrQueuedIDTaken is a queued message whose ids another queued message has.
var ErrQueuedIDTaken = fmt.Errorf("queued message id taken: %w", presenters.ErrMessageIDInUse)

// QueueMessage appends a message to its session's queue.
func (s *Store) QueueMessage(ctx context.Context, m presenters.QueuedMessage) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	parts := make([]contentPartJSON, len(m.Content.Parts))
	for i, p := range m.Content.Parts {
		parts[i] = contentPartJSON(p)
	}
	content, err := json.Marshal(contentJSON{Parts: parts})
	if err != nil {
		return fmt.Errorf("encode the queued message %s: %w", m.MessageID, err)
	}
	err = s.write(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Raw(`SELECT COUNT(*) FROM queued_messages WHERE message_id IN (?, ?) OR user_message_id IN (?, ?)`,
			m.MessageID, m.UserMessageID, m.MessageID, m.UserMessageID).Scan(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return ErrQueuedIDTaken
		}
		return tx.Exec(`INSERT INTO queued_messages (session_id, message_id, user_message_id, content, reason, queued_at, principal) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			m.SessionID, m.MessageID, m.UserMessageID, string(content), m.Reason, m.QueuedAt.UnixNano(), m.Principal).Error
	})
	if errors.Is(err, ErrQueuedIDTaken) {
		return fmt.Errorf("message id %s or %s is already queued: %w", m.MessageID, m.UserMessageID, err)
	}
	if err != nil {
		return fmt.Errorf("queue message %s of session %s: %w", m.MessageID, m.SessionID, err)
	}
	return nil
}

const queuedMessagesSQL = `SELECT session_id, message_id, user_message_id, content, reason, queued_at, principal
		FROM queued_messages WHERE session_id = ? ORDER BY position`

// QueuedMessages lists a session's queue, oldest first.
func (s *Store) QueuedMessages(ctx context.Context, sessionID string) (_ []presenters.QueuedMessage, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	rows, err := s.queuedMessagesStmt.QueryContext(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read the queue of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []presenters.QueuedMessage
	for rows.Next() {
		var (
			m       presenters.QueuedMessage
			content string
			at      int64
		)
		if err := rows.Scan(&m.SessionID, &m.MessageID, &m.UserMessageID, &content, &m.Reason, &at, &m.Principal); err != nil {
			return nil, fmt.Errorf("read the queue of session %s: %w", sessionID, err)
		}
		var c contentJSON
		if err := json.Unmarshal([]byte(content), &c); err != nil {
			return nil, fmt.Errorf("decode queued message %s: %w", m.MessageID, err)
		}
		for _, p := range c.Parts {
			m.Content.Parts = append(m.Content.Parts, presenters.ContentPart(p))
		}
		m.QueuedAt = time.Unix(0, at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the queue of session %s: %w", sessionID, err)
	}
	return out, nil
}

// QueuedSessions lists the sessions with queued messages.
func (s *Store) QueuedSessions(ctx context.Context) (_ []string, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var ids []string
	if err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT session_id FROM queued_messages ORDER BY session_id`).Scan(&ids).Error; err != nil {
		return nil, fmt.Errorf("list the sessions with queued messages: %w", err)
	}
	return ids, nil
}

// RemoveQueuedMessage takes a message out of its session's queue; id is its message_id
// or user_message_id. It reports whether the message was queued.
func (s *Store) RemoveQueuedMessage(ctx context.Context, sessionID, id string) (_ bool, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var removed int64
	err = s.write(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`DELETE FROM queued_messages WHERE session_id = ? AND (message_id = ? OR user_message_id = ?)`, sessionID, id, id)
		removed = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("remove queued message %s of session %s: %w", id, sessionID, err)
	}
	return removed > 0, nil
}

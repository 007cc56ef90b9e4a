package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// InterruptedMessage is a message MarkInterrupted found still in progress.
type InterruptedMessage struct {
	SessionID string
	MessageID string
	// AgentID is the agent of the message's conversation ("" when none is stored).
	AgentID string
}

// MarkInterrupted turns every message still in progress (left by a crash) into an
// incomplete one, and its unfinished tool calls into cancelled ones. Call it at
// start-up, before any turn runs. It returns the messages it changed, oldest first.
func (s *Store) MarkInterrupted(ctx context.Context) (_ []InterruptedMessage, err error) {
	ctx, done := s.longCall(ctx)
	defer done(&err)
	return s.markInterrupted(ctx, "")
}

// MarkSessionInterrupted is MarkInterrupted for one session: for a replica that takes
// over a session whose owner died, while other replicas' turns run on.
func (s *Store) MarkSessionInterrupted(ctx context.Context, sessionID string) (_ []InterruptedMessage, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if sessionID == "" {
		return nil, errors.New("mark a session's interrupted messages: empty session id")
	}
	return s.markInterrupted(ctx, sessionID)
}

// markInterrupted marks the messages in progress of one session, or of all ("").
func (s *Store) markInterrupted(ctx context.Context, sessionID string) ([]InterruptedMessage, error) {
	var marked []InterruptedMessage
	// inSession limits each statement to the session; "" matches every one.
	const inSession = ` AND (? = '' OR conversation_id = ?)`
	err := s.write(ctx, func(tx *gorm.DB) error {
		rows, err := tx.Raw(`SELECT m.conversation_id, m.id, COALESCE(c.agent_id, '') FROM messages m
			LEFT JOIN conversations c ON c.id = m.conversation_id
			WHERE m.status = ? AND (? = '' OR m.conversation_id = ?) ORDER BY m.seq`,
			string(StatusInProgress), sessionID, sessionID).Rows()
		if err != nil {
			return err
		}
		for rows.Next() {
			var m InterruptedMessage
			if err := rows.Scan(&m.SessionID, &m.MessageID, &m.AgentID); err != nil {
				_ = rows.Close()
				return err
			}
			marked = append(marked, m)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		// The rows it changes are no longer what was committed; other messages' are.
		for _, m := range marked {
			delete(s.committed, m.MessageID)
		}
		if len(marked) == 0 {
			return nil
		}
		err = tx.Exec(`UPDATE blocks SET tool_status = ?
			WHERE type = ? AND tool_status IN (?, ?)
			AND message_id IN (SELECT id FROM messages WHERE status = ?`+inSession+`)`,
			string(presenters.ToolCancelled), string(presenters.BlockTool),
			string(presenters.ToolPending), string(presenters.ToolInProgress), string(StatusInProgress), sessionID, sessionID).Error
		if err != nil {
			return err
		}
		return tx.Exec(`UPDATE messages SET status = ?, updated_at = ? WHERE status = ?`+inSession,
			string(presenters.MessageIncomplete), time.Now().UnixNano(), string(StatusInProgress), sessionID, sessionID).Error
	})
	if err != nil {
		return nil, fmt.Errorf("mark interrupted messages: %w", err)
	}
	return marked, nil
}

// UnendedMessages returns up to limit of the session's newest assistant messages, oldest
// first, that are stored finished while the event log holds events of theirs but not
// their MESSAGE_END: a replica stored the turn's end and lost the session before the
// event announcing it reached the log. Its subscribers never saw the turn end.
func (s *Store) UnendedMessages(ctx context.Context, sessionID string, limit int) (_ []InterruptedMessage, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var ids []string
	err = s.db.WithContext(ctx).Raw(`SELECT id FROM (SELECT m.id, m.seq FROM messages m
		WHERE m.conversation_id = ? AND m.role = ? AND m.status NOT IN (?, ?)
		AND EXISTS (SELECT 1 FROM event_log e WHERE e.session_id = m.conversation_id AND e.message_id = m.id)
		AND NOT EXISTS (SELECT 1 FROM event_log e WHERE e.session_id = m.conversation_id AND e.message_id = m.id AND e.type = ?)
		ORDER BY m.seq DESC LIMIT ?) AS newest ORDER BY seq`,
		sessionID, string(presenters.RoleAssistant), string(StatusInProgress), string(presenters.MessageIncomplete),
		int(presenters.EventMessageEnd), limit).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("find the unended messages of session %s: %w", sessionID, err)
	}
	out := make([]InterruptedMessage, len(ids))
	for i, id := range ids {
		out[i] = InterruptedMessage{SessionID: sessionID, MessageID: id}
	}
	return out, nil
}

// MarkMessagesInterrupted makes the session's messages incomplete, whatever their status,
// and their unfinished tool calls cancelled (as MarkInterrupted does for messages in
// progress): for UnendedMessages, whose stored end no subscriber saw.
func (s *Store) MarkMessagesInterrupted(ctx context.Context, sessionID string, msgs []InterruptedMessage) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MessageID
	}
	err = s.write(ctx, func(tx *gorm.DB) error {
		for _, id := range ids {
			delete(s.committed, id)
		}
		err := tx.Exec(`UPDATE blocks SET tool_status = ? WHERE type = ? AND tool_status IN (?, ?) AND message_id IN ?`,
			string(presenters.ToolCancelled), string(presenters.BlockTool), string(presenters.ToolPending), string(presenters.ToolInProgress), ids).Error
		if err != nil {
			return err
		}
		return tx.Exec(`UPDATE messages SET status = ?, stop_reason = ?, updated_at = ? WHERE conversation_id = ? AND id IN ?`,
			string(presenters.MessageIncomplete), string(presenters.StopError), time.Now().UnixNano(), sessionID, ids).Error
	})
	if err != nil {
		return fmt.Errorf("mark the interrupted messages of session %s: %w", sessionID, err)
	}
	return nil
}

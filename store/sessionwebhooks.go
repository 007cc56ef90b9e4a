package store

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"
)

// SessionWebhook is a session's own webhook (CreateSession's config.webhook), kept so
// that it outlives a restart and reaches the replica that takes the session over. It
// lasts until the session is closed or deleted.
type SessionWebhook struct {
	SessionID string
	URL       string
	// Events are the kinds of notice it is told of (the webhooks package's names); none
	// for all.
	Events []string
}

// SaveSessionWebhook stores a session's webhook, replacing the one stored for it.
func (s *Store) SaveSessionWebhook(ctx context.Context, h SessionWebhook) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	events, err := json.Marshal(nonNil(h.Events))
	if err != nil {
		return fmt.Errorf("encode the webhook events of session %s: %w", h.SessionID, err)
	}
	err = s.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO session_webhooks (session_id, url, events) VALUES (?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET url = excluded.url, events = excluded.events`,
			h.SessionID, h.URL, string(events)).Error
	})
	if err != nil {
		return fmt.Errorf("store the webhook of session %s: %w", h.SessionID, err)
	}
	return nil
}

// SessionWebhooks returns the stored webhooks of the sessions named, or of every session
// when none is named.
func (s *Store) SessionWebhooks(ctx context.Context, sessionIDs ...string) (_ []SessionWebhook, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	q := s.db.WithContext(ctx).Table("session_webhooks").Select("session_id, url, events").Order("session_id")
	if len(sessionIDs) > 0 {
		q = q.Where("session_id IN ?", sessionIDs)
	}
	var rows []struct {
		SessionID, URL, Events string
	}
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read sessions' webhooks: %w", err)
	}
	out := make([]SessionWebhook, len(rows))
	for i, r := range rows {
		out[i] = SessionWebhook{SessionID: r.SessionID, URL: r.URL}
		if err := json.Unmarshal([]byte(r.Events), &out[i].Events); err != nil {
			return nil, fmt.Errorf("decode the webhook events of session %s: %w", r.SessionID, err)
		}
	}
	return out, nil
}

// DeleteSessionWebhook forgets a session's webhook (its session was closed); deleting
// one that is not stored is no error.
func (s *Store) DeleteSessionWebhook(ctx context.Context, sessionID string) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	err = s.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`DELETE FROM session_webhooks WHERE session_id = ?`, sessionID).Error
	})
	if err != nil {
		return fmt.Errorf("forget the webhook of session %s: %w", sessionID, err)
	}
	return nil
}

package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// DeleteSession removes everything stored of a session in one transaction: its
// conversation (with its messages, blocks and text parts), its events in the event log,
// its setup and webhook, its queued messages, its messages' senders, its owner record
// and ACL, and its lease. Deleting a session that has none of them is no error. Its
// stored message ids are free again afterwards (an id a check let through in the last
// minutes stays claimed until its claim expires).
func (s *Store) DeleteSession(ctx context.Context, sessionID string) (err error) {
	ctx, done := s.longCall(ctx)
	defer done(&err)
	err = s.write(ctx, func(tx *gorm.DB) error {
		for _, stmt := range []string{
			`DELETE FROM conversations WHERE id = ?`,
			`DELETE FROM event_log WHERE session_id = ?`,
			`DELETE FROM session_setups WHERE session_id = ?`,
			`DELETE FROM session_webhooks WHERE session_id = ?`,
			`DELETE FROM queued_messages WHERE session_id = ?`,
			`DELETE FROM message_senders WHERE session_id = ?`,
			`DELETE FROM session_owners WHERE session_id = ?`,
			`DELETE FROM session_grants WHERE session_id = ?`,
			`DELETE FROM session_leases WHERE session_id = ?`,
		} {
			if err := tx.Exec(stmt, sessionID).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", sessionID, err)
	}
	return nil
}

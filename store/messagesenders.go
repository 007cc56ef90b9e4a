package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// ClaimMessageSender records who sends the user message messageID of a session, before
// its turn starts, so that the message names its sender as soon as it is stored (Messages
// reads it as Message.Sender). The first claim of an id stands: claimed is false when
// the id was claimed already.
func (s *Store) ClaimMessageSender(ctx context.Context, sessionID, messageID, principal string) (claimed bool, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	err = s.write(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`INSERT INTO message_senders (message_id, session_id, principal) VALUES (?, ?, ?) ON CONFLICT (message_id) DO NOTHING`,
			messageID, sessionID, principal)
		claimed = res.RowsAffected == 1
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("record the sender of message %s: %w", messageID, err)
	}
	return claimed, nil
}

// ReleaseMessageSender takes back a claim (one ClaimMessageSender made) whose message did
// not start.
func (s *Store) ReleaseMessageSender(ctx context.Context, messageID string) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	err = s.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`DELETE FROM message_senders WHERE message_id = ?`, messageID).Error
	})
	if err != nil {
		return fmt.Errorf("forget the sender of message %s: %w", messageID, err)
	}
	return nil
}

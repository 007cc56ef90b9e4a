package store

import (
	"context"
	"fmt"

	"github.com/agenticd/agenticd/presenters"
)

// CheckMessageIDsFree is presenters.ErrMessageIDInUse for the first of ids (empty ones
// are skipped) that a stored message has. Message ids are one namespace in the store (a
// message keeps its id for life), so an id taken in another session is taken too.
func (s *Store) CheckMessageIDsFree(ctx context.Context, sessionID string, ids ...string) error {
	for _, id := range ids {
		if id == "" {
			continue
		}
		var sessions []string
		err := s.db.WithContext(ctx).Raw(`SELECT conversation_id FROM messages WHERE id = ?`, id).Scan(&sessions).Error
		if err != nil {
			return fmt.Errorf("look up message %s: %w", id, err)
		}
		switch {
		case len(sessions) == 0:
		case sessions[0] == sessionID:
			return fmt.Errorf("message id %q is taken in session %s; choose another, or leave it empty for the server to choose: %w",
				id, sessionID, presenters.ErrMessageIDInUse)
		default:
			return fmt.Errorf("message id %q is taken by a message of another session (message ids are unique across the server); choose another, such as a UUID, or leave it empty for the server to choose: %w",
				id, presenters.ErrMessageIDInUse)
		}
	}
	return nil
}

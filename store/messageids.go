package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Claims outlive the time a presenter takes to store a checked message (milliseconds;
// an ACP agent's user message is saved as the turn starts) by far, and are bounded so
// that clients cannot grow them without end.
const (
	messageIDClaimTTL  = 10 * time.Minute
	maxMessageIDClaims = 100_000
)

// messageIDClaims remembers the ids CheckMessageIDsFree let through, so that two
// sessions checking the same id at once cannot both take it before either is stored.
type messageIDClaims struct {
	mu     sync.Mutex
	claims map[string]messageIDClaim
	order  []string // ids in claim order, for expiry
}

type messageIDClaim struct {
	sessionID string
	at        time.Time
}

// claim takes id for sessionID unless another session holds it; the same session may
// claim it again (a retried send).
func (c *messageIDClaims) claim(id, sessionID string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claims == nil {
		c.claims = make(map[string]messageIDClaim)
	}
	for len(c.order) > 0 && (len(c.order) >= maxMessageIDClaims || now.Sub(c.claims[c.order[0]].at) > messageIDClaimTTL) {
		delete(c.claims, c.order[0])
		c.order = c.order[1:]
	}
	if held, ok := c.claims[id]; ok {
		return held.sessionID == sessionID
	}
	c.claims[id] = messageIDClaim{sessionID: sessionID, at: now}
	c.order = append(c.order, id)
	return true
}

// CheckMessageIDsFree is presenters.ErrMessageIDInUse for the first of ids (empty ones
// are skipped) that a stored message has, or that another session's check let through
// and may not have stored yet. Message ids are one namespace in the store (a message
// keeps its id for life), so an id taken in another session is taken too.
func (s *Store) CheckMessageIDsFree(ctx context.Context, sessionID string, ids ...string) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
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
			return presenters.WithDetail(fmt.Errorf("message id %q is taken in session %s; choose another, or leave it empty for the server to choose: %w",
				id, sessionID, presenters.ErrMessageIDInUse), "message_id", id)
		default:
			return presenters.WithDetail(fmt.Errorf("message id %q is taken by a message of another session (message ids are unique across the server); choose another, such as a UUID, or leave it empty for the server to choose: %w",
				id, presenters.ErrMessageIDInUse), "message_id", id)
		}
		if !s.claimed.claim(id, sessionID, time.Now()) {
			return presenters.WithDetail(fmt.Errorf("message id %q is being taken by a message of another session (message ids are unique across the server); choose another, such as a UUID, or leave it empty for the server to choose: %w",
				id, presenters.ErrMessageIDInUse), "message_id", id)
		}
	}
	return nil
}

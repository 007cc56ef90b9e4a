package service

import (
	"context"
	"log/slog"
	"sync"

	"github.com/agenticd/agenticd/store"
)

// SenderStore records who sends each user message; *store.Store is one.
type SenderStore interface {
	ClaimMessageSender(ctx context.Context, sessionID, messageID, principal string) (bool, error)
	ReleaseMessageSender(ctx context.Context, messageID string) error
}

var _ SenderStore = (*store.Store)(nil)

// claimSender records principal as the sender of a user message before its turn can
// store and announce it, so that every read of the message names its sender (and a
// queued message's, whichever replica starts it and when). release takes the claim back
// when the message does not start; it is idempotent, and does nothing when no claim was
// made (no principal, or a claim of the id stood already).
func claimSender(ctx context.Context, st SenderStore, logger *slog.Logger, sessionID, messageID, principal string) (release func(), err error) {
	if principal == "" || messageID == "" {
		return func() {}, nil
	}
	claimed, err := st.ClaimMessageSender(ctx, sessionID, messageID, principal)
	if err != nil || !claimed {
		return func() {}, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := st.ReleaseMessageSender(context.WithoutCancel(ctx), messageID); err != nil {
				logger.WarnContext(ctx, "could not take back the sender of a message that did not start", "session_id", sessionID, "message_id", messageID, "err", err)
			}
		})
	}, nil
}

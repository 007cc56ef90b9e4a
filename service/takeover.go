package service

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/webhooks"
)

// TakeOvers is what the service does with a session this replica takes over from a
// replica whose lease ran out, for the replicas' router: the session's own webhook is
// taken up, its events from here on are numbered above the last owner's, and the replies
// the last owner left running end here, visibly, holding the text their subscribers saw.
// Messages it left queued start here (Due).
type TakeOvers struct {
	Store *store.Store
	Hub   *Hub
	// Webhooks, when set, takes up a taken-over session's own webhook from the store.
	Webhooks *webhooks.Notifier
}

// unendedLimit is how many of a session's newest replies a take-over checks for an end
// the log lacks: only the last turns can have one.
const unendedLimit = 4

// EndPrevious ends what the last owner of a session left running; it returns how many
// replies it ended. logger names the session and its agent.
func (t *TakeOvers) EndPrevious(ctx context.Context, sessionID string, logger *slog.Logger) (int, error) {
	if t.Webhooks != nil {
		// The session's own webhook hears of what follows here, its interrupted turn's
		// end first.
		if err := RestoreSessionWebhooks(ctx, t.Store, t.Webhooks, logger, sessionID); err != nil {
			return 0, fmt.Errorf("take over session %s: %w", sessionID, err)
		}
	}
	// Every event of the session from here on is numbered above whatever the last owner
	// issued, so the session's order holds across owners.
	if err := t.Hub.SkipAhead(ctx); err != nil {
		return 0, fmt.Errorf("take over session %s: %w", sessionID, err)
	}
	interrupted, err := t.Store.MarkSessionInterrupted(ctx, sessionID)
	if err != nil {
		return 0, fmt.Errorf("take over session %s: %w", sessionID, err)
	}
	// A reply the last owner stored finished but whose end it could not log before it
	// lost the session: its subscribers never saw it end, so it ends here like the others.
	unended, err := t.Store.UnendedMessages(ctx, sessionID, unendedLimit)
	if err == nil {
		err = t.Store.MarkMessagesInterrupted(ctx, sessionID, unended)
	}
	if err != nil {
		return 0, fmt.Errorf("take over session %s: %w", sessionID, err)
	}
	interrupted = append(interrupted, unended...)
	if err := matchLoggedReplies(ctx, t.Store, interrupted, logger); err != nil {
		return 0, err
	}
	EndInterruptedReplies(t.Hub, interrupted, InterruptOwnerLost)
	return len(interrupted), nil
}

// Due has the queue start the messages the last owner left queued now (loading the
// session first), not at the end of a turn here.
func (t *TakeOvers) Due(sessionID string) {
	if q := t.Hub.queue; q != nil {
		q.Due(sessionID)
	}
}

package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

// Between two looks at the store while a message runs: the MESSAGE_END event wakes the
// wait at once; the looks only cover an end the live stream cannot show (one published
// before the wait registered whose stored status is still incomplete, an interrupted
// turn), so they back off from the first to the last interval.
const (
	waitRecheckFirst = 100 * time.Millisecond
	waitRecheckLast  = 2 * time.Second
)

// WaitMessage waits until a message has ended and returns it as stored, for clients that
// want a turn's result without a stream. It registers for the session's MESSAGE_END
// events first and only then reads the message, so an end between the two is not
// missed; a message not stored yet (queued, or its turn just starting) is waited for.
// The caller's deadline bounds the wait (DEADLINE_EXCEEDED).
func (s *Service) WaitMessage(ctx context.Context, req *pb.WaitMessageRequest) (*pb.WaitMessageResponse, error) {
	const method = "WaitMessage"
	id, messageID := req.GetSessionId(), req.GetMessageId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("message_id", messageID, "the id of a message from SendMessage, ListMessages or an event"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	wait, cancel := beforeDeadline(ctx)
	defer cancel()
	m, attrs, err := s.waitMessage(wait, id, messageID)
	if err != nil {
		return nil, s.fail(ctx, method, err, append(attrs, "message_id", messageID)...)
	}
	out, _ := s.messageForResponse(ctx, m)
	return &pb.WaitMessageResponse{Message: out}, nil
}

// deadlineMargin is the most of a call's time a wait leaves for its answer to travel.
const deadlineMargin = 250 * time.Millisecond

// beforeDeadline ends a wait a little before the caller's deadline (a tenth of the time
// left, at most deadlineMargin), so that the caller gets the server's DEADLINE_EXCEEDED
// with its reason and advice rather than its own, bare one.
func beforeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-min(time.Until(deadline)/10, deadlineMargin)))
}

// waitMessage returns the message once it has ended (ended).
func (s *Service) waitMessage(ctx context.Context, sessionID, messageID string) (presenters.Message, []any, error) {
	attrs := []any{"session_id", sessionID}
	// The session must exist before anything is waited for: an unknown id is NOT_FOUND
	// at once, not a wait until the deadline.
	if _, err := s.owner(ctx, sessionID); err != nil {
		var notConfigured *agentNotConfiguredError
		if !errors.As(err, &notConfigured) {
			return presenters.Message{}, attrs, err
		}
	}
	filter := events.Filter{SessionIDs: []string{sessionID}, Types: []presenters.EventType{presenters.EventMessageEnd, presenters.EventMessageDequeued}}
	sub, err := s.hub.subscribe(filter, events.Live())
	if err != nil {
		return presenters.Message{}, attrs, err
	}
	defer func() { sub.Close() }()
	recheck := time.NewTimer(waitRecheckFirst)
	defer recheck.Stop()
	interval := waitRecheckFirst
	var taken []*wire.Event
	for {
		m, ok, readAttrs, err := s.ended(ctx, sessionID, messageID)
		if err != nil || ok {
			return m, append(attrs[:0:0], readAttrs...), err
		}
		recheck.Reset(interval)
		interval = min(2*interval, waitRecheckLast)
		for woken := false; !woken; {
			batch, err := sub.NextBatch(ctx, recheck.C, 64, maxBatchBytes, taken)
			var overflow *events.OverflowError
			if errors.As(err, &overflow) {
				// Only MESSAGE_ENDs of one session reach the wait, and it reads them at
				// once; should it still fall behind, it registers again and looks.
				sub.Close()
				if sub, err = s.hub.subscribe(filter, events.Live()); err != nil {
					return presenters.Message{}, attrs, err
				}
				break
			}
			if err != nil {
				return presenters.Message{}, attrs, waitError(ctx, messageID, err)
			}
			taken = batch.Events
			woken = len(batch.Events) == 0 && batch.Bookmark == 0 && !batch.ReplayEnded // the timer fired
			for _, ev := range batch.Events {
				var e pb.AgenticEvent
				if proto.Unmarshal(ev.Bytes(), &e) == nil &&
					(e.GetMessageEnd().GetMessageId() == messageID || e.GetMessageDequeued().GetMessageId() == messageID) {
					woken = true
				}
			}
			clear(taken)
		}
	}
}

// ended reads the message and says whether it has ended: stored with a final status, or
// incomplete while no turn of its session runs it (a turn a crash or a lost replica
// interrupted). A message not stored yet has not ended.
func (s *Service) ended(ctx context.Context, sessionID, messageID string) (m presenters.Message, ok bool, attrs []any, err error) {
	m, attrs, err = s.readMessage(ctx, sessionID, messageID)
	var notFound *messageNotFoundError
	switch {
	case errors.As(err, &notFound):
		if q := s.hub.queue; q != nil {
			if removed, ok := q.removedUnrun(messageID); ok {
				return m, false, attrs, &messageDequeuedError{notFound: notFound, how: removed}
			}
		}
		return m, false, attrs, nil
	case err != nil:
		return m, false, attrs, err
	case m.Status != presenters.MessageIncomplete:
		return m, true, attrs, nil
	}
	if running, err := s.runs(ctx, sessionID, messageID); err != nil || running {
		return m, false, attrs, err
	}
	// It was not running when asked; read it again, so that a turn that ended in between
	// is returned with its final status (stored before its end is announced).
	m, attrs, err = s.readMessage(ctx, sessionID, messageID)
	return m, err == nil, attrs, err
}

// runs says whether the session's turn in flight is the message's, by its agent's word or
// else by the events the hub holds.
func (s *Service) runs(ctx context.Context, sessionID, messageID string) (bool, error) {
	snap := s.hub.snapshot(sessionID)
	if snap.InFlight == messageID {
		return true, nil
	}
	p, err := s.owner(ctx, sessionID)
	var notConfigured *agentNotConfiguredError
	switch {
	case errors.As(err, &notConfigured):
		return false, nil // nothing runs a session without its agent
	case err != nil:
		return false, err
	}
	info, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return false, err
	}
	return info.MessageInFlight == messageID, nil
}

// messageDequeuedError: the message waited for was taken out of its session's queue
// without running, so it will never end (MESSAGE_NOT_FOUND, metadata message_id).
type messageDequeuedError struct {
	notFound *messageNotFoundError
	how      presenters.MessageDequeuedPayload
}

func (e *messageDequeuedError) Error() string {
	why := string(e.how.Reason)
	if e.how.Detail != "" {
		why += ": " + e.how.Detail
	}
	return fmt.Sprintf("message %q of session %q was taken out of the queue without running (%s), so it will never end; send it again to run it",
		e.notFound.MessageID, e.notFound.SessionID, why)
}

func (e *messageDequeuedError) Unwrap() error { return e.notFound }

// waitError says why a wait ended before the message did, and what to do.
func waitError(ctx context.Context, messageID string, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("message %q has not ended within the call's deadline (%w); call WaitMessage again to keep waiting", messageID, err)
	case errors.Is(err, events.ErrClosed), errors.As(err, new(*events.ClosedError)):
		return fmt.Errorf("%w; call WaitMessage again once it is back", errShuttingDown)
	}
	return err
}

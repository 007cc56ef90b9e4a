package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// QueueStore keeps the queued messages; *store.Store is one.
type QueueStore interface {
	QueueMessage(ctx context.Context, m presenters.QueuedMessage) error
	QueuedMessages(ctx context.Context, sessionID string) ([]presenters.QueuedMessage, error)
	QueuedSessions(ctx context.Context) ([]string, error)
	RemoveQueuedMessage(ctx context.Context, sessionID, id string) (bool, error)
	CheckMessageIDsFree(ctx context.Context, sessionID string, ids ...string) error
}

// Busy sessions are tried again after these waits when the event stream shows no turn
// running (a turn's end is announced a moment before its presenter takes the next one).
const (
	queueRetryFirst = 20 * time.Millisecond
	queueRetryMax   = 2 * time.Second
	// queueCallTimeout bounds one start of a queued message, which runs for no caller.
	queueCallTimeout = time.Minute
	// interruptTimeout bounds how long an INTERRUPT waits for the cancelled turn to end.
	interruptTimeout = 30 * time.Second
	// queueStoreTimeout bounds a caller's look at or write to the queue's store: a
	// database behind a partition holds a query without answering or failing.
	queueStoreTimeout = 5 * time.Second
)

// storeCall runs fn, a look at or write to the queue's store for a caller, within
// queueStoreTimeout. A database that does not answer in time, and a replica that knows
// it is cut off from its database, are UNAVAILABLE to the caller (DATABASE_UNAVAILABLE):
// it sends again shortly, here or through another replica, instead of waiting out its
// own deadline.
func (q *Queue) storeCall(ctx context.Context, what string, fn func(context.Context) error) error {
	if q.hub != nil && q.hub.cutOff.Load() {
		return fmt.Errorf("%s: this replica cannot reach its database; send again shortly: %w", what, store.ErrUnavailable)
	}
	sctx, cancel := context.WithTimeout(ctx, queueStoreTimeout)
	defer cancel()
	err := fn(sctx)
	if err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: the database did not answer within %s; send again shortly: %w", what, queueStoreTimeout, store.ErrUnavailable)
	}
	return err
}

// Queue holds the messages sent while their session's turn ran, in the store, and starts
// each one's turn when the turn before it has ended. It learns of turns' ends as an
// observer of the hub; Run owns the goroutine that starts the turns.
//
// Everything that starts a turn or changes a session's queue holds that session's lock
// (lockSession), so a queued message never overtakes another, and a message sent while
// the queue is not empty waits behind it.
type Queue struct {
	st       QueueStore
	registry *Registry
	hub      *Hub
	logger   *slog.Logger
	// owns says whether this replica runs the session's queue (all of them when nil).
	owns func(sessionID string) bool

	mu    sync.Mutex
	locks map[string]*sessionLock
	due   map[string]bool          // sessions to look at now
	retry map[string]time.Duration // busy sessions' next wait
	ends  map[string]chan struct{} // closed at the session's next turn end
	wake  chan struct{}
}

type sessionLock struct {
	mu    sync.Mutex
	users int
}

// newQueue returns the hub's queue (HubOptions.Queue); New gives it the registry, and
// Run starts its turns.
func newQueue(st QueueStore, hub *Hub, logger *slog.Logger) *Queue {
	return &Queue{st: st, hub: hub, logger: logger,
		locks: map[string]*sessionLock{}, due: map[string]bool{}, retry: map[string]time.Duration{},
		ends: map[string]chan struct{}{}, wake: make(chan struct{}, 1)}
}

// OnlyOwned makes the queue run only the sessions owns reports as this replica's (with
// several replicas on one database); call it before Run.
func (q *Queue) OnlyOwned(owns func(sessionID string) bool) { q.owns = owns }

// Published notes the end of a turn: the session's next queued message may start. It
// runs under the hub's lock, so it only takes notes.
func (q *Queue) Published(ev presenters.Event) {
	if ev.SessionID == "" || ev.Replay {
		return
	}
	switch p := ev.Payload.(type) {
	case presenters.MessageEndPayload:
		if !assistant(p.Role) {
			return
		}
	case presenters.StatusChangedPayload:
		if p.Status != presenters.SessionIdle {
			return
		}
	case presenters.SessionClosedPayload:
	default:
		return
	}
	q.mu.Lock()
	if ch, ok := q.ends[ev.SessionID]; ok {
		close(ch)
		delete(q.ends, ev.SessionID)
	}
	q.markDueLocked(ev.SessionID)
	q.mu.Unlock()
}

func (q *Queue) markDueLocked(sessionID string) {
	q.due[sessionID] = true
	delete(q.retry, sessionID)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run starts the queued messages left from before a restart, then each session's next
// one as turns end, until ctx ends.
func (q *Queue) Run(ctx context.Context) {
	if ids, err := q.st.QueuedSessions(ctx); err != nil {
		q.logger.Error("could not read the queued messages; they start at their sessions' next turn end", "err", err)
	} else {
		q.mu.Lock()
		for _, id := range ids {
			q.markDueLocked(id)
		}
		q.mu.Unlock()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		due := make([]string, 0, len(q.due))
		for id := range q.due {
			due = append(due, id)
		}
		clear(q.due)
		q.mu.Unlock()
		for _, id := range due {
			if ctx.Err() != nil {
				return
			}
			q.startNext(ctx, id)
		}
		next := time.Duration(-1)
		q.mu.Lock()
		for _, wait := range q.retry {
			if next < 0 || wait < next {
				next = wait
			}
		}
		q.mu.Unlock()
		if next >= 0 {
			timer.Reset(next)
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
			q.mu.Lock()
			for id := range q.retry {
				q.due[id] = true
			}
			q.mu.Unlock()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// startNext starts the session's first queued message if the session is free.
func (q *Queue) startNext(ctx context.Context, sessionID string) {
	if q.owns != nil && !q.owns(sessionID) {
		return
	}
	unlock := q.lockSession(sessionID)
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, queueCallTimeout)
	defer cancel()
	queued, err := q.st.QueuedMessages(ctx, sessionID)
	if err != nil {
		q.logger.Error("could not read a session's queue", "session_id", sessionID, "err", err)
		return
	}
	if len(queued) == 0 {
		return
	}
	m := queued[0]
	agentID := ""
	p, err := q.registry.ownerOf(ctx, sessionID)
	if err == nil {
		agentID = p.AgentID()
		_, err = p.SendMessage(ctx, sessionID, m.Content, presenters.SendOptions{MessageID: m.MessageID, UserMessageID: m.UserMessageID})
	}
	if errors.Is(err, presenters.ErrSessionBusy) {
		if q.hub.snapshot(sessionID).InFlight == "" {
			q.mu.Lock()
			wait := min(max(2*q.retry[sessionID], queueRetryFirst), queueRetryMax)
			q.retry[sessionID] = wait
			q.mu.Unlock()
		}
		return
	}
	reason, detail := presenters.DequeuedStarted, ""
	if err != nil {
		q.logger.Warn("a queued message could not start", "session_id", sessionID, "message_id", m.MessageID, "err", err)
		reason, detail = presenters.DequeuedFailed, fmt.Sprintf("the message could not start: %v", err)
	}
	if _, rmErr := q.st.RemoveQueuedMessage(ctx, sessionID, m.MessageID); rmErr != nil {
		q.logger.Error("could not take a started message out of the queue", "session_id", sessionID, "message_id", m.MessageID, "err", rmErr)
	}
	q.publish(sessionID, agentID, presenters.MessageDequeuedPayload{MessageID: m.MessageID, UserMessageID: m.UserMessageID, Reason: reason, Detail: detail})
	if len(queued) > 1 {
		q.mu.Lock()
		q.markDueLocked(sessionID)
		q.mu.Unlock()
	}
}

// lockSession serializes what starts turns or changes one session's queue.
func (q *Queue) lockSession(sessionID string) (unlock func()) {
	q.mu.Lock()
	l := q.locks[sessionID]
	if l == nil {
		l = &sessionLock{}
		q.locks[sessionID] = l
	}
	l.users++
	q.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		q.mu.Lock()
		if l.users--; l.users == 0 {
			delete(q.locks, sessionID)
		}
		q.mu.Unlock()
	}
}

// turnEnd is closed at the session's next turn end (or idle status, or close).
func (q *Queue) turnEnd(sessionID string) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch, ok := q.ends[sessionID]
	if !ok {
		ch = make(chan struct{})
		q.ends[sessionID] = ch
	}
	return ch
}

func (q *Queue) publish(sessionID, agentID string, p presenters.Payload) {
	q.hub.Publish(presenters.Event{SessionID: sessionID, AgentID: agentID, Payload: p})
}

// delivery is what deliver did with a message.
type delivery struct {
	res     presenters.SendResult
	outcome deliveryOutcome
	reason  string // why the outcome is not what was asked
}

type deliveryOutcome int

const (
	outcomeStarted deliveryOutcome = iota + 1
	outcomeQueued
	outcomeSteered
)

// deliveryMode is how a SendMessage asks to be delivered while a turn runs.
type deliveryMode int

const (
	deliverQueue deliveryMode = iota
	deliverSteer
	deliverInterrupt
)

// deliver sends a message to a session as mode asks: see DeliveryMode in the API.
func (q *Queue) deliver(ctx context.Context, p presenters.Presenter, sessionID string, content presenters.MessageContent, opts presenters.SendOptions, mode deliveryMode) (delivery, error) {
	unlock := q.lockSession(sessionID)
	defer unlock()
	if mode == deliverInterrupt {
		return q.interrupt(ctx, p, sessionID, content, opts)
	}
	reason := ""
	if mode == deliverSteer {
		// Into the running turn, whatever waits in the queue: the queue is for turns.
		steerer, ok := p.(presenters.Steerer)
		if !ok {
			reason = "this agent takes no steering; queued to run after the current turn"
		} else {
			res, err := steerer.Steer(ctx, sessionID, content, opts)
			switch {
			case err == nil:
				return delivery{res: res, outcome: outcomeSteered}, nil
			case errors.Is(err, presenters.ErrUnsupported):
				reason = "this agent takes no steering; queued to run after the current turn"
			case !errors.Is(err, presenters.ErrMessageNotRunning):
				return delivery{}, err
			}
		}
	}
	var queued []presenters.QueuedMessage
	err := q.storeCall(ctx, "read the queue of session "+sessionID, func(ctx context.Context) (err error) {
		queued, err = q.st.QueuedMessages(ctx, sessionID)
		return err
	})
	if err != nil {
		return delivery{}, err
	}
	if len(queued) > 0 {
		reason = fmt.Sprintf("%d message(s) wait before it", len(queued))
	} else {
		res, err := p.SendMessage(ctx, sessionID, content, opts)
		if err == nil {
			return delivery{res: res, outcome: outcomeStarted}, nil
		}
		if !errors.Is(err, presenters.ErrSessionBusy) {
			return delivery{}, err
		}
	}
	if mode == deliverSteer && reason == "" {
		reason = "the turn was ending; queued to run after it"
	}
	res, err := q.enqueue(ctx, p, sessionID, content, opts, reason)
	if err != nil {
		return delivery{}, err
	}
	if mode == deliverQueue {
		reason = ""
	}
	return delivery{res: res, outcome: outcomeQueued, reason: reason}, nil
}

// interrupt cancels whatever runs and starts the message as soon as the session is free,
// ahead of the queue (whose next message waits for this lock).
func (q *Queue) interrupt(ctx context.Context, p presenters.Presenter, sessionID string, content presenters.MessageContent, opts presenters.SendOptions) (delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, interruptTimeout)
	defer cancel()
	wait := queueRetryFirst
	for {
		ended := q.turnEnd(sessionID)
		if _, err := p.CancelMessage(ctx, sessionID, ""); err != nil {
			return delivery{}, err
		}
		res, err := p.SendMessage(ctx, sessionID, content, opts)
		if !errors.Is(err, presenters.ErrSessionBusy) {
			if err != nil {
				return delivery{}, err
			}
			return delivery{res: res, outcome: outcomeStarted}, nil
		}
		// The cancelled turn has not ended yet: wait for its end, looking again now and
		// then in case it ended before the wait began.
		select {
		case <-ended:
		case <-time.After(wait):
			wait = min(2*wait, queueRetryMax)
		case <-ctx.Done():
			return delivery{}, fmt.Errorf("the cancelled turn of session %s did not end in time; try again: %w", sessionID, presenters.ErrSessionBusy)
		}
	}
}

// enqueue stores a message at the end of the session's queue and announces it.
func (q *Queue) enqueue(ctx context.Context, p presenters.Presenter, sessionID string, content presenters.MessageContent, opts presenters.SendOptions, reason string) (presenters.SendResult, error) {
	if content.Empty() {
		return presenters.SendResult{}, fmt.Errorf("the message is empty; send text, images, files or resources: %w", presenters.ErrInvalidArgument)
	}
	m := presenters.QueuedMessage{SessionID: sessionID, MessageID: opts.MessageID, UserMessageID: opts.UserMessageID,
		Content: content, Reason: reason, QueuedAt: time.Now(), Principal: callerOf(ctx).Name}
	if m.MessageID == "" {
		m.MessageID = uuid.Must(uuid.NewV7()).String()
	}
	if m.UserMessageID == "" {
		m.UserMessageID = uuid.Must(uuid.NewV7()).String()
	}
	err := q.storeCall(ctx, "queue a message of session "+sessionID, func(ctx context.Context) error {
		if err := q.st.CheckMessageIDsFree(ctx, sessionID, m.UserMessageID, m.MessageID); err != nil {
			return err
		}
		return q.st.QueueMessage(ctx, m)
	})
	if err != nil {
		return presenters.SendResult{}, err
	}
	q.publish(sessionID, p.AgentID(), presenters.MessageQueuedPayload{Message: m})
	// The turn may have ended between the busy answer and the store's write.
	q.mu.Lock()
	q.markDueLocked(sessionID)
	q.mu.Unlock()
	return presenters.SendResult{MessageID: m.MessageID, UserMessageID: m.UserMessageID}, nil
}

// remove takes a queued message (by either of its ids) out of the queue, and reports
// whether it was there.
func (q *Queue) remove(ctx context.Context, p presenters.Presenter, sessionID, id string) (presenters.QueuedMessage, bool, error) {
	unlock := q.lockSession(sessionID)
	defer unlock()
	var queued []presenters.QueuedMessage
	err := q.storeCall(ctx, "read the queue of session "+sessionID, func(ctx context.Context) (err error) {
		queued, err = q.st.QueuedMessages(ctx, sessionID)
		return err
	})
	if err != nil {
		return presenters.QueuedMessage{}, false, err
	}
	for _, m := range queued {
		if m.MessageID != id && m.UserMessageID != id {
			continue
		}
		var removed bool
		err := q.storeCall(ctx, "take a message out of the queue of session "+sessionID, func(ctx context.Context) (err error) {
			removed, err = q.st.RemoveQueuedMessage(ctx, sessionID, id)
			return err
		})
		if err != nil || !removed {
			return m, false, err
		}
		q.publish(sessionID, p.AgentID(), presenters.MessageDequeuedPayload{MessageID: m.MessageID, UserMessageID: m.UserMessageID, Reason: presenters.DequeuedCancelled})
		return m, true, nil
	}
	return presenters.QueuedMessage{}, false, nil
}

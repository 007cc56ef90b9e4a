package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agenticd/agenticd/events"
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
	// GetConversation says whether a client closed the session (Conversation.Closed).
	GetConversation(ctx context.Context, id string) (store.Conversation, error)
	SenderStore
}

var _ QueueStore = (*store.Store)(nil)

// Busy sessions are tried again after these waits when the event stream shows no turn
// running (a turn's end is announced a moment before its presenter takes the next one).
const (
	queueRetryFirst = 20 * time.Millisecond
	queueRetryMax   = 2 * time.Second
	// A message that could not start for a passing reason (transient) is tried again
	// after these waits, doubling, for up to queueGiveUp; then it ends as failed.
	queueFailFirst = 500 * time.Millisecond
	queueFailMax   = 30 * time.Second
	queueGiveUp    = 10 * time.Minute
	// queueCallTimeout bounds one start of a queued message, which runs for no caller.
	queueCallTimeout = time.Minute
	// interruptTimeout bounds how long an INTERRUPT waits for the cancelled turn to end.
	interruptTimeout = 30 * time.Second
)

// storeCall runs fn, a look at or write to the queue's store for a caller. A replica
// that knows it is cut off from its database answers at once what the store answers once
// a call runs out of its bound: UNAVAILABLE (DATABASE_UNAVAILABLE), so that the caller
// sends again shortly, here or through another replica.
func (q *Queue) storeCall(ctx context.Context, what string, fn func(context.Context) error) error {
	if q.hub != nil && q.hub.cutOff.Load() {
		return fmt.Errorf("%s: this replica cannot reach its database; send again shortly: %w", what, store.ErrUnavailable)
	}
	return fn(ctx)
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
	// runsHere, with several replicas on one database, makes a session live on this
	// replica if it is this replica's to run (replicas.Replica.RunsHere); nil: every session is.
	runsHere func(ctx context.Context, sessionID string) (bool, error)

	mu    sync.Mutex
	locks map[string]*sessionLock
	due   map[string]bool          // sessions to look at now
	later map[string]time.Time     // sessions to look at again, and when
	waits map[string]time.Duration // their last wait, which the next one doubles
	// failing are the sessions whose first queued message failed to start for a passing
	// reason: they are looked at again only when their wait is over.
	failing map[string]failure
	// closed are the sessions a client is closing or closed here: none of their
	// messages starts, or opens them again, until they are loaded again.
	closed map[string]bool
	ends   map[string]chan struct{} // closed at the session's next turn end
	wake   chan struct{}
	// removed are the messages taken out of a queue without running (cancelled, or
	// failed to start), for WaitMessage: such a message is never stored, and a wait
	// that began after its MESSAGE_DEQUEUED would otherwise last until its deadline.
	removed *timedMemory[string, presenters.MessageDequeuedPayload]
}

// How long, and how many, messages taken out of a queue are remembered for WaitMessage.
const (
	removedKeep = 10 * time.Minute
	removedMost = 4096
)

// failure is a queued message that has failed to start since a time.
type failure struct {
	messageID string
	since     time.Time
}

type sessionLock struct {
	mu    sync.Mutex
	users int
}

// newQueue returns the hub's queue (HubOptions.Queue); New gives it the registry, and
// Run starts its turns.
func newQueue(st QueueStore, hub *Hub, logger *slog.Logger) *Queue {
	return &Queue{st: st, hub: hub, logger: logger,
		locks: map[string]*sessionLock{}, due: map[string]bool{}, later: map[string]time.Time{}, waits: map[string]time.Duration{},
		failing: map[string]failure{}, closed: map[string]bool{}, ends: map[string]chan struct{}{}, wake: make(chan struct{}, 1),
		removed: newTimedMemory[string, presenters.MessageDequeuedPayload](removedKeep, removedMost)}
}

// removedUnrun says whether a message was taken out of a queue without running, and
// how (MESSAGE_DEQUEUED cancelled or failed).
func (q *Queue) removedUnrun(messageID string) (presenters.MessageDequeuedPayload, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.removed.recall(messageID, time.Now())
}

// RunOnOwner makes the queue run a session's messages only where runsHere says the
// session runs, after runsHere made it live there (with several replicas on one
// database: replicas.Replica.RunsHere); call it before Run.
func (q *Queue) RunOnOwner(runsHere func(ctx context.Context, sessionID string) (bool, error)) {
	q.runsHere = runsHere
}

// Due has the queue look at a session's messages now: a replica took the session over.
func (q *Queue) Due(sessionID string) {
	q.mu.Lock()
	delete(q.closed, sessionID) // whatever happened to it here is past: the store says
	q.markDueLocked(sessionID)
	q.mu.Unlock()
}

// closing keeps the queue off a session a client closes or deletes: none of its
// messages starts, or opens it again, until it is loaded again or undo is called (the
// close failed).
func (q *Queue) closing(sessionID string) (undo func()) {
	unlock := q.lockSession(sessionID) // after a start under way
	q.mu.Lock()
	q.closed[sessionID] = true
	q.mu.Unlock()
	unlock()
	return func() {
		q.mu.Lock()
		delete(q.closed, sessionID)
		q.markDueLocked(sessionID)
		q.mu.Unlock()
	}
}

// drain takes the messages left in a closed session's queue out of it: they would run
// on a session the client closed (MESSAGE_DEQUEUED cancelled, saying why).
func (q *Queue) drain(ctx context.Context, sessionID, agentID string) {
	unlock := q.lockSession(sessionID)
	defer unlock()
	var queued []presenters.QueuedMessage
	err := q.storeCall(ctx, "read the queue of session "+sessionID, func(ctx context.Context) (err error) {
		queued, err = q.st.QueuedMessages(ctx, sessionID)
		return err
	})
	for _, m := range queued {
		if err != nil {
			break
		}
		var removed bool
		err = q.storeCall(ctx, "take a message out of the queue of session "+sessionID, func(ctx context.Context) (err error) {
			removed, err = q.st.RemoveQueuedMessage(ctx, sessionID, m.MessageID)
			return err
		})
		if err == nil && removed {
			q.forgetSender(m)
			q.publish(sessionID, agentID, presenters.MessageDequeuedPayload{MessageID: m.MessageID, UserMessageID: m.UserMessageID,
				Reason: presenters.DequeuedCancelled, Detail: "the session was closed"})
		}
	}
	if err != nil {
		// They stay queued; the session's conversation says it was closed, so they end as
		// failed when next looked at, here after a restart or on another replica.
		q.logger.Error("could not empty a closed session's queue", "session_id", sessionID, "agent_id", agentID, "err", err)
	}
	q.mu.Lock()
	delete(q.failing, sessionID)
	q.mu.Unlock()
}

// Published notes the end of a turn: the session's next queued message may start; and a
// message taken out of a queue without running. It runs under the hub's lock, so it only
// takes notes.
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
	case presenters.SessionReadyPayload:
		// Loaded again: what is queued from now on runs.
		q.mu.Lock()
		delete(q.closed, ev.SessionID)
		q.mu.Unlock()
		return
	case presenters.MessageDequeuedPayload:
		if p.Reason != presenters.DequeuedStarted {
			q.mu.Lock()
			q.removed.remember(p.MessageID, p, time.Now())
			q.mu.Unlock()
		}
		return
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

// markDueLocked has the queue look at a session now, unless its first message is
// waiting to be tried again after a failure.
func (q *Queue) markDueLocked(sessionID string) {
	if _, failing := q.failing[sessionID]; failing {
		return
	}
	q.due[sessionID] = true
	delete(q.later, sessionID)
	delete(q.waits, sessionID)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// lookLaterLocked has the queue look at a session again after a wait that doubles each
// time, from first up to most.
func (q *Queue) lookLaterLocked(sessionID string, first, most time.Duration) time.Duration {
	wait := min(max(2*q.waits[sessionID], first), most)
	q.waits[sessionID] = wait
	q.later[sessionID] = time.Now().Add(wait)
	return wait
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
		var next time.Time
		q.mu.Lock()
		for _, at := range q.later {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		q.mu.Unlock()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
		now := time.Now()
		q.mu.Lock()
		for id, at := range q.later {
			if !at.After(now) {
				q.due[id] = true
				delete(q.later, id)
			}
		}
		q.mu.Unlock()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// startNext starts the session's first queued message if the session is free. A message
// that cannot start for a passing reason (transient) stays queued and is tried again
// with backoff; one that cannot start at all leaves the queue as failed, with an ERROR
// naming it.
func (q *Queue) startNext(runCtx context.Context, sessionID string) {
	ctx, cancel := context.WithTimeout(runCtx, queueCallTimeout)
	defer cancel()
	if q.runsHere != nil {
		// runsHere makes the session live here, which loads it and starts its agent: a
		// session is due after every take-over, a read's too, and one with nothing queued
		// (a closed one's queue is drained) must stay as it is. A failed look goes on, to
		// the read below that retries.
		if waiting, err := q.st.QueuedMessages(ctx, sessionID); err == nil && len(waiting) == 0 {
			return
		}
		here, err := q.runsHere(ctx, sessionID)
		if err != nil {
			q.mu.Lock()
			wait := q.lookLaterLocked(sessionID, queueFailFirst, queueFailMax)
			q.mu.Unlock()
			q.logger.Warn("could not take up a session's queue; trying again", "session_id", sessionID, "retry_in", wait, "err", err)
			return
		}
		if !here {
			return // the replica that holds the session runs its queue
		}
	}
	unlock := q.lockSession(sessionID)
	defer unlock()
	q.mu.Lock()
	closed := q.closed[sessionID]
	q.mu.Unlock()
	if closed {
		return
	}
	queued, err := q.st.QueuedMessages(ctx, sessionID)
	if err != nil {
		q.mu.Lock()
		wait := q.lookLaterLocked(sessionID, queueFailFirst, queueFailMax)
		q.mu.Unlock()
		q.logger.Error("could not read a session's queue; trying again", "session_id", sessionID, "retry_in", wait, "err", err)
		return
	}
	if len(queued) == 0 {
		q.mu.Lock()
		delete(q.failing, sessionID)
		q.mu.Unlock()
		return
	}
	m := queued[0]
	agentID, err := q.start(ctx, sessionID, m)
	switch {
	case err != nil && runCtx.Err() != nil:
		return // the server stops: the message stays queued for its next start
	case errors.Is(err, presenters.ErrSessionBusy):
		if q.hub.snapshot(sessionID).InFlight == "" {
			q.mu.Lock()
			q.lookLaterLocked(sessionID, queueRetryFirst, queueRetryMax)
			q.mu.Unlock()
		}
		return
	case errors.Is(err, store.ErrFenced):
		return // another replica took the session over, and runs its queue
	case err != nil && transient(err):
		q.mu.Lock()
		f, ok := q.failing[sessionID]
		if !ok || f.messageID != m.MessageID {
			f = failure{messageID: m.MessageID, since: time.Now()}
			q.failing[sessionID] = f
		}
		giveUp := time.Since(f.since) >= queueGiveUp
		var wait time.Duration
		if !giveUp {
			wait = q.lookLaterLocked(sessionID, queueFailFirst, queueFailMax)
		}
		q.mu.Unlock()
		if !giveUp {
			q.logger.Warn("a queued message could not start yet; it stays queued and is tried again", "session_id", sessionID,
				"agent_id", agentID, "message_id", m.MessageID, "retry_in", wait, "err", err)
			return
		}
		err = fmt.Errorf("tried for %s: %w", queueGiveUp, err)
	}
	q.mu.Lock()
	delete(q.failing, sessionID)
	delete(q.waits, sessionID)
	q.mu.Unlock()
	reason, detail, code, why := presenters.DequeuedStarted, "", "", ""
	if err != nil {
		q.logger.Warn("a queued message could not start; it leaves the queue", "session_id", sessionID, "agent_id", agentID, "message_id", m.MessageID, "err", err)
		code, why = startFailure(err)
		reason, detail = presenters.DequeuedFailed, "the message could not start: "+why
		q.forgetSender(m)
	}
	if _, rmErr := q.st.RemoveQueuedMessage(ctx, sessionID, m.MessageID); rmErr != nil {
		q.logger.Error("could not take a message out of the queue", "session_id", sessionID, "agent_id", agentID, "message_id", m.MessageID, "err", rmErr)
	}
	q.publish(sessionID, agentID, presenters.MessageDequeuedPayload{MessageID: m.MessageID, UserMessageID: m.UserMessageID, Reason: reason, Detail: detail})
	if err != nil {
		q.publish(sessionID, agentID, presenters.ErrorPayload{Code: code, MessageID: m.MessageID,
			Message: fmt.Sprintf("queued message %s could not start and left the queue: %s; send it again", m.MessageID, why)})
	}
	if len(queued) > 1 {
		q.mu.Lock()
		q.markDueLocked(sessionID)
		q.mu.Unlock()
	}
}

// startFailure is how a queued message that could not start is told: the error's reason
// (an ERROR event's code) and its text, as a call would get them. An error no reason fits
// says no more than INTERNAL does; the log has the rest.
func startFailure(err error) (code, text string) {
	reason, _, ok := classify(err)
	if !ok {
		return "internal", "an internal error occurred in agenticd; the server log has the details"
	}
	return strings.ToLower(strings.TrimPrefix(reason.String(), "ERROR_REASON_")), boundMessage(err.Error(), maxFailureText)
}

// maxFailureText bounds the text of a start's failure in an event.
const maxFailureText = 1024

// start starts a queued message's turn on behalf of its sender. A session that is not
// open (not loaded since the server started, or in error after its agent stopped) is
// opened again as LoadSession does, unless a client closed it.
func (q *Queue) start(ctx context.Context, sessionID string, m presenters.QueuedMessage) (agentID string, err error) {
	p, err := q.registry.OwnerOf(ctx, sessionID)
	if err != nil {
		return "", err
	}
	release, err := claimSender(ctx, q.st, q.logger, sessionID, m.UserMessageID, m.Principal)
	if err != nil {
		return p.AgentID(), err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	q.noteSender(ctx, m)
	opts := presenters.SendOptions{MessageID: m.MessageID, UserMessageID: m.UserMessageID}
	_, err = p.SendMessage(ctx, sessionID, m.Content, opts)
	if !errors.Is(err, presenters.ErrSessionClosed) {
		return p.AgentID(), err
	}
	conv, err := q.st.GetConversation(ctx, sessionID)
	switch {
	case err != nil:
		return p.AgentID(), err
	case conv.Closed:
		return p.AgentID(), presenters.WithDetail(fmt.Errorf("session %s was closed; load it again with LoadSession: %w", sessionID, presenters.ErrSessionClosed), "session_id", sessionID)
	}
	q.logger.Info("opening a session again for its queued message", "session_id", sessionID, "agent_id", p.AgentID(), "message_id", m.MessageID)
	done := q.hub.noteCall(withPrincipal(ctx, Principal{Name: m.Principal}), loadKey(sessionID))
	_, err = p.LoadSession(ctx, sessionID, presenters.LoadContext{})
	done()
	if err != nil {
		return p.AgentID(), err
	}
	_, err = p.SendMessage(ctx, sessionID, m.Content, opts)
	return p.AgentID(), err
}

// transient reports whether a message that could not start may start when tried again:
// the database was away, the agent's process was gone or starting again, or the try ran
// out of time.
func transient(err error) bool {
	return store.IsUnavailable(err) || errors.Is(err, events.ErrLogUnavailable) ||
		errors.Is(err, presenters.ErrAgentUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// noteSender notes a queued message's sender for the MESSAGE_END of its user message
// (auditor.stamp), so that its turn names the principal it runs for wherever and
// whenever it starts.
func (q *Queue) noteSender(ctx context.Context, m presenters.QueuedMessage) {
	if q.hub.audit != nil && m.Principal != "" {
		q.hub.audit.note(withPrincipal(ctx, Principal{Name: m.Principal}), senderKey(m.SessionID, m.UserMessageID))
	}
}

// forgetSender takes back the note of a message that leaves the queue without starting.
func (q *Queue) forgetSender(m presenters.QueuedMessage) {
	if q.hub.audit != nil {
		q.hub.audit.forget(senderKey(m.SessionID, m.UserMessageID))
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
	var release func()
	err := q.storeCall(ctx, "record the sender of a message of session "+sessionID, func(ctx context.Context) (err error) {
		release, err = claimSender(ctx, q.st, q.logger, sessionID, opts.UserMessageID, callerOf(ctx).Name)
		return err
	})
	if err != nil {
		return delivery{}, err
	}
	d, err := q.deliverLocked(ctx, p, sessionID, content, opts, mode, release)
	if err != nil {
		release()
	}
	return d, err
}

// deliverLocked is deliver under the session's lock; release takes the sender's claim
// back, before a message is queued (its start claims it again).
func (q *Queue) deliverLocked(ctx context.Context, p presenters.Presenter, sessionID string, content presenters.MessageContent, opts presenters.SendOptions, mode deliveryMode, release func()) (delivery, error) {
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
	release()
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
		q.forgetSender(m)
		q.mu.Lock()
		if f, ok := q.failing[sessionID]; ok && f.messageID == m.MessageID {
			// The next message need not wait out the removed one's backoff.
			delete(q.failing, sessionID)
			q.markDueLocked(sessionID)
		}
		q.mu.Unlock()
		q.publish(sessionID, p.AgentID(), presenters.MessageDequeuedPayload{MessageID: m.MessageID, UserMessageID: m.UserMessageID, Reason: presenters.DequeuedCancelled})
		return m, true, nil
	}
	return presenters.QueuedMessage{}, false, nil
}

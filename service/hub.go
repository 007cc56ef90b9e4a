package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Hub defaults.
const (
	DefaultEventCapacity   = 100_000
	DefaultSubscriberQueue = 4096
	// DefaultSequenceBlock is how many sequences one write of the floor reserves.
	DefaultSequenceBlock uint64 = 100_000
)

// SequenceStore keeps the sequence floor: every sequence ever issued is at most the floor,
// so a hub started later begins above it and never reuses a sequence. SetSequenceFloor
// must never lower the stored floor (writes may land out of order).
type SequenceStore interface {
	SequenceFloor(ctx context.Context) (uint64, error)
	SetSequenceFloor(ctx context.Context, floor uint64) error
}

// HubOptions tunes a Hub; zero values take the defaults.
type HubOptions struct {
	// Capacity is how many recent events are held for resuming subscribers.
	Capacity int
	// SubscriberQueue is how many events may wait for one subscriber before it is ended
	// with RESOURCE_EXHAUSTED.
	SubscriberQueue int
	// Store persists the sequence floor; nil starts at 1 every time (tests only).
	Store SequenceStore
	// SequenceBlock is how far ahead the floor is reserved (one store write per block).
	SequenceBlock uint64
	Logger        *slog.Logger
}

// Hub is the event hub: it implements presenters.Publisher, numbers every event with a
// server-wide rising sequence, holds the most recent events for resuming, keeps a small
// projection per session (last sequence, message in flight, pending permission requests)
// and fans events out to subscribers without ever waiting for one.
type Hub struct {
	queueSize int
	block     uint64
	store     SequenceStore
	logger    *slog.Logger

	reserving sync.WaitGroup // the floor write in flight, if any

	mu       sync.Mutex // guards everything below
	ring     []*heldEvent
	next     uint64 // the sequence the next event gets
	base     uint64 // sequences <= base were issued before this hub started
	reserved uint64 // sequences up to here are covered by the stored floor
	inFlight bool   // a write of the next floor is under way
	sessions map[string]*sessionState
	subs     []*subscription
	closed   bool
}

var _ presenters.Publisher = (*Hub)(nil)

// heldEvent is one published event, shared read-only by the ring and every subscriber
// queue. Its wire bytes are built once, by the first stream that sends it (codec.go).
type heldEvent struct {
	ev         presenters.Event
	encodeOnce sync.Once
	wire       *encodedEvent
	wireErr    error
}

// sessionState is the projection of one session's events; for an idle session it is a
// few words (no in-flight message, no pending requests).
type sessionState struct {
	agentID  string
	lastSeq  uint64
	inFlight string
	pending  []presenters.PermissionRequest
}

// NewHub loads the sequence floor and reserves the first block above it.
func NewHub(ctx context.Context, opts HubOptions) (*Hub, error) {
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultEventCapacity
	}
	if opts.SubscriberQueue <= 0 {
		opts.SubscriberQueue = DefaultSubscriberQueue
	}
	if opts.SequenceBlock == 0 {
		opts.SequenceBlock = DefaultSequenceBlock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Hub{
		queueSize: opts.SubscriberQueue,
		block:     opts.SequenceBlock,
		store:     opts.Store,
		logger:    opts.Logger,
		ring:      make([]*heldEvent, opts.Capacity),
		sessions:  make(map[string]*sessionState),
	}
	if h.store == nil {
		h.next = 1
		return h, nil
	}
	floor, err := h.store.SequenceFloor(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the event sequence floor: %w", err)
	}
	h.base, h.next, h.reserved = floor, floor+1, floor+h.block
	if err := h.store.SetSequenceFloor(ctx, h.reserved); err != nil {
		return nil, fmt.Errorf("reserve event sequences: %w", err)
	}
	return h, nil
}

// Publish numbers and timestamps the event, holds it, updates the session's projection
// and queues it for every matching subscriber. It never waits for a subscriber: one whose
// queue is full is ended (RESOURCE_EXHAUSTED with its resume point). The payload must not
// be modified after Publish: subscribers read it concurrently.
func (h *Hub) Publish(ev presenters.Event) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := h.next
	h.next++
	h.reserveLocked(seq)
	ev.Sequence = seq
	ev.Time = time.Now()
	he := &heldEvent{ev: ev}
	slot := &h.ring[seq%uint64(len(h.ring))]
	if *slot != nil {
		h.forgetLocked(&(*slot).ev)
	}
	*slot = he
	h.projectLocked(&he.ev)
	for i := 0; i < len(h.subs); i++ {
		sub := h.subs[i]
		if !sub.matches(&he.ev) {
			continue
		}
		select {
		case sub.ch <- he:
		default:
			sub.end = &overflowError{Queue: h.queueSize}
			close(sub.ch)
			h.removeLocked(i)
			i--
		}
	}
	return seq
}

// reserveLocked keeps the stored floor ahead of the sequences issued. Halfway through a
// block it writes the next floor in the background, so Publish does not wait for SQLite
// (which may be busy with another writer); only if that write has not landed by the end of
// the block does Publish write it itself. A failed write is logged, not fatal (Publish
// cannot fail): after a restart, sequences could then repeat.
func (h *Hub) reserveLocked(seq uint64) {
	if h.store == nil {
		return
	}
	if seq > h.reserved {
		if err := h.store.SetSequenceFloor(context.Background(), h.reserved+h.block); err != nil {
			h.logger.Error("could not persist the event sequence floor; sequences may repeat after a restart", "err", err)
		}
		h.reserved += h.block
		return
	}
	if h.inFlight || h.closed || seq+h.block/2 < h.reserved {
		return
	}
	h.inFlight = true
	next := h.reserved + h.block
	h.reserving.Add(1)
	go func() {
		defer h.reserving.Done()
		err := h.store.SetSequenceFloor(context.Background(), next)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.inFlight = false
		if err != nil {
			h.logger.Error("could not persist the event sequence floor; retrying", "floor", next, "err", err)
			return
		}
		h.reserved = max(h.reserved, next)
	}()
}

func (h *Hub) projectLocked(ev *presenters.Event) {
	st := h.sessions[ev.SessionID]
	if st == nil {
		st = &sessionState{agentID: ev.AgentID}
		h.sessions[ev.SessionID] = st
	}
	st.lastSeq = ev.Sequence
	switch p := ev.Payload.(type) {
	case presenters.MessageDeltaPayload:
		if assistant(p.Role) {
			st.setInFlight(p.MessageID)
		}
	case presenters.MessageBlockPayload:
		if assistant(p.Role) {
			st.setInFlight(p.MessageID)
		}
	case presenters.ToolStartPayload:
		st.setInFlight(p.MessageID)
	case presenters.ToolRunningPayload:
		st.setInFlight(p.MessageID)
	case presenters.ToolEndPayload:
		st.setInFlight(p.MessageID)
	case presenters.MessageEndPayload:
		if assistant(p.Role) {
			st.inFlight, st.pending = "", nil
		}
	case presenters.PermissionRequiredPayload:
		st.removePending(p.Request.RequestID)
		st.pending = append(st.pending, p.Request)
	case presenters.PermissionGrantedPayload:
		st.removePending(p.RequestID)
	case presenters.PermissionDeniedPayload:
		st.removePending(p.RequestID)
	case presenters.SessionClosedPayload:
		st.inFlight, st.pending = "", nil
	}
}

// forgetLocked drops the projection of an idle session whose last event leaves the ring,
// so that memory follows the sessions with recent events, not all sessions ever seen.
// Nothing is lost: an idle session's projection holds nothing but its owner, which the
// store also knows.
func (h *Hub) forgetLocked(evicted *presenters.Event) {
	st := h.sessions[evicted.SessionID]
	if st != nil && st.lastSeq == evicted.Sequence && st.inFlight == "" && st.pending == nil {
		delete(h.sessions, evicted.SessionID)
	}
}

// assistant reports whether a role is the assistant's; an unset role on a delta, block or
// end is the assistant's output (only replays carry user or system text).
func assistant(r presenters.MessageRole) bool {
	return r != presenters.RoleUser && r != presenters.RoleSystem
}

func (st *sessionState) setInFlight(messageID string) {
	if messageID != "" {
		st.inFlight = messageID
	}
}

func (st *sessionState) removePending(requestID string) {
	for i, r := range st.pending {
		if r.RequestID == requestID {
			st.pending = append(st.pending[:i], st.pending[i+1:]...)
			if len(st.pending) == 0 {
				st.pending = nil
			}
			return
		}
	}
}

func (h *Hub) removeLocked(i int) {
	last := len(h.subs) - 1
	h.subs[i] = h.subs[last]
	h.subs[last] = nil
	h.subs = h.subs[:last]
}

// sessionSnapshot is what the hub knows of one session at one point of the stream.
type sessionSnapshot struct {
	// AgentID is empty when the session has no held events.
	AgentID string
	// Point is the newest sequence issued when the snapshot was taken. Every event of the
	// session up to it has happened, so resuming a subscription there misses nothing and
	// repeats nothing; and, being the newest, it stays resumable until a whole ring of
	// newer events has passed (a session's own last event may be about to leave the ring).
	Point    uint64
	InFlight string
	Pending  []presenters.PermissionRequest
}

// snapshot returns the session's projection and the point it was taken at.
func (h *Hub) snapshot(sessionID string) sessionSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	snap := sessionSnapshot{Point: h.next - 1}
	if st := h.sessions[sessionID]; st != nil {
		snap.AgentID = st.agentID
		snap.InFlight = st.inFlight
		snap.Pending = append([]presenters.PermissionRequest(nil), st.pending...)
	}
	return snap
}

// pendingRequest returns a pending permission request of a session.
func (h *Hub) pendingRequest(sessionID, requestID string) (presenters.PermissionRequest, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.sessions[sessionID]; st != nil {
		for _, r := range st.pending {
			if r.RequestID == requestID {
				return r, true
			}
		}
	}
	return presenters.PermissionRequest{}, false
}

// LastSequence is the sequence of the newest event issued (the base when none yet).
func (h *Hub) LastSequence() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1
}

// subscription is one Subscribe stream's place in the hub. The hub closes ch when it ends
// the subscription, after setting end; the stream drains ch and then reports end.
type subscription struct {
	ch       chan *heldEvent
	sessions map[string]struct{} // nil: every session
	agents   map[string]struct{} // nil: every agent
	end      error               // *overflowError or errShuttingDown; set before ch is closed
}

func (s *subscription) matches(ev *presenters.Event) bool {
	if s.sessions != nil {
		if _, ok := s.sessions[ev.SessionID]; !ok {
			return false
		}
	}
	if s.agents != nil {
		if _, ok := s.agents[ev.AgentID]; !ok {
			return false
		}
	}
	return true
}

func newSubscription(sessionIDs, agentIDs []string, queue int) *subscription {
	return &subscription{ch: make(chan *heldEvent, queue), sessions: set(sessionIDs), agents: set(agentIDs)}
}

func set(ids []string) map[string]struct{} {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	return m
}

// subscribe registers a subscriber and returns the held events after `after` that match
// it (after == 0: none, live only). Both happen under the lock, so that the backlog and
// the live queue meet with no gap and no duplicate.
func (h *Hub) subscribe(sessionIDs, agentIDs []string, after uint64) (*subscription, []*heldEvent, error) {
	sub := newSubscription(sessionIDs, agentIDs, h.queueSize)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, fmt.Errorf("%w: reconnect when it is back", errShuttingDown)
	}
	var backlog []*heldEvent
	if after > 0 {
		last := h.next - 1
		if after > last {
			return nil, nil, fmt.Errorf("%w: after_sequence=%d is ahead of the newest event (%d); resume from a sequence you received, or use 0 for live events",
				errOutOfRange, after, last)
		}
		oldest := h.oldestHeldLocked()
		if after+1 < oldest {
			return nil, nil, fmt.Errorf("%w: events after sequence %d are no longer held (the oldest held is %d); rebuild from GetSession and GetMessages, then subscribe with after_sequence set to the session's last_sequence",
				errOutOfRange, after, oldest)
		}
		for seq := max(after+1, oldest); seq <= last; seq++ {
			he := h.ring[seq%uint64(len(h.ring))]
			if sub.matches(&he.ev) {
				backlog = append(backlog, he)
			}
		}
	}
	h.subs = append(h.subs, sub)
	return sub, backlog, nil
}

// oldestHeldLocked is the smallest sequence still in the ring (next when it is empty).
func (h *Hub) oldestHeldLocked() uint64 {
	oldest := h.base + 1
	if held := uint64(len(h.ring)); h.next > held && h.next-held > oldest {
		oldest = h.next - held
	}
	return oldest
}

// unsubscribe removes a subscriber (a no-op when the hub already ended it).
func (h *Hub) unsubscribe(sub *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, s := range h.subs {
		if s == sub {
			h.removeLocked(i)
			return
		}
	}
}

// Close ends every subscription (their streams report that the server is shutting down),
// refuses new ones and waits for a floor write in flight. Publishing still works, for
// presenters that emit while closing (floor writes are then synchronous).
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for _, sub := range h.subs {
		sub.end = errShuttingDown
		close(sub.ch)
	}
	h.subs = nil
	h.mu.Unlock()
	h.reserving.Wait()
}

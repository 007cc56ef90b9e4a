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
	DefaultEventCapacity = 100_000
	// DefaultEventBytes bounds the memory of the held events: 64 MiB. Small events meet
	// DefaultEventCapacity first (100,000 deltas of 64 B take ~32 MiB); large ones meet
	// this: ~50,000 chunks of 1 KiB, a long turn's worth of resume window. A larger bound
	// resumes further back but is paid for in resident memory during every flood (the Go
	// heap may grow to about twice its live data before a collection).
	DefaultEventBytes      int64 = 64 << 20
	DefaultSubscriberQueue       = 4096
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
	// MaxBytes bounds the held events by size too: when their estimated memory (each
	// event's text once, as payload until a stream encodes it and as wire bytes from then
	// on, plus a fixed overhead) passes it, the oldest are let go, even below Capacity.
	// The newest event is always held.
	MaxBytes int64
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
	maxBytes  int64
	block     uint64
	store     SequenceStore
	logger    *slog.Logger

	reserving sync.WaitGroup // the floor write in flight, if any

	mu           sync.Mutex // guards everything below
	ring         []*heldEvent
	next         uint64 // the sequence the next event gets
	oldest       uint64 // the oldest sequence held (next when none is)
	heldBytes    int64  // the estimated memory of the held events
	reserved     uint64 // sequences up to here are covered by the stored floor
	floorWriting bool   // a background write of the next floor is under way
	floorFailing bool   // the last floor write failed (logged once until one lands)
	sessions     map[string]*sessionState
	subs         []*subscription
	closed       bool
}

var _ presenters.Publisher = (*Hub)(nil)

// heldEvent is one published event, shared by the ring and every subscriber queue. Its
// wire bytes are built once, by the first stream that sends it (codec.go); from then on
// they are all of the event that is kept (payload is dropped), so the ring holds each
// event's text once. The filters and the ring need only the ids and the sequence; the
// projection reads the payload in Publish, before the event is shared.
type heldEvent struct {
	sequence  uint64
	sessionID string
	agentID   string
	size      int64 // heldSize, counted in Hub.heldBytes while held

	encodeOnce sync.Once
	// time and payload are read, and payload cleared, only inside encodeOnce, which sets
	// wire.
	time    time.Time
	payload presenters.Payload
	wire    *encodedEvent
}

// sessionState is the projection of one session's events; for an idle session it is a
// few words (no in-flight message, no pending requests).
type sessionState struct {
	agentID       string
	lastSeq       uint64
	inFlight      string // the assistant message being produced
	inFlightFirst uint64 // the sequence of inFlight's first event
	pending       []presenters.PermissionRequest
}

// NewHub loads the sequence floor and reserves the first block above it.
func NewHub(ctx context.Context, opts HubOptions) (*Hub, error) {
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultEventCapacity
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultEventBytes
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
		maxBytes:  opts.MaxBytes,
		block:     opts.SequenceBlock,
		store:     opts.Store,
		logger:    opts.Logger,
		ring:      make([]*heldEvent, opts.Capacity),
		sessions:  make(map[string]*sessionState),
	}
	if h.store == nil {
		h.next, h.oldest = 1, 1
		return h, nil
	}
	floor, err := h.store.SequenceFloor(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the event sequence floor: %w", err)
	}
	h.next, h.oldest, h.reserved = floor+1, floor+1, floor+h.block
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
	he := &heldEvent{sequence: seq, sessionID: ev.SessionID, agentID: ev.AgentID, size: heldSize(ev.Payload), time: ev.Time, payload: ev.Payload}
	if seq-h.oldest == uint64(len(h.ring)) {
		h.evictOldestLocked() // its slot is the one seq takes
	}
	h.ring[seq%uint64(len(h.ring))] = he
	h.heldBytes += he.size
	for h.heldBytes > h.maxBytes && h.oldest < seq {
		h.evictOldestLocked()
	}
	h.projectLocked(&ev)
	for i := 0; i < len(h.subs); i++ {
		sub := h.subs[i]
		if !sub.matches(he) {
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

// evictOldestLocked lets the oldest held event go.
func (h *Hub) evictOldestLocked() {
	slot := &h.ring[h.oldest%uint64(len(h.ring))]
	he := *slot
	*slot = nil
	h.heldBytes -= he.size
	h.oldest++
	h.forgetLocked(he)
}

// reserveLocked keeps the stored floor ahead of the sequences issued. Halfway through a
// block it writes the next floor in the background, so Publish does not wait for SQLite
// (which may be busy with another writer); only if that write has not landed by the end of
// the block does Publish write it itself. A failed write reserves nothing: the next
// Publish tries again. It is logged, not fatal (Publish cannot fail): until a write lands,
// a restart could reuse the sequences issued meanwhile.
func (h *Hub) reserveLocked(seq uint64) {
	if h.store == nil {
		return
	}
	if seq > h.reserved {
		next := seq + h.block // past every sequence issued, also after failed writes
		err := h.store.SetSequenceFloor(context.Background(), next)
		h.floorWritten(next, err)
		return
	}
	if h.floorWriting || h.closed || seq+h.block/2 < h.reserved {
		return
	}
	h.floorWriting = true
	next := h.reserved + h.block
	h.reserving.Add(1)
	go func() {
		defer h.reserving.Done()
		err := h.store.SetSequenceFloor(context.Background(), next)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.floorWriting = false
		h.floorWritten(next, err)
	}()
}

// floorWritten records the outcome of writing floor (with h.mu held).
func (h *Hub) floorWritten(floor uint64, err error) {
	if err != nil {
		if !h.floorFailing {
			h.logger.Error("could not persist the event sequence floor; retrying with the next events (until it lands, a restart may reuse sequences)",
				"floor", floor, "err", err)
		}
		h.floorFailing = true
		return
	}
	if h.floorFailing {
		h.logger.Info("the event sequence floor is persisted again", "floor", floor)
	}
	h.floorFailing = false
	h.reserved = max(h.reserved, floor)
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
			st.setInFlight(p.MessageID, ev.Sequence)
		}
	case presenters.MessageBlockPayload:
		if assistant(p.Role) {
			st.setInFlight(p.MessageID, ev.Sequence)
		}
	case presenters.ToolStartPayload:
		st.setInFlight(p.MessageID, ev.Sequence)
	case presenters.ToolRunningPayload:
		st.setInFlight(p.MessageID, ev.Sequence)
	case presenters.ToolEndPayload:
		st.setInFlight(p.MessageID, ev.Sequence)
	case presenters.MessageEndPayload:
		if assistant(p.Role) {
			st.endMessage(p.MessageID)
		}
	case presenters.PermissionRequiredPayload:
		st.removePending(p.Request.RequestID)
		st.pending = append(st.pending, p.Request)
	case presenters.PermissionGrantedPayload:
		st.removePending(p.RequestID)
	case presenters.PermissionDeniedPayload:
		st.removePending(p.RequestID)
	case presenters.SessionClosedPayload:
		st.inFlight, st.inFlightFirst, st.pending = "", 0, nil
	}
}

// forgetLocked drops the projection of an idle session whose last event leaves the ring,
// so that memory follows the sessions with recent events, not all sessions ever seen.
// Nothing is lost: an idle session's projection holds nothing but its owner, which the
// store also knows.
func (h *Hub) forgetLocked(evicted *heldEvent) {
	st := h.sessions[evicted.sessionID]
	if st != nil && st.lastSeq == evicted.sequence && st.inFlight == "" && st.pending == nil {
		delete(h.sessions, evicted.sessionID)
	}
}

// assistant reports whether a role is the assistant's; an unset role on a delta, block or
// end is the assistant's output (only replays carry user or system text).
func assistant(r presenters.MessageRole) bool {
	return r != presenters.RoleUser && r != presenters.RoleSystem
}

func (st *sessionState) setInFlight(messageID string, seq uint64) {
	if messageID != "" && messageID != st.inFlight {
		st.inFlight, st.inFlightFirst = messageID, seq
	}
}

// endMessage drops the permission requests of an ended assistant message. Only the end of
// the message in flight ends the turn, and with it the requests tied to no message: the
// end of another one (a replayed old message, say) leaves the turn as it is.
func (st *sessionState) endMessage(messageID string) {
	turnEnds := messageID == st.inFlight
	kept := st.pending[:0]
	for _, r := range st.pending {
		if (messageID != "" && r.MessageID == messageID) || (turnEnds && r.MessageID == "") {
			continue
		}
		kept = append(kept, r)
	}
	clear(st.pending[len(kept):])
	st.pending = kept
	if len(st.pending) == 0 {
		st.pending = nil
	}
	if turnEnds {
		st.inFlight, st.inFlightFirst = "", 0
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
	// InFlightFirst is the sequence of InFlight's first event (0 when none is in flight).
	InFlightFirst uint64
	Pending       []presenters.PermissionRequest
}

// snapshot returns the session's projection and the point it was taken at.
func (h *Hub) snapshot(sessionID string) sessionSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snapshotLocked(sessionID)
}

func (h *Hub) snapshotLocked(sessionID string) sessionSnapshot {
	snap := sessionSnapshot{Point: h.next - 1}
	if st := h.sessions[sessionID]; st != nil {
		snap.AgentID = st.agentID
		snap.InFlight = st.inFlight
		snap.InFlightFirst = st.inFlightFirst
		snap.Pending = append([]presenters.PermissionRequest(nil), st.pending...)
	}
	return snap
}

// snapshots is snapshot for many sessions, under one lock.
func (h *Hub) snapshots(sessionIDs []string) []sessionSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sessionSnapshot, len(sessionIDs))
	for i, id := range sessionIDs {
		out[i] = h.snapshotLocked(id)
	}
	return out
}

// agentOf returns the agent of a session with held events ("" if it has none).
func (h *Hub) agentOf(sessionID string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.sessions[sessionID]; st != nil {
		return st.agentID
	}
	return ""
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

func (s *subscription) matches(he *heldEvent) bool {
	if s.sessions != nil {
		if _, ok := s.sessions[he.sessionID]; !ok {
			return false
		}
	}
	if s.agents != nil {
		if _, ok := s.agents[he.agentID]; !ok {
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

// replayChunk is how many held events subscribe looks at per hold of the lock, so that a
// long replay never holds Publish up for more than a few tens of microseconds.
const replayChunk = 4096

// subscribe registers a subscriber and returns the held events after `after` that match
// it (after == 0: none, live only). The held events are gathered a chunk at a time, the
// lock released in between; the last chunk and the registration happen under one hold,
// so that the backlog and the live queue meet with no gap and no duplicate.
func (h *Hub) subscribe(sessionIDs, agentIDs []string, after uint64) (*subscription, []*heldEvent, error) {
	sub := newSubscription(sessionIDs, agentIDs, h.queueSize)
	var backlog []*heldEvent
	next := after + 1 // the next sequence to look at
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: reconnect when it is back", errShuttingDown)
		}
		if after > 0 {
			last := h.next - 1
			if after > last {
				h.mu.Unlock()
				return nil, nil, fmt.Errorf("%w: after_sequence=%d is ahead of the newest event (%d); resume from a sequence you received, or use 0 for live events",
					errOutOfRange, after, last)
			}
			if next < h.oldest {
				oldest := h.oldest
				h.mu.Unlock()
				return nil, nil, fmt.Errorf("%w: events after sequence %d are no longer held (the oldest held is %d); rebuild from GetSession and GetMessages, then subscribe with after_sequence set to the session's last_sequence",
					errOutOfRange, next-1, oldest)
			}
			if next <= last && last-next >= replayChunk {
				backlog = h.appendHeldLocked(backlog, sub, next, next+replayChunk-1)
				next += replayChunk
				h.mu.Unlock()
				continue
			}
			backlog = h.appendHeldLocked(backlog, sub, next, last)
		}
		h.subs = append(h.subs, sub)
		h.mu.Unlock()
		return sub, backlog, nil
	}
}

// appendHeldLocked appends the held events from..to (to may be below from) that match sub;
// the sequence gives each one's slot.
func (h *Hub) appendHeldLocked(out []*heldEvent, sub *subscription, from, to uint64) []*heldEvent {
	for seq := from; seq <= to; seq++ {
		if he := h.ring[seq%uint64(len(h.ring))]; sub.matches(he) {
			out = append(out, he)
		}
	}
	return out
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

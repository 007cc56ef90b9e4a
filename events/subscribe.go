package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

var (
	// ErrOutOfRange: a resume point the hub no longer holds, or never issued.
	ErrOutOfRange = errors.New("resume point out of range")
	// ErrClosed: the hub is closed; subscriptions end and new ones are refused.
	ErrClosed = errors.New("event hub closed")
)

// OutOfRangeError is a resume point the hub cannot serve: ahead of the newest event
// (After > Newest), or with successors that have left the ring and the log.
type OutOfRangeError struct {
	After  uint64 // the point asked for (or reached, when retention overtook a long replay)
	Newest uint64 // the newest sequence issued
	Oldest uint64 // the oldest sequence held, in the ring or the log
}

func (e *OutOfRangeError) Error() string {
	if e.After > e.Newest {
		return fmt.Sprintf("%v: sequence %d is ahead of the newest event (%d)", ErrOutOfRange, e.After, e.Newest)
	}
	return fmt.Sprintf("%v: events after sequence %d are no longer held (the oldest held is %d)", ErrOutOfRange, e.After, e.Oldest)
}

func (e *OutOfRangeError) Unwrap() error { return ErrOutOfRange }

// OverflowError ends a subscriber whose queue filled up: it resumes after Last.
type OverflowError struct {
	Queue int    // the size of the queue that filled up
	Last  uint64 // the subscription's resume point when it ended (Subscription.Last)
}

func (e *OverflowError) Error() string {
	return fmt.Sprintf("subscriber too slow: %d events waited unread; resume after sequence %d", e.Queue, e.Last)
}

// ClosedError ends a subscriber because the hub closed: it resumes after Last.
type ClosedError struct{ Last uint64 }

func (e *ClosedError) Error() string {
	return fmt.Sprintf("%v; resume after sequence %d", ErrClosed, e.Last)
}

func (e *ClosedError) Unwrap() error { return ErrClosed }

// Filter chooses the events a subscription gets. An empty list matches everything; when
// several are set an event must match all of them.
type Filter struct {
	SessionIDs []string
	AgentIDs   []string
	Types      []presenters.EventType
}

// Start is where a subscription begins: Live, After or OldestHeld.
type Start struct {
	kind  startKind
	after uint64
}

type startKind int

const (
	startLive startKind = iota
	startAfter
	startOldest
)

// Live starts with the events published after the subscription is registered.
func Live() Start { return Start{kind: startLive} }

// After replays the held events with a larger sequence than after, then goes live.
func After(after uint64) Start { return Start{kind: startAfter, after: after} }

// OldestHeld replays every event still held, then goes live.
func OldestHeld() Start { return Start{kind: startOldest} }

// Subscription is one subscriber's place in the hub: the held events it resumed with,
// then its live queue. The hub closes ch when it ends the subscription (after setting
// overflowed when that is why); NextBatch drains ch and then reports the end.
//
// A filtered subscription may see long runs of events it does not match, and its resume
// point would leave the ring with them. So the hub counts what it skips and, every
// bookmarkEvery events (or bookmarkBytes of them), queues the skipped event itself: behind
// every matching event before it, so once NextBatch takes it everything up to its
// sequence has been taken or filtered out. The subscriber is woken for it only that often.
type Subscription[T any] struct {
	hub *Hub[T]
	ch  chan *held[T]
	// The part of the replay older than the ring, read from the log a chunk at a time
	// (readLog) and taken before backlog: the sequences logNext..logUntil are still to be
	// read (none when logNext is 0), logBacklog what was read and not taken yet.
	logNext, logUntil uint64
	logBacklog        []*held[T]
	filter            Filter     // for the log
	backlog           []*held[T] // the replay from the ring, taken before ch
	pending           *held[T]   // taken from ch but left out of a full batch: the next one starts with it
	sessions          map[string]struct{}
	agents            map[string]struct{}
	types             uint64 // a bit per presenters.EventType; 0: every type
	filtered          bool

	// Under the hub's lock.
	overflowed   bool // set before ch is closed
	skipped      int  // events skipped since the last matching event or bookmark queued
	skippedBytes int64

	registered uint64 // the newest sequence when the subscription was registered
	caughtUp   bool   // CaughtUp has reported registered
	last       uint64 // the resume point: the newest sequence taken, bookmarked or caught up to
}

// typeBit is t's bit in Subscription.types; 0 for a type out of its range, which no
// types filter then matches.
func typeBit(t presenters.EventType) uint64 {
	if t < 0 || t >= 64 {
		return 0
	}
	return 1 << uint(t)
}

func (s *Subscription[T]) matches(he *held[T]) bool {
	if !s.filtered {
		return true
	}
	if s.types != 0 && s.types&typeBit(he.typ) == 0 {
		return false
	}
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

// Batch is what NextBatch took: events in sequence order, and a bookmark.
type Batch[T any] struct {
	// Events are the encoded events taken (none when only a bookmark or the idle signal
	// came).
	Events []T
	// Last is the sequence of the last of Events.
	Last uint64
	// Bookmark, when not 0, is above Last: every event up to it that the subscription
	// matches is in Events or was in an earlier batch; the others were filtered out.
	Bookmark uint64
	// ReplayEnded: reading the log ended the replay with nothing more to take (the log
	// held no event of the subscription after its point). CaughtUp now says so.
	ReplayEnded bool
}

// NextBatch takes the events already waiting, in sequence order: the held events after
// the resume point first, then the live ones, with no gap and no duplicate between them.
// It waits only for the first; then it takes what is already queued, without waiting for
// more, until maxEvents or maxBytes (by the hub's Size; the first event always goes) is
// reached. A batch holds replayed events or live ones, never both, so CaughtUp can be
// told between them.
//
// It waits until an event or a bookmark comes, idle fires (an empty Batch), ctx ends
// (ctx.Err()) or the hub ends the subscription (*OverflowError or *ClosedError, with the
// resume point). dst is reused for Batch.Events.
func (s *Subscription[T]) NextBatch(ctx context.Context, idle <-chan time.Time, maxEvents, maxBytes int, dst []T) (Batch[T], error) {
	b := Batch[T]{Events: dst[:0]}
	readLog := false
	for len(s.logBacklog) == 0 && s.logNext != 0 && s.logNext <= s.logUntil {
		if err := s.readLog(ctx); err != nil {
			return b, err
		}
		readLog = true
	}
	if readLog && len(s.logBacklog) == 0 && len(s.backlog) == 0 {
		// Waiting for a live event now would hold the caught-up marker back.
		b.ReplayEnded = true
		return b, nil
	}
	bytes := 0
	// add appends he unless the batch is full.
	add := func(he *held[T]) bool {
		enc := s.hub.encoded(he)
		n := 0
		if s.hub.size != nil {
			n = s.hub.size(enc)
		}
		if len(b.Events) > 0 && (len(b.Events) >= maxEvents || bytes+n > maxBytes) {
			return false
		}
		b.Events = append(b.Events, enc)
		b.Last = he.sequence
		bytes += n
		return true
	}
	// takeReplay takes what fits of a replayed part.
	takeReplay := func(replay *[]*held[T]) {
		taken := 0
		for _, he := range *replay {
			if !add(he) {
				break
			}
			taken++
		}
		clear((*replay)[:taken]) // a replay may be long; what was taken need not stay
		if *replay = (*replay)[taken:]; len(*replay) == 0 {
			*replay = nil
		}
		s.last = b.Last
	}
	if len(s.logBacklog) > 0 {
		takeReplay(&s.logBacklog)
		return b, nil
	}
	if len(s.backlog) > 0 {
		takeReplay(&s.backlog)
		return b, nil
	}
	he := s.pending
	s.pending = nil
	if he == nil {
		var ok bool
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-idle:
			return b, nil
		case he, ok = <-s.ch:
		}
		if !ok {
			return b, s.endError()
		}
	}
	for {
		if !s.matches(he) {
			b.Bookmark = he.sequence // see Subscription
		} else if !add(he) {
			s.pending = he
			break
		}
		var ok bool
		select {
		case he, ok = <-s.ch:
		default:
		}
		if !ok { // nothing more waits, or the hub ended the subscription: the next call tells
			break
		}
	}
	if b.Bookmark < b.Last {
		b.Bookmark = 0 // the events sent after it are the newer resume point
	}
	s.last = max(s.last, b.Last, b.Bookmark)
	return b, nil
}

func (s *Subscription[T]) endError() error {
	if s.overflowed {
		return &OverflowError{Queue: cap(s.ch), Last: s.last}
	}
	return &ClosedError{Last: s.last}
}

// CaughtUp reports, once the replay has all been taken, the newest sequence when the
// subscription was registered: every event up to it that the subscription matches was in
// the replay. ok is false while replayed events remain, and after the first report. The
// point counts as delivered from then on (Last).
func (s *Subscription[T]) CaughtUp() (seq uint64, ok bool) {
	if s.caughtUp || len(s.backlog) > 0 || len(s.logBacklog) > 0 || (s.logNext != 0 && s.logNext <= s.logUntil) {
		return 0, false
	}
	s.caughtUp = true
	s.last = max(s.last, s.registered)
	return s.registered, true
}

// Last is the subscription's resume point: the newest sequence NextBatch took or
// bookmarked, or CaughtUp reported; the start point before any.
func (s *Subscription[T]) Last() uint64 { return s.last }

// Settled is Last moved up to the hub's newest sequence when nothing waits for the
// subscription: once the replay is over and its queue is empty, every event it matches
// up to the newest has been taken, and the ones it skipped since its last bookmark are
// passed too. A subscriber told this point (a heartbeat) may resume from it although
// no bookmark came. Call it between NextBatch calls, from the same goroutine.
func (s *Subscription[T]) Settled() uint64 {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.caughtUp && !s.overflowed && s.pending == nil && len(s.ch) == 0 && h.next > 0 {
		s.last = max(s.last, h.next-1)
		s.skipped, s.skippedBytes = 0, 0
	}
	return s.last
}

// Close removes the subscription from the hub (a no-op when the hub already ended it).
func (s *Subscription[T]) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, sub := range h.subs {
		if sub == s {
			h.removeLocked(i)
			return
		}
	}
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

// replayChunk is how many held events Subscribe looks at per hold of the lock, so that a
// long replay never holds Publish up for more than a few tens of microseconds.
const replayChunk = 4096

// Subscribe registers a subscriber to the events the filter matches, from start. The held
// events to replay are gathered a chunk at a time, the lock released in between; the last
// chunk and the registration happen under one hold, so that the replay and the live
// queue meet with no gap and no duplicate. The events older than the ring come from the
// log, read as NextBatch gets to them; if the ring moves on while the replay is gathered,
// what it let go is read from the log too (it was logged first). A point ahead of the
// newest event, or one whose successors have left the ring and the log, is an
// *OutOfRangeError; a closed hub refuses with ErrClosed.
func (h *Hub[T]) Subscribe(f Filter, start Start) (*Subscription[T], error) {
	sub := &Subscription[T]{hub: h, ch: make(chan *held[T], h.queueSize), sessions: set(f.SessionIDs), agents: set(f.AgentIDs),
		filter: Filter{SessionIDs: slices.Clone(f.SessionIDs), AgentIDs: slices.Clone(f.AgentIDs), Types: slices.Clone(f.Types)}}
	for _, t := range f.Types {
		sub.types |= typeBit(t)
	}
	if len(f.Types) > 0 && sub.types == 0 {
		sub.types = 1 // only types no event has: match none
	}
	sub.filtered = sub.sessions != nil || sub.agents != nil || sub.types != 0
	next := start.after + 1 // the next sequence to look at
	for first := true; ; first = false {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		servable := h.servableOldestLocked()
		if first && start.kind == startOldest {
			next = servable
		}
		last := h.next - 1
		if start.kind != startLive {
			from := next // the oldest sequence the replay still needs
			if sub.logNext != 0 {
				from = sub.logNext
			}
			if next > last+1 || from < servable {
				// from-1 is the point asked for, or the point a long replay had reached
				// when the ring (and retention) overtook it.
				err := &OutOfRangeError{After: from - 1, Newest: last, Oldest: servable}
				h.mu.Unlock()
				return nil, err
			}
			if oldest := h.oldestLocked(); next < oldest {
				// Older than the ring: in the log, with whatever of the ring was gathered
				// so far (it has left the ring, so it was logged).
				if sub.logNext == 0 {
					sub.logNext = next
				}
				sub.logUntil = oldest - 1
				clear(sub.backlog)
				sub.backlog = sub.backlog[:0]
				next = oldest
			}
			pos := h.positionLocked(next)
			if h.end-pos > replayChunk {
				sub.backlog = h.appendHeldLocked(sub.backlog, sub, pos, pos+replayChunk)
				next = h.ring[(pos+replayChunk)%uint64(len(h.ring))].sequence
				h.mu.Unlock()
				continue
			}
			sub.backlog = h.appendHeldLocked(sub.backlog, sub, pos, h.end)
		}
		sub.registered = last
		sub.last = last
		if start.kind == startAfter {
			sub.last = start.after
		} else if start.kind == startOldest {
			sub.last = min(last, servable-1) // the point just before the replay
		}
		h.subs = append(h.subs, sub)
		h.mu.Unlock()
		return sub, nil
	}
}

// appendHeldLocked appends the held events at the positions from..end-1 that match sub.
func (h *Hub[T]) appendHeldLocked(out []*held[T], sub *Subscription[T], from, end uint64) []*held[T] {
	for pos := from; pos < end; pos++ {
		if he := h.ring[pos%uint64(len(h.ring))]; sub.matches(he) {
			out = append(out, he)
		}
	}
	return out
}

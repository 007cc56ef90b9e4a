package events

import (
	"context"
	"errors"
	"fmt"
)

var (
	// ErrOutOfRange: a resume point the hub no longer holds, or never issued.
	ErrOutOfRange = errors.New("resume point out of range")
	// ErrClosed: the hub is closed; subscriptions end and new ones are refused.
	ErrClosed = errors.New("event hub closed")
)

// OutOfRangeError is a resume point the hub cannot serve: ahead of the newest event
// (After > Newest), or with successors that have left the ring.
type OutOfRangeError struct {
	After  uint64 // the point asked for (or reached, when the ring overtook a long replay)
	Newest uint64 // the newest sequence issued
	Oldest uint64 // the oldest sequence held
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
	Last  uint64 // the last sequence Next returned (the resume point when none was)
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

// Subscription is one subscriber's place in the hub: the held events it resumed with,
// then its live queue. The hub closes ch when it ends the subscription (after setting
// overflowed when that is why); Next drains ch and then reports the end.
type Subscription[T any] struct {
	hub        *Hub[T]
	ch         chan *held[T]
	backlog    []*held[T]          // the replay, sent before ch
	sessions   map[string]struct{} // nil: every session
	agents     map[string]struct{} // nil: every agent
	overflowed bool                // set under the hub's lock before ch is closed
	last       uint64              // the last sequence Next returned, or the resume point
}

func (s *Subscription[T]) matches(he *held[T]) bool {
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

// Next returns the next event, as its sequence and encoded form: the held events after
// the resume point first, then the live ones, with no gap and no duplicate between them.
// It waits until an event comes, ctx ends (ctx.Err()) or the hub ends the subscription
// (*OverflowError or *ClosedError, with the last sequence returned).
func (s *Subscription[T]) Next(ctx context.Context) (uint64, T, error) {
	var he *held[T]
	if len(s.backlog) > 0 {
		he = s.backlog[0]
		s.backlog[0] = nil // a replay may be long; what was sent need not stay
		if s.backlog = s.backlog[1:]; len(s.backlog) == 0 {
			s.backlog = nil
		}
	} else {
		var ok bool
		select {
		case <-ctx.Done():
			var zero T
			return 0, zero, ctx.Err()
		case he, ok = <-s.ch:
		}
		if !ok {
			var zero T
			if s.overflowed {
				return 0, zero, &OverflowError{Queue: cap(s.ch), Last: s.last}
			}
			return 0, zero, &ClosedError{Last: s.last}
		}
	}
	s.last = he.sequence
	return he.sequence, s.hub.encoded(he), nil
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

// Subscribe registers a subscriber to the events of the given sessions and agents (none
// given: all) after the point `after` (0: live events only). The held events after it
// are gathered a chunk at a time, the lock released in between; the last chunk and the
// registration happen under one hold, so that the replay and the live queue meet with no
// gap and no duplicate. A point ahead of the newest event, or one whose successors have
// left the ring, is an *OutOfRangeError; a closed hub refuses with ErrClosed.
func (h *Hub[T]) Subscribe(sessionIDs, agentIDs []string, after uint64) (*Subscription[T], error) {
	sub := &Subscription[T]{hub: h, ch: make(chan *held[T], h.queueSize), sessions: set(sessionIDs), agents: set(agentIDs), last: after}
	next := after + 1 // the next sequence to look at
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		if after > 0 {
			last := h.next - 1
			if after > last || next < h.oldest {
				// next-1 is after, or the point a long replay had reached when the ring
				// overtook it.
				err := &OutOfRangeError{After: next - 1, Newest: last, Oldest: h.oldest}
				h.mu.Unlock()
				return nil, err
			}
			if next <= last && last-next >= replayChunk {
				sub.backlog = h.appendHeldLocked(sub.backlog, sub, next, next+replayChunk-1)
				next += replayChunk
				h.mu.Unlock()
				continue
			}
			sub.backlog = h.appendHeldLocked(sub.backlog, sub, next, last)
		}
		h.subs = append(h.subs, sub)
		h.mu.Unlock()
		return sub, nil
	}
}

// appendHeldLocked appends the held events from..to (to may be below from) that match sub;
// the sequence gives each one's slot.
func (h *Hub[T]) appendHeldLocked(out []*held[T], sub *Subscription[T], from, to uint64) []*held[T] {
	for seq := from; seq <= to; seq++ {
		if he := h.ring[seq%uint64(len(h.ring))]; sub.matches(he) {
			out = append(out, he)
		}
	}
	return out
}

package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// TailLog is an EventLog that tails can read: by session, each from a point of its own.
type TailLog interface {
	EventLog
	// SessionHeads returns the newest logged sequence of each session with events the
	// filter matches; sessions with none are absent.
	SessionHeads(ctx context.Context, f Filter) (map[string]uint64, error)
	// ReadSessionEvents returns up to limit logged events of the sessions in after, each
	// with a sequence above the session's entry there, that match the filter's agents and
	// types, oldest first. What it returns of a session is the start of what the session
	// has above its entry.
	ReadSessionEvents(ctx context.Context, after map[string]uint64, f Filter, limit int) ([]LoggedEvent, error)
}

// Tail settings.
const (
	// tailRead bounds the events one read of the log pulls.
	tailRead = replayChunk
	// tailStartTimeout bounds the reads that place a tail's start.
	tailStartTimeout = 30 * time.Second
	// tailClockSlack covers the difference between the clocks of the hubs that stamp the
	// events and the delay between an event's publication and its wake-up.
	tailClockSlack = time.Minute
)

// Tail follows the events a filter matches by reading the log, not the ring: the events
// of every hub appending to it, for several hubs sharing one log. It has the methods of
// a Subscription that Subscribe's callers use, with the same meanings.
//
// Hubs take their sequences in blocks, so events reach the log in an order that is not
// their sequences': the sequences of one session rise, but a session's new event may lie
// below another's older one. So a tail keeps a cursor per session (every event of it up
// to there was taken, or precedes the start) and reads the events above each cursor.
// WakeTails tells it which sessions to read again; it reads only while NextBatch runs,
// and owns no goroutine.
type Tail[T any] struct {
	hub      *Hub[T]
	log      TailLog
	filter   Filter
	sessions map[string]struct{} // the filter's sessions; nil: every session
	wake     chan struct{}       // signalled by WakeTails
	// ctx ends when Close or Hub.Close ends the tail; reads in flight end with it.
	ctx    context.Context
	cancel context.CancelFunc

	// Under hub.tailMu: the wakes not acted on yet, each with when the first came.
	woken    map[string]time.Time
	wokenAll time.Time

	// The rest is NextBatch's (one goroutine at a time, as for a Subscription).
	cursors   map[string]uint64
	base      uint64 // the cursor of a session cursors does not name
	replaying bool   // the replay (rows above scan, in sequence order) is not over yet
	scan      uint64
	// pending are the sessions to read again, each with when the first wake-up came
	// since it was last read to its end; pendingAll: every session (since then).
	pending    map[string]time.Time
	pendingAll time.Time
	buf        []tailEvent[T] // read, not taken yet, from taken on
	taken      int
	// lowest is the lowest oldest sequence the log had when the tail looked (0: it was
	// empty each time): an oldest above it is retention's doing.
	lowest     uint64
	oldestSeq  uint64    // the log's oldest event as last looked up,
	oldestTime time.Time // and its time
	caughtUp   bool
	last       uint64
	err        error // *OutOfRangeError, which ends the tail
}

type tailEvent[T any] struct {
	sequence uint64
	enc      T
}

// Tail starts a tail of the events the filter matches (see Tail), from start: Live begins
// each session after its newest logged event (and a session with none at its first),
// After(x) every session after x, OldestHeld every session at the log's oldest. Events
// that come after the start point are taken in the order of their sequences when a read
// finds several, and each session's always in order. The log must be a TailLog. A point
// ahead of every sequence ever reserved, or one older than the log's oldest, is an
// *OutOfRangeError; a closed hub refuses with ErrClosed. The reads that place the start
// take at most tailStartTimeout.
func (h *Hub[T]) Tail(f Filter, start Start) (*Tail[T], error) {
	log, ok := h.log.(TailLog)
	if !ok {
		return nil, errors.New("events: a tail reads the event log: Options.Log must be a TailLog")
	}
	t := &Tail[T]{hub: h, log: log, sessions: set(f.SessionIDs), wake: make(chan struct{}, 1),
		filter:  Filter{SessionIDs: slices.Clone(f.SessionIDs), AgentIDs: slices.Clone(f.AgentIDs), Types: slices.Clone(f.Types)},
		woken:   make(map[string]time.Time),
		cursors: make(map[string]uint64),
		pending: make(map[string]time.Time)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	// Registered before the first read: what is logged from now on wakes the tail.
	h.tailMu.Lock()
	if h.tailsClosed {
		h.tailMu.Unlock()
		return nil, ErrClosed
	}
	if h.tails == nil {
		h.tails = make(map[*Tail[T]]struct{})
	}
	h.tails[t] = struct{}{}
	h.tailMu.Unlock()
	ctx, cancel := context.WithTimeout(t.ctx, tailStartTimeout)
	defer cancel()
	if err := t.begin(ctx, start); err != nil {
		closed := t.ctx.Err() != nil // by Hub.Close
		t.Close()
		if closed {
			return nil, ErrClosed
		}
		return nil, err
	}
	return t, nil
}

// begin places the cursors at the start.
func (t *Tail[T]) begin(ctx context.Context, start Start) error {
	oldest, newest, err := t.logRange(ctx)
	if err != nil {
		return err
	}
	t.lowest = oldest
	if start.kind == startLive {
		heads, err := t.heads(ctx)
		if err != nil {
			return err
		}
		for id, head := range heads {
			t.cursors[id] = head
			t.last = max(t.last, head)
		}
		return nil
	}
	after := start.after
	if start.kind == startOldest {
		after = max(oldest, 1) - 1
	}
	// A point another hub issued may not be logged yet, nor below this hub's newest: only
	// one above every reserved sequence is surely unknown.
	bound := max(newest, t.hub.LastSequence())
	if t.hub.store != nil {
		floor, err := t.hub.store.SequenceFloor(ctx)
		if err != nil {
			return fmt.Errorf("read the event sequence floor: %w", err)
		}
		bound = max(bound, floor)
	}
	heldOldest := oldest
	if oldest == 0 {
		heldOldest = newest + 1
	}
	if after > bound || (oldest != 0 && after+1 < oldest) {
		return &OutOfRangeError{After: after, Newest: max(newest, t.hub.LastSequence()), Oldest: heldOldest}
	}
	t.base, t.scan, t.last, t.replaying = after, after, after, true
	return nil
}

// cursor is the session's cursor.
func (t *Tail[T]) cursor(sessionID string) uint64 {
	if c, ok := t.cursors[sessionID]; ok {
		return c
	}
	return t.base
}

// NextBatch takes the events read and not taken yet, up to maxEvents or maxBytes (by the
// hub's Size; the first event always goes), reading the log when none are: first the
// replay, then the sessions WakeTails named. A batch holds replayed events or later ones,
// never both.
//
// It waits until an event comes, idle fires (an empty Batch), ctx ends (ctx.Err()) or the
// tail is ended (*ClosedError with the resume point; *OutOfRangeError when the log's
// retention took events the tail had not read). dst is reused for Batch.Events.
func (t *Tail[T]) NextBatch(ctx context.Context, idle <-chan time.Time, maxEvents, maxBytes int, dst []T) (Batch[T], error) {
	b := Batch[T]{Events: dst[:0]}
	for {
		if t.err != nil {
			return b, t.err
		}
		if t.ctx.Err() != nil {
			return b, &ClosedError{Last: t.last}
		}
		if t.taken < len(t.buf) {
			t.take(&b, maxEvents, maxBytes)
			return b, nil
		}
		if t.replaying {
			if err := t.readReplay(ctx); err != nil {
				return b, t.fail(ctx, err)
			}
			if !t.replaying && len(t.buf) == 0 {
				b.ReplayEnded = true // the caught-up marker need not wait for an event
				return b, nil
			}
			continue
		}
		if t.takeWakes() {
			if err := t.readWoken(ctx); err != nil {
				return b, t.fail(ctx, err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-idle:
			return b, nil
		case <-t.ctx.Done():
			return b, &ClosedError{Last: t.last}
		case <-t.wake: // a wake-up that came after takeWakes looked is in woken now
		}
	}
}

// take moves what fits of the events read into b.
func (t *Tail[T]) take(b *Batch[T], maxEvents, maxBytes int) {
	bytes := 0
	for ; t.taken < len(t.buf); t.taken++ {
		ev := t.buf[t.taken]
		n := 0
		if t.hub.size != nil {
			n = t.hub.size(ev.enc)
		}
		if len(b.Events) > 0 && (len(b.Events) >= maxEvents || bytes+n > maxBytes) {
			break
		}
		b.Events = append(b.Events, ev.enc)
		b.Last = ev.sequence
		bytes += n
	}
	if t.taken == len(t.buf) {
		clear(t.buf) // what was taken need not stay
		t.buf, t.taken = t.buf[:0], 0
	}
	t.last = max(t.last, b.Last)
}

// ErrLogUnavailable ends a tail's read of the log that did not finish within
// logReadTimeout (the database stopped answering): the stream cannot vouch for what it
// sends and ends, to be resumed.
var ErrLogUnavailable = errors.New("the event log did not answer in time")

// logReadTimeout bounds one read of the log by a tail.
const logReadTimeout = 5 * time.Second

// readContext is ctx, ended also when the tail is, and after logReadTimeout.
func (t *Tail[T]) readContext(ctx context.Context) (context.Context, func()) {
	rctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	stop := context.AfterFunc(t.ctx, cancel)
	return rctx, func() {
		stop()
		cancel()
	}
}

// fail is what NextBatch returns for err: the end of the tail or of ctx when either
// caused it. An *OutOfRangeError ends the tail; another error (the database's) does not,
// and the next call reads again.
func (t *Tail[T]) fail(ctx context.Context, err error) error {
	var outOfRange *OutOfRangeError
	switch {
	case t.ctx.Err() != nil:
		return &ClosedError{Last: t.last}
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &outOfRange):
		t.err = err
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrLogUnavailable, err)
	}
	return err
}

// readReplay reads the next part of the replay: the events above scan, in sequence order.
// Retention may have taken the events above scan meanwhile: that is an *OutOfRangeError.
func (t *Tail[T]) readReplay(ctx context.Context) error {
	ctx, done := t.readContext(ctx)
	defer done()
	evs, err := t.log.ReadEvents(ctx, t.scan, 0, t.filter, tailRead)
	if err != nil {
		return fmt.Errorf("replay from the event log: %w", err)
	}
	oldest, newest, err := t.logRange(ctx) // after the read: a prune before it cut it short
	if err != nil {
		return err
	}
	if t.pruned(t.scan, oldest) {
		return &OutOfRangeError{After: t.scan, Newest: newest, Oldest: oldest}
	}
	t.add(evs)
	if len(evs) > 0 {
		t.scan = evs[len(evs)-1].Sequence
	}
	t.replaying = len(evs) == tailRead
	return nil
}

// add keeps the events above their sessions' cursors for NextBatch, and moves the cursors.
func (t *Tail[T]) add(evs []LoggedEvent) {
	for _, ev := range evs {
		if ev.Sequence <= t.cursor(ev.SessionID) {
			continue
		}
		t.cursors[ev.SessionID] = ev.Sequence
		t.buf = append(t.buf, tailEvent[T]{sequence: ev.Sequence, enc: t.hub.unmarshal(ev.Data)})
	}
}

// takeWakes moves the wake-ups that came into pending, and reports whether anything is to
// be read.
func (t *Tail[T]) takeWakes() bool {
	h := t.hub
	h.tailMu.Lock()
	for id, since := range t.woken {
		if first, ok := t.pending[id]; !ok || since.Before(first) {
			t.pending[id] = since
		}
	}
	clear(t.woken)
	if !t.wokenAll.IsZero() && (t.pendingAll.IsZero() || t.wokenAll.Before(t.pendingAll)) {
		t.pendingAll = t.wokenAll
	}
	t.wokenAll = time.Time{}
	h.tailMu.Unlock()
	return len(t.pending) > 0 || !t.pendingAll.IsZero()
}

// readWoken reads the pending sessions above their cursors, up to tailRead events. After
// a wake-up of every session it first asks the log which sessions have events above
// their cursors. A session read to its end leaves pending; a read that met its bound
// leaves every session there, to be read again from the cursors it moved.
//
// The log's retention deletes its oldest sequences. When it has passed a session's
// cursor, events of the session above the cursor are gone, or there were none (the
// session was quiet). Those the tail has not read were published after the session was
// last read to its end, so about when the wake-up that made it pending came: if the log's
// oldest event is from then or later, they may be gone, and that ends the tail with an
// *OutOfRangeError.
func (t *Tail[T]) readWoken(ctx context.Context) error {
	ctx, done := t.readContext(ctx)
	defer done()
	if !t.pendingAll.IsZero() {
		heads, err := t.heads(ctx)
		if err != nil {
			return err
		}
		for id, head := range heads {
			if first, ok := t.pending[id]; head > t.cursor(id) && (!ok || t.pendingAll.Before(first)) {
				t.pending[id] = t.pendingAll
			}
		}
		t.pendingAll = time.Time{}
		if len(t.pending) == 0 {
			return nil
		}
	}
	after := make(map[string]uint64, len(t.pending))
	for id := range t.pending {
		after[id] = t.cursor(id)
	}
	evs, err := t.log.ReadSessionEvents(ctx, after, Filter{AgentIDs: t.filter.AgentIDs, Types: t.filter.Types}, tailRead)
	if err != nil {
		return fmt.Errorf("read the event log: %w", err)
	}
	oldest, newest, err := t.logRange(ctx) // after the read: a prune before it cut it short
	if err != nil {
		return err
	}
	for id, since := range t.pending {
		if c := after[id]; t.pruned(c, oldest) {
			at, err := t.oldestEventTime(ctx, oldest)
			if err != nil {
				return err
			}
			if !at.Before(since.Add(-tailClockSlack)) {
				return &OutOfRangeError{After: c, Newest: newest, Oldest: oldest}
			}
		}
	}
	t.add(evs)
	if len(evs) < tailRead {
		clear(t.pending)
	}
	return nil
}

// logRange is the log's oldest and newest sequence.
func (t *Tail[T]) logRange(ctx context.Context) (oldest, newest uint64, err error) {
	oldest, newest, err = t.log.EventLogRange(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read the event log's range: %w", err)
	}
	return oldest, newest, nil
}

// heads is the log's newest sequence of each of the filter's sessions with events of its
// agents, of any type.
func (t *Tail[T]) heads(ctx context.Context) (map[string]uint64, error) {
	heads, err := t.log.SessionHeads(ctx, Filter{SessionIDs: t.filter.SessionIDs, AgentIDs: t.filter.AgentIDs})
	if err != nil {
		return nil, fmt.Errorf("read the event log's newest event of each session: %w", err)
	}
	return heads, nil
}

// pruned reports whether retention has deleted sequences above from since the tail
// started: the log's oldest is above from+1, and above the lowest oldest the tail saw
// (below that, the log never held any event the tail could miss: those went before it
// started, or were never issued). It then records oldest as seen.
func (t *Tail[T]) pruned(from, oldest uint64) bool {
	pruned := t.lowest != 0 && oldest > max(from+1, t.lowest)
	if oldest != 0 && (t.lowest == 0 || oldest < t.lowest) {
		t.lowest = oldest
	}
	return pruned
}

// oldestEventTime is the time of the log's oldest event, oldest (or a later one if it
// went meanwhile), looked up once per oldest.
func (t *Tail[T]) oldestEventTime(ctx context.Context, oldest uint64) (time.Time, error) {
	if t.oldestSeq != oldest {
		evs, err := t.log.ReadEvents(ctx, oldest-1, 0, Filter{}, 1)
		if err != nil {
			return time.Time{}, fmt.Errorf("read the event log's oldest event: %w", err)
		}
		t.oldestSeq, t.oldestTime = oldest, time.Now()
		if len(evs) > 0 {
			t.oldestTime = evs[0].Time
		}
	}
	return t.oldestTime, nil
}

// CaughtUp reports, once the replay has all been taken, the tail's resume point then
// (Last); at once for a Live tail. ok is false before, and after the first report.
func (t *Tail[T]) CaughtUp() (seq uint64, ok bool) {
	if t.caughtUp || t.replaying || t.taken < len(t.buf) {
		return 0, false
	}
	t.caughtUp = true
	return t.last, true
}

// Last is the tail's resume point: the newest sequence it took, or the start point (for
// Live, the newest logged of the filter's sessions then) before any. Each session's
// events rise, so for a tail of one session every event after it is still to come; of
// several, an event below it that a hub with an older block logs later is not.
func (t *Tail[T]) Last() uint64 { return t.last }

// Settled is Last: a tail knows only what it read from the log, and an event a replica
// logs later may still fall below the newest sequence it could name.
func (t *Tail[T]) Settled() uint64 { return t.last }

// Close ends the tail and unregisters it from the hub's wake-ups; NextBatch then returns a
// *ClosedError.
func (t *Tail[T]) Close() {
	h := t.hub
	h.tailMu.Lock()
	delete(h.tails, t)
	h.tailMu.Unlock()
	t.cancel()
}

// WakeTails tells the tails that events of the sessions were logged, or, with all, that
// any session's may have been (its caller lost track of which). A tail whose filter has
// none of the sessions ignores them. It never waits: each tail reads in its NextBatch.
func (h *Hub[T]) WakeTails(sessionIDs []string, all bool) {
	now := time.Now()
	h.tailMu.Lock()
	defer h.tailMu.Unlock()
	for t := range h.tails {
		woke := all
		if all {
			if t.wokenAll.IsZero() {
				t.wokenAll = now
			}
		} else {
			for _, id := range sessionIDs {
				if _, ok := t.sessions[id]; t.sessions != nil && !ok {
					continue
				}
				if _, ok := t.woken[id]; !ok {
					t.woken[id] = now
				}
				woke = true
			}
		}
		if woke {
			signal(t.wake)
		}
	}
}

// closeTails ends every tail and refuses new ones.
func (h *Hub[T]) closeTails() {
	h.tailMu.Lock()
	defer h.tailMu.Unlock()
	h.tailsClosed = true
	for t := range h.tails {
		t.cancel()
	}
	h.tails = nil
}

// Package events numbers the server's events, holds the most recent ones for resuming
// subscribers, appends every one to a durable log in group commits (log.go), and fans
// them out without ever waiting for a subscriber or the disk. It knows nothing of the
// wire: each event is encoded by a function the caller gives, once, the first time a
// subscriber or the log writer asks for it, and every subscriber shares that encoded form.
package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Hub defaults.
const (
	DefaultCapacity = 100_000
	// DefaultMaxBytes bounds the memory of the held events: 64 MiB. Small events meet
	// DefaultCapacity first (100,000 deltas of 64 B take ~32 MiB); large ones meet this:
	// ~50,000 chunks of 1 KiB, a long turn's worth of resume window. A larger bound
	// resumes further back but is paid for in resident memory during every flood (the Go
	// heap may grow to about twice its live data before a collection).
	DefaultMaxBytes        int64 = 64 << 20
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

// SequenceReserver hands out blocks of sequences exclusively, to several hubs sharing one
// store: ReserveSequences returns the first of n sequences no other reservation got, above
// every block reserved before.
type SequenceReserver interface {
	ReserveSequences(ctx context.Context, n uint64) (first uint64, err error)
}

// Observer follows the events as the hub sequences them. The hub calls it under its lock,
// in sequence order, so its state may be read consistently with a point of the stream
// through Hub.View. Its methods must be quick and must not call the hub.
type Observer interface {
	// Published sees every event, numbered and timestamped, before any subscriber can.
	Published(ev presenters.Event)
	// Evicted is told when a held event leaves the ring.
	Evicted(sessionID string, sequence uint64)
}

// Options tunes a Hub; zero values take the defaults, except Encode, which is required.
type Options[T any] struct {
	// Capacity is how many recent events are held for resuming subscribers.
	Capacity int
	// MaxBytes bounds the held events by size too: when their estimated memory (each
	// event's text once, as payload until it is encoded and as its encoded form from then
	// on, plus a fixed overhead) passes it, the oldest are let go, even below Capacity.
	// The newest event is always held.
	MaxBytes int64
	// SubscriberQueue is how many events may wait for one subscriber before it is ended
	// with an *OverflowError.
	SubscriberQueue int
	// Store persists the sequence floor; nil starts at 1 every time (tests only).
	Store SequenceStore
	// SequenceBlock is how far ahead the floor is reserved (one store write per block).
	SequenceBlock uint64
	// ExclusiveBlocks, for several hubs on one store, takes the sequences in blocks of
	// SequenceBlock that Store hands out exclusively (it must be a SequenceReserver)
	// instead of keeping the floor: the hubs never issue the same sequence, and each one's
	// sequences rise, with gaps where other hubs' blocks lie.
	ExclusiveBlocks bool
	// Encode builds an event's encoded form (its wire bytes, say). The hub calls it at
	// most once per event, when a subscriber first takes the event; it must always return
	// something to send.
	Encode func(presenters.Event) T
	// Size, when set, gives an encoded form's size, which NextBatch's maxBytes bounds.
	Size func(T) int
	// Observer, when set, is told of every event under the hub's lock.
	Observer Observer
	// Log, when set, keeps every event durably: a log writer owned by the hub (started by
	// New, flushed and stopped by Close) appends them in batches, DefaultLogInterval after
	// the first of a batch or as soon as 1,024 wait, so Publish does not wait for the
	// disk. Only when the writer falls a quarter of Capacity events, or half of MaxBytes,
	// behind (a stalled or failing disk: it retries) does Publish wait for it, since the
	// ring holds every event until it is logged. Subscribe then resumes from points older
	// than the ring, and from before a restart, as long as the log holds them.
	Log EventLog
	// Marshal gives the bytes the log keeps of an encoded form, and Unmarshal the encoded
	// form back; both are required with Log.
	Marshal   func(T) []byte
	Unmarshal func([]byte) T
	// LogRetention bounds the log; the writer applies it at start and now and then.
	LogRetention LogRetention
	// LogInterval is how long the writer lets events gather (DefaultLogInterval when 0).
	LogInterval time.Duration
	Logger      *slog.Logger
}

// Hub implements presenters.Publisher: it numbers every event with a server-wide rising
// sequence, holds the most recent events for resuming, tells its Observer, and fans
// events out to subscribers without ever waiting for one. T is the encoded form of an
// event.
type Hub[T any] struct {
	queueSize int
	maxBytes  int64
	block     uint64
	store     SequenceStore
	reserver  SequenceReserver // set with ExclusiveBlocks: blocks come from it, not the floor
	encode    func(presenters.Event) T
	size      func(T) int
	observer  Observer
	// A filtered subscriber gets a bookmark after this many skipped events, or this many
	// of their held bytes: a fraction of the ring, so its resume point is renewed long
	// before the events it covers leave.
	bookmarkEvery int
	bookmarkBytes int64
	logger        *slog.Logger

	reserving sync.WaitGroup // the background floor write or block reservation in flight, if any

	log             EventLog // nil: none (then every event counts as logged when published)
	marshal         func(T) []byte
	unmarshal       func([]byte) T
	retention       LogRetention // under mu
	logInterval     time.Duration
	logBacklog      uint64        // Publish waits while this many events wait to be logged
	logBacklogBytes int64         // ...or this many of their held bytes
	logWake         chan struct{} // the first event of a batch waits
	logFull         chan struct{} // a full batch waits, or Publish does
	logStop         chan struct{} // closed by Close
	logDone         chan struct{} // closed when the writer has returned
	closeOnce       sync.Once
	// pruneMu is held for writing while retention deletes rows, and for reading by a
	// subscription reading the log, so that it never reads across a prune unawares.
	pruneMu sync.RWMutex

	tailMu      sync.Mutex // guards tails and each tail's wakes
	tails       map[*Tail[T]]struct{}
	tailsClosed bool

	mu   sync.Mutex // guards everything below, and the Observer's state
	ring []*held[T]
	// Positions number the events published, one by one, whatever their sequences (which
	// may leave gaps): the event at position p is in slot p % len(ring). The ring holds
	// the positions start..end-1, in rising sequence order.
	start, end uint64
	next       uint64 // the sequence the next event gets
	heldBytes  int64  // the estimated memory of the held events
	// Sequences up to reserved are covered: by the stored floor, or, with exclusive
	// blocks, by the current block (next..reserved); without a Store nothing reads it.
	// upcoming is the first sequence of the next block, reserved ahead (0: none yet).
	reserved     uint64
	upcoming     uint64
	floorWriting bool // a write of the next floor, or a reservation of the next block, is under way
	floorFailing bool // the last one failed (logged once until one lands)
	subs         []*Subscription[T]
	overflows    uint64 // subscriptions ended for a full queue (Stats)
	closed       bool
	// pastBlock: the hub is closed and no block could be reserved within
	// closedReserveBudget, so the sequences go on past the current block, uncovered.
	pastBlock bool
	// The log, when there is one. The events at positions below loggedEnd are in it;
	// those from there to takenEnd are being appended; the rest wait. The ring never lets
	// an event go before it is logged, so ring and log together hold every event from the
	// log's oldest on.
	loggedEnd     uint64
	takenEnd      uint64
	unloggedBytes int64      // the held bytes of the events not logged yet
	logOldest     uint64     // the oldest sequence in the log; 0 when it holds none
	logStopped    bool       // the writer has returned: Publish appends itself
	cond          *sync.Cond // on mu: signalled when events got logged or a block of sequences landed
}

// held is one published event, shared by the ring and every subscriber queue. Its
// encoded form is built once, by the first subscriber that takes it; from then on it is
// all of the event that is kept (payload is dropped), so the ring holds each event's text
// once. The filters and the ring need only the ids, the type and the sequence.
type held[T any] struct {
	sequence  uint64
	sessionID string
	agentID   string
	typ       presenters.EventType
	messageID string
	replay    bool
	size      int64 // heldSize, counted in Hub.heldBytes while held
	time      time.Time

	encodeOnce sync.Once
	// payload is read and cleared only inside encodeOnce, which sets encoded.
	payload presenters.Payload
	encoded T
}

// New loads the sequence floor and reserves the first block above it, above every logged
// sequence too (with ExclusiveBlocks, it reserves the first block from the store); with a
// Log, it starts the log writer.
func New[T any](ctx context.Context, opts Options[T]) (*Hub[T], error) {
	if opts.Encode == nil {
		return nil, errors.New("events: Options.Encode is required: the hub encodes each event once with it")
	}
	reserver, isReserver := opts.Store.(SequenceReserver)
	if opts.ExclusiveBlocks && !isReserver {
		return nil, errors.New("events: Options.ExclusiveBlocks needs a Store that is a SequenceReserver: the blocks come from it")
	}
	if opts.Log != nil && (opts.Marshal == nil || opts.Unmarshal == nil) {
		return nil, errors.New("events: Options.Log needs Marshal and Unmarshal: the log keeps each encoded event as bytes")
	}
	if opts.LogInterval <= 0 {
		opts.LogInterval = DefaultLogInterval
	}
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultCapacity
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
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
	h := &Hub[T]{
		queueSize: opts.SubscriberQueue,
		maxBytes:  opts.MaxBytes,
		block:     opts.SequenceBlock,
		store:     opts.Store,
		encode:    opts.Encode,
		size:      opts.Size,
		observer:  opts.Observer,

		bookmarkEvery: max(opts.Capacity/8, 1),
		bookmarkBytes: opts.MaxBytes / 8,
		logger:        opts.Logger,
		ring:          make([]*held[T], opts.Capacity),

		log:       opts.Log,
		marshal:   opts.Marshal,
		unmarshal: opts.Unmarshal,
		retention: opts.LogRetention,
		// Below the capacity, so that the ring always has a logged event to let go.
		logBacklog:      uint64(max(opts.Capacity/logBacklogShare, 1)),
		logBacklogBytes: max(opts.MaxBytes/2, 1),
		logInterval:     opts.LogInterval,
	}
	h.cond = sync.NewCond(&h.mu)
	var base uint64 // every sequence issued before is at most base
	if h.log != nil {
		oldest, newest, err := h.log.EventLogRange(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the event log's range: %w", err)
		}
		h.logOldest, base = oldest, newest
	}
	first := base + 1
	switch {
	case opts.ExclusiveBlocks:
		h.reserver = reserver
		var err error
		if first, err = h.reserveBlock(time.Time{}); err != nil {
			return nil, fmt.Errorf("reserve event sequences: %w", err)
		}
	case h.store != nil:
		floor, err := h.store.SequenceFloor(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the event sequence floor: %w", err)
		}
		first = max(base, floor) + 1
		if err := h.store.SetSequenceFloor(ctx, first+h.block-1); err != nil {
			return nil, fmt.Errorf("reserve event sequences: %w", err)
		}
	}
	h.setBlockLocked(first) // nothing else sees h yet
	if h.log != nil {
		h.logWake = make(chan struct{}, 1)
		h.logFull = make(chan struct{}, 1)
		h.logStop = make(chan struct{})
		h.logDone = make(chan struct{})
		go h.runLog()
	}
	return h, nil
}

// Publish numbers and timestamps the event, holds it, tells the Observer and queues it
// for every matching subscriber (and, now and then, as a bookmark for one it does not
// match: see Subscription). It never waits for a subscriber: one whose queue is full is
// ended (*OverflowError with its resume point). Nor does it wait for the log, unless the
// log writer has fallen too far behind (Options.Log). The payload must not be modified
// after Publish: subscribers read it concurrently.
func (h *Hub[T]) Publish(ev presenters.Event) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		if h.logBehindLocked() {
			signal(h.logFull)
			h.cond.Wait()
		} else if h.reserver != nil && h.next > h.reserved && !h.pastBlock {
			h.nextBlockLocked()
		} else {
			break
		}
	}
	seq := h.next
	h.next++
	h.reserveLocked(seq)
	ev.Sequence = seq
	ev.Time = time.Now()
	he := &held[T]{sequence: seq, sessionID: ev.SessionID, agentID: ev.AgentID, typ: eventType(ev.Payload), messageID: messageIDOf(ev.Payload),
		replay: ev.Replay, size: heldSize(ev.Payload), time: ev.Time, payload: ev.Payload}
	if h.end-h.start == uint64(len(h.ring)) {
		h.evictOldestLocked() // its slot is the one the event takes; logged, as logBacklog < capacity
	}
	pos := h.end
	h.ring[pos%uint64(len(h.ring))] = he
	h.end++
	h.heldBytes += he.size
	h.shedLocked(h.maxBytes)
	if h.observer != nil {
		h.observer.Published(ev)
	}
	h.loggedPublishedLocked(he, pos)
	for i := 0; i < len(h.subs); i++ {
		sub := h.subs[i]
		if !sub.matches(he) {
			sub.skipped++
			sub.skippedBytes += he.size
			if sub.skipped < h.bookmarkEvery && sub.skippedBytes < h.bookmarkBytes {
				continue
			}
			// A bookmark (see Subscription); with the queue full, a later event tries again.
			select {
			case sub.ch <- he:
				sub.skipped, sub.skippedBytes = 0, 0
			default:
			}
			continue
		}
		select {
		case sub.ch <- he:
			sub.skipped, sub.skippedBytes = 0, 0
		default:
			sub.overflowed = true
			h.overflows++
			close(sub.ch)
			h.removeLocked(i)
			i--
		}
	}
	return seq
}

// evictOldestLocked lets the oldest held event go.
func (h *Hub[T]) evictOldestLocked() {
	slot := &h.ring[h.start%uint64(len(h.ring))]
	he := *slot
	*slot = nil
	h.heldBytes -= he.size
	h.start++
	if h.observer != nil {
		h.observer.Evicted(he.sessionID, he.sequence)
	}
}

// shedLocked lets the oldest held events go while the held ones take more than maxBytes,
// keeping the newest and every event the log has not appended yet (the ring is their only
// place until then). It returns how many went.
func (h *Hub[T]) shedLocked(maxBytes int64) int {
	n := 0
	for h.heldBytes > maxBytes && h.end-h.start > 1 && h.start < h.loggedEnd {
		h.evictOldestLocked()
		n++
	}
	return n
}

// oldestLocked is the oldest sequence held (next when none is).
func (h *Hub[T]) oldestLocked() uint64 {
	if h.start == h.end {
		return h.next
	}
	return h.ring[h.start%uint64(len(h.ring))].sequence
}

// positionLocked is the position of the oldest held event with a sequence of at least seq
// (end when none has).
func (h *Hub[T]) positionLocked(seq uint64) uint64 {
	n := uint64(len(h.ring))
	if oldest := h.oldestLocked(); seq >= oldest { // no gap between: the sequence tells the position
		if p := h.start + (seq - oldest); p < h.end && h.ring[p%n].sequence == seq {
			return p
		}
	}
	return h.start + uint64(sort.Search(int(h.end-h.start), func(i int) bool {
		return h.ring[(h.start+uint64(i))%n].sequence >= seq
	}))
}

// reserveLocked keeps the stored floor ahead of the sequences issued. Halfway through a
// block it writes the next floor in the background, so Publish does not wait for the
// store (which may be busy with another writer); only if that write has not landed by the
// end of the block does Publish write it itself. A failed write reserves nothing: the
// next Publish tries again. It is logged, not fatal (Publish cannot fail): until a write
// lands, a restart could reuse the sequences issued meanwhile. With exclusive blocks it
// reserves the next block halfway through the current one, likewise.
func (h *Hub[T]) reserveLocked(seq uint64) {
	if h.reserver != nil {
		h.reserveAheadLocked(seq)
		return
	}
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

// reserveAheadLocked reserves the next exclusive block in the background once seq is
// halfway through the current one.
func (h *Hub[T]) reserveAheadLocked(seq uint64) {
	if h.floorWriting || h.closed || h.upcoming != 0 || seq+h.block/2 < h.reserved {
		return
	}
	h.floorWriting = true
	h.reserving.Go(func() {
		first, err := h.reserveBlock(time.Time{})
		h.mu.Lock()
		defer h.mu.Unlock()
		h.floorWriting = false
		if err != nil {
			h.reserveFailedLocked("could not reserve the next block of event sequences; retrying with the next events (publishing waits at the end of the block until one lands)",
				"err", err)
		} else {
			h.reserveLandedLocked("a block of event sequences is reserved again", "first", first)
			h.blockLandedLocked(first)
		}
		h.cond.Broadcast() // a Publish may wait for it at the end of the block
	})
}

// nextBlockLocked moves on from a used-up block: to the block reserved ahead, or to one
// reserved now, which Publish waits for (without the lock, so that everything else goes
// on). It retries a failed reservation with backoff, without end while the hub is open:
// a sequence no block covers may be another hub's, and the log would refuse the event
// then, so there is nothing to issue until a block lands; and a store that fails this
// long stops the log too, which holds Publish up soon anyway. Once the hub is closed it
// retries for closedReserveBudget at most, so that a store that is down does not hold
// the shutdown forever, and then gives up: see pastBlock.
func (h *Hub[T]) nextBlockLocked() {
	if h.upcoming != 0 {
		h.setBlockLocked(h.upcoming)
		h.upcoming = 0
		return
	}
	if h.floorWriting { // a reservation is under way: its end wakes us
		h.cond.Wait()
		return
	}
	h.floorWriting = true
	var giveUp time.Time // once the hub is seen closed: when retrying ends
	if h.closed {
		giveUp = time.Now().Add(closedReserveBudget)
	}
	h.mu.Unlock()
	var first uint64
	tries, err := retry(func() (err error) {
		first, err = h.reserveBlock(giveUp)
		return err
	}, func(err error) {
		h.logger.Error("could not reserve a block of event sequences; publishing waits and retries until one lands", "err", err)
	}, func(delay time.Duration) bool {
		if giveUp.IsZero() {
			h.mu.Lock()
			if h.closed {
				giveUp = time.Now().Add(closedReserveBudget)
			}
			h.mu.Unlock()
		}
		if !giveUp.IsZero() {
			if delay = min(delay, time.Until(giveUp)); delay <= 0 {
				return false
			}
		}
		time.Sleep(delay)
		return true
	})
	if err == nil && tries > 1 {
		h.logger.Info("a block of event sequences is reserved again", "first", first, "attempts", tries)
	}
	h.mu.Lock()
	h.floorWriting = false
	if err != nil {
		// As the floor mode does after a failed write: go on past the reserved sequences.
		h.logger.Error("the hub is closed and no block of event sequences could be reserved; issuing sequences past the block, which may collide with another replica's (the event log may refuse those events)",
			"from_sequence", h.next, "budget", closedReserveBudget, "err", err)
		h.pastBlock, h.floorFailing = true, true
	} else {
		h.floorFailing = false
		h.blockLandedLocked(first)
	}
	h.cond.Broadcast()
}

// closedReserveBudget is how long, once the hub is closed, Publish retries a failed
// reservation at the end of a block before it gives up (a variable for tests).
var closedReserveBudget = 5 * time.Second

// reserveTimeout bounds one reservation of a block, so that a connection that hangs is
// given up and tried again.
const reserveTimeout = 10 * time.Second

// reserveBlock reserves a block of exclusive sequences and returns its first, giving up
// after reserveTimeout or at deadline, if it is set and earlier.
func (h *Hub[T]) reserveBlock(deadline time.Time) (uint64, error) {
	if d := time.Now().Add(reserveTimeout); deadline.IsZero() || d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return h.reserver.ReserveSequences(ctx, h.block)
}

// blockLandedLocked keeps a block reserved ahead for when the current one is used up;
// one below the current block (in use since SkipAhead) is let go.
func (h *Hub[T]) blockLandedLocked(first uint64) {
	if first > h.reserved {
		h.upcoming = first
	}
}

// setBlockLocked issues the next sequences from the block that starts at first.
func (h *Hub[T]) setBlockLocked(first uint64) {
	h.next, h.reserved = first, first+h.block-1
}

// SkipAhead reserves a fresh block and continues from it, so that every event published
// after it returns is above every sequence any hub on the store issued before the call:
// a hub that takes a session over from another calls it first, so that the session's
// sequences keep rising. Without exclusive blocks the hub is its store's only one and
// its sequences rise anyway: it does nothing.
func (h *Hub[T]) SkipAhead(ctx context.Context) error {
	if h.reserver == nil {
		return nil
	}
	first, err := h.reserver.ReserveSequences(ctx, h.block)
	if err != nil {
		return fmt.Errorf("skip ahead: reserve event sequences: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// A block reserved later than this one, already in use or ahead, is above it too.
	if first > h.reserved {
		h.setBlockLocked(first)
		if h.upcoming < first {
			h.upcoming = 0
		}
	}
	return nil
}

// floorWritten records the outcome of writing floor (with h.mu held).
func (h *Hub[T]) floorWritten(floor uint64, err error) {
	if err != nil {
		h.reserveFailedLocked("could not persist the event sequence floor; retrying with the next events (until it lands, a restart may reuse sequences)",
			"floor", floor, "err", err)
		return
	}
	h.reserveLandedLocked("the event sequence floor is persisted again", "floor", floor)
	h.reserved = max(h.reserved, floor)
}

// reserveFailedLocked notes a failed floor write or block reservation, logging only the
// first of a run: they are retried with the next events, which may be many.
func (h *Hub[T]) reserveFailedLocked(msg string, args ...any) {
	if !h.floorFailing {
		h.logger.Error(msg, args...)
	}
	h.floorFailing = true
}

// reserveLandedLocked notes a floor write or block reservation that landed, logging it
// when it ends a run of failures.
func (h *Hub[T]) reserveLandedLocked(msg string, args ...any) {
	if h.floorFailing {
		h.logger.Info(msg, args...)
	}
	h.floorFailing = false
}

func (h *Hub[T]) removeLocked(i int) {
	last := len(h.subs) - 1
	h.subs[i] = h.subs[last]
	h.subs[last] = nil
	h.subs = h.subs[:last]
}

// SubscriberQueue is how many events may wait for one subscriber before it is ended.
func (h *Hub[T]) SubscriberQueue() int { return h.queueSize }

// LastSequence is the sequence of the newest event issued (the floor when none yet).
func (h *Hub[T]) LastSequence() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1
}

// HeldRange is the oldest sequence held, in the ring or the log, and the newest issued: a
// subscription can resume after any point from oldest-1 to newest. After a restart the
// log's oldest starts it. Oldest is newest+1 when none is held, and both are 0 before
// the first sequence was ever issued.
func (h *Hub[T]) HeldRange() (oldest, newest uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.next == 1 {
		return 0, 0
	}
	return h.servableOldestLocked(), h.next - 1
}

// View calls read under the hub's lock with the newest sequence issued. What read sees of
// the Observer's state is then exactly the effect of every event up to newest, and of
// none after it: a subscriber that resumes after newest misses nothing of what read saw
// and repeats nothing. read must be quick and must not call the hub.
func (h *Hub[T]) View(read func(newest uint64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	read(h.next - 1)
}

// eventType is the payload's type. A payload that cannot tell (its EventType panics) is
// filtered as an ERROR event: that is what its encoding turns it into.
func eventType(p presenters.Payload) (t presenters.EventType) {
	defer func() {
		if recover() != nil {
			t = presenters.EventError
		}
	}()
	return p.EventType()
}

// encoded returns the event's encoded form, encoding it on first use, and then lets the
// payload go: the ring keeps the encoded form alone.
func (h *Hub[T]) encoded(he *held[T]) T {
	he.encodeOnce.Do(func() {
		he.encoded = h.encode(presenters.Event{Sequence: he.sequence, SessionID: he.sessionID, AgentID: he.agentID, Time: he.time, Replay: he.replay, Payload: he.payload})
		he.payload = nil
	})
	return he.encoded
}

// Close ends every subscription and tail (each is told with a *ClosedError), refuses new
// ones, waits for a floor write or block reservation in flight, and appends to the log
// what waits for it before it stops the log writer. Publishing still works, for
// presenters that emit while closing (floor writes, block reservations and log appends
// are then synchronous; a block reservation that keeps failing is given up after
// closedReserveBudget).
func (h *Hub[T]) Close() {
	h.mu.Lock()
	h.closed = true
	for _, sub := range h.subs {
		close(sub.ch)
	}
	h.subs = nil
	h.mu.Unlock()
	h.closeTails()
	h.reserving.Wait()
	if h.log != nil {
		h.closeOnce.Do(func() { close(h.logStop) })
		<-h.logDone
	}
}

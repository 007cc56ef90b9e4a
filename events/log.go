package events

import (
	"context"
	"fmt"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// EventLog is the durable log of every event published: it serves resume points older
// than the ring, and those from before a restart.
type EventLog interface {
	// AppendEvents writes a batch in one transaction: all of it or none.
	AppendEvents(ctx context.Context, batch []LoggedEvent) error
	// ReadEvents returns up to limit logged events with a sequence in (after, until],
	// oldest first, that the filter matches.
	ReadEvents(ctx context.Context, after, until uint64, f Filter, limit int) ([]LoggedEvent, error)
	// EventLogRange is the oldest and newest logged sequence (0, 0 when empty).
	EventLogRange(ctx context.Context) (oldest, newest uint64, err error)
	// PruneEvents deletes the oldest events until the log is within r; it returns how
	// many went.
	PruneEvents(ctx context.Context, r LogRetention) (int64, error)
}

// LoggedEvent is an event as the log keeps it: its encoded form as bytes (Options.Marshal)
// and what the filters look at.
type LoggedEvent struct {
	Sequence  uint64
	SessionID string
	AgentID   string
	Type      presenters.EventType
	MessageID string
	Time      time.Time
	Data      []byte
}

// LogRetention bounds the log; a bound of 0 is no bound. The oldest events go first.
type LogRetention struct {
	MaxEvents int64
	MaxBytes  int64 // of the events' encoded forms
	MaxAge    time.Duration
}

// Log writer settings.
const (
	// DefaultLogInterval is how long the writer lets events gather before it appends them
	// (group commit): live delivery does not wait for it, and a crash loses at most this
	// much of the stream (plus the batch being written).
	DefaultLogInterval = 5 * time.Millisecond
	// logBatch waiting events make the writer append them without waiting for the interval.
	logBatch = 1024
	// maxLogBatch bounds one transaction, so that the other writers of the database (a
	// turn's checkpoints) never wait long behind the log.
	maxLogBatch = 4 * logBatch
	// pruneInterval is how often retention runs, besides at start and after every
	// pruneEvents events appended.
	pruneInterval = time.Minute
	pruneEvents   = 64 * logBatch
	// Retry delays of a failed append (and of a failed reservation of a block of
	// sequences, which the log would refuse events without).
	logRetryFirst = 50 * time.Millisecond
	logRetryMax   = 2 * time.Second
	// appendTimeout bounds one append: a database connection that stopped answering
	// fails it, and it is tried again on another, instead of holding the writer forever.
	appendTimeout = 10 * time.Second
)

// appendBounded appends records within appendTimeout.
func (h *Hub[T]) appendBounded(records []LoggedEvent) error {
	ctx, cancel := context.WithTimeout(context.Background(), appendTimeout)
	defer cancel()
	return h.log.AppendEvents(ctx, records)
}

// logBacklogShare: the writer may fall 1/logBacklogShare of the ring's capacity (and half
// its bytes) behind before Publish waits for it (Options.Log).
const logBacklogShare = 4

// messageIDOf is the message an event belongs to, "" if none.
func messageIDOf(p presenters.Payload) string {
	switch p := p.(type) {
	case presenters.MessageDeltaPayload:
		return p.MessageID
	case presenters.MessageBlockPayload:
		return p.MessageID
	case presenters.MessageEndPayload:
		return p.MessageID
	case presenters.ToolStartPayload:
		return p.MessageID
	case presenters.ToolRunningPayload:
		return p.MessageID
	case presenters.ToolEndPayload:
		return p.MessageID
	case presenters.ErrorPayload:
		return p.MessageID
	}
	return ""
}

// signal wakes the log writer without waiting: a wake-up already pending is enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// logBehindLocked reports whether Publish must wait for the log writer: so many events
// (or bytes) wait to be logged that the ring, which keeps every one of them, would grow
// past its bounds.
func (h *Hub[T]) logBehindLocked() bool {
	return h.log != nil && !h.logStopped &&
		(h.end-h.loggedEnd >= h.logBacklog || h.unloggedBytes >= h.logBacklogBytes)
}

// loggedPublishedLocked hands a just-published event, at position pos, to the log: to
// the writer, which it wakes for the first event of a batch and for a full one; or, once
// the writer has stopped (the hub is closed), to the log at once.
func (h *Hub[T]) loggedPublishedLocked(he *held[T], pos uint64) {
	if h.log == nil {
		h.loggedEnd = pos + 1
		return
	}
	h.unloggedBytes += he.size
	if h.logStopped {
		// Presenters may still emit while they close, after the hub: those events are
		// appended here, one by one, so that a restart resumes them too.
		h.takenEnd = pos + 1
		rec := []LoggedEvent{h.record(he)}
		err := h.appendBounded(rec)
		if err != nil {
			h.logger.Error("could not append an event published after the hub closed to the event log; a subscriber resuming after a restart will not get it",
				"session_id", he.sessionID, "agent_id", he.agentID, "sequence", he.sequence, "err", err)
		}
		h.markLoggedLocked(he.sequence, pos+1, he.size, err == nil)
		return
	}
	switch pos + 1 - h.takenEnd {
	case 1:
		signal(h.logWake)
	case logBatch:
		signal(h.logFull)
	}
}

// record is what the log keeps of an event; it encodes the event if no subscriber has.
func (h *Hub[T]) record(he *held[T]) LoggedEvent {
	data := h.marshal(h.encoded(he))
	return LoggedEvent{Sequence: he.sequence, SessionID: he.sessionID, AgentID: he.agentID, Type: he.typ, MessageID: he.messageID, Time: he.time, Data: data}
}

// markLoggedLocked records that the events at the positions below end, from the one with
// sequence first on, are in the log (appended) or given up on, lets the ring shed what it
// held beyond its byte bound only because it was not logged yet, and wakes the
// publishers waiting for the writer.
func (h *Hub[T]) markLoggedLocked(first, end uint64, bytes int64, appended bool) {
	h.loggedEnd = end
	h.unloggedBytes -= bytes
	if appended && h.logOldest == 0 {
		h.logOldest = first
	}
	h.shedLocked(h.maxBytes)
	h.cond.Broadcast()
}

// runLog is the log writer: it appends the events published since its last batch once
// DefaultLogInterval has passed since the first of them, or at once when logBatch wait;
// and it applies retention now and then. Close stops it after a last flush.
func (h *Hub[T]) runLog() {
	defer close(h.logDone)
	h.prune()
	sincePrune := 0
	pruneTick := time.NewTicker(pruneInterval)
	defer pruneTick.Stop()
	gather := time.NewTimer(h.logInterval)
	gather.Stop()
	for {
		select {
		case <-h.logStop:
			h.flushLog()
			return
		case <-pruneTick.C:
			h.prune()
			sincePrune = 0
			continue
		case <-h.logWake:
		case <-h.logFull:
		}
		h.mu.Lock()
		waiting := h.end - h.takenEnd
		h.mu.Unlock()
		if waiting < logBatch {
			gather.Reset(h.logInterval)
			select {
			case <-gather.C:
			case <-h.logFull:
				gather.Stop()
			case <-h.logStop:
				gather.Stop()
				h.flushLog()
				return
			}
		}
		sincePrune += h.writeBatch(false)
		if sincePrune >= pruneEvents {
			h.prune()
			sincePrune = 0
		}
	}
}

// flushLog appends everything not yet logged and stops the writer: from then on Publish
// appends each event itself.
func (h *Hub[T]) flushLog() {
	for {
		h.mu.Lock()
		if h.takenEnd == h.end {
			h.logStopped = true
			h.cond.Broadcast()
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		h.writeBatch(true)
	}
}

// writeBatch appends the events published since the last batch (up to maxLogBatch) in
// one transaction, retrying a failed append until it lands or, stopping, once. It
// returns how many events it took.
func (h *Hub[T]) writeBatch(stopping bool) int {
	h.mu.Lock()
	end := min(h.end, h.takenEnd+maxLogBatch)
	if h.takenEnd == end {
		h.mu.Unlock()
		return 0
	}
	batch := make([]*held[T], 0, end-h.takenEnd)
	for pos := h.takenEnd; pos < end; pos++ {
		batch = append(batch, h.ring[pos%uint64(len(h.ring))]) // not logged, so still held
	}
	h.takenEnd = end
	if h.end > end {
		signal(h.logWake) // more than one batch waits: the next goes at once
	}
	h.mu.Unlock()
	from, to := batch[0].sequence, batch[len(batch)-1].sequence

	records := make([]LoggedEvent, len(batch))
	var bytes int64
	for i, he := range batch {
		records[i] = h.record(he)
		bytes += he.size
	}
	tries, err := retry(func() error {
		return h.appendBounded(records)
	}, func(err error) {
		h.logger.Error(fmt.Sprintf("could not append events to the event log; retrying (publishing waits once %d events wait)", h.logBacklog),
			"from_sequence", from, "to_sequence", to, "err", err)
	}, func(delay time.Duration) bool {
		if stopping {
			return false
		}
		select {
		case <-h.logStop:
			stopping = true // one more try, then give up
		case <-time.After(delay):
		}
		return true
	})
	if err != nil {
		h.logger.Error("events are missing from the event log: a subscriber resuming after a restart from before them will not get them",
			"from_sequence", from, "to_sequence", to, "err", err)
	} else if tries > 1 {
		h.logger.Info("the event log is written again", "from_sequence", from, "to_sequence", to, "attempts", tries)
	}
	h.mu.Lock()
	h.markLoggedLocked(from, end, bytes, err == nil)
	h.mu.Unlock()
	return len(batch)
}

// retry calls try until it succeeds, waiting between tries with a backoff from
// logRetryFirst to logRetryMax. failed is told of the first failure only, so that a long
// outage is logged once. wait sleeps for the delay it is given (or less) and reports
// false to give up: retry then returns the last error. tries counts the calls of try.
func retry(try func() error, failed func(error), wait func(delay time.Duration) bool) (tries int, err error) {
	delay := logRetryFirst
	for tries = 1; ; tries++ {
		if err = try(); err == nil {
			return tries, nil
		}
		if tries == 1 {
			failed(err)
		}
		if !wait(delay) {
			return tries, err
		}
		delay = min(2*delay, logRetryMax)
	}
}

// prune applies retention, and moves the oldest point the log serves to what remains.
// Log readers hold pruneMu for reading, so none reads while rows go.
func (h *Hub[T]) prune() {
	h.mu.Lock()
	r := h.retention
	h.mu.Unlock()
	if r.MaxEvents <= 0 && r.MaxBytes <= 0 && r.MaxAge <= 0 {
		return
	}
	h.pruneMu.Lock()
	defer h.pruneMu.Unlock()
	ctx := context.Background()
	n, err := h.log.PruneEvents(ctx, r)
	if err != nil {
		h.logger.Warn("could not apply the event log's retention; trying again later", "err", err)
	}
	oldest, _, rangeErr := h.log.EventLogRange(ctx)
	if rangeErr != nil {
		// Unsure what remains, serve only what the ring holds until the next prune.
		h.logger.Warn("could not read the event log's range after applying retention; resuming from the log waits for the next try", "err", rangeErr)
		oldest = 0
	}
	h.mu.Lock()
	h.logOldest = oldest
	h.mu.Unlock()
	if n > 0 {
		h.logger.Debug("event log retention applied", "events_deleted", n, "oldest_sequence", oldest)
	}
}

// servableOldestLocked is the oldest sequence the ring or the log holds: the log holds
// every event up to the ring's oldest, from its own oldest on.
func (h *Hub[T]) servableOldestLocked() uint64 {
	oldest := h.oldestLocked()
	if h.logOldest != 0 {
		return min(h.logOldest, oldest)
	}
	return oldest
}

// loggedHeld is a logged event as the subscription queues hold events: already encoded.
func (h *Hub[T]) loggedHeld(ev LoggedEvent) *held[T] {
	he := &held[T]{sequence: ev.Sequence, sessionID: ev.SessionID, agentID: ev.AgentID, typ: ev.Type, messageID: ev.MessageID, time: ev.Time}
	he.encodeOnce.Do(func() { he.encoded = h.unmarshal(ev.Data) })
	return he
}

// readLog reads the next chunk of the subscription's replay from the log. The log may
// have been pruned past the point meanwhile: that is an *OutOfRangeError.
func (s *Subscription[T]) readLog(ctx context.Context) error {
	h := s.hub
	h.pruneMu.RLock()
	defer h.pruneMu.RUnlock()
	h.mu.Lock()
	logOldest, servable, newest := h.logOldest, h.servableOldestLocked(), h.next-1
	h.mu.Unlock()
	if logOldest == 0 || s.logNext < logOldest {
		return &OutOfRangeError{After: s.logNext - 1, Newest: newest, Oldest: servable}
	}
	evs, err := h.log.ReadEvents(ctx, s.logNext-1, s.logUntil, s.filter, replayChunk)
	if err != nil {
		return fmt.Errorf("resume from the event log: %w", err)
	}
	for _, ev := range evs {
		s.logBacklog = append(s.logBacklog, h.loggedHeld(ev))
	}
	if len(evs) == replayChunk {
		s.logNext = evs[len(evs)-1].Sequence + 1
	} else {
		s.logNext = s.logUntil + 1
	}
	return nil
}

// WaitLogged waits until every event published before the call is in the log (appended
// or given up on), and reports whether they are: false when ctx ended first. Without a
// log, events count as logged when published.
func (h *Hub[T]) WaitLogged(ctx context.Context) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	target := h.end
	// markLoggedLocked broadcasts on the writer's progress; this wakes the wait when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cond.Broadcast()
	})
	defer stop()
	for h.loggedEnd < target {
		if ctx.Err() != nil {
			return false
		}
		h.cond.Wait()
	}
	return true
}

package events

// Stats is a snapshot of a hub's load, for metrics.
type Stats struct {
	// Subscribers is how many subscriptions are live.
	Subscribers int
	// HeldEvents and HeldBytes are the events the ring holds for resuming and their
	// estimated memory (Options.MaxBytes bounds it).
	HeldEvents int
	HeldBytes  int64
	// Overflows is how many subscriptions were ended because their queue was full, since
	// the hub started.
	Overflows uint64
	// LogBacklog is how many published events wait to be appended to the log (0 without
	// one).
	LogBacklog uint64
	// LastSequence is the sequence of the newest event issued.
	LastSequence uint64
}

// Stats returns the hub's load now. It takes the hub's lock briefly, as Publish does.
func (h *Hub[T]) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{
		Subscribers:  len(h.subs),
		HeldEvents:   int(h.end - h.start),
		HeldBytes:    h.heldBytes,
		Overflows:    h.overflows,
		LogBacklog:   h.end - h.loggedEnd,
		LastSequence: h.next - 1,
	}
}

// TrimHeld lets the oldest held events go until the rest take at most maxBytes, keeping
// the newest and every event the log has not appended yet; a resume from a point before
// the rest reads the log, as one from before a restart does. Without a log nothing goes:
// the ring is then the only place the events are. It returns how many went. An idle
// server trims so that its memory is not a long reply's events that nobody may ask for.
func (h *Hub[T]) TrimHeld(maxBytes int64) int {
	if h.log == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.shedLocked(maxBytes)
}

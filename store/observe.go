package store

import "time"

// WriteObserver is told how long each database write took, the wait for the write lock
// included: op is "transaction" (a write of several statements), "statement" (one
// prepared statement on its own), "messages" (a save of messages and their blocks) or
// "event_log_append" (a group commit of the event log).
type WriteObserver func(op string, d time.Duration)

// SetWriteObserver installs the write observer (metrics); call it before the store is
// shared.
func (s *Store) SetWriteObserver(o WriteObserver) { s.writeObserver = o }

// observeWrite reports a write that started at start; deferred at the top of a write.
func (s *Store) observeWrite(op string, start time.Time) {
	if s.writeObserver != nil {
		s.writeObserver(op, time.Since(start))
	}
}

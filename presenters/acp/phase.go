package acp

import "context"

// phase is where a session is in its life, and says what its other fields hold: s.conn
// is its connection while it is bound, s.turn its turn from prompting to draining. s.mu
// guards it; only the transitions below change it (setPhase), and info.Status is what
// clients see of it.
//
//	closed      known from the store only: not opened since the server started, closed
//	            by a client, or shut down. The zero value.
//	failed      its agent process stopped under it, or stopped while it was reopened.
//	creating    bound to the agent session that CreateSession or ForkSession got, and not
//	            stored yet: nothing is written for it until it is.
//	opening     a LoadSession reopens it; not bound yet.
//	attaching   that LoadSession binds it: the agent's requests are served (session/load
//	            replays while it lasts), but clients cannot use it yet.
//	idle        open, no turn.
//	prompting   open, a turn runs (s.turn).
//	cancelling  the turn was cancelled; the agent has cancelGrace to answer.
//	ending      the turn's message is final and being stored; MESSAGE_END follows.
//	draining    a cancelled turn was ended without the agent's answer, which is still
//	            awaited (s.turn): its late updates are dropped and no turn may start.
//	closing     being taken off its connection (teardownLocked).
//
// The transitions, and where they are made:
//
//	closed, failed ─beginReopen→ opening ─loadFromAgent, reopened→ attaching ─reopened→ idle
//	attaching ─detach (session/load failed), teardownLocked→ opening
//	attaching ─reopened (the agent stopped)→ failed
//	opening ─endReopen (the reopening failed)→ closed, or failed when its status says so
//	(new) ─adopt→ creating ─adopt (stored)→ idle
//	idle ─send→ prompting ─cancel→ cancelling
//	prompting, cancelling ─endTurnLocked→ ending ─turnEnded→ idle, or draining while the
//	agent's answer is still awaited ─finishTurn→ idle
//	bound, failed ─teardownLocked→ closing ─close, shutdown, connGone→ closed, or failed
type phase uint8

const (
	phaseClosed phase = iota
	phaseFailed
	phaseCreating
	phaseOpening
	phaseAttaching
	phaseIdle
	phasePrompting
	phaseCancelling
	phaseEnding
	phaseDraining
	phaseClosing
)

// open reports whether clients can use the session: it is bound and stored.
func (ph phase) open() bool { return ph >= phaseIdle && ph <= phaseDraining }

// bound reports whether the session is on its agent connection (s.conn), whose
// requests for it are served.
func (ph phase) bound() bool { return ph == phaseCreating || ph == phaseAttaching || ph.open() }

// turnRuns reports whether s.turn runs: its message is not final yet.
func (ph phase) turnRuns() bool { return ph == phasePrompting || ph == phaseCancelling }

// turnInFlight reports whether s.turn has not sent its MESSAGE_END yet.
func (ph phase) turnInFlight() bool { return ph.turnRuns() || ph == phaseEnding }

// passing reports whether a LoadSession or a teardown has the session between two
// settled phases; another LoadSession waits for it to settle.
func (ph phase) passing() bool {
	return ph == phaseOpening || ph == phaseAttaching || ph == phaseClosing
}

// setPhase makes a transition (s.mu held) and wakes whoever waits for one.
func (s *session) setPhase(to phase) {
	s.phase = to
	if s.phaseChanged != nil {
		close(s.phaseChanged)
		s.phaseChanged = nil
	}
}

// awaitPhaseLocked waits until the phase changes or ctx ends (s.mu held, released
// while it waits).
func (s *session) awaitPhaseLocked(ctx context.Context) error {
	if s.phaseChanged == nil {
		s.phaseChanged = make(chan struct{})
	}
	changed := s.phaseChanged
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lateTurnLocked reports whether s.turn was ended without the agent's answer, which is
// still awaited: what the agent still sends of it is dropped (s.mu held).
func (s *session) lateTurnLocked() bool {
	return s.turn != nil && !s.turn.answered && !s.phase.turnRuns()
}

package acp

import (
	"context"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// The end of a session's life on its agent process: closed by a client, shut down
// with the presenter, or left by a process that stopped.

// close ends a session: its turn is cancelled, its terminals released, the agent told
// (session/close when advertised). The history stays. A session closed already, or
// being reopened or torn down, is left to that.
func (s *session) close(ctx context.Context) error {
	s.mu.Lock()
	for s.phase.turnInFlight() {
		t := s.turn
		s.mu.Unlock()
		if _, err := s.cancel(ctx, ""); err != nil {
			return err
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("closing session %s: %w", s.id, presenters.ErrCancelled)
		}
		s.mu.Lock()
	}
	if s.phase == phaseClosed || s.phase.passing() {
		s.mu.Unlock()
		return nil
	}
	conn, acpID, terms := s.teardownLocked("the session was closed")
	s.setStatus(presenters.SessionClosed, "closed by a client; reopen it with LoadSession")
	s.emit.SessionClosed("closed by a client")
	s.conv.Closed = true
	s.storeConversationLocked()
	s.setPhase(phaseClosed)
	s.mu.Unlock()
	if conn != nil {
		if conn.init.AgentCapabilities.SessionCapabilities.Close != nil && conn.alive() {
			if _, err := conn.rpc.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: acpID}); err != nil {
				s.log.Warn("session/close failed", "err", err)
			}
		}
	}
	closeTerminals(terms)
	return nil
}

// shutdown ends the session because the presenter closes: a running turn is stored as
// incomplete and ends with MESSAGE_END(cancelled).
func (s *session) shutdown() {
	s.mu.Lock()
	if !s.phase.bound() {
		s.mu.Unlock()
		return
	}
	t := s.turn
	var wait <-chan error
	var msg presenters.Message
	ending := s.phase.turnRuns()
	if ending {
		t.stopPrompt()
		msg, wait = s.endTurnLocked(t, presenters.StopCancelled, presenters.MessageIncomplete, nil)
	}
	_, _, terms := s.teardownLocked("the server is shutting down")
	if s.phase == phaseClosing {
		s.setPhase(phaseClosed)
	}
	s.mu.Unlock()
	closeTerminals(terms)
	if ending {
		<-wait
		s.turnEnded(t, msg)
	}
}

// connGone handles the end of the agent process the session lived on. After a crash
// the session is in error; its turn ends with ERROR and MESSAGE_END(error), the message
// stored first as for any turn.
func (s *session) connGone(c *agentConn, crashed bool, reason string) {
	s.mu.Lock()
	if s.conn != c || !s.phase.bound() {
		s.mu.Unlock()
		return
	}
	t := s.turn
	ending := s.phase.turnRuns()
	if crashed {
		e := presenters.ErrorPayload{Code: "agent_crashed", Retryable: true,
			Message: fmt.Sprintf("agent %s stopped: %s; reopen the session with LoadSession", s.p.cfg.ID, reason)}
		if ending {
			e.MessageID = t.assistantID
		}
		s.emit.Error(e)
	}
	var msg presenters.Message
	var wait <-chan error
	if ending {
		msg, wait = s.endTurnLocked(t, presenters.StopError, presenters.MessageError, nil)
	}
	_, _, terms := s.teardownLocked("the agent stopped")
	s.mu.Unlock()

	if ending {
		<-wait
	}
	s.mu.Lock()
	if ending {
		s.emit.MessageEnd(presenters.MessageEndPayload{MessageID: msg.ID, StopReason: msg.StopReason, Role: presenters.RoleAssistant})
		if s.turn == t {
			s.turn = nil
			s.info.MessageInFlight = ""
		}
	}
	if crashed {
		s.setStatus(presenters.SessionError, reason)
	}
	switch {
	case s.phase != phaseClosing: // a LoadSession was attaching it: it fails
	case crashed:
		s.setPhase(phaseFailed)
	default:
		s.setPhase(phaseClosed)
	}
	s.mu.Unlock()
	if ending {
		close(t.done)
	}
	closeTerminals(terms)
}

// teardownLocked takes a bound session off its agent connection for good, into phase
// closing (the caller ends it in closed or failed): pending requests are answered
// cancelled with reason, a turn ended without the agent's answer stops awaiting it, and
// the session is unbound (unbindLocked). A session a LoadSession is attaching goes back
// to opening instead, and that LoadSession fails. s.mu is held, and released for a
// moment.
func (s *session) teardownLocked(reason string) (*agentConn, sdk.SessionId, *sandbox.Terminals) {
	if s.lateTurnLocked() {
		s.turn.stopPrompt()
	}
	if s.phase == phaseDraining {
		s.turn = nil
	}
	if s.phase == phaseAttaching {
		s.setPhase(phaseOpening)
	} else {
		s.setPhase(phaseClosing)
	}
	s.cancelPendingLocked(reason)
	return s.unbindLocked()
}

// unbindLocked takes the session off its connection: the connection stops routing the
// agent's messages and requests to it, and its terminals are handed back, to be closed
// once s.mu is released. s.mu is held, and released while the connection's lock is
// taken: register applies early updates under that lock, so it comes first.
func (s *session) unbindLocked() (*agentConn, sdk.SessionId, *sandbox.Terminals) {
	conn, acpID := s.conn, s.acpID
	s.mu.Unlock()
	if conn != nil {
		conn.unregister(acpID)
	}
	s.mu.Lock()
	terms := s.terminals.live
	s.conn, s.terminals.live = nil, nil
	return conn, acpID, terms
}

// detach unbinds a session that did not open (a new one that could not be made, or one
// whose attach failed) into phase to, and releases its terminals.
func (s *session) detach(to phase) {
	s.mu.Lock()
	_, _, terms := s.unbindLocked()
	s.setPhase(to)
	s.mu.Unlock()
	closeTerminals(terms)
}

// closeTerminals releases a session's terminals, if it had any.
func closeTerminals(terms *sandbox.Terminals) {
	if terms != nil {
		_ = terms.Close()
	}
}

package service

import (
	"time"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/presenters"
)

// projection is what the event stream says of each session: its agent, its last event,
// the assistant message in flight (with the sequence of its first event) and the pending
// permission requests. It is an events.Observer: the hub feeds it under its lock, in
// sequence order, and Hub reads it only through events.Hub.View, under that same lock.
// A snapshot and the point it is taken at therefore always agree: every event up to the
// point is in the snapshot, and none after it, so a client that resumes after the point
// sees every later event.
//
// It also remembers how permission requests were decided, for a while (decisionMemory,
// at most maxDecisions), so that a RespondPermission repeated after the decision gets it.
type projection struct {
	sessions  map[string]*sessionState
	decisions *timedMemory[decisionKey, permissionDecision]
	// resolutions are the elicitations' outcomes, remembered as decisions are
	// (elicitation.go).
	resolutions *timedMemory[decisionKey, presenters.ElicitationResolvedPayload]
	now         func() time.Time
}

// Decisions are remembered as long as a request_id is, so that a client repeating an
// answer meets the same outcome either way, and at most maxDecisions of them.
const (
	decisionMemory = requestIDTTL
	maxDecisions   = 10_000
)

type decisionKey struct{ sessionID, permissionID string }

// permissionDecision is how one permission request was decided.
type permissionDecision struct {
	sessionID    string
	permissionID string
	optionID     string                          // empty when cancelled
	kind         presenters.PermissionOptionKind // of optionID, when the request was seen
	granted      bool
	decidedBy    presenters.PermissionDecider
}

var _ events.Observer = (*projection)(nil)

// sessionState is the projection of one session's events; for an idle session it is a
// few words (no in-flight message, no pending requests).
type sessionState struct {
	agentID       string
	lastSeq       uint64
	inFlight      string // the assistant message being produced
	inFlightFirst uint64 // the sequence of inFlight's first event
	pending       []presenters.PermissionRequest
	elicitations  []presenters.ElicitationRequest
}

func newProjection() *projection {
	return &projection{sessions: make(map[string]*sessionState), decisions: newTimedMemory[decisionKey, permissionDecision](decisionMemory, maxDecisions),
		resolutions: newTimedMemory[decisionKey, presenters.ElicitationResolvedPayload](decisionMemory, maxDecisions), now: time.Now}
}

// Published updates the session of ev; an agent's own events (no session) change none.
func (p *projection) Published(ev presenters.Event) {
	if ev.SessionID == "" {
		return
	}
	st := p.sessions[ev.SessionID]
	if st == nil {
		st = &sessionState{agentID: ev.AgentID}
		p.sessions[ev.SessionID] = st
	}
	st.lastSeq = ev.Sequence
	if ev.Replay {
		// History shown again is not a turn in flight.
		return
	}
	switch pl := ev.Payload.(type) {
	case presenters.MessageDeltaPayload:
		if assistant(pl.Role) {
			st.setInFlight(pl.MessageID, ev.Sequence)
		}
	case presenters.MessageBlockPayload:
		if assistant(pl.Role) {
			st.setInFlight(pl.MessageID, ev.Sequence)
		}
	case presenters.ToolStartPayload:
		st.setInFlight(pl.MessageID, ev.Sequence)
	case presenters.ToolRunningPayload:
		st.setInFlight(pl.MessageID, ev.Sequence)
	case presenters.ToolEndPayload:
		st.setInFlight(pl.MessageID, ev.Sequence)
	case presenters.MessageEndPayload:
		if assistant(pl.Role) {
			st.endMessage(pl.MessageID)
		}
	case presenters.PermissionRequiredPayload:
		st.removePending(pl.Request.RequestID)
		st.pending = append(st.pending, pl.Request)
	case presenters.PermissionGrantedPayload:
		p.decided(ev.SessionID, presenters.PermissionDecision(pl), true, st.removePending(pl.RequestID))
	case presenters.PermissionDeniedPayload:
		p.decided(ev.SessionID, presenters.PermissionDecision(pl), false, st.removePending(pl.RequestID))
	case presenters.ElicitationRequiredPayload:
		st.removeElicitation(pl.Request.ElicitationID)
		st.elicitations = append(st.elicitations, pl.Request)
	case presenters.ElicitationResolvedPayload:
		st.removeElicitation(pl.ElicitationID)
		p.resolved(ev.SessionID, pl)
	case presenters.SessionClosedPayload:
		st.inFlight, st.inFlightFirst, st.pending, st.elicitations = "", 0, nil, nil
	}
}

// Evicted drops the projection of an idle session whose last event leaves the ring, so
// that memory follows the sessions with recent events, not all sessions ever seen.
// Nothing is lost: an idle session's projection holds nothing but its owner, which the
// store also knows.
func (p *projection) Evicted(sessionID string, sequence uint64) {
	st := p.sessions[sessionID]
	if st != nil && st.lastSeq == sequence && st.inFlight == "" && st.pending == nil && st.elicitations == nil {
		delete(p.sessions, sessionID)
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

// removePending drops a pending request and returns it (zero if it was not pending).
func (st *sessionState) removePending(requestID string) presenters.PermissionRequest {
	for i, r := range st.pending {
		if r.RequestID == requestID {
			st.pending = append(st.pending[:i], st.pending[i+1:]...)
			if len(st.pending) == 0 {
				st.pending = nil
			}
			return r
		}
	}
	return presenters.PermissionRequest{}
}

// decided remembers a decision; req is the request it decided, when it was seen pending
// (it gives the kind of the option chosen).
func (p *projection) decided(sessionID string, d presenters.PermissionDecision, granted bool, req presenters.PermissionRequest) {
	rec := permissionDecision{sessionID: sessionID, permissionID: d.RequestID, optionID: d.OptionID,
		granted: granted, decidedBy: d.DecidedBy}
	if opt, ok := req.Option(d.OptionID); ok {
		rec.kind = opt.Kind
	}
	p.decisions.remember(decisionKey{sessionID, d.RequestID}, rec, p.now())
}

// decision returns how a permission request was decided, if that is remembered.
func (p *projection) decision(sessionID, permissionID string) (permissionDecision, bool) {
	return p.decisions.recall(decisionKey{sessionID, permissionID}, p.now())
}

// permissionDecision returns how a permission request was decided, if the projection
// still remembers it.
func (h *Hub) permissionDecision(sessionID, permissionID string) (d permissionDecision, ok bool) {
	h.events.View(func(uint64) { d, ok = h.proj.decision(sessionID, permissionID) })
	return d, ok
}

// snapshot returns the session's projection at point.
func (p *projection) snapshot(sessionID string, point uint64) sessionSnapshot {
	snap := sessionSnapshot{Point: point}
	if st := p.sessions[sessionID]; st != nil {
		snap.AgentID = st.agentID
		snap.InFlight = st.inFlight
		snap.InFlightFirst = st.inFlightFirst
		snap.Pending = append([]presenters.PermissionRequest(nil), st.pending...)
		snap.Elicitations = append([]presenters.ElicitationRequest(nil), st.elicitations...)
	}
	return snap
}

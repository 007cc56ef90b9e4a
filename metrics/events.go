package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agenticd/agenticd/presenters"
)

// Published counts an event the hub published (service.EventObserver). The hub calls it
// under its lock for every event, message deltas included, so the common case is an
// atomic add and a map lookup.
func (m *Metrics) Published(ev presenters.Event) { m.events.published(ev) }

// eventState is what the metrics follow of the event stream: each session's status,
// model and turn in flight, and each agent's status. Only Published touches it, and the
// hub calls that one event at a time, under its lock.
type eventState struct {
	m        *Metrics
	sessions map[string]*sessionState
	agents   map[string]*agentState
	// byStatus are the sessions gauge's children for the known statuses, looked up once.
	byStatus map[presenters.SessionStatus]prometheus.Gauge
}

type sessionState struct {
	status presenters.SessionStatus // "" until an event says
	model  string
	// The turn in flight: inTurn from its first event (a status change to generating or
	// the assistant's first output) to its MESSAGE_END; turn is its message id once known.
	inTurn    bool
	turn      string
	turnStart time.Time
}

type agentState struct {
	status  presenters.AgentStatus
	crashed bool // crashed since it was last ready
}

func newEventState(m *Metrics) *eventState {
	e := &eventState{m: m, sessions: make(map[string]*sessionState), agents: make(map[string]*agentState),
		byStatus: make(map[presenters.SessionStatus]prometheus.Gauge)}
	for _, s := range []presenters.SessionStatus{presenters.SessionIdle, presenters.SessionGenerating, presenters.SessionPaused, presenters.SessionError} {
		e.byStatus[s] = m.sessions.WithLabelValues(string(s))
	}
	return e
}

func (e *eventState) published(ev presenters.Event) {
	e.m.eventsPublished.Inc()
	if ev.Replay {
		// History a LoadSession shows again: counted when it happened.
		return
	}
	if ev.SessionID == "" {
		if p, ok := ev.Payload.(presenters.AgentStatusChangedPayload); ok {
			e.agentStatus(ev.AgentID, p.Info.Status)
		}
		return
	}
	st := e.sessions[ev.SessionID]
	if st == nil {
		if _, closing := ev.Payload.(presenters.SessionClosedPayload); closing {
			return
		}
		st = &sessionState{}
		e.sessions[ev.SessionID] = st
	}
	switch p := ev.Payload.(type) {
	case presenters.MessageDeltaPayload:
		if assistant(p.Role) {
			e.output(st, p.MessageID, ev.Time)
		}
	case presenters.MessageBlockPayload:
		if assistant(p.Role) {
			e.output(st, p.MessageID, ev.Time)
		}
	case presenters.ToolStartPayload:
		e.output(st, p.MessageID, ev.Time)
	case presenters.ToolRunningPayload:
		e.output(st, p.MessageID, ev.Time)
	case presenters.ToolEndPayload:
		e.output(st, p.MessageID, ev.Time)
	case presenters.MessageEndPayload:
		if assistant(p.Role) {
			e.turnEnded(ev, st, p)
		}
	case presenters.StatusChangedPayload:
		e.setStatus(st, p.Status)
		if p.Status == presenters.SessionGenerating && !st.inTurn {
			st.inTurn, st.turn, st.turnStart = true, "", ev.Time
		}
	case presenters.SessionCreatedPayload:
		st.model = p.Session.CurrentModelID
		e.setStatus(st, cmpStatus(p.Session.Status))
	case presenters.SessionUpdatedPayload:
		if p.Patch.CurrentModelID != nil {
			st.model = *p.Patch.CurrentModelID
		}
		if p.Patch.Status != nil {
			e.setStatus(st, *p.Patch.Status)
		}
	case presenters.SessionClosedPayload:
		e.setStatus(st, "")
		delete(e.sessions, ev.SessionID)
	case presenters.PermissionRequiredPayload:
		e.m.permissionAsked.WithLabelValues(ev.AgentID).Inc()
	case presenters.PermissionGrantedPayload:
		e.m.permissionDecide.WithLabelValues(ev.AgentID, "granted", string(p.DecidedBy)).Inc()
	case presenters.PermissionDeniedPayload:
		e.m.permissionDecide.WithLabelValues(ev.AgentID, "denied", string(p.DecidedBy)).Inc()
	case presenters.ErrorPayload:
		e.m.errors.WithLabelValues(ev.AgentID, p.Code).Inc()
	}
}

// output notes the assistant's output of a message: the first one starts a turn.
func (e *eventState) output(st *sessionState, messageID string, at time.Time) {
	switch {
	case !st.inTurn:
		st.inTurn, st.turn, st.turnStart = true, messageID, at
	case st.turn == "":
		st.turn = messageID
	}
}

// turnEnded counts a turn at its MESSAGE_END: its stop reason, duration and tokens.
func (e *eventState) turnEnded(ev presenters.Event, st *sessionState, p presenters.MessageEndPayload) {
	if st.inTurn && st.turn != "" && st.turn != p.MessageID {
		// The end of another message (not the one in flight) ends no turn.
		return
	}
	e.m.turns.WithLabelValues(ev.AgentID, string(p.StopReason)).Inc()
	if st.inTurn {
		e.m.turnDuration.WithLabelValues(ev.AgentID).Observe(ev.Time.Sub(st.turnStart).Seconds())
	}
	st.inTurn, st.turn = false, ""
	if u := p.Usage; u != nil {
		if u.InputTokens != nil {
			e.m.tokens.WithLabelValues(ev.AgentID, st.model, "input").Add(float64(*u.InputTokens))
		}
		if u.OutputTokens != nil {
			e.m.tokens.WithLabelValues(ev.AgentID, st.model, "output").Add(float64(*u.OutputTokens))
		}
	}
}

// setStatus moves a session between the sessions gauge's statuses ("" counts nowhere).
func (e *eventState) setStatus(st *sessionState, status presenters.SessionStatus) {
	if st.status == status {
		return
	}
	if st.status != "" {
		e.statusGauge(st.status).Dec()
	}
	if status != "" && status != presenters.SessionClosed {
		e.statusGauge(status).Inc()
	} else {
		status = ""
	}
	st.status = status
}

func (e *eventState) statusGauge(s presenters.SessionStatus) prometheus.Gauge {
	if g, ok := e.byStatus[s]; ok {
		return g
	}
	return e.m.sessions.WithLabelValues(string(s))
}

// agentStatus follows an agent's AGENT_STATUS_CHANGED: its status gauge, its crashes and
// its restarts (ready again after a crash).
func (e *eventState) agentStatus(agentID string, status presenters.AgentStatus) {
	a := e.agents[agentID]
	if a == nil {
		a = &agentState{}
		e.agents[agentID] = a
	}
	if a.status != "" {
		e.m.agentStatus.DeleteLabelValues(agentID, string(a.status))
	}
	e.m.agentStatus.WithLabelValues(agentID, string(status)).Set(1)
	a.status = status
	switch status {
	case presenters.AgentCrashed:
		e.m.agentCrashes.WithLabelValues(agentID).Inc()
		a.crashed = true
	case presenters.AgentReady:
		if a.crashed {
			e.m.agentRestarts.WithLabelValues(agentID).Inc()
		}
		a.crashed = false
	}
}

// cmpStatus is a new session's status: one created without one is idle.
func cmpStatus(s presenters.SessionStatus) presenters.SessionStatus {
	if s == "" {
		return presenters.SessionIdle
	}
	return s
}

// assistant reports whether a role is the assistant's: an unset role is (only replays
// carry user or system text).
func assistant(r presenters.MessageRole) bool {
	return r != presenters.RoleUser && r != presenters.RoleSystem
}

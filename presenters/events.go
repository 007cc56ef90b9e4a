package presenters

import "time"

// EventType names an event's payload.
type EventType int

const (
	EventSessionCreated EventType = iota + 1
	EventSessionReady
	EventSessionUpdated
	EventSessionClosed
	EventMessageDelta
	EventMessageBlock
	EventMessageEnd
	EventToolStart
	EventToolRunning
	EventToolEnd
	EventToolPermissionRequired
	EventToolPermissionGranted
	EventToolPermissionDenied
	EventStatusChanged
	EventError
	EventAgentStatusChanged
	EventElicitationRequired
	EventElicitationResolved
	EventMessageQueued
	EventMessageDequeued
	EventMessageSteered
)

// Event is one thing that happened in a session, or to an agent (SessionID empty:
// AGENT_STATUS_CHANGED). The hub assigns Sequence and Time.
type Event struct {
	Sequence  uint64
	SessionID string
	AgentID   string
	Time      time.Time
	// Replay marks history a LoadSession shows again, as opposed to new activity.
	Replay  bool
	Payload Payload
}

// Payload is one of the *Payload types below.
type Payload interface {
	EventType() EventType
}

type SessionCreatedPayload struct{ Session SessionInfo }

// SessionReadyPayload ends a LoadSession; Principal is whose (set by the service).
type SessionReadyPayload struct {
	MessageCount int64
	Principal    string
}

type SessionUpdatedPayload struct{ Patch SessionPatch }

// SessionClosedPayload is a session's end; Principal is whose call ended it (set by
// the service), empty when nobody's did.
type SessionClosedPayload struct {
	Reason    string
	Principal string
}

// MessageDeltaPayload is a chunk of a message's text.
type MessageDeltaPayload struct {
	MessageID string
	Text      string
	Role      MessageRole
}

type MessageBlockPayload struct {
	MessageID string
	Block     Block
	Role      MessageRole
}

type MessageEndPayload struct {
	MessageID  string
	StopReason StopReason
	Usage      *TokenUsage
	Role       MessageRole
	// Principal sent a user message (set by the service); presenters leave it empty.
	Principal string
}

// ToolPayload carries the whole current state of a tool call (start, running, end).
type ToolPayload struct {
	MessageID string
	Tool      ToolCall
}

type ToolStartPayload ToolPayload
type ToolRunningPayload ToolPayload
type ToolEndPayload ToolPayload

type PermissionRequiredPayload struct{ Request PermissionRequest }

// PermissionDecider says who decided a permission request.
type PermissionDecider string

const (
	DecidedByUser      PermissionDecider = "user"
	DecidedByPolicy    PermissionDecider = "policy"
	DecidedByCancelled PermissionDecider = "cancelled"
)

// PermissionDecision is the outcome of a permission request.
type PermissionDecision struct {
	RequestID string
	ToolID    string
	OptionID  string
	DecidedBy PermissionDecider
	Reason    string
	// Principal answered, for DecidedByUser (set by the service); presenters leave it
	// empty.
	Principal string
}

type PermissionGrantedPayload PermissionDecision
type PermissionDeniedPayload PermissionDecision

type ElicitationRequiredPayload struct{ Request ElicitationRequest }

// ElicitationDecider says who resolved an elicitation.
type ElicitationDecider string

const (
	ElicitationByUser      ElicitationDecider = "user"
	ElicitationByAgent     ElicitationDecider = "agent" // a URL elicitation it reported complete
	ElicitationByCancelled ElicitationDecider = "cancelled"
)

// ElicitationResolvedPayload is how an elicitation was resolved.
type ElicitationResolvedPayload struct {
	ElicitationID string
	ToolID        string
	Action        ElicitationAction
	Content       map[string]any
	DecidedBy     ElicitationDecider
	Reason        string
	// Principal answered, for ElicitationByUser (set by the service); presenters leave
	// it empty.
	Principal string
}

type StatusChangedPayload struct {
	Status SessionStatus
	Reason string
}

// ErrorPayload reports a failure; Message says what happened and what to do.
type ErrorPayload struct {
	Code      string
	Message   string
	MessageID string
	Retryable bool
}

// AgentStatusChangedPayload is an agent's whole AgentInfo after its status changed
// (starting, ready, crashed, needs a login). Its event has no session.
type AgentStatusChangedPayload struct{ Info AgentInfo }

func (SessionCreatedPayload) EventType() EventType      { return EventSessionCreated }
func (SessionReadyPayload) EventType() EventType        { return EventSessionReady }
func (SessionUpdatedPayload) EventType() EventType      { return EventSessionUpdated }
func (SessionClosedPayload) EventType() EventType       { return EventSessionClosed }
func (MessageDeltaPayload) EventType() EventType        { return EventMessageDelta }
func (MessageBlockPayload) EventType() EventType        { return EventMessageBlock }
func (MessageEndPayload) EventType() EventType          { return EventMessageEnd }
func (ToolStartPayload) EventType() EventType           { return EventToolStart }
func (ToolRunningPayload) EventType() EventType         { return EventToolRunning }
func (ToolEndPayload) EventType() EventType             { return EventToolEnd }
func (PermissionRequiredPayload) EventType() EventType  { return EventToolPermissionRequired }
func (PermissionGrantedPayload) EventType() EventType   { return EventToolPermissionGranted }
func (PermissionDeniedPayload) EventType() EventType    { return EventToolPermissionDenied }
func (StatusChangedPayload) EventType() EventType       { return EventStatusChanged }
func (ErrorPayload) EventType() EventType               { return EventError }
func (AgentStatusChangedPayload) EventType() EventType  { return EventAgentStatusChanged }
func (ElicitationRequiredPayload) EventType() EventType { return EventElicitationRequired }
func (ElicitationResolvedPayload) EventType() EventType { return EventElicitationResolved }
func (MessageQueuedPayload) EventType() EventType       { return EventMessageQueued }
func (MessageDequeuedPayload) EventType() EventType     { return EventMessageDequeued }
func (MessageSteeredPayload) EventType() EventType      { return EventMessageSteered }

// MessageQueuedPayload is a message that waits for the running turn to end.
type MessageQueuedPayload struct{ Message QueuedMessage }

// DequeueReason says why a message left its session's queue.
type DequeueReason string

const (
	DequeuedStarted   DequeueReason = "started"   // its turn started
	DequeuedCancelled DequeueReason = "cancelled" // a client took it out (CancelMessage)
	DequeuedFailed    DequeueReason = "failed"    // its turn could not start; Detail says why
)

// MessageDequeuedPayload is a queued message leaving the queue.
type MessageDequeuedPayload struct {
	MessageID     string
	UserMessageID string
	Reason        DequeueReason
	Detail        string
}

// MessageSteeredPayload is a user message delivered into the running turn MessageID.
type MessageSteeredPayload struct {
	MessageID     string
	UserMessageID string
}

// Publisher takes events of any session; the service's hub implements it. Publish must
// not block on slow consumers and returns the sequence it assigned.
type Publisher interface {
	Publish(ev Event) uint64
}

// Emitter publishes the events of one session, or of an agent itself (NewAgentEmitter).
// It is a small value: create one wherever needed.
type Emitter struct {
	pub       Publisher
	agentID   string
	sessionID string
	replay    bool
}

// NewEmitter binds a publisher to one session of one agent.
func NewEmitter(pub Publisher, agentID, sessionID string) Emitter {
	return Emitter{pub: pub, agentID: agentID, sessionID: sessionID}
}

// NewAgentEmitter binds a publisher to an agent's own events, which belong to no
// session (AgentStatusChanged).
func NewAgentEmitter(pub Publisher, agentID string) Emitter {
	return Emitter{pub: pub, agentID: agentID}
}

// Replaying is the emitter marking what it emits as a LoadSession's replay.
func (e Emitter) Replaying() Emitter {
	e.replay = true
	return e
}

// SessionID is the session the emitter is bound to.
func (e Emitter) SessionID() string { return e.sessionID }

// Emit publishes any payload and returns its sequence.
func (e Emitter) Emit(p Payload) uint64 {
	return e.pub.Publish(Event{SessionID: e.sessionID, AgentID: e.agentID, Replay: e.replay, Payload: p})
}

// AgentStatusChanged publishes an agent's new state; the emitter is NewAgentEmitter's.
func (e Emitter) AgentStatusChanged(info AgentInfo) uint64 {
	return e.Emit(AgentStatusChangedPayload{Info: info})
}

func (e Emitter) SessionCreated(info SessionInfo) uint64 {
	return e.Emit(SessionCreatedPayload{Session: info})
}

func (e Emitter) SessionReady(messageCount int64) uint64 {
	return e.Emit(SessionReadyPayload{MessageCount: messageCount})
}

func (e Emitter) SessionUpdated(p SessionPatch) uint64 {
	return e.Emit(SessionUpdatedPayload{Patch: p})
}

func (e Emitter) SessionClosed(reason string) uint64 {
	return e.Emit(SessionClosedPayload{Reason: reason})
}

func (e Emitter) MessageDelta(messageID string, role MessageRole, text string) uint64 {
	return e.Emit(MessageDeltaPayload{MessageID: messageID, Text: text, Role: role})
}

func (e Emitter) MessageBlock(messageID string, role MessageRole, b Block) uint64 {
	return e.Emit(MessageBlockPayload{MessageID: messageID, Block: b, Role: role})
}

func (e Emitter) MessageEnd(p MessageEndPayload) uint64 { return e.Emit(p) }

func (e Emitter) ToolStart(messageID string, t ToolCall) uint64 {
	return e.Emit(ToolStartPayload{MessageID: messageID, Tool: t})
}

func (e Emitter) ToolRunning(messageID string, t ToolCall) uint64 {
	return e.Emit(ToolRunningPayload{MessageID: messageID, Tool: t})
}

func (e Emitter) ToolEnd(messageID string, t ToolCall) uint64 {
	return e.Emit(ToolEndPayload{MessageID: messageID, Tool: t})
}

func (e Emitter) PermissionRequired(r PermissionRequest) uint64 {
	return e.Emit(PermissionRequiredPayload{Request: r})
}

func (e Emitter) PermissionGranted(d PermissionDecision) uint64 {
	return e.Emit(PermissionGrantedPayload(d))
}

func (e Emitter) PermissionDenied(d PermissionDecision) uint64 {
	return e.Emit(PermissionDeniedPayload(d))
}

func (e Emitter) ElicitationRequired(r ElicitationRequest) uint64 {
	return e.Emit(ElicitationRequiredPayload{Request: r})
}

func (e Emitter) ElicitationResolved(r ElicitationResolvedPayload) uint64 { return e.Emit(r) }

func (e Emitter) StatusChanged(status SessionStatus, reason string) uint64 {
	return e.Emit(StatusChangedPayload{Status: status, Reason: reason})
}

func (e Emitter) Error(p ErrorPayload) uint64 { return e.Emit(p) }

func (e Emitter) MessageSteered(messageID, userMessageID string) uint64 {
	return e.Emit(MessageSteeredPayload{MessageID: messageID, UserMessageID: userMessageID})
}

package tracing

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agenticd/agenticd/presenters"
)

// ScopeName is the instrumentation scope of the spans Turns makes.
const ScopeName = "github.com/agenticd/agenticd/tracing"

// GenAI semantic-convention attribute keys (and agenticd's own, for what they lack).
const (
	keyOperation      = attribute.Key("gen_ai.operation.name")
	keyAgentID        = attribute.Key("gen_ai.agent.id")
	keyConversationID = attribute.Key("gen_ai.conversation.id")
	keyRequestModel   = attribute.Key("gen_ai.request.model")
	keyInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	keyFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	keyToolName       = attribute.Key("gen_ai.tool.name")
	keyToolCallID     = attribute.Key("gen_ai.tool.call.id")
	keyToolType       = attribute.Key("gen_ai.tool.type")
	keyMessageID      = attribute.Key("agenticd.message_id")
	keyStopReason     = attribute.Key("agenticd.stop_reason")
	keyToolKind       = attribute.Key("agenticd.tool.kind")
	keyToolStatus     = attribute.Key("agenticd.tool.status")
	keyErrorCode      = attribute.Key("agenticd.error.code")
)

// Operation names, which also start the span names.
const (
	OpInvokeAgent = "invoke_agent"
	OpExecuteTool = "execute_tool"
)

// Turns derives spans from the events the hub publishes (service.EventObserver): a span
// per turn (invoke_agent), from the SendMessage that started it, or from its first event
// when no call did, to its MESSAGE_END; and a span per tool call (execute_tool), a child of
// its turn's, from TOOL_START to TOOL_END. Spans take the events' times.
type Turns struct {
	tracer trace.Tracer

	mu       sync.Mutex // Published (under the hub's lock) and the RPCs' Begin
	sessions map[string]*sessionSpans
}

// sessionSpans is one session's turn in flight and what its spans need to know.
type sessionSpans struct {
	agentID string
	model   string
	// pending is the span of a SendMessage whose turn has not shown in the events yet.
	pending trace.Span
	// The turn in flight: inTurn from its first event to its MESSAGE_END; message is its
	// message id once known.
	inTurn  bool
	message string
	turn    trace.Span
	turnCtx context.Context
	tools   map[string]trace.Span
}

// NewTurns makes the turn and tool spans with tp.
func NewTurns(tp trace.TracerProvider) *Turns {
	return &Turns{tracer: tp.Tracer(ScopeName), sessions: make(map[string]*sessionSpans)}
}

// Begin starts the span of the turn a SendMessage asks for, as a child of the span in
// ctx (the RPC's), and returns ctx carrying it: the presenter passes that on to the
// agent (ACP _meta, provider HTTP headers), so the agent's own spans join the turn. The
// events of the turn then take the span over and end it at MESSAGE_END. done ends it
// with the call's error if the call failed before the turn began.
func (t *Turns) Begin(ctx context.Context, sessionID string) (turnCtx context.Context, done func(err error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.session(sessionID)
	attrs := []attribute.KeyValue{keyOperation.String(OpInvokeAgent), keyConversationID.String(sessionID)}
	if s.agentID != "" {
		attrs = append(attrs, keyAgentID.String(s.agentID))
	}
	if s.model != "" {
		attrs = append(attrs, keyRequestModel.String(s.model))
	}
	turnCtx, span := t.tracer.Start(ctx, spanName(OpInvokeAgent, s.agentID), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if s.pending != nil {
		// A call whose turn never showed: nothing will end its span but this.
		s.pending.End()
	}
	s.pending = span
	return turnCtx, func(err error) {
		if err == nil {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if s := t.sessions[sessionID]; s != nil && s.pending == span {
			s.pending = nil
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.End()
			// A failed call may name a session no event ever told of (a wrong id): its
			// entry must not outlive the call.
			if !s.inTurn && s.agentID == "" && len(s.tools) == 0 {
				delete(t.sessions, sessionID)
			}
		}
	}
}

// Published follows one event. The hub calls it under its lock for every event, so for
// most (message deltas) it is a map lookup.
func (t *Turns) Published(ev presenters.Event) {
	if ev.Replay || ev.SessionID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch p := ev.Payload.(type) {
	case presenters.MessageDeltaPayload:
		if assistant(p.Role) {
			t.output(ev, p.MessageID)
		}
	case presenters.MessageBlockPayload:
		if assistant(p.Role) {
			t.output(ev, p.MessageID)
		}
	case presenters.ToolStartPayload:
		t.toolStarted(ev, p.MessageID, p.Tool)
	case presenters.ToolRunningPayload:
		t.toolStarted(ev, p.MessageID, p.Tool)
	case presenters.ToolEndPayload:
		s := t.toolStarted(ev, p.MessageID, p.Tool)
		endTool(s.tools[p.Tool.ToolID], p.Tool, ev.Time)
		delete(s.tools, p.Tool.ToolID)
	case presenters.MessageEndPayload:
		if assistant(p.Role) {
			t.turnEnded(ev, p)
		}
	case presenters.StatusChangedPayload:
		if p.Status == presenters.SessionGenerating {
			t.startTurn(ev, "")
		}
	case presenters.ErrorPayload:
		if s := t.sessions[ev.SessionID]; s != nil && s.turn != nil {
			s.turn.AddEvent("agenticd.error", trace.WithTimestamp(ev.Time),
				trace.WithAttributes(keyErrorCode.String(p.Code), attribute.String("message", p.Message)))
		}
	case presenters.SessionCreatedPayload:
		s := t.session(ev.SessionID)
		s.agentID, s.model = ev.AgentID, p.Session.CurrentModelID
	case presenters.SessionUpdatedPayload:
		if p.Patch.CurrentModelID != nil {
			t.session(ev.SessionID).model = *p.Patch.CurrentModelID
		}
	case presenters.SessionClosedPayload:
		if s := t.sessions[ev.SessionID]; s != nil {
			s.endTurn(ev.Time)
			if s.pending != nil {
				s.pending.End(trace.WithTimestamp(ev.Time))
			}
			delete(t.sessions, ev.SessionID)
		}
	}
}

func (t *Turns) session(sessionID string) *sessionSpans {
	s := t.sessions[sessionID]
	if s == nil {
		s = &sessionSpans{}
		t.sessions[sessionID] = s
	}
	return s
}

// output notes the assistant's output of a message: the first output of a turn starts it
// when nothing has.
func (t *Turns) output(ev presenters.Event, messageID string) *sessionSpans {
	s := t.sessions[ev.SessionID]
	switch {
	case s == nil || !s.inTurn:
		return t.startTurn(ev, messageID)
	case s.message == "" && messageID != "":
		s.message = messageID
		s.turn.SetAttributes(keyMessageID.String(messageID))
	}
	return s
}

// startTurn starts the session's turn at ev unless one is in flight: it takes over the
// span of the SendMessage that asked for it, or starts a span of its own (a root).
func (t *Turns) startTurn(ev presenters.Event, messageID string) *sessionSpans {
	s := t.session(ev.SessionID)
	if s.inTurn {
		return s
	}
	s.agentID = ev.AgentID
	s.inTurn, s.message = true, messageID
	attrs := []attribute.KeyValue{keyAgentID.String(ev.AgentID)}
	if s.model != "" {
		attrs = append(attrs, keyRequestModel.String(s.model))
	}
	if messageID != "" {
		attrs = append(attrs, keyMessageID.String(messageID))
	}
	if s.pending != nil {
		s.turn, s.pending = s.pending, nil
		s.turn.SetName(spanName(OpInvokeAgent, ev.AgentID))
		s.turn.SetAttributes(attrs...)
	} else {
		attrs = append(attrs, keyOperation.String(OpInvokeAgent), keyConversationID.String(ev.SessionID))
		_, s.turn = t.tracer.Start(context.Background(), spanName(OpInvokeAgent, ev.AgentID), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(ev.Time), trace.WithAttributes(attrs...))
	}
	s.turnCtx = trace.ContextWithSpan(context.Background(), s.turn)
	return s
}

// toolStarted returns the session with a span for the tool call, started at its first
// event (TOOL_START, or a later one when that was missed).
func (t *Turns) toolStarted(ev presenters.Event, messageID string, tool presenters.ToolCall) *sessionSpans {
	s := t.output(ev, messageID)
	if _, ok := s.tools[tool.ToolID]; ok {
		return s
	}
	if s.tools == nil {
		s.tools = make(map[string]trace.Span)
	}
	attrs := []attribute.KeyValue{keyOperation.String(OpExecuteTool), keyToolCallID.String(tool.ToolID),
		keyToolType.String("function"), keyConversationID.String(ev.SessionID)}
	if tool.ToolName != "" {
		attrs = append(attrs, keyToolName.String(tool.ToolName))
	}
	if tool.Kind != "" {
		attrs = append(attrs, keyToolKind.String(string(tool.Kind)))
	}
	_, span := t.tracer.Start(s.turnCtx, spanName(OpExecuteTool, tool.ToolName), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(ev.Time), trace.WithAttributes(attrs...))
	s.tools[tool.ToolID] = span
	return s
}

// endTool ends a tool call's span with its final status.
func endTool(span trace.Span, tool presenters.ToolCall, at time.Time) {
	if span == nil {
		return
	}
	span.SetAttributes(keyToolStatus.String(string(tool.Status)))
	if tool.Status == presenters.ToolFailed {
		span.SetStatus(codes.Error, tool.Error)
	}
	span.End(trace.WithTimestamp(at))
}

// turnEnded ends the turn in flight at its MESSAGE_END, with the tokens it used and its
// stop reason (an error stop is an error status).
func (t *Turns) turnEnded(ev presenters.Event, p presenters.MessageEndPayload) {
	s := t.sessions[ev.SessionID]
	if s == nil || !s.inTurn {
		// A turn that ended before any other event of it (refused at once): a span of an
		// instant, so that it is seen.
		s = t.startTurn(ev, p.MessageID)
	}
	if s.message != "" && s.message != p.MessageID {
		return // the end of another message ends no turn
	}
	attrs := []attribute.KeyValue{keyStopReason.String(string(p.StopReason)), keyFinishReasons.StringSlice([]string{string(p.StopReason)})}
	if s.message == "" && p.MessageID != "" {
		attrs = append(attrs, keyMessageID.String(p.MessageID))
	}
	if u := p.Usage; u != nil {
		if u.InputTokens != nil {
			attrs = append(attrs, keyInputTokens.Int64(*u.InputTokens))
		}
		if u.OutputTokens != nil {
			attrs = append(attrs, keyOutputTokens.Int64(*u.OutputTokens))
		}
	}
	s.turn.SetAttributes(attrs...)
	if p.StopReason == presenters.StopError {
		s.turn.SetStatus(codes.Error, "the turn ended with an error")
	}
	s.endTurn(ev.Time)
}

// endTurn ends the turn in flight and the spans of its tool calls still open.
func (s *sessionSpans) endTurn(at time.Time) {
	if !s.inTurn {
		return
	}
	for id, span := range s.tools {
		span.SetAttributes(keyToolStatus.String("unfinished"))
		span.End(trace.WithTimestamp(at))
		delete(s.tools, id)
	}
	s.turn.End(trace.WithTimestamp(at))
	s.inTurn, s.message, s.turn, s.turnCtx = false, "", nil, nil
}

// spanName is the GenAI conventions' "{operation} {name}", or the operation alone.
func spanName(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

// assistant reports whether a role is the assistant's: an unset role is (only replays
// carry user or system text).
func assistant(r presenters.MessageRole) bool {
	return r != presenters.RoleUser && r != presenters.RoleSystem
}

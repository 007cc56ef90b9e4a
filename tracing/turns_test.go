package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agenticd/agenticd/presenters"
)

func newTestTurns(t *testing.T) (*Turns, *tracetest.InMemoryExporter, trace.Tracer) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return NewTurns(tp), exp, tp.Tracer("test")
}

func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(exp.GetSpans()))
	return tracetest.SpanStub{}
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A turn started by SendMessage is a child of the call's span, carried by the context
// Begin returns; its tool calls are its children; the spans take the events' times and
// end at MESSAGE_END with the GenAI attributes.
func TestTurnSpanFromSendMessage(t *testing.T) {
	turns, exp, tracer := newTestTurns(t)
	t0 := time.Unix(2000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pub := func(s int, p presenters.Payload) {
		turns.Published(presenters.Event{SessionID: "s1", AgentID: "acp.test.agent", Time: at(s), Payload: p})
	}
	pub(0, presenters.SessionCreatedPayload{Session: presenters.SessionInfo{CurrentModelID: "model-a"}})

	rpcCtx, rpc := tracer.Start(context.Background(), "agentic.v1.AgenticService/SendMessage")
	turnCtx, done := turns.Begin(rpcCtx, "s1")
	passed := trace.SpanContextFromContext(turnCtx) // what a presenter passes on to the agent
	pub(1, presenters.StatusChangedPayload{Status: presenters.SessionGenerating})
	done(nil)
	rpc.End()
	tool := presenters.ToolCall{ToolID: "t1", ToolName: "read_file", Kind: presenters.ToolKind("read")}
	pub(2, presenters.MessageDeltaPayload{MessageID: "m1", Text: "x", Role: presenters.RoleAssistant})
	pub(3, presenters.ToolStartPayload{MessageID: "m1", Tool: tool})
	tool.Status = presenters.ToolFailed
	tool.Error = "no such file"
	pub(5, presenters.ToolEndPayload{MessageID: "m1", Tool: tool})
	pub(9, presenters.MessageEndPayload{MessageID: "m1", StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant,
		Usage: &presenters.TokenUsage{InputTokens: presenters.Reported[int64](100), OutputTokens: presenters.Reported[int64](20)}})

	turn := spanNamed(t, exp, "invoke_agent acp.test.agent")
	if turn.Parent.SpanID() != rpc.SpanContext().SpanID() {
		t.Errorf("the turn's parent is %v, want the SendMessage span %v", turn.Parent.SpanID(), rpc.SpanContext().SpanID())
	}
	if turn.SpanContext.SpanID() != passed.SpanID() {
		t.Errorf("the context Begin returned carries span %v, not the turn's %v", passed.SpanID(), turn.SpanContext.SpanID())
	}
	if !turn.EndTime.Equal(at(9)) {
		t.Errorf("the turn ended at %v, want MESSAGE_END's time %v", turn.EndTime, at(9))
	}
	for key, want := range map[attribute.Key]attribute.Value{
		keyAgentID: attribute.StringValue("acp.test.agent"), keyConversationID: attribute.StringValue("s1"),
		keyRequestModel: attribute.StringValue("model-a"), keyInputTokens: attribute.Int64Value(100),
		keyOutputTokens: attribute.Int64Value(20), keyStopReason: attribute.StringValue("end_turn"),
		keyOperation: attribute.StringValue(OpInvokeAgent), keyMessageID: attribute.StringValue("m1"),
	} {
		if got := attr(turn, key); got != want {
			t.Errorf("turn %s = %v, want %v", key, got.String(), want.String())
		}
	}
	if turn.Status.Code == codes.Error {
		t.Errorf("an end_turn turn has error status")
	}
	ts := spanNamed(t, exp, "execute_tool read_file")
	if ts.Parent.SpanID() != turn.SpanContext.SpanID() {
		t.Errorf("the tool span's parent is %v, want the turn %v", ts.Parent.SpanID(), turn.SpanContext.SpanID())
	}
	if !ts.StartTime.Equal(at(3)) || !ts.EndTime.Equal(at(5)) {
		t.Errorf("tool span %v..%v, want TOOL_START..TOOL_END %v..%v", ts.StartTime, ts.EndTime, at(3), at(5))
	}
	if ts.Status.Code != codes.Error || attr(ts, keyToolCallID).AsString() != "t1" {
		t.Errorf("failed tool: status %v, call id %q", ts.Status, attr(ts, keyToolCallID).AsString())
	}
}

// A turn no call started gets a root span from its first event; an error stop is an
// error status and ends the tool calls still open.
func TestTurnSpanFromEventsAlone(t *testing.T) {
	turns, exp, _ := newTestTurns(t)
	t0 := time.Unix(3000, 0)
	pub := func(s int, p presenters.Payload) {
		turns.Published(presenters.Event{SessionID: "s2", AgentID: "deepchat.x", Time: t0.Add(time.Duration(s) * time.Second), Payload: p})
	}
	pub(1, presenters.MessageDeltaPayload{MessageID: "m", Text: "x"})
	pub(2, presenters.ToolStartPayload{MessageID: "m", Tool: presenters.ToolCall{ToolID: "t", ToolName: "run_command"}})
	pub(4, presenters.MessageEndPayload{MessageID: "m", StopReason: presenters.StopError})
	turn := spanNamed(t, exp, "invoke_agent deepchat.x")
	if turn.Parent.IsValid() || !turn.StartTime.Equal(t0.Add(time.Second)) {
		t.Errorf("turn: parent %v start %v, want a root from the first event's time", turn.Parent, turn.StartTime)
	}
	if turn.Status.Code != codes.Error {
		t.Errorf("an error stop: status %v, want Error", turn.Status)
	}
	if tool := spanNamed(t, exp, "execute_tool run_command"); !tool.EndTime.Equal(turn.EndTime) {
		t.Errorf("the open tool call ended at %v, want with the turn at %v", tool.EndTime, turn.EndTime)
	}
}

// A SendMessage that fails before its turn began ends the turn's span with the error, and
// a later turn is not taken for it.
func TestFailedSendEndsItsSpan(t *testing.T) {
	turns, exp, _ := newTestTurns(t)
	_, done := turns.Begin(context.Background(), "s3")
	done(errors.New("session busy"))
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != codes.Error {
		t.Fatalf("spans after a failed send: %+v, want one with error status", spans)
	}
	turns.mu.Lock()
	kept := len(turns.sessions)
	turns.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d sessions kept after a failed send to a session no event told of", kept)
	}
	turns.Published(presenters.Event{SessionID: "s3", AgentID: "a", Time: time.Now(), Payload: presenters.MessageEndPayload{MessageID: "m", StopReason: presenters.StopEndTurn}})
	if spans := exp.GetSpans(); len(spans) != 2 || spans[1].Parent.IsValid() {
		t.Errorf("the next turn: %d spans, parent %v; want a root span of its own", len(spans), spans[len(spans)-1].Parent)
	}
}

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

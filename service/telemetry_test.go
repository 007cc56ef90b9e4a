package service

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/metrics"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/tracing"
)

// newTelemetryEnv is newEnv's server with metrics and tracing on: its hub tells the
// metrics and the turns of every event, as the daemon wires them.
func newTelemetryEnv(t *testing.T, m *metrics.Metrics, tp trace.TracerProvider) *testEnv {
	t.Helper()
	ctx := context.Background()
	turns := tracing.NewTurns(tp)
	e := &testEnv{store: openStore(t)}
	var err error
	if e.hub, err = NewHub(ctx, HubOptions{Store: e.store, Observers: []EventObserver{m, turns}}); err != nil {
		t.Fatal(err)
	}
	if e.root, err = filepath.EvalSymlinks(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	roots, err := sandbox.NewRoots([]string{e.root}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.fake, e.other = newFake(fakeID, e.hub), newFake(otherID, e.hub)
	registry, err := NewRegistry(e.store, []presenters.Presenter{e.fake, e.other})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewGRPCServer(New(Options{Registry: registry, Hub: e.hub, Roots: roots, Logger: discard}),
		GRPCOptions{Credentials: Credentials{Tokens: []string{testToken}}, Logger: discard, Metrics: m, TracerProvider: tp, Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	m.WatchHub(e.hub)
	e.lis = listenLoopback(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(e.lis) }()
	e.token = testToken
	e.conn = dialListener(t, e.lis, e.token)
	e.client = pb.NewAgenticServiceClient(e.conn)
	t.Cleanup(func() {
		_ = e.conn.Close()
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		srv.Stop(stopped)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// gathered finds a metric's value by name and labels in a registry's exposition.
func gathered(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metric
				}
			}
			return value(m)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

// Every RPC is counted per method and code and traced, native gRPC and Connect alike; a
// SendMessage's turn span is a child of the call's span and is the span in the context
// the presenter gets, so that the presenter can pass it on to the agent.
func TestTelemetryOfRPCsAndTurns(t *testing.T) {
	m := metrics.New()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	e := newTelemetryEnv(t, m, tp)

	var seen trace.SpanContext // the span in the context the presenter got
	e.fake.sendFn = func(ctx context.Context, id string, c presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
		seen = trace.SpanContextFromContext(ctx)
		em := e.fake.emitter(id)
		em.MessageDelta("m1", presenters.RoleAssistant, "hi")
		em.MessageEnd(presenters.MessageEndPayload{MessageID: "m1", StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant,
			Usage: &presenters.TokenUsage{OutputTokens: presenters.Reported[int64](3)}})
		return presenters.SendResult{MessageID: "m1", UserMessageID: "u1"}, nil
	}
	session := e.createSession(t, fakeID)
	if _, err := e.client.SendMessage(context.Background(), &pb.SendMessageRequest{SessionId: session.GetSessionId(),
		Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "hello"}}}}}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if _, err := e.client.GetSession(context.Background(), &pb.GetSessionRequest{SessionId: "no-such-session"}); err == nil {
		t.Fatal("GetSession of an unknown session succeeded")
	}
	resp := post(t, e.httpClient(t, false), rpcURL("ListAgents"), "application/json", []byte(`{}`), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Connect ListAgents: %s", resp.Status)
	}

	reg := m.Registry()
	for _, c := range []struct {
		method, code string
	}{{"SendMessage", "OK"}, {"GetSession", "NotFound"}, {"ListAgents", "OK"}} {
		if got := gathered(t, reg, "agenticd_grpc_server_handled_total", map[string]string{"grpc_method": c.method, "grpc_code": c.code}); got != 1 {
			t.Errorf("agenticd_grpc_server_handled_total{%s,%s} = %v, want 1", c.method, c.code, got)
		}
	}
	if got := gathered(t, reg, "agenticd_grpc_server_handling_seconds", map[string]string{"grpc_method": "ListAgents"}); got != 1 {
		t.Errorf("ListAgents latency samples = %v, want 1 (the Connect call)", got)
	}
	if got := gathered(t, reg, "agenticd_turns_total", map[string]string{"agent_id": fakeID, "stop_reason": "end_turn"}); got != 1 {
		t.Errorf("agenticd_turns_total = %v, want 1", got)
	}
	if got := gathered(t, reg, "agenticd_event_ring_events", nil); got < 1 {
		t.Errorf("agenticd_event_ring_events = %v, want the events published", got)
	}

	var rpc, turn, listAgents tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "agentic.v1.AgenticService/SendMessage":
			rpc = s
		case "invoke_agent " + fakeID:
			turn = s
		case "agentic.v1.AgenticService/ListAgents":
			listAgents = s
		}
	}
	if !rpc.SpanContext.IsValid() || !turn.SpanContext.IsValid() || !listAgents.SpanContext.IsValid() {
		t.Fatalf("spans: SendMessage %v, turn %v, ListAgents over Connect %v", rpc.SpanContext.IsValid(), turn.SpanContext.IsValid(), listAgents.SpanContext.IsValid())
	}
	if turn.Parent.SpanID() != rpc.SpanContext.SpanID() {
		t.Errorf("the turn's parent is %v, want the SendMessage span %v", turn.Parent.SpanID(), rpc.SpanContext.SpanID())
	}
	if seen.SpanID() != turn.SpanContext.SpanID() {
		t.Errorf("the presenter's context carries span %v, want the turn's %v", seen.SpanID(), turn.SpanContext.SpanID())
	}
}

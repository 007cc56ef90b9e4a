package service

import (
	"context"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/metrics"
	"github.com/agenticd/agenticd/tracing"
)

// Stats is the hub's load now, for metrics (events.Hub.Stats).
func (h *Hub) Stats() events.Stats { return h.events.Stats() }

// rpcBuckets are the RPC latency histogram's bounds, in seconds: unary calls take
// milliseconds, a SendMessage waits for an agent to take the turn, and a Subscribe stream
// lasts as long as its client stays.
var rpcBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600}

// telemetry is what NewGRPCServer adds for metrics and traces. Connect and gRPC-Web calls
// run through the same grpc.Server (httpGateway), so they are counted and traced alike.
type telemetry struct {
	rpcMetrics *grpcprom.ServerMetrics // nil without metrics
	provider   trace.TracerProvider    // nil without tracing
	turns      *tracing.Turns          // nil without tracing
}

func newTelemetry(m *metrics.Metrics, tp trace.TracerProvider, turns *tracing.Turns) telemetry {
	t := telemetry{provider: tp, turns: turns}
	if m != nil {
		t.rpcMetrics = grpcprom.NewServerMetrics(
			grpcprom.WithServerCounterOptions(grpcprom.WithNamespace(metrics.Namespace)),
			grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramNamespace(metrics.Namespace), grpcprom.WithHistogramBuckets(rpcBuckets)),
		)
		m.Registry().MustRegister(t.rpcMetrics)
	}
	return t
}

// serverOptions wraps the server's own options: the span per RPC (a stats handler, so it
// starts before any interceptor) and the RPC metrics outermost, so that every refusal is
// counted with its code; the hand-over of SendMessage's span to the turn innermost, after
// the answers to repeated request_ids, which start no turn.
func (t telemetry) serverOptions(own []grpc.ServerOption) []grpc.ServerOption {
	var opts []grpc.ServerOption
	if t.provider != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(t.provider),
			otelgrpc.WithPropagators(tracing.Propagator()),
			// Metrics are the Prometheus side's; the handler's own would go nowhere.
			otelgrpc.WithMeterProvider(noop.NewMeterProvider()),
		)))
	}
	if t.rpcMetrics != nil {
		var exemplar []grpcprom.Option
		if t.provider != nil {
			exemplar = append(exemplar, grpcprom.WithExemplarFromContext(traceExemplar))
		}
		opts = append(opts, grpc.ChainUnaryInterceptor(t.rpcMetrics.UnaryServerInterceptor(exemplar...)),
			grpc.ChainStreamInterceptor(t.rpcMetrics.StreamServerInterceptor(exemplar...)))
	}
	opts = append(opts, own...)
	if t.turns != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(turnSpan(t.turns)))
	}
	return opts
}

// registered readies the metrics of every method registered on g, so that each shows
// (at zero) before its first call.
func (t telemetry) registered(g *grpc.Server) {
	if t.rpcMetrics != nil {
		t.rpcMetrics.InitializeMetrics(g)
	}
}

// traceExemplar links an RPC's latency to its trace (shown in the OpenMetrics format).
func traceExemplar(ctx context.Context) prometheus.Labels {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		return prometheus.Labels{"trace_id": sc.TraceID().String()}
	}
	return nil
}

// turnSpan starts the span of the turn a SendMessage asks for (tracing.Turns.Begin) and
// hands the handler a context carrying it, which reaches the presenter.
func turnSpan(turns *tracing.Turns) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		send, ok := req.(*pb.SendMessageRequest)
		if !ok || send.GetSessionId() == "" {
			return next(ctx, req)
		}
		ctx, done := turns.Begin(ctx, send.GetSessionId())
		resp, err := next(ctx, req)
		done(err)
		return resp, err
	}
}

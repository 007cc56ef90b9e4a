package tracecontext

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The turn's span travels as traceparent in an ACP _meta and in provider HTTP headers.
func TestPropagation(t *testing.T) {
	if ACPMeta(context.Background()) != nil {
		t.Error("a context without a span gave a _meta")
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "turn")
	defer span.End()
	want := span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String()
	meta := ACPMeta(ctx)
	if tp, _ := meta["traceparent"].(string); !strings.Contains(tp, want) {
		t.Errorf("_meta %v lacks traceparent with %s", meta, want)
	}
	h := http.Header{}
	InjectHTTP(ctx, h)
	if !strings.Contains(h.Get("traceparent"), want) {
		t.Errorf("headers %v lack traceparent with %s", h, want)
	}
}

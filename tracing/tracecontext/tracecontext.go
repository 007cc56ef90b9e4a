// Package tracecontext carries the W3C trace context of a turn to where agenticd calls
// out: an ACP request's _meta and a provider's HTTP headers. It needs OpenTelemetry's
// API alone, so that presenters can use it without the exporters.
package tracecontext

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// ACPMeta is the W3C trace context of ctx's span (traceparent, and tracestate when set)
// as an ACP request's _meta, for the agent's own spans to join the turn's trace; nil when
// ctx carries no span.
func ACPMeta(ctx context.Context) map[string]any {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	meta := make(map[string]any, len(carrier))
	for k, v := range carrier {
		meta[k] = v
	}
	return meta
}

// InjectHTTP sets the W3C trace context headers of ctx's span on an outgoing request
// (a provider call); it sets nothing when ctx carries no span.
func InjectHTTP(ctx context.Context, h http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

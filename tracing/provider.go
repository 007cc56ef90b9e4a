// Package tracing gives agenticd OpenTelemetry traces: a tracer provider configured by the
// standard OTEL_* variables (off unless they ask for traces), and Turns, which derives a
// span per turn (invoke_agent) and per tool call (execute_tool) from the event stream,
// with the GenAI semantic conventions' attributes. It knows nothing of gRPC: the service
// adds the span per RPC and hands each SendMessage's context to Turns.
package tracing

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Enabled reports whether the environment asks for traces: OTEL_TRACES_EXPORTER set to
// an exporter (not "none"), or an OTLP endpoint set (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and OTEL_SDK_DISABLED not "true". Tracing is off
// by default: the SDK's own default exporter (OTLP to localhost) would send spans to
// whatever answers there.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter != "" {
		return exporter != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewProvider returns a tracer provider that batches spans to the exporter the OTEL_*
// variables name (otlp by default, over OTEL_EXPORTER_OTLP_PROTOCOL; console; none),
// sampled as OTEL_TRACES_SAMPLER says, with the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES describe (service.name agenticd unless they say otherwise).
// Shutdown flushes it. Call it only when Enabled.
func NewProvider(ctx context.Context, version string) (*sdktrace.TracerProvider, error) {
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry traces (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*): %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "agenticd")}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	// Later options win: the environment overrides the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithFromEnv())
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}

// Propagator is the W3C trace context (traceparent, tracestate) and baggage: what the RPC
// spans read from requests, and what presenters pass on to agents and providers.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

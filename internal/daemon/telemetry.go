package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/metrics"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/tracing"
)

// telemetry is the server's metrics (metrics.listen set) and traces (OTEL_* variables
// set); either may be off, and then costs nothing.
type telemetry struct {
	metrics  *metrics.Metrics         // nil: off
	provider *sdktrace.TracerProvider // nil: off
	turns    *tracing.Turns
	served   *metrics.Server
	addr     string // the metrics listener's address, once serving
}

// newTelemetry builds what cfg and the environment ask for; the metrics time the store's
// writes from here on.
func newTelemetry(ctx context.Context, cfg Config, st *store.Store, logger *slog.Logger) (*telemetry, error) {
	t := &telemetry{}
	if cfg.Metrics.Listen != "" {
		t.metrics = metrics.New()
		st.SetWriteObserver(t.metrics.ObserveWrite)
	}
	if tracing.Enabled(os.Getenv) {
		tp, err := tracing.NewProvider(ctx, version.Number())
		if err != nil {
			return nil, err
		}
		t.provider, t.turns = tp, tracing.NewTurns(tp)
		logger.Info("OpenTelemetry traces on", "exporter", os.Getenv("OTEL_TRACES_EXPORTER"),
			"endpoint", cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")))
	}
	return t, nil
}

// observers are the hub's observers for metrics and traces.
func (t *telemetry) observers() []service.EventObserver {
	var obs []service.EventObserver
	if t.metrics != nil {
		obs = append(obs, t.metrics)
	}
	if t.turns != nil {
		obs = append(obs, t.turns)
	}
	return obs
}

// watch has the metrics follow the hub's load and the agents' processes.
func (t *telemetry) watch(hub *service.Hub, agents []presenters.Presenter) {
	if t.metrics == nil {
		return
	}
	t.metrics.WatchHub(hub)
	t.metrics.WatchAgents(agents)
}

// grpcOptions adds the RPC metrics and spans to the server's options.
func (t *telemetry) grpcOptions(opts service.GRPCOptions) service.GRPCOptions {
	opts.Metrics, opts.Turns = t.metrics, t.turns
	if t.provider != nil {
		opts.TracerProvider = t.provider
	}
	return opts
}

// serve starts the metrics listener, when metrics are on.
func (t *telemetry) serve(cfg MetricsConfig, logger *slog.Logger) error {
	if t.metrics == nil {
		return nil
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w (choose another address with metrics.listen)", cfg.Listen, err)
	}
	t.addr = lis.Addr().String()
	t.served = t.metrics.Serve(lis, cfg.Token, logger)
	logger.Info("metrics serving", "addr", t.addr, "path", "/metrics", "token", cfg.Token != "")
	if cfg.Token != "" && !isLoopback(hostOf(cfg.Listen)) {
		logger.Warn("the metrics token travels in clear text on a non-loopback address; scrape through a TLS proxy or a private network")
	}
	return nil
}

// close stops the metrics listener and flushes the spans still waiting to be exported.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	if t.served != nil {
		if err := t.served.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("metrics: %w", err))
		}
	}
	if t.provider != nil {
		if err := t.provider.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush traces: %w", err))
		}
	}
	return errors.Join(errs...)
}

// MetricsAddr is the address metrics are served on ("" when they are off).
func (s *Server) MetricsAddr() string { return s.telemetry.addr }

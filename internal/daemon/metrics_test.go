package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMetricsConfigValidation(t *testing.T) {
	const token = "k7Qz-metrics-Xw92pL"
	for _, c := range []struct {
		name    string
		metrics MetricsConfig
		apiTok  string
		wantErr string
	}{
		{name: "off", metrics: MetricsConfig{}},
		{name: "loopback", metrics: MetricsConfig{Listen: "127.0.0.1:9464"}},
		{name: "all interfaces with a token", metrics: MetricsConfig{Listen: ":9464", Token: token}},
		{name: "all interfaces without a token", metrics: MetricsConfig{Listen: ":9464"}, wantErr: "without metrics.token"},
		{name: "not host:port", metrics: MetricsConfig{Listen: "9464"}, wantErr: "not host:port"},
		{name: "weak token", metrics: MetricsConfig{Listen: ":9464", Token: "short"}, wantErr: "refusing the token"},
		{name: "token without listen", metrics: MetricsConfig{Token: token}, wantErr: "listen is not"},
		{name: "the API's token", metrics: MetricsConfig{Listen: ":9464", Token: token}, apiTok: token, wantErr: "token of its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Metrics: c.metrics, Token: c.apiTok}.WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("Validate: %v, want an error saying %q", err, c.wantErr)
			}
		})
	}
}

// With metrics.listen set, the server serves /metrics on that listener: RPC metrics,
// the hub's and the store's, and nothing there without it.
func TestStartServesMetrics(t *testing.T) {
	cfg := testConfig(t)
	cfg.Metrics.Listen = "127.0.0.1:0"
	srv, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop(context.Background()) }()
	conn, err := grpc.NewClient(srv.Addr(), clientOptions(srv)...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if srv.MetricsAddr() == "" {
		t.Fatal("no metrics address")
	}
	resp, err := http.Get("http://" + srv.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`agenticd_grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1`,
		"agenticd_event_subscribers 0", "agenticd_store_write_duration_seconds_count", "agenticd_events_published_total",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

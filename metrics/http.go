package metrics

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agenticd/agenticd/internal/bearer"
)

// Handler serves the exposition at /metrics and a short index at /; nothing else. With a
// token, both require `Authorization: Bearer <token>` (Prometheus: the scrape config's
// authorization.credentials).
func (m *Metrics) Handler(token string, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		Registry:          m.reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("agenticd metrics: GET /metrics (Prometheus exposition format)\n"))
	})
	if token == "" {
		return mux
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given, ok := bearer.Token(r.Header.Get("Authorization"))
		if !ok || subtle.ConstantTimeCompare([]byte(given), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agenticd metrics"`)
			http.Error(w, "missing or invalid bearer token: send `Authorization: Bearer <metrics.token>` (Prometheus: authorization.credentials in the scrape config)", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Server serves Handler on a listener of its own.
type Server struct {
	http *http.Server
	done chan struct{}
	err  error
}

// Serve starts serving the metrics on lis; Close stops it.
func (m *Metrics) Serve(lis net.Listener, token string, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		http: &http.Server{Handler: m.Handler(token, logger), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
			logger.Error("the metrics listener failed; metrics are no longer served", "addr", lis.Addr().String(), "err", err)
		}
	}()
	return s
}

// Close stops serving, letting scrapes under way finish until ctx ends, and returns the
// error serving ended with, if it failed before.
func (s *Server) Close(ctx context.Context) error {
	if err := s.http.Shutdown(ctx); err != nil {
		s.http.Close()
	}
	<-s.done
	return s.err
}

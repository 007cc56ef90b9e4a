package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/connsplit"
	"github.com/agenticd/agenticd/metrics"
	"github.com/agenticd/agenticd/tracing"
)

// GRPCOptions configures NewGRPCServer.
type GRPCOptions struct {
	// Credentials are what every RPC but health needs, in every protocol.
	Credentials Credentials
	// TLSCertFile and TLSKeyFile (PEM), when set, serve over TLS.
	TLSCertFile, TLSKeyFile string
	// ClientCAFile (PEM), when set with TLS, verifies the client certificates that
	// clients may present: one mapped to a principal (StaticPrincipal.CertSubject)
	// authenticates as it.
	ClientCAFile string
	// Page answers the HTTP requests that are not RPCs (the web page); nil answers 404.
	Page http.Handler
	// AllowedOrigins are the web origins (https://host:port) whose pages may call the API
	// from a browser besides the server's own.
	AllowedOrigins []string
	// Metrics, when set, gets the RPC metrics (per method and code) on its registry.
	Metrics *metrics.Metrics
	// TracerProvider, when set, traces every RPC, and Turns takes over the span of each
	// SendMessage's turn.
	TracerProvider trace.TracerProvider
	Turns          *tracing.Turns
	// Router, when set, routes each session's calls to the replica that owns it.
	Router Router
	// Answers, when set, keeps the answers to request_ids in the database, for repeats
	// after a restart or on another replica; without it they live in memory only.
	Answers AnswerStore
	Logger  *slog.Logger
}

// GRPCServer serves a Service on one listener in three protocols: native gRPC, gRPC-Web
// and Connect (through an HTTP gateway to the same gRPC server), with
// grpc.health.v1.Health, server reflection and the web page, so that the rest of
// agenticd needs no gRPC or HTTP types.
type GRPCServer struct {
	grpc   *grpc.Server
	http   *http.Server
	tls    *tls.Config // nil: plain TCP
	health *health.Server
	hub    *Hub
	acp    *acpGateway
	logger *slog.Logger

	// inproc serves the ACP gateway's in-process API connections, from the first Serve.
	inprocOnce    sync.Once
	inprocServing sync.WaitGroup

	// httpConns counts the HTTP server's connections, whose goroutines outlive Close (a
	// connection that left a request body unread waits a moment before closing): Stop
	// waits for them once httpServing is done, when no connection is added any more.
	httpConns   sync.WaitGroup
	httpServing sync.WaitGroup // one per listener served

	mu      sync.Mutex
	splits  []*connsplit.Splitter // one per listener served
	stopped bool
}

// NewGRPCServer registers svc, health and reflection on a gRPC server with the shared
// event codec and the interceptors (bearer token, access log), and puts the HTTP gateway
// in front of it.
func NewGRPCServer(svc *Service, opts GRPCOptions) (*GRPCServer, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// WaitForHandlers: once Stop returns no handler runs, so what they use may be closed.
	tel := newTelemetry(opts.Metrics, opts.TracerProvider, opts.Turns)
	var sessions sessionReach
	if svc.registry != nil {
		sessions = svc.registry
	}
	base := serverOptions(opts.Credentials, sessions, opts.Answers, logger)
	if opts.Router != nil {
		// After the token check and the remembered answers (only the turn span, which
		// telemetry adds, runs inside it): a call is authorized, and answered from the
		// remembered answers, before it is routed to the session's owner.
		base = append(base, grpc.ChainUnaryInterceptor(routed(opts.Router, logger)))
	}
	serverOpts := tel.serverOptions(append(base, grpc.WaitForHandlers(true)))
	g := &GRPCServer{grpc: grpc.NewServer(serverOpts...), health: health.NewServer(), hub: svc.hub,
		acp: newACPGateway(opts.Credentials, logger), logger: logger}
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		// TLS ends before the protocols split, so every protocol shares it: h2 for
		// gRPC and HTTP/2 clients, http/1.1 for the rest.
		g.tls = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		if opts.ClientCAFile != "" {
			pem, err := os.ReadFile(opts.ClientCAFile)
			if err != nil {
				return nil, fmt.Errorf("tls.client_ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls.client_ca_file %s: no PEM certificate in it", opts.ClientCAFile)
			}
			// A certificate is optional (tokens still work) but, when given, must verify.
			g.tls.ClientCAs, g.tls.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
	}
	pb.RegisterAgenticServiceServer(g.grpc, svc)
	healthpb.RegisterHealthServer(g.grpc, g.health)
	reflection.Register(g.grpc)
	tel.registered(g.grpc)
	gateway, err := httpGateway(g.grpc, opts.Page, g.acp, opts.Credentials.WebLogins, g.tls != nil, opts.AllowedOrigins, logger)
	if err != nil {
		return nil, err
	}
	g.http = &http.Server{
		Handler:           gateway,
		Protocols:         httpProtocols(),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		IdleTimeout:       httpIdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		ConnState:         g.trackHTTPConn,
	}
	return g, nil
}

// trackHTTPConn counts a connection from its first state to its last.
func (g *GRPCServer) trackHTTPConn(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		g.httpConns.Add(1)
	case http.StateClosed, http.StateHijacked:
		g.httpConns.Done()
	}
}

// The HTTP side's timeouts: a client has this long to send its request's headers, and an
// idle keep-alive connection is closed after the other. Streams have no write timeout.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpIdleTimeout       = 2 * time.Minute
)

// httpProtocols are HTTP/1.1 and HTTP/2 in clear text (h2c, with prior knowledge): the
// splitter has ended TLS already, when there is TLS.
func httpProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// Serve turns health SERVING and serves lis (with TLS when configured) until Stop; it
// returns nil once stopped.
func (g *GRPCServer) Serve(lis net.Listener) error {
	if g.tls != nil {
		lis = certListener{tls.NewListener(lis, g.tls)}
	}
	return g.serve(lis)
}

// ServeLocal serves the local socket (localcred.Listen) beside Serve's listener, without
// TLS: the kernel vouches for its peers. It returns nil once stopped.
func (g *GRPCServer) ServeLocal(lis net.Listener) error { return g.serve(lis) }

func (g *GRPCServer) serve(lis net.Listener) error {
	split := connsplit.New(lis, connsplit.Options{Logger: g.logger})
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return lis.Close()
	}
	g.splits = append(g.splits, split)
	g.httpServing.Add(1)
	g.inprocOnce.Do(func() {
		g.inprocServing.Go(func() { _ = g.grpc.Serve(g.acp.inproc) })
	})
	g.mu.Unlock()
	g.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.health.SetServingStatus(pb.AgenticService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	grpcErr, httpErr := make(chan error, 1), make(chan error, 1)
	go func() { grpcErr <- g.grpc.Serve(split.GRPC()) }()
	go func() {
		defer g.httpServing.Done()
		httpErr <- g.http.Serve(split.HTTP())
	}()
	runErr := split.Run()
	if runErr != nil {
		// The listener failed: stop serving the others too, rather than run on half.
		g.grpc.Stop()
		g.http.Close()
	}
	errs := []error{runErr}
	if err := <-grpcErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
		errs = append(errs, err)
	}
	if err := <-httpErr; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stop stops serving: health turns NOT_SERVING, every event stream ends telling its client
// where to resume (the hub closes), and running RPCs get until ctx ends to finish; then
// they are cut off. It reports whether they all finished in time. Once it returns, no
// handler runs any more.
func (g *GRPCServer) Stop(ctx context.Context) (graceful bool) {
	g.mu.Lock()
	g.stopped = true
	splits := g.splits
	g.mu.Unlock()
	g.health.Shutdown()
	// Editors first: their bridges follow sessions through streams the hub would end,
	// and they would only reconnect.
	g.acp.close()
	g.hub.Close()
	// The HTTP side first: its requests run as gRPC handlers, which a graceful stop of the
	// gRPC server would cut off rather than wait for.
	graceful = g.http.Shutdown(ctx) == nil
	if !graceful {
		g.http.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.grpc.GracefulStop()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		g.grpc.Stop()
		<-done
		graceful = false
	}
	for _, split := range splits {
		split.Close()
	}
	_ = g.acp.inproc.Close() // when nothing was served, Serve never closed it
	g.inprocServing.Wait()
	g.httpServing.Wait()
	g.httpConns.Wait()
	return graceful
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"gorm.io/gorm"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/transcript"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/service"
)

// DatabaseFile is the name of the SQLite database under the data dir.
const DatabaseFile = "agenticd.db"

// Deps is what agent constructors (acpPresenters, deepchatPresenters) get. The context they
// are called with bounds their start-up only; Presenter.Close ends what they start.
type Deps struct {
	// Publisher is the event hub: presenters emit through presenters.NewEmitter(Publisher, ...).
	Publisher presenters.Publisher
	// Roots admits workspaces (sessions' workspaces are already admitted by the service).
	Roots *sandbox.Roots
	// DB is the server's SQLite database (transcript.New(ctx, DB) for history).
	DB      *gorm.DB
	Logger  *slog.Logger
	DataDir string
}

// Server is a running agenticd.
type Server struct {
	cfg        Config
	logger     *slog.Logger
	db         *gorm.DB
	hub        *service.Hub
	presenters []presenters.Presenter
	grpc       *grpc.Server
	health     *health.Server
	addr       string
	served     chan struct{} // closed when Serve returns
	serveErr   error         // Serve's result, readable once served is closed

	stopOnce sync.Once
	stopErr  error
}

// Start opens the database, builds the hub, the sandbox roots and the agents, and serves
// gRPC (AgenticService, health, reflection) on cfg.Listen. Unset settings take their
// defaults. It refuses a config that would listen beyond loopback without a token.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{cfg: cfg, logger: logger, served: make(chan struct{})}
	if err := s.build(ctx); err != nil {
		s.release(context.WithoutCancel(ctx))
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("listen on %s: %w (is another agenticd running? choose another address with --listen)", cfg.Listen, err)
	}
	s.addr = lis.Addr().String()
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(agenticv1.AgenticService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	go func() {
		defer close(s.served)
		s.serveErr = s.grpc.Serve(lis)
	}()
	ids := make([]string, len(s.presenters))
	for i, p := range s.presenters {
		ids[i] = p.AgentID()
	}
	logger.Info("agenticd serving", "addr", s.addr, "data_dir", cfg.DataDir, "agents", ids,
		"workspace_roots", cfg.WorkspaceRoots, "tls", cfg.TLS.CertFile != "", "token", cfg.Token != "")
	if cfg.Token != "" && cfg.TLS.CertFile == "" && !isLoopback(hostOf(cfg.Listen)) {
		logger.Warn("the bearer token travels in clear text on a non-loopback address; configure tls.cert_file and tls.key_file")
	}
	return s, nil
}

func hostOf(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	return host
}

// build creates everything but the listener. On error, release undoes what was built.
func (s *Server) build(ctx context.Context) error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data_dir: %w", err)
	}
	db, err := transcript.OpenSQLite(filepath.Join(cfg.DataDir, DatabaseFile))
	if err != nil {
		return err
	}
	s.db = db
	store, err := service.NewStore(ctx, db)
	if err != nil {
		return err
	}
	s.hub, err = service.NewHub(ctx, service.HubOptions{
		Capacity:        cfg.EventBuffer,
		SubscriberQueue: cfg.SubscriberQueue,
		Store:           store,
		Logger:          s.logger,
	})
	if err != nil {
		return err
	}
	roots, err := sandbox.NewRoots(cfg.WorkspaceRoots)
	if err != nil {
		return fmt.Errorf("workspace_roots: %w", err)
	}
	deps := Deps{Publisher: s.hub, Roots: roots, DB: db, Logger: s.logger, DataDir: cfg.DataDir}
	for _, build := range []func(context.Context, Config, Deps) ([]presenters.Presenter, error){acpPresenters, deepchatPresenters} {
		ps, err := build(ctx, cfg, deps)
		s.presenters = append(s.presenters, ps...)
		if err != nil {
			return fmt.Errorf("agents: %w", err)
		}
	}
	registry, err := service.NewRegistry(store, s.presenters)
	if err != nil {
		return err
	}
	// WaitForHandlers: after a stop, no handler still runs when the agents are closed.
	opts := append(service.ServerOptions(cfg.Token, s.logger), grpc.WaitForHandlers(true))
	if cfg.TLS.CertFile != "" {
		creds, err := credentials.NewServerTLSFromFile(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(opts...)
	agenticv1.RegisterAgenticServiceServer(s.grpc, service.New(service.Options{
		Registry: registry,
		Hub:      s.hub,
		Roots:    roots,
		Logger:   s.logger,
	}))
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	return nil
}

// Addr is the address the server listens on (with the real port when Listen asked for 0).
func (s *Server) Addr() string { return s.addr }

// Done is closed when the server stopped serving (after Stop, or if serving failed).
func (s *Server) Done() <-chan struct{} { return s.served }

// Stop shuts down gracefully: health NOT_SERVING, event streams ended (clients are told
// where to resume), in-flight RPCs finished until ctx ends (then cut), agents closed,
// database closed. It is idempotent and returns the first Stop's result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Server) stop(ctx context.Context) error {
	s.logger.Info("agenticd stopping")
	s.health.Shutdown()
	s.hub.Close()
	graceful := make(chan struct{})
	go func() {
		defer close(graceful)
		s.grpc.GracefulStop()
	}()
	select {
	case <-graceful:
	case <-ctx.Done():
		s.logger.Warn("RPCs still running at the shutdown deadline; cutting them off")
		s.grpc.Stop()
		<-graceful
	}
	<-s.served
	err := s.release(ctx)
	if s.serveErr != nil && !errors.Is(s.serveErr, grpc.ErrServerStopped) {
		err = errors.Join(fmt.Errorf("serve: %w", s.serveErr), err)
	}
	s.logger.Info("agenticd stopped")
	return err
}

// release closes the agents and the database.
func (s *Server) release(ctx context.Context) error {
	var errs []error
	for _, p := range s.presenters {
		if err := p.Close(ctx); err != nil {
			s.logger.Error("agent did not close cleanly", "agent_id", p.AgentID(), "err", err)
			errs = append(errs, fmt.Errorf("close agent %s: %w", p.AgentID(), err))
		}
	}
	if s.db != nil {
		if sqlDB, err := s.db.DB(); err == nil {
			if err := sqlDB.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close database: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends (cmd/agenticd cancels it on SIGINT/SIGTERM) or serving fails,
// then stops within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	srv, err := Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-srv.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), srv.cfg.ShutdownTimeout)
	defer cancel()
	return srv.Stop(stopCtx)
}

// NewLogger returns the slog logger the config asks for, writing to w.
func NewLogger(w io.Writer, cfg Config) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

func parseLevel(s string) (slog.Level, error) {
	var level slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return level, fmt.Errorf("log_level %q: use debug, info, warn or error", s)
	}
	return level, nil
}

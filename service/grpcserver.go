package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// GRPCOptions configures NewGRPCServer.
type GRPCOptions struct {
	// Token, when set, is required as `authorization: Bearer <token>` on every RPC but
	// health.
	Token string
	// TLSCertFile and TLSKeyFile (PEM), when set, serve over TLS.
	TLSCertFile, TLSKeyFile string
	Logger                  *slog.Logger
}

// GRPCServer serves a Service over gRPC, with grpc.health.v1.Health and server
// reflection, so that the rest of agenticd needs no gRPC types.
type GRPCServer struct {
	grpc   *grpc.Server
	health *health.Server
	hub    *Hub
}

// NewGRPCServer registers svc, health and reflection on a gRPC server with the shared
// event codec and the interceptors (bearer token, access log).
func NewGRPCServer(svc *Service, opts GRPCOptions) (*GRPCServer, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// WaitForHandlers: once Stop returns no handler runs, so what they use may be closed.
	serverOpts := append(serverOptions(opts.Token, logger), grpc.WaitForHandlers(true))
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		creds, err := credentials.NewServerTLSFromFile(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		serverOpts = append(serverOpts, grpc.Creds(creds))
	}
	g := &GRPCServer{grpc: grpc.NewServer(serverOpts...), health: health.NewServer(), hub: svc.hub}
	pb.RegisterAgenticServiceServer(g.grpc, svc)
	healthpb.RegisterHealthServer(g.grpc, g.health)
	reflection.Register(g.grpc)
	return g, nil
}

// Serve turns health SERVING and serves lis until Stop; it returns nil once stopped.
func (g *GRPCServer) Serve(lis net.Listener) error {
	g.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.health.SetServingStatus(pb.AgenticService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if err := g.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop stops serving: health turns NOT_SERVING, every event stream ends telling its client
// where to resume (the hub closes), and running RPCs get until ctx ends to finish; then
// they are cut off. It reports whether they all finished in time. Once it returns, no
// handler runs any more.
func (g *GRPCServer) Stop(ctx context.Context) (graceful bool) {
	g.health.Shutdown()
	g.hub.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.grpc.GracefulStop()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		g.grpc.Stop()
		<-done
		return false
	}
}

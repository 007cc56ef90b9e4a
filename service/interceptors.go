package service

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// healthPrefix is the one service callable without the bearer token, so that load
// balancers and orchestrators can probe the server.
const healthPrefix = "/grpc.health.v1.Health/"

// serverOptions returns what every agenticd server needs: the codec that sends an event's
// encoded bytes to every subscriber, and the interceptors: the bearer token check (when
// token is not empty; health is exempt), then an access log at debug level. Panics are
// recovered in one place, each handler (Service.recoverPanic), where the method and its
// request are known; an interceptor recovering too would only repeat it.
func serverOptions(token string, logger *slog.Logger) []grpc.ServerOption {
	ic := interceptors{token: []byte(token), logger: logger}
	return []grpc.ServerOption{
		sharedEventCodecOption(),
		grpc.ChainUnaryInterceptor(ic.authUnary, ic.logUnary),
		grpc.ChainStreamInterceptor(ic.authStream, ic.logStream),
	}
}

type interceptors struct {
	token  []byte
	logger *slog.Logger
}

// authorize checks `authorization: Bearer <token>` in constant time. The scheme is
// case-insensitive (RFC 6750 via RFC 9110 section 11.1).
func (ic interceptors) authorize(ctx context.Context, method string) error {
	if len(ic.token) == 0 || strings.HasPrefix(method, healthPrefix) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) == 0 {
		return status.Error(codes.Unauthenticated, "missing bearer token: send the metadata `authorization: Bearer <token>` (agenticctl: --token or AGENTICD_TOKEN; grpcurl: -H 'authorization: Bearer <token>')")
	}
	scheme, given, _ := strings.Cut(values[0], " ")
	given = strings.TrimLeft(given, " ")
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(given), ic.token) != 1 {
		return status.Error(codes.Unauthenticated, "invalid bearer token: use the token from the server's config (token) or its AGENTICD_TOKEN")
	}
	return nil
}

func (ic interceptors) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := ic.authorize(ctx, info.FullMethod); err != nil {
		ic.logger.WarnContext(ctx, "RPC refused", "method", info.FullMethod, "err", err)
		return nil, err
	}
	return next(ctx, req)
}

func (ic interceptors) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if err := ic.authorize(ss.Context(), info.FullMethod); err != nil {
		ic.logger.WarnContext(ss.Context(), "RPC refused", "method", info.FullMethod, "err", err)
		return err
	}
	return next(srv, ss)
}

func (ic interceptors) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !ic.logger.Enabled(ctx, slog.LevelDebug) {
		return next(ctx, req)
	}
	start := time.Now()
	resp, err := next(ctx, req)
	ic.logger.DebugContext(ctx, "RPC", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
	return resp, err
}

func (ic interceptors) logStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if !ic.logger.Enabled(ss.Context(), slog.LevelDebug) {
		return next(srv, ss)
	}
	start := time.Now()
	err := next(srv, ss)
	ic.logger.DebugContext(ss.Context(), "RPC", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
	return err
}

package service

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/agenticd/agenticd/service/replicas"
)

// Router routes each session's calls to the replica that owns the session; its own
// failures are errors, which the service maps to statuses.
type Router interface {
	Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error)
}

var (
	_ Router              = (*replicas.Replica)(nil)
	_ replicas.Owners     = (*Registry)(nil)
	_ replicas.Hub        = (*Hub)(nil)
	_ replicas.Successor  = (*TakeOvers)(nil)
	_ replicas.Principals = ForwardedPrincipal{}
)

// routed is the interceptor that runs the router: statuses (the handler's answer, or the
// owner's) pass as they are, and the routing's errors become the status toStatus gives.
func routed(r Router, logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		resp, err := r.Unary(ctx, req, info, next)
		if _, isStatus := status.FromError(err); err == nil || isStatus {
			return resp, err
		}
		var attrs []any
		if sr, ok := req.(interface{ GetSessionId() string }); ok && sr.GetSessionId() != "" {
			attrs = append(attrs, "session_id", sr.GetSessionId())
		}
		return nil, failWith(ctx, logger, info.FullMethod, err, attrs...)
	}
}

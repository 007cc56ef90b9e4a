package service

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/agenticd/agenticd/service/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// healthPrefix is the one service callable without credentials.
const healthPrefix = "/grpc.health.v1.Health/"

// serverOptions returns what every agenticd server needs: the codec that sends an event's
// encoded bytes to every subscriber and tells which requests held invalid UTF-8, and the
// interceptors, outermost first: the details every error status carries (an ErrorInfo
// even on a status no handler made), panic recovery (the one place a panic in a handler
// is recovered), the refusal of requests with invalid UTF-8, the credentials check (health
// is exempt) and the caller's scope, its reach to the session a call names (when
// sessions is set), an access log at debug level, then the answers to repeated
// request_ids (per principal; kept in kept too, when not nil).
func serverOptions(creds Credentials, sessions sessionReach, kept AnswerStore, logger *slog.Logger) []grpc.ServerOption {
	invalid := &wire.Requests{Limit: maxRequestBytes, TooLarge: func(n int) error {
		st, _ := toStatus(requestTooLarge(maxRequestBytes, fmt.Sprintf("the request message has %d bytes", n)))
		return st.Err()
	}}
	ic := interceptors{auth: newAuthenticator(creds), sessions: sessions, logger: logger, invalid: invalid,
		answers: newAnswers(kept, logger, requestIDTTL, maxRememberedAnswers, maxRememberedBytes, time.Now)}
	return []grpc.ServerOption{
		wire.CodecOption(invalid),
		grpc.MaxRecvMsgSize(maxWireRequestBytes),
		grpc.ChainUnaryInterceptor(ic.detailsUnary, ic.recoverUnary, ic.utf8Unary, ic.authUnary, ic.reachUnary, ic.logUnary, ic.idempotentUnary),
		grpc.ChainStreamInterceptor(ic.detailsStream, ic.recoverStream, ic.utf8Stream, ic.authStream, ic.logStream),
	}
}

type interceptors struct {
	auth     *authenticator
	sessions sessionReach // nil: no session checks (tests of the interceptors alone)
	logger   *slog.Logger
	invalid  *wire.Requests
	answers  *answers
}

// detailsUnary makes sure every error status carries an ErrorInfo (withDetails): the
// handlers' errors have theirs already (toStatus); this covers a status made elsewhere.
func (ic interceptors) detailsUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	resp, err := next(ctx, req)
	return resp, detailedErr(err)
}

// detailsStream is detailsUnary for streams.
func (ic interceptors) detailsStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	return detailedErr(next(srv, ss))
}

// detailedErr is err as a bounded status with details; nil stays nil.
func detailedErr(err error) error {
	if err == nil {
		return nil
	}
	return boundStatus(withDetails(status.Convert(err))).Err()
}

// refuse converts an error of an interceptor for the client, logging it like a
// handler's (Service.fail).
func (ic interceptors) refuse(ctx context.Context, method string, err error) error {
	return failWith(ctx, ic.logger, method, err)
}

// recoverUnary turns a panic in a handler (or a later interceptor) into INTERNAL, so that
// one bad request costs its caller an error and the server nothing.
func (ic interceptors) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, ic.panicked(ctx, info.FullMethod, r, requestAttrs(req))
		}
	}()
	return next(ctx, req)
}

// recoverStream is recoverUnary for streams.
func (ic interceptors) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = ic.panicked(ss.Context(), info.FullMethod, r, nil)
		}
	}()
	return next(srv, ss)
}

// panicked logs a recovered panic with its stack under a fresh correlation id and returns
// the INTERNAL status naming that id.
func (ic interceptors) panicked(ctx context.Context, method string, r any, attrs []any) error {
	st, correlationID := internalStatus()
	ic.logger.ErrorContext(ctx, "handler panicked", append([]any{"method", method, "correlation_id", correlationID,
		"panic", r, "stack", string(debug.Stack())}, attrs...)...)
	return st.Err()
}

// requestAttrs are the session and agent ids a request names, for the log.
func requestAttrs(req any) []any {
	var attrs []any
	if r, ok := req.(interface{ GetSessionId() string }); ok && r.GetSessionId() != "" {
		attrs = append(attrs, "session_id", r.GetSessionId())
	}
	if r, ok := req.(interface{ GetAgentId() string }); ok && r.GetAgentId() != "" {
		attrs = append(attrs, "agent_id", r.GetAgentId())
	}
	return attrs
}

// utf8Unary refuses a request the codec found invalid UTF-8 in. It runs before the token
// check so that every such request is taken out of wire.Requests.
func (ic interceptors) utf8Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := ic.invalid.Take(req); err != nil {
		ic.logger.DebugContext(ctx, "request refused", "method", info.FullMethod, "err", err)
		return nil, err
	}
	return next(ctx, req)
}

// utf8Stream refuses, from RecvMsg, each message of a stream the codec found invalid
// UTF-8 in.
func (ic interceptors) utf8Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	return next(srv, utf8CheckedStream{ServerStream: ss, invalid: ic.invalid})
}

type utf8CheckedStream struct {
	grpc.ServerStream
	invalid *wire.Requests
}

func (s utf8CheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.invalid.Take(m)
}

// authorize admits a caller with credentials (authenticator.authenticate) and the scope
// the method needs, and returns ctx with its principal; health needs none, so that load
// balancers and orchestrators can probe the server.
func (ic interceptors) authorize(ctx context.Context, method string) (context.Context, error) {
	if strings.HasPrefix(method, healthPrefix) {
		return ctx, nil
	}
	p, err := ic.auth.authenticate(ctx)
	if err != nil {
		ic.logger.WarnContext(ctx, "RPC refused", "method", method, "err", err)
		return ctx, err
	}
	if want := methodScope(method); !p.Scopes.has(want) {
		return ctx, ic.refuse(ctx, path.Base(method), scopeMissing(p, want, path.Base(method)))
	}
	return withPrincipal(ctx, p), nil
}

func (ic interceptors) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	ctx, err := ic.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return next(ctx, req)
}

func (ic interceptors) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	ctx, err := ic.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return next(srv, principalStream{ServerStream: ss, ctx: ctx})
}

// principalStream is a stream whose context carries its caller's principal.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s principalStream) Context() context.Context { return s.ctx }

// reachUnary refuses a call on a session the caller may not reach as the method needs
// (sessionNeeds); the session's own replica checks a forwarded call again.
func (ic interceptors) reachUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	need, ok := sessionNeeds[info.FullMethod]
	sr, hasID := req.(interface{ GetSessionId() string })
	if ic.sessions == nil || !ok || !hasID || sr.GetSessionId() == "" {
		return next(ctx, req)
	}
	if err := checkReach(ctx, ic.sessions, sr.GetSessionId(), need, path.Base(info.FullMethod)); err != nil {
		return nil, ic.refuse(ctx, path.Base(info.FullMethod), err)
	}
	return next(ctx, req)
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

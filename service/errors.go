package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// errorDomain names agenticd in errdetails.ErrorInfo.
const errorDomain = "agenticd"

// Errors of the hub, mapped by toStatus like the presenters' sentinels.
var (
	// errOutOfRange: a Subscribe resume point the hub no longer holds (or never issued).
	errOutOfRange = errors.New("resume point out of range")
	// errShuttingDown: the server is stopping; streams end and new ones are refused.
	errShuttingDown = errors.New("server shutting down")
)

// overflowError ends a subscriber whose queue filled up: the client resumes after Last.
type overflowError struct {
	Queue int
	Last  uint64
}

func (e *overflowError) Error() string {
	return fmt.Sprintf("subscriber too slow: %d events waited unread; resume with after_sequence=%d", e.Queue, e.Last)
}

// shutdownError ends a stream because the server stops; the client resumes after Last
// once the server is back (a pre-restart point is then OUT_OF_RANGE: rebuild from
// GetSession).
type shutdownError struct{ Last uint64 }

func (e *shutdownError) Error() string {
	return fmt.Sprintf("agenticd is shutting down; reconnect and resume with after_sequence=%d", e.Last)
}

func (e *shutdownError) Unwrap() error { return errShuttingDown }

// responseTooLargeError: the messages a GetMessages asked for take more than one response
// may carry (MaxEventBytes); the newest Fit of them would fit.
type responseTooLargeError struct {
	Bytes int
	Fit   int
}

func (e *responseTooLargeError) Error() string {
	return fmt.Sprintf("the messages asked for take %d bytes, more than the %d one response may carry; ask for the newest %d at most (limit) and page back with before_message_id",
		e.Bytes, MaxEventBytes, e.Fit)
}

// internalMessage is all a client learns about an unexpected error; the log has the rest.
const internalMessage = "internal error in agenticd; the server log has the details"

// toStatus maps an error from validation, the registry, the hub, a presenter or the
// sandbox to the one gRPC status the client sees. It is the only place that chooses
// codes. Unknown errors become INTERNAL with a generic message (internal reports whether
// that happened, so that the caller logs the real error).
func toStatus(err error) (st *status.Status, internal bool) {
	if err == nil {
		return nil, false
	}
	if s, ok := status.FromError(err); ok {
		return s, false
	}
	var authErr *presenters.AuthRequiredError
	var overflow *overflowError
	var shutdown *shutdownError
	var tooLarge *responseTooLargeError
	switch {
	case errors.As(err, &authErr):
		return authStatus(authErr), false
	case errors.As(err, &overflow):
		return withInfo(status.New(codes.ResourceExhausted, err.Error()), "SUBSCRIBER_OVERFLOW",
			map[string]string{"last_sequence": fmt.Sprint(overflow.Last)}), false
	case errors.As(err, &shutdown):
		return withInfo(status.New(codes.Unavailable, err.Error()), "SHUTTING_DOWN",
			map[string]string{"last_sequence": fmt.Sprint(shutdown.Last)}), false
	case errors.As(err, &tooLarge):
		return withInfo(status.New(codes.OutOfRange, err.Error()), "RESPONSE_TOO_LARGE",
			map[string]string{"max_limit": fmt.Sprint(tooLarge.Fit)}), false
	case errors.Is(err, errShuttingDown):
		return status.New(codes.Unavailable, err.Error()), false
	case errors.Is(err, errOutOfRange):
		return status.New(codes.OutOfRange, err.Error()), false
	case errors.Is(err, context.Canceled), errors.Is(err, presenters.ErrCancelled):
		return status.New(codes.Canceled, err.Error()), false
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, err.Error()), false
	case errors.Is(err, presenters.ErrNotFound),
		errors.Is(err, sandbox.ErrNotFound),
		errors.Is(err, sandbox.ErrTerminalNotFound):
		return status.New(codes.NotFound, err.Error()), false
	case errors.Is(err, presenters.ErrInvalidArgument),
		errors.Is(err, sandbox.ErrWorkspaceNotAllowed),
		errors.Is(err, sandbox.ErrOutsideWorkspace),
		errors.Is(err, sandbox.ErrInvalidPath),
		errors.Is(err, sandbox.ErrInvalidArgument),
		errors.Is(err, sandbox.ErrNotText),
		errors.Is(err, sandbox.ErrTooLarge):
		return status.New(codes.InvalidArgument, err.Error()), false
	case errors.Is(err, presenters.ErrSessionBusy),
		errors.Is(err, presenters.ErrFailedPrecondition),
		errors.Is(err, presenters.ErrUnsupported),
		errors.Is(err, sandbox.ErrTerminalsClosed):
		return status.New(codes.FailedPrecondition, err.Error()), false
	case errors.Is(err, sandbox.ErrTooManyTerminals):
		return status.New(codes.ResourceExhausted, err.Error()), false
	case errors.Is(err, presenters.ErrAuthRequired):
		return status.New(codes.Unauthenticated, err.Error()), false
	case errors.Is(err, presenters.ErrAgentUnavailable):
		return status.New(codes.Unavailable, err.Error()), false
	default:
		return status.New(codes.Internal, internalMessage), true
	}
}

// authStatus is UNAUTHENTICATED naming the agent's methods, in the message for people
// and in an ErrorInfo (metadata auth_methods, comma-separated ids) for programs.
func authStatus(e *presenters.AuthRequiredError) *status.Status {
	ids := make([]string, len(e.Methods))
	for i, m := range e.Methods {
		ids[i] = m.ID
	}
	return withInfo(status.New(codes.Unauthenticated, e.Error()), "AGENT_AUTH_REQUIRED",
		map[string]string{"agent_id": e.AgentID, "auth_methods": strings.Join(ids, ",")})
}

func withInfo(st *status.Status, reason string, md map[string]string) *status.Status {
	withDetails, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: md})
	if err != nil {
		return st
	}
	return withDetails
}

// invalidArgument is a validation failure naming the field and what to do.
func invalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{presenters.ErrInvalidArgument}, args...)...)
}

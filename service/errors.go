package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// errorDomain names agenticd in errdetails.ErrorInfo.
const errorDomain = "agenticd"

// errShuttingDown: the server is stopping; streams end and new ones are refused.
var errShuttingDown = errors.New("server shutting down")

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

// toStatus maps an error from validation, the registry, the hub, a presenter or the
// sandbox to the one gRPC status the client sees. It is the only place that chooses
// codes, and the one place where every status message is bounded (boundMessage). An
// unknown error becomes INTERNAL with a generic message and a fresh correlation id, which
// it returns so that the caller logs the real error under it; the id is empty otherwise.
func toStatus(err error) (st *status.Status, correlationID string) {
	if err == nil {
		return nil, ""
	}
	st, internal := statusOf(err)
	if internal {
		st, correlationID = internalStatus()
	}
	return boundStatus(st), correlationID
}

// internalStatus is INTERNAL with nothing but a fresh correlation id: all a client learns
// of an unexpected error or a panic; the server log has the rest under that id.
func internalStatus() (st *status.Status, correlationID string) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	correlationID = hex.EncodeToString(b[:])
	return status.Newf(codes.Internal, "an internal error occurred in agenticd (correlation id %s); the server log has the details under that id", correlationID), correlationID
}

// statusOf chooses the status of an error; internal when no code fits it.
func statusOf(err error) (st *status.Status, internal bool) {
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
	case errors.Is(err, events.ErrOutOfRange):
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
		return nil, true
	}
}

// Status messages echo what the client sent (ids, paths, model ids), and gRPC carries the
// message in a response header: a client built on gRPC core (Python, Ruby, C++) refuses
// headers over 8 KiB and reports INTERNAL "RST_STREAM" instead of the real status. So
// every echoed value is shortened and the whole message capped well below that.
const (
	// maxEchoedRunes bounds each run of non-space characters in a status message: an id or
	// a path is one such run; the server's own words never come near it.
	maxEchoedRunes = 200
	// maxStatusMessageBytes caps a whole status message, details and all other headers
	// leaving room under the 8 KiB.
	maxStatusMessageBytes = 2048
)

// ellipsis marks where a status message was shortened.
const ellipsis = "…"

// boundStatus is st with its message bounded (boundMessage), keeping code and details.
// The details carry the message once more, so a status with details gets half the room.
func boundStatus(st *status.Status) *status.Status {
	msg := st.Message()
	budget := maxStatusMessageBytes
	if len(st.Proto().GetDetails()) > 0 {
		budget /= 2
	}
	bounded := boundMessage(msg, budget)
	if bounded == msg {
		return st
	}
	p := st.Proto()
	p.Message = bounded
	return status.FromProto(p)
}

// boundMessage makes a message valid UTF-8 (gRPC sends U+FFFD for a bad byte anyway),
// shortens every run of more than maxEchoedRunes non-space characters to its first
// maxEchoedRunes and an ellipsis, then cuts it at a rune boundary so that it takes at
// most budget bytes on the wire, where gRPC percent-encodes every byte outside printable
// ASCII (and '%') as three. A message that needs none of this is returned as it is.
func boundMessage(msg string, budget int) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if longestRun(msg) > maxEchoedRunes {
		var b strings.Builder
		b.Grow(len(msg))
		run := 0
		for _, r := range msg {
			if unicode.IsSpace(r) {
				run = 0
			} else if run++; run > maxEchoedRunes {
				if run == maxEchoedRunes+1 {
					b.WriteString(ellipsis)
				}
				continue
			}
			b.WriteRune(r)
		}
		msg = b.String()
	}
	if wireLen(msg) <= budget {
		return msg
	}
	room := budget - wireLen(ellipsis)
	used, cut := 0, 0
	for i, r := range msg {
		w := wireLen(string(r))
		if used+w > room {
			break
		}
		used += w
		cut = i + utf8.RuneLen(r)
	}
	return msg[:cut] + ellipsis
}

// wireLen is how many bytes s takes as a gRPC status message: printable ASCII but '%'
// as itself, every other byte percent-encoded.
func wireLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c <= 0x7e && c != '%' {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// longestRun is the length in runes of the longest run of non-space characters.
func longestRun(s string) int {
	longest, run := 0, 0
	for _, r := range s {
		if unicode.IsSpace(r) {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
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

// maxMetadataValueBytes bounds each ErrorInfo metadata value on the wire: they echo ids
// an agent or a client sent, and travel in a response header too.
const maxMetadataValueBytes = 512

func withInfo(st *status.Status, reason string, md map[string]string) *status.Status {
	for k, v := range md {
		md[k] = boundMessage(v, maxMetadataValueBytes)
	}
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

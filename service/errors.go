package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/service/replicas"
	"github.com/agenticd/agenticd/store"
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

// Reasons: every non-OK status carries an errdetails.ErrorInfo whose reason is one of
// pb.ErrorReason, named without its prefix, and whose metadata holds the values the
// proto documents for it. The reason decides the code (reasonCodes), so a reason always
// comes with the same code.
var reasonCodes = map[pb.ErrorReason]codes.Code{
	pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT:             codes.InvalidArgument,
	pb.ErrorReason_ERROR_REASON_REQUEST_ID_REUSED:            codes.InvalidArgument,
	pb.ErrorReason_ERROR_REASON_WORKSPACE_NOT_ALLOWED:        codes.InvalidArgument,
	pb.ErrorReason_ERROR_REASON_PATH_OUTSIDE_WORKSPACE:       codes.InvalidArgument,
	pb.ErrorReason_ERROR_REASON_TOKEN_INVALID:                codes.Unauthenticated,
	pb.ErrorReason_ERROR_REASON_SCOPE_MISSING:                codes.PermissionDenied,
	pb.ErrorReason_ERROR_REASON_AGENT_NOT_FOUND:              codes.NotFound,
	pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND:            codes.NotFound,
	pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_FOUND:            codes.NotFound,
	pb.ErrorReason_ERROR_REASON_PERMISSION_NOT_PENDING:       codes.NotFound,
	pb.ErrorReason_ERROR_REASON_ELICITATION_NOT_PENDING:      codes.NotFound,
	pb.ErrorReason_ERROR_REASON_SESSION_BUSY:                 codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_SESSION_CLOSED:               codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_PRECONDITION_FAILED:          codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_AGENT_NOT_CONFIGURED:         codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_AGENT_AUTH_REQUIRED:          codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_UNSUPPORTED:                  codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_PERMISSION_ALREADY_DECIDED:   codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_ELICITATION_ALREADY_RESOLVED: codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_RUNNING:          codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_WORKSPACE_GONE:               codes.FailedPrecondition,
	pb.ErrorReason_ERROR_REASON_MESSAGE_ID_IN_USE:            codes.AlreadyExists,
	pb.ErrorReason_ERROR_REASON_RESUME_POINT_EXPIRED:         codes.OutOfRange,
	pb.ErrorReason_ERROR_REASON_RESUME_POINT_UNKNOWN:         codes.OutOfRange,
	pb.ErrorReason_ERROR_REASON_SUBSCRIBER_TOO_SLOW:          codes.ResourceExhausted,
	pb.ErrorReason_ERROR_REASON_TOO_MANY_TERMINALS:           codes.ResourceExhausted,
	pb.ErrorReason_ERROR_REASON_REQUEST_TOO_LARGE:            codes.ResourceExhausted,
	pb.ErrorReason_ERROR_REASON_AGENT_UNAVAILABLE:            codes.Unavailable,
	pb.ErrorReason_ERROR_REASON_SHUTTING_DOWN:                codes.Unavailable,
	pb.ErrorReason_ERROR_REASON_SESSION_OWNER_UNAVAILABLE:    codes.Unavailable,
	pb.ErrorReason_ERROR_REASON_DATABASE_UNAVAILABLE:         codes.Unavailable,
	pb.ErrorReason_ERROR_REASON_CANCELLED:                    codes.Canceled,
	pb.ErrorReason_ERROR_REASON_DEADLINE_EXCEEDED:            codes.DeadlineExceeded,
	pb.ErrorReason_ERROR_REASON_INTERNAL:                     codes.Internal,
}

// reasonName is the ErrorInfo reason of r: its name without the ERROR_REASON_ prefix.
func reasonName(r pb.ErrorReason) string {
	return strings.TrimPrefix(r.String(), "ERROR_REASON_")
}

// reasonError marks an error with the reason and metadata its status carries, where the
// sentinel alone does not say enough (which id was not found, which turn is running).
type reasonError struct {
	reason pb.ErrorReason
	md     map[string]string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// withReason marks err with a reason and metadata given as key, value pairs.
func withReason(reason pb.ErrorReason, err error, keyValues ...string) error {
	md := make(map[string]string, len(keyValues)/2)
	for i := 0; i+1 < len(keyValues); i += 2 {
		md[keyValues[i]] = keyValues[i+1]
	}
	return &reasonError{reason: reason, md: md, err: err}
}

// notFoundAs names what a NOT_FOUND error did not find: a presenter or the store says
// presenters.ErrNotFound, and the handler knows whether it asked for a session, an agent,
// a message or a permission request. Other errors, and errors that already name what was
// not found (the innermost, most specific, wins), are returned as they are.
func notFoundAs(reason pb.ErrorReason, key, id string, err error) error {
	var marked *reasonError
	var noAgent *agentNotFoundError
	var noMessage *messageNotFoundError
	if !errors.Is(err, presenters.ErrNotFound) || errors.As(err, &marked) || errors.As(err, &noAgent) || errors.As(err, &noMessage) {
		return err
	}
	return withReason(reason, err, key, id)
}

// sessionNotFound marks a NOT_FOUND error as SESSION_NOT_FOUND.
func sessionNotFound(sessionID string, err error) error {
	return notFoundAs(pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, "session_id", sessionID, err)
}

// permissionNotPending marks a NOT_FOUND error as PERMISSION_NOT_PENDING.
func permissionNotPending(permissionID string, err error) error {
	return notFoundAs(pb.ErrorReason_ERROR_REASON_PERMISSION_NOT_PENDING, "permission_id", permissionID, err)
}

// elicitationNotPending marks a NOT_FOUND error as ELICITATION_NOT_PENDING.
func elicitationNotPending(elicitationID string, err error) error {
	return notFoundAs(pb.ErrorReason_ERROR_REASON_ELICITATION_NOT_PENDING, "elicitation_id", elicitationID, err)
}

// fieldError names the request field an INVALID_ARGUMENT is about, for the status's
// BadRequest. A fallback field (inField) gives way to one the message starts with.
type fieldError struct {
	field    string
	fallback bool
	err      error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// invalidField is a validation failure of one request field (a path like
// "content.parts[2].image"), saying what is wrong and what to do.
func invalidField(field, format string, args ...any) error {
	return &fieldError{field: field, err: invalidArgument(format, args...)}
}

// inField names the request field an error is about when it is INVALID_ARGUMENT and
// says no more precise one (a presenter refusing an argument says why, the handler knows
// which field it came from): an error naming its field, or whose message starts with
// one ("content.parts[2].image: ..."), keeps that.
func inField(field string, err error) error {
	var named *fieldError
	if err == nil || errors.As(err, &named) {
		return err
	}
	return &fieldError{field: field, fallback: true, err: err}
}

// invalidArgument is a validation failure whose message starts with the field it is
// about; the BadRequest names that field (fieldOfMessage). invalidField names it
// explicitly.
func invalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{presenters.ErrInvalidArgument}, args...)...)
}

// leadingField matches a request field path at the start of a message: "page_size",
// "session_ids[3]", "content.parts[2].image", and what follows it.
var leadingField = regexp.MustCompile(`^([a-z][a-z0-9_]*(?:\[[0-9]+\])?(?:\.[a-z][a-z0-9_]*(?:\[[0-9]+\])?)*)(.*)$`)

// fieldOfMessage is the request field a validation message starts with ("page_size must
// not be negative", "content is empty: ..."), or "" when it starts with ordinary words.
func fieldOfMessage(msg string) string {
	m := leadingField.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	field, rest := m[1], m[2]
	if strings.ContainsAny(field, "_.[") || strings.HasPrefix(rest, ":") ||
		strings.HasPrefix(rest, " is ") || strings.HasPrefix(rest, " must ") {
		return field
	}
	return ""
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
	st = status.Newf(codes.Internal, "an internal error occurred in agenticd (correlation id %s); the server log has the details under that id", correlationID)
	return detailed(st, pb.ErrorReason_ERROR_REASON_INTERNAL, map[string]string{"correlation_id": correlationID}, ""), correlationID
}

// statusOf chooses the status of an error; internal when no reason fits it. A status
// made elsewhere (gRPC's own) keeps its code and gets the details it lacks (withDetails).
func statusOf(err error) (st *status.Status, internal bool) {
	if s, ok := status.FromError(err); ok {
		return withDetails(s), false
	}
	reason, md, ok := classify(err)
	if !ok {
		return nil, true
	}
	var field string
	if reasonCodes[reason] == codes.InvalidArgument {
		field = fieldOf(err, reason)
	}
	return detailed(status.New(reasonCodes[reason], err.Error()), reason, md, field), false
}

// classify is the one switch from errors to reasons: sentinels of presenters, sandbox and
// events, and the service's own error types. ok is false for an error no reason fits (a
// fault of the server: INTERNAL with a correlation id).
func classify(err error) (reason pb.ErrorReason, md map[string]string, ok bool) {
	reason, md, ok = classifyReason(err)
	if !ok {
		return reason, md, ok
	}
	// The facts the domain attached (presenters.WithDetail), unless the reason's own
	// metadata says otherwise.
	var merged map[string]string
	for e := err; e != nil; e = errors.Unwrap(e) {
		d, isDetail := e.(*presenters.DetailError)
		if !isDetail {
			continue
		}
		if merged == nil {
			merged = maps.Clone(md)
			if merged == nil {
				merged = map[string]string{}
			}
		}
		if _, set := merged[d.Key]; !set {
			merged[d.Key] = d.Value
		}
	}
	if merged != nil {
		md = merged
	}
	return reason, md, ok
}

// classifyReason is classify without the details the domain attached.
func classifyReason(err error) (reason pb.ErrorReason, md map[string]string, ok bool) {
	var (
		marked     *reasonError
		authErr    *presenters.AuthRequiredError
		overflow   *overflowError
		shutdown   *shutdownError
		cutOff     *cutOffError
		outOfRange *events.OutOfRangeError
		notConfig  *agentNotConfiguredError
		noAgent    *agentNotFoundError
		noMessage  *messageNotFoundError
		ownerGone  *replicas.OwnerUnavailableError
	)
	switch {
	case errors.As(err, &marked):
		return marked.reason, marked.md, true
	case errors.As(err, &authErr):
		ids := make([]string, len(authErr.Methods))
		for i, m := range authErr.Methods {
			ids[i] = m.ID
		}
		return pb.ErrorReason_ERROR_REASON_AGENT_AUTH_REQUIRED,
			map[string]string{"agent_id": authErr.AgentID, "auth_methods": strings.Join(ids, ",")}, true
	case errors.Is(err, presenters.ErrAuthRequired):
		return pb.ErrorReason_ERROR_REASON_AGENT_AUTH_REQUIRED, nil, true
	case errors.As(err, &overflow):
		return pb.ErrorReason_ERROR_REASON_SUBSCRIBER_TOO_SLOW, map[string]string{"last_sequence": fmt.Sprint(overflow.Last)}, true
	case errors.As(err, &ownerGone):
		expires := ownerGone.Owner.Expires.UTC().Format(time.RFC3339Nano)
		return pb.ErrorReason_ERROR_REASON_SESSION_OWNER_UNAVAILABLE, map[string]string{"owner": ownerGone.Owner.Address, "lease_expires": expires}, true
	case errors.As(err, &cutOff):
		return pb.ErrorReason_ERROR_REASON_DATABASE_UNAVAILABLE, map[string]string{"last_sequence": fmt.Sprint(cutOff.Last)}, true
	case errors.As(err, &shutdown):
		return pb.ErrorReason_ERROR_REASON_SHUTTING_DOWN, map[string]string{"last_sequence": fmt.Sprint(shutdown.Last)}, true
	case errors.Is(err, errShuttingDown):
		return pb.ErrorReason_ERROR_REASON_SHUTTING_DOWN, nil, true
	case errors.As(err, &outOfRange) && outOfRange.After > outOfRange.Newest:
		return pb.ErrorReason_ERROR_REASON_RESUME_POINT_UNKNOWN, map[string]string{"newest_sequence": fmt.Sprint(outOfRange.Newest)}, true
	case errors.As(err, &outOfRange):
		return pb.ErrorReason_ERROR_REASON_RESUME_POINT_EXPIRED, map[string]string{
			"oldest_sequence": fmt.Sprint(outOfRange.Oldest), "newest_sequence": fmt.Sprint(outOfRange.Newest)}, true
	case errors.Is(err, store.ErrFenced):
		// Another replica took the session over since this one last renewed; the call
		// goes there once tried again.
		return pb.ErrorReason_ERROR_REASON_SESSION_OWNER_UNAVAILABLE, nil, true
	case store.IsUnavailable(err), errors.Is(err, events.ErrLogUnavailable):
		// The database is away for now (a restart, a cut, read-only): nothing is lost,
		// and the call may succeed when tried again. Before the context cases: a
		// connection's own timeout is no caller's deadline.
		return pb.ErrorReason_ERROR_REASON_DATABASE_UNAVAILABLE, nil, true
	case errors.Is(err, context.Canceled), errors.Is(err, presenters.ErrCancelled):
		return pb.ErrorReason_ERROR_REASON_CANCELLED, nil, true
	case errors.Is(err, context.DeadlineExceeded):
		return pb.ErrorReason_ERROR_REASON_DEADLINE_EXCEEDED, nil, true
	case errors.As(err, &notConfig):
		return pb.ErrorReason_ERROR_REASON_AGENT_NOT_CONFIGURED, map[string]string{"agent_id": notConfig.rec.AgentID}, true
	case errors.As(err, &noAgent):
		return pb.ErrorReason_ERROR_REASON_AGENT_NOT_FOUND, map[string]string{"agent_id": noAgent.AgentID}, true
	case errors.As(err, &noMessage):
		return pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_FOUND, map[string]string{"message_id": noMessage.MessageID}, true
	case errors.Is(err, presenters.ErrNotFound):
		// Unmarked (notFoundAs): sessions are what handlers look up most.
		return pb.ErrorReason_ERROR_REASON_SESSION_NOT_FOUND, nil, true
	case errors.Is(err, presenters.ErrMessageIDInUse):
		return pb.ErrorReason_ERROR_REASON_MESSAGE_ID_IN_USE, nil, true
	case errors.Is(err, presenters.ErrMessageNotRunning):
		return pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_RUNNING, nil, true
	case errors.Is(err, presenters.ErrWorkspaceGone):
		return pb.ErrorReason_ERROR_REASON_WORKSPACE_GONE, nil, true
	case errors.Is(err, sandbox.ErrWorkspaceNotAllowed):
		return pb.ErrorReason_ERROR_REASON_WORKSPACE_NOT_ALLOWED, nil, true
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		return pb.ErrorReason_ERROR_REASON_PATH_OUTSIDE_WORKSPACE, nil, true
	case errors.Is(err, presenters.ErrInvalidArgument),
		errors.Is(err, sandbox.ErrInvalidPath),
		errors.Is(err, sandbox.ErrInvalidArgument),
		errors.Is(err, sandbox.ErrNotText),
		errors.Is(err, sandbox.ErrTooLarge),
		// A file a message names (an image's file_path) that is not in the workspace.
		errors.Is(err, sandbox.ErrNotFound):
		return pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, nil, true
	case errors.Is(err, presenters.ErrSessionBusy):
		return pb.ErrorReason_ERROR_REASON_SESSION_BUSY, nil, true
	case errors.Is(err, presenters.ErrUnsupported):
		return pb.ErrorReason_ERROR_REASON_UNSUPPORTED, nil, true
	case errors.Is(err, presenters.ErrSessionClosed), errors.Is(err, sandbox.ErrTerminalsClosed):
		return pb.ErrorReason_ERROR_REASON_SESSION_CLOSED, nil, true
	case errors.Is(err, presenters.ErrFailedPrecondition):
		return pb.ErrorReason_ERROR_REASON_PRECONDITION_FAILED, nil, true
	case errors.Is(err, sandbox.ErrTooManyTerminals):
		return pb.ErrorReason_ERROR_REASON_TOO_MANY_TERMINALS, nil, true
	case errors.Is(err, presenters.ErrAgentUnavailable):
		return pb.ErrorReason_ERROR_REASON_AGENT_UNAVAILABLE, nil, true
	}
	return pb.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, false
}

// fieldOf is the request field an INVALID_ARGUMENT error is about: the one it names
// (invalidField), else the one its message starts with, else its fallback (inField); a
// workspace refused without a field named is CreateSession's config.workspace (its
// additional directories name theirs).
func fieldOf(err error, reason pb.ErrorReason) string {
	var named *fieldError
	hasNamed := errors.As(err, &named)
	switch {
	case hasNamed && !named.fallback:
		return named.field
	case reason == pb.ErrorReason_ERROR_REASON_WORKSPACE_NOT_ALLOWED:
		return "config.workspace"
	}
	msg := err.Error()
	for _, prefix := range []string{presenters.ErrInvalidArgument.Error() + ": ", sandbox.ErrInvalidArgument.Error() + ": "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	if field := fieldOfMessage(msg); field != "" || !hasNamed {
		return field
	}
	return named.field
}

// codeReasons gives a status made outside classify (by gRPC, or a status error another
// layer returned) the reason its code stands for; a code no reason stands for gets
// INTERNAL, keeping its code.
var codeReasons = map[codes.Code]pb.ErrorReason{
	codes.InvalidArgument:  pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
	codes.Unauthenticated:  pb.ErrorReason_ERROR_REASON_TOKEN_INVALID,
	codes.Canceled:         pb.ErrorReason_ERROR_REASON_CANCELLED,
	codes.DeadlineExceeded: pb.ErrorReason_ERROR_REASON_DEADLINE_EXCEEDED,
	codes.Unimplemented:    pb.ErrorReason_ERROR_REASON_UNSUPPORTED,
	codes.Unavailable:      pb.ErrorReason_ERROR_REASON_AGENT_UNAVAILABLE,
	// gRPC's own RESOURCE_EXHAUSTED refuses a message over the size limit; the server's
	// other ones (a slow subscriber, terminals) carry their reasons.
	codes.ResourceExhausted: pb.ErrorReason_ERROR_REASON_REQUEST_TOO_LARGE,
}

// withDetails is st with an ErrorInfo (and, for INVALID_ARGUMENT, a BadRequest naming
// the field its message starts with) if it has none.
func withDetails(st *status.Status) *status.Status {
	if st.Code() == codes.OK {
		return st
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			return st
		}
	}
	reason, ok := codeReasons[st.Code()]
	if !ok {
		reason = pb.ErrorReason_ERROR_REASON_INTERNAL
	}
	var field string
	if st.Code() == codes.InvalidArgument {
		field = fieldOfMessage(st.Message())
	}
	return detailed(st, reason, nil, field)
}

// maxMetadataValueBytes bounds each ErrorInfo metadata value and BadRequest description
// on the wire: they echo ids an agent or a client sent, and travel in a response header
// too.
const maxMetadataValueBytes = 512

// detailed is st with an ErrorInfo of reason and md and, for INVALID_ARGUMENT, a
// BadRequest naming field (empty when no single field is at fault).
func detailed(st *status.Status, reason pb.ErrorReason, md map[string]string, field string) *status.Status {
	bounded := make(map[string]string, len(md))
	for k, v := range md {
		bounded[k] = boundMessage(v, maxMetadataValueBytes)
	}
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reasonName(reason), Domain: errorDomain, Metadata: bounded}}
	if st.Code() == codes.InvalidArgument {
		details = append(details, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field:       field,
			Description: boundMessage(st.Message(), maxMetadataValueBytes),
		}}})
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		return st
	}
	return withDetails
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

// requestTooLarge is the error of a request message over limit bytes, which grpc-go (its
// default receive limit) or the HTTP gateway refused before any handler ran.
func requestTooLarge(limit int, msg string) error {
	return withReason(pb.ErrorReason_ERROR_REASON_REQUEST_TOO_LARGE,
		fmt.Errorf("%s: the request is larger than the %d bytes agenticd accepts; send a smaller one (retrying it unchanged cannot succeed)", msg, limit),
		"limit_bytes", fmt.Sprint(limit))
}

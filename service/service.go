// Package service is agenticd's gRPC layer: the handlers of agentic.v1.AgenticService,
// the registry of agents and session owners, the event hub, the interceptors, and the
// checks of what clients send; the wire encoding itself is service/wire. It is the only
// package that chooses gRPC status codes (service/wire's codec only refuses a request
// that does not decode, as INVALID_ARGUMENT).
package service

import (
	"context"
	"log/slog"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/webhooks"
)

// ListSessions page sizes.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// WorkspaceRoots admits a session's workspace (sandbox.Roots implements it).
type WorkspaceRoots interface {
	Open(dir string) (*sandbox.Workspace, error)
}

var _ WorkspaceRoots = (*sandbox.Roots)(nil)

// Options wires a Service.
type Options struct {
	Registry *Registry
	Hub      *Hub
	Roots    WorkspaceRoots
	// WebLogins mints the web page's sign-in links (CreateWebLogin); nil: UNSUPPORTED.
	WebLogins *WebLogins
	// PageURL is where a browser on this machine reaches the page (scheme://host:port),
	// once the server listens; nil or "": links carry only their path.
	PageURL func() string
	// Webhooks, when set, takes sessions' own webhooks (SessionConfig.webhook); nil:
	// such a CreateSession is INVALID_ARGUMENT.
	Webhooks *webhooks.Notifier
	Logger   *slog.Logger
}

// Service implements agentic.v1.AgenticService. Every handler does the same three things
// in the same order: validate the request, delegate to the registry, presenter or hub,
// and convert any error with toStatus. A panic is the interceptors' (recoverUnary,
// recoverStream).
type Service struct {
	pb.UnimplementedAgenticServiceServer

	registry  *Registry
	hub       *Hub
	roots     WorkspaceRoots
	webLogins *WebLogins
	pageURL   func() string
	webhooks  *webhooks.Notifier
	logger    *slog.Logger
}

var _ pb.AgenticServiceServer = (*Service)(nil)

// New returns the service.
func New(opts Options) *Service {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if opts.Hub != nil && opts.Hub.queue != nil {
		opts.Hub.queue.registry = opts.Registry
	}
	return &Service{registry: opts.Registry, hub: opts.Hub, roots: opts.Roots, webLogins: opts.WebLogins, pageURL: opts.PageURL,
		webhooks: opts.Webhooks, logger: logger}
}

// fail converts an error for the client, logging unexpected ones in full.
func (s *Service) fail(ctx context.Context, method string, err error, attrs ...any) error {
	return failWith(ctx, s.logger, method, err, attrs...)
}

// failWith is the status of err for the client; the real error of an unexpected one is
// logged in full under its correlation id, a refusal at debug level.
func failWith(ctx context.Context, logger *slog.Logger, method string, err error, attrs ...any) error {
	st, correlationID := toStatus(err)
	if correlationID != "" {
		logger.ErrorContext(ctx, "request failed", append([]any{"method", method, "correlation_id", correlationID, "err", err}, attrs...)...)
	} else {
		logger.DebugContext(ctx, "request refused", append([]any{"method", method, "code", st.Code().String(), "err", err}, attrs...)...)
	}
	return st.Err()
}

func required(field, value, what string) error {
	if value == "" {
		return invalidArgument("%s is required: %s", field, what)
	}
	return nil
}

func requireSession(id string) error {
	return required("session_id", id, "the id of a session from CreateSession or ListSessions")
}

// owner returns the presenter that owns a session: the hub knows the owners of sessions
// with recent events (including one whose CreateSession has not returned yet), the store
// knows all the others.
func (s *Service) owner(ctx context.Context, sessionID string) (presenters.Presenter, error) {
	if agentID := s.hub.agentOf(sessionID); agentID != "" {
		if p, err := s.registry.Agent(agentID); err == nil {
			return p, nil
		}
	}
	p, err := s.registry.OwnerOf(ctx, sessionID)
	return p, sessionNotFound(sessionID, err)
}

// sessionToPB converts a presenter's SessionInfo completed with what the event stream
// says: the snapshot point as last_sequence always, the message in flight and the
// pending requests when the presenter leaves them empty, and the sequence of the first
// event of the message in flight when it is the one the hub saw. A read-only snapshot is
// taken before asking the presenter (so the presenter's answer reflects every event up to
// the point); after a change (create, load, set mode...) it is taken after, so the point
// covers the events the change emitted.
func sessionToPB(info presenters.SessionInfo, snap sessionSnapshot) *pb.SessionInfo {
	info.LastSequence = snap.Point
	if info.MessageInFlight == "" {
		info.MessageInFlight = snap.InFlight
	}
	if len(info.PendingPermissions) == 0 {
		info.PendingPermissions = snap.Pending
	}
	if len(info.PendingElicitations) == 0 {
		info.PendingElicitations = snap.Elicitations
	}
	out := wire.SessionInfoToPB(info)
	if info.MessageInFlight != "" && info.MessageInFlight == snap.InFlight {
		out.MessageInFlightFirstSequence = snap.InFlightFirst
	}
	return out
}

// afterChange converts a SessionInfo returned by a change with a snapshot taken now.
func (s *Service) afterChange(info presenters.SessionInfo) *pb.SessionInfo {
	return sessionToPB(info, s.hub.snapshot(info.SessionID))
}

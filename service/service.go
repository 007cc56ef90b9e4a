// Package service is agenticd's gRPC layer: the handlers of agentic.v1.AgenticService,
// the registry of agents and session owners, the event hub, the interceptors, and the
// conversion between the domain (presenters) and the wire. It is the only package that
// knows gRPC status codes.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
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
	Logger   *slog.Logger
}

// Service implements agentic.v1.AgenticService. Every handler does the same four things
// in the same order: recover from a panic, validate the request, delegate to the
// registry, presenter or hub, and convert any error with toStatus.
type Service struct {
	pb.UnimplementedAgenticServiceServer

	registry *Registry
	hub      *Hub
	roots    WorkspaceRoots
	logger   *slog.Logger
}

var _ pb.AgenticServiceServer = (*Service)(nil)

// New returns the service.
func New(opts Options) *Service {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Service{registry: opts.Registry, hub: opts.Hub, roots: opts.Roots, logger: logger}
}

// recoverPanic turns a panic in a handler into INTERNAL and logs it with its stack.
func (s *Service) recoverPanic(ctx context.Context, method string, err *error) {
	if r := recover(); r != nil {
		s.logger.ErrorContext(ctx, "handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
		*err = status.Error(codes.Internal, internalMessage)
	}
}

// fail converts an error for the client, logging unexpected ones in full.
func (s *Service) fail(ctx context.Context, method string, err error, attrs ...any) error {
	st, internal := toStatus(err)
	if internal {
		s.logger.ErrorContext(ctx, "request failed", append([]any{"method", method, "err", err}, attrs...)...)
	} else {
		s.logger.DebugContext(ctx, "request refused", append([]any{"method", method, "code", st.Code().String(), "err", err}, attrs...)...)
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
	if agentID := s.hub.snapshot(sessionID).AgentID; agentID != "" {
		if p, err := s.registry.Agent(agentID); err == nil {
			return p, nil
		}
	}
	return s.registry.ownerOf(ctx, sessionID)
}

// withHub completes a presenter's SessionInfo with what the event stream says: the
// snapshot point as last_sequence always, the message in flight and the pending requests
// when the presenter leaves them empty. A read-only snapshot is taken before asking the
// presenter (so the presenter's answer reflects every event up to the point); after a
// change (create, load, set mode...) it is taken after, so the point covers the events
// the change emitted.
func withHub(info presenters.SessionInfo, snap sessionSnapshot) presenters.SessionInfo {
	info.LastSequence = snap.Point
	if info.MessageInFlight == "" {
		info.MessageInFlight = snap.InFlight
	}
	if len(info.PendingPermissions) == 0 {
		info.PendingPermissions = snap.Pending
	}
	return info
}

// afterChange merges a SessionInfo returned by a change with a snapshot taken now.
func (s *Service) afterChange(info presenters.SessionInfo) *pb.SessionInfo {
	return sessionInfoToPB(withHub(info, s.hub.snapshot(info.SessionID)))
}

func (s *Service) ListAgents(ctx context.Context, _ *pb.ListAgentsRequest) (resp *pb.ListAgentsResponse, err error) {
	defer s.recoverPanic(ctx, "ListAgents", &err)
	resp = &pb.ListAgentsResponse{}
	for _, p := range s.registry.Presenters() {
		info := p.Describe(ctx)
		if info.ID == "" {
			info.ID = p.AgentID()
		}
		resp.Agents = append(resp.Agents, agentInfoToPB(info))
	}
	return resp, nil
}

func (s *Service) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (resp *pb.CreateSessionResponse, err error) {
	const method = "CreateSession"
	defer s.recoverPanic(ctx, method, &err)
	agentID, cfg := req.GetAgentId(), req.GetConfig()
	if err := required("agent_id", agentID, "one of the agents ListAgents shows"); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("config.workspace", cfg.GetWorkspace(), "an absolute directory under one of the server's workspace_roots"); err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	ws, err := s.roots.Open(cfg.GetWorkspace())
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	p, err := s.registry.Agent(agentID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	info, err := p.CreateSession(ctx, presenters.SessionConfig{
		Workspace: ws.Root(),
		ModelID:   cfg.GetModelId(),
		ModeID:    cfg.GetModeId(),
		Title:     cfg.GetTitle(),
	})
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	if info.SessionID == "" {
		return nil, s.fail(ctx, method, fmt.Errorf("agent %s returned a session without an id", agentID), "agent_id", agentID)
	}
	if info.AgentID == "" {
		info.AgentID = agentID
	}
	if info.Workspace == "" {
		info.Workspace = ws.Root()
	}
	if info.CreatedAt.IsZero() {
		info.CreatedAt = time.Now()
	}
	if err := s.registry.recordSession(ctx, info, agentID); err != nil {
		// A session nobody can find again must not stay open.
		if closeErr := p.CloseSession(context.WithoutCancel(ctx), info.SessionID); closeErr != nil {
			s.logger.ErrorContext(ctx, "could not close an unrecorded session", "session_id", info.SessionID, "agent_id", agentID, "err", closeErr)
		}
		return nil, s.fail(ctx, method, err, "agent_id", agentID, "session_id", info.SessionID)
	}
	s.logger.InfoContext(ctx, "session created", "session_id", info.SessionID, "agent_id", agentID, "workspace", info.Workspace)
	return &pb.CreateSessionResponse{Session: s.afterChange(info)}, nil
}

func (s *Service) GetSession(ctx context.Context, req *pb.GetSessionRequest) (resp *pb.GetSessionResponse, err error) {
	const method = "GetSession"
	defer s.recoverPanic(ctx, method, &err)
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	snap := s.hub.snapshot(id)
	info, err := p.GetSession(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.GetSessionResponse{Session: sessionInfoToPB(withHub(info, snap))}, nil
}

func (s *Service) ListSessions(ctx context.Context, req *pb.ListSessionsRequest) (resp *pb.ListSessionsResponse, err error) {
	const method = "ListSessions"
	defer s.recoverPanic(ctx, method, &err)
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, s.fail(ctx, method, invalidArgument("page_size must not be negative (0 means %d, at most %d)", defaultPageSize, maxPageSize))
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	cursor, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if agentID := req.GetAgentId(); agentID != "" {
		if _, err := s.registry.Agent(agentID); err != nil {
			return nil, s.fail(ctx, method, err, "agent_id", agentID)
		}
	}
	recs, err := s.registry.store.listSessions(ctx, req.GetAgentId(), size+1, cursor)
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	resp = &pb.ListSessionsResponse{}
	if len(recs) > size {
		recs = recs[:size]
		last := recs[size-1]
		resp.NextPageToken = encodePageToken(sessionCursor{CreatedUnixNano: last.CreatedUnixNano, SessionID: last.SessionID})
	}
	for _, rec := range recs {
		snap := s.hub.snapshot(rec.SessionID)
		resp.Sessions = append(resp.Sessions, sessionInfoToPB(withHub(s.listedSession(ctx, rec), snap)))
	}
	return resp, nil
}

// listedSession asks the owner for a listed session. A session its agent can no longer
// describe is still listed, from the stored record, with the reason as its status.
func (s *Service) listedSession(ctx context.Context, rec sessionOwner) presenters.SessionInfo {
	stored := presenters.SessionInfo{
		SessionID: rec.SessionID,
		AgentID:   rec.AgentID,
		Workspace: rec.Workspace,
		CreatedAt: rec.createdAt(),
		Status:    presenters.SessionError,
	}
	p, err := s.registry.Agent(rec.AgentID)
	if err != nil {
		stored.StatusReason = fmt.Sprintf("agent %s is not configured on this server", rec.AgentID)
		return stored
	}
	info, err := p.GetSession(ctx, rec.SessionID)
	switch {
	case errors.Is(err, presenters.ErrNotFound):
		stored.StatusReason = fmt.Sprintf("agent %s no longer has this session", rec.AgentID)
		return stored
	case err != nil:
		st, internal := toStatus(err)
		if internal {
			s.logger.ErrorContext(ctx, "could not describe a listed session", "session_id", rec.SessionID, "agent_id", rec.AgentID, "err", err)
		}
		stored.StatusReason = st.Message()
		return stored
	}
	return info
}

func (s *Service) LoadSession(ctx context.Context, req *pb.LoadSessionRequest) (resp *pb.LoadSessionResponse, err error) {
	const method = "LoadSession"
	defer s.recoverPanic(ctx, method, &err)
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if req.GetMaxHistory() < 0 {
		return nil, s.fail(ctx, method, invalidArgument("max_history must not be negative (0 replays all messages)"), "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	info, err := p.LoadSession(ctx, id, presenters.LoadContext{
		MaxHistory:            int(req.GetMaxHistory()),
		IncludeSystemMessages: req.GetIncludeSystemMessages(),
	})
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.LoadSessionResponse{Session: s.afterChange(info)}, nil
}

func (s *Service) CloseSession(ctx context.Context, req *pb.CloseSessionRequest) (resp *pb.CloseSessionResponse, err error) {
	const method = "CloseSession"
	defer s.recoverPanic(ctx, method, &err)
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	if err := p.CloseSession(ctx, id); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	s.logger.InfoContext(ctx, "session closed", "session_id", id, "agent_id", p.AgentID())
	return &pb.CloseSessionResponse{}, nil
}

func (s *Service) SendMessage(ctx context.Context, req *pb.SendMessageRequest) (resp *pb.SendMessageResponse, err error) {
	const method = "SendMessage"
	defer s.recoverPanic(ctx, method, &err)
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	content, err := contentFromPB(req.GetContent())
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	res, err := p.SendMessage(ctx, id, content)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.SendMessageResponse{MessageId: res.MessageID, UserMessageId: res.UserMessageID}, nil
}

func (s *Service) CancelMessage(ctx context.Context, req *pb.CancelMessageRequest) (resp *pb.CancelMessageResponse, err error) {
	const method = "CancelMessage"
	defer s.recoverPanic(ctx, method, &err)
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	if err := p.CancelMessage(ctx, id, req.GetMessageId()); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.CancelMessageResponse{}, nil
}

func (s *Service) SetModel(ctx context.Context, req *pb.SetModelRequest) (resp *pb.SetModelResponse, err error) {
	const method = "SetModel"
	defer s.recoverPanic(ctx, method, &err)
	id, modelID := req.GetSessionId(), req.GetModelId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("model_id", modelID, "one of the session's available_models (GetSession)"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	current, err := p.GetSession(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	ids := make([]string, len(current.AvailableModels))
	for i, m := range current.AvailableModels {
		ids[i] = m.ID
	}
	if err := offered("model_id", modelID, "models", ids); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	info, err := p.SetModel(ctx, id, modelID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.SetModelResponse{Session: s.afterChange(info)}, nil
}

func (s *Service) SetMode(ctx context.Context, req *pb.SetModeRequest) (resp *pb.SetModeResponse, err error) {
	const method = "SetMode"
	defer s.recoverPanic(ctx, method, &err)
	id, modeID := req.GetSessionId(), req.GetModeId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("mode_id", modeID, "one of the session's available_modes (GetSession)"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	current, err := p.GetSession(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	ids := make([]string, len(current.AvailableModes))
	for i, m := range current.AvailableModes {
		ids[i] = m.ID
	}
	if err := offered("mode_id", modeID, "modes", ids); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	info, err := p.SetMode(ctx, id, modeID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.SetModeResponse{Session: s.afterChange(info)}, nil
}

// offered checks an id against the session's list, so every agent refuses an unknown
// model or mode the same way (DESIGN.md: INVALID_ARGUMENT).
func offered(field, id, what string, ids []string) error {
	if len(ids) == 0 {
		return invalidArgument("%s %q: this session offers no %s to choose from", field, id, what)
	}
	for _, have := range ids {
		if have == id {
			return nil
		}
	}
	return invalidArgument("%s %q is not one of the session's %s: %s", field, id, what, strings.Join(ids, ", "))
}

func (s *Service) RespondPermission(ctx context.Context, req *pb.RespondPermissionRequest) (resp *pb.RespondPermissionResponse, err error) {
	const method = "RespondPermission"
	defer s.recoverPanic(ctx, method, &err)
	id, requestID := req.GetSessionId(), req.GetRequestId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("request_id", requestID, "the request_id of a TOOL_PERMISSION_REQUIRED event or of the session's pending_permissions"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	var kind presenters.PermissionOptionKind
	switch answer := req.GetAnswer().(type) {
	case *pb.RespondPermissionRequest_OptionId:
		if answer.OptionId == "" {
			return nil, s.fail(ctx, method, invalidArgument("option_id is empty: use one of the request's option ids, or set option_kind"), "session_id", id)
		}
	case *pb.RespondPermissionRequest_OptionKind:
		k, ok := optionKindFromPB(answer.OptionKind)
		if !ok {
			return nil, s.fail(ctx, method, invalidArgument("option_kind must be set (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE or REJECT_ALWAYS)"), "session_id", id)
		}
		kind = k
	default:
		return nil, s.fail(ctx, method, invalidArgument("an answer is required: set option_id or option_kind"), "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	optionID := req.GetOptionId()
	if kind != "" {
		pending, err := s.pendingRequest(ctx, p, id, requestID)
		if err != nil {
			return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
		}
		opt, ok := pending.OptionOfKind(kind)
		if !ok {
			return nil, s.fail(ctx, method, invalidArgument("permission request %q has no %s option; its options are: %s",
				requestID, kind, describeOptions(pending.Options)), "session_id", id, "agent_id", p.AgentID())
		}
		optionID = opt.ID
	}
	if err := p.RespondPermission(ctx, id, presenters.PermissionResponse{RequestID: requestID, OptionID: optionID}); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.RespondPermissionResponse{}, nil
}

// pendingRequest finds a pending permission request: in the hub's projection, or else in
// what the presenter reports.
func (s *Service) pendingRequest(ctx context.Context, p presenters.Presenter, sessionID, requestID string) (presenters.PermissionRequest, error) {
	if r, ok := s.hub.pendingRequest(sessionID, requestID); ok {
		return r, nil
	}
	info, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return presenters.PermissionRequest{}, err
	}
	for _, r := range info.PendingPermissions {
		if r.RequestID == requestID {
			return r, nil
		}
	}
	return presenters.PermissionRequest{}, fmt.Errorf("%w: permission request %q is not pending in session %q (answered already, or never asked); GetSession lists the pending ones",
		presenters.ErrNotFound, requestID, sessionID)
}

func describeOptions(opts []presenters.PermissionOption) string {
	if len(opts) == 0 {
		return "none"
	}
	parts := make([]string, len(opts))
	for i, o := range opts {
		parts[i] = fmt.Sprintf("%s (%s)", o.ID, o.Kind)
	}
	return strings.Join(parts, ", ")
}

func (s *Service) GetMessages(ctx context.Context, req *pb.GetMessagesRequest) (resp *pb.GetMessagesResponse, err error) {
	const method = "GetMessages"
	defer s.recoverPanic(ctx, method, &err)
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if req.GetLimit() < 0 {
		return nil, s.fail(ctx, method, invalidArgument("limit must not be negative (0 returns all messages)"), "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	msgs, err := p.GetMessages(ctx, id, presenters.MessageQuery{Limit: int(req.GetLimit()), BeforeMessageID: req.GetBeforeMessageId()})
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	resp = &pb.GetMessagesResponse{Messages: make([]*pb.Message, len(msgs))}
	for i, m := range msgs {
		resp.Messages[i] = messageToPB(m)
	}
	return resp, nil
}

// Subscribe replays the held events after after_sequence, then streams live ones, until
// the client leaves, the server stops, or the client falls a whole queue behind.
func (s *Service) Subscribe(req *pb.SubscribeRequest, stream pb.AgenticService_SubscribeServer) (err error) {
	const method = "Subscribe"
	ctx := stream.Context()
	defer s.recoverPanic(ctx, method, &err)
	for i, id := range req.GetSessionIds() {
		if id == "" {
			return s.fail(ctx, method, invalidArgument("session_ids[%d] is empty: list session ids, or leave session_ids empty for all sessions", i))
		}
	}
	for i, id := range req.GetAgentIds() {
		if id == "" {
			return s.fail(ctx, method, invalidArgument("agent_ids[%d] is empty: list agent ids, or leave agent_ids empty for all agents", i))
		}
	}
	sub, backlog, err := s.hub.subscribe(req.GetSessionIds(), req.GetAgentIds(), req.GetAfterSequence())
	if err != nil {
		return s.fail(ctx, method, err)
	}
	defer s.hub.unsubscribe(sub)
	// Headers go out only now, so a client that waits for them knows it is registered:
	// every event published from here on reaches it.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
	}
	last := req.GetAfterSequence()
	for _, he := range backlog {
		if err := send(stream, he); err != nil {
			return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
		}
		last = he.ev.Sequence
	}
	backlog = nil // the replay may be long; let it go while the stream lives on
	for {
		select {
		case <-ctx.Done():
			return s.fail(ctx, method, ctx.Err())
		case he, ok := <-sub.ch:
			if !ok {
				return s.fail(ctx, method, endError(sub.end, last), "last_sequence", last)
			}
			if err := send(stream, he); err != nil {
				return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
			}
			last = he.ev.Sequence
		}
	}
}

// send writes one event to a stream as bytes shared by every subscriber.
func send(stream pb.AgenticService_SubscribeServer, he *heldEvent) error {
	wire, err := he.encoded()
	if err != nil {
		return err
	}
	return stream.SendMsg(wire)
}

// endError is why the hub ended a subscription, with the client's resume point.
func endError(end error, last uint64) error {
	var overflow *overflowError
	if errors.As(end, &overflow) {
		return &overflowError{Queue: overflow.Queue, Last: last}
	}
	return &shutdownError{Last: last}
}

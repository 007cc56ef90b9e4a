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
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
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

// Service implements agentic.v1.AgenticService. Every handler does the same three things
// in the same order: validate the request, delegate to the registry, presenter or hub,
// and convert any error with toStatus. A panic is the interceptors' (recoverUnary,
// recoverStream).
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

// fail converts an error for the client, logging unexpected ones in full.
func (s *Service) fail(ctx context.Context, method string, err error, attrs ...any) error {
	st, correlationID := toStatus(err)
	if correlationID != "" {
		s.logger.ErrorContext(ctx, "request failed", append([]any{"method", method, "correlation_id", correlationID, "err", err}, attrs...)...)
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
	if agentID := s.hub.agentOf(sessionID); agentID != "" {
		if p, err := s.registry.Agent(agentID); err == nil {
			return p, nil
		}
	}
	return s.registry.ownerOf(ctx, sessionID)
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
	out := sessionInfoToPB(info)
	if info.MessageInFlight != "" && info.MessageInFlight == snap.InFlight {
		out.MessageInFlightFirstSequence = snap.InFlightFirst
	}
	return out
}

// afterChange converts a SessionInfo returned by a change with a snapshot taken now.
func (s *Service) afterChange(info presenters.SessionInfo) *pb.SessionInfo {
	return sessionToPB(info, s.hub.snapshot(info.SessionID))
}

func (s *Service) ListAgents(ctx context.Context, _ *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	resp := &pb.ListAgentsResponse{}
	for _, p := range s.registry.Presenters() {
		info := p.Describe(ctx)
		if info.ID == "" {
			info.ID = p.AgentID()
		}
		resp.Agents = append(resp.Agents, agentInfoToPB(info))
	}
	return resp, nil
}

func (s *Service) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	const method = "CreateSession"
	agentID, cfg := req.GetAgentId(), req.GetConfig()
	if err := required("agent_id", agentID, "one of the agents ListAgents shows"); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("config.workspace", cfg.GetWorkspace(), "an absolute directory under one of the server's workspace_roots"); err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	// The one place a path a client sent becomes a workspace: presenters get it opened.
	ws, err := s.roots.Open(cfg.GetWorkspace())
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	p, err := s.registry.Agent(agentID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	info, err := p.CreateSession(ctx, presenters.SessionConfig{
		Workspace: ws,
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

func (s *Service) GetSession(ctx context.Context, req *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
	const method = "GetSession"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.owner(ctx, id)
	var notConfigured *agentNotConfiguredError
	if errors.As(err, &notConfigured) {
		return s.unconfiguredSession(ctx, notConfigured.rec), nil
	}
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	snap := s.hub.snapshot(id)
	info, err := p.GetSession(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.GetSessionResponse{Session: sessionToPB(info, snap)}, nil
}

// unconfiguredSession answers GetSession for a session whose agent is no longer
// configured: the stored snapshot, closed, with nothing in flight or pending (nothing
// could answer them).
func (s *Service) unconfiguredSession(ctx context.Context, rec store.SessionOwner) *pb.GetSessionResponse {
	infos, err := s.unconfiguredSnapshots(ctx, []store.SessionOwner{rec})
	if err != nil {
		s.logger.ErrorContext(ctx, "could not read a session's stored history", "session_id", rec.SessionID, "agent_id", rec.AgentID, "err", err)
	}
	return &pb.GetSessionResponse{Session: sessionToPB(infos[0], sessionSnapshot{Point: s.hub.LastSequence()})}
}

func (s *Service) ListSessions(ctx context.Context, req *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	const method = "ListSessions"
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
	recs, err := s.registry.store.ListSessionOwners(ctx, req.GetAgentId(), size+1, cursor)
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	resp := &pb.ListSessionsResponse{}
	if len(recs) > size {
		recs = recs[:size]
		last := recs[size-1]
		resp.NextPageToken = encodePageToken(store.SessionCursor{CreatedUnixNano: last.CreatedUnixNano, SessionID: last.SessionID})
	}
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.SessionID
	}
	snaps := s.hub.snapshots(ids)
	infos := s.listedSessions(ctx, recs)
	resp.Sessions = make([]*pb.SessionInfo, len(recs))
	for i := range recs {
		resp.Sessions[i] = sessionToPB(infos[i], snaps[i])
	}
	return resp, nil
}

// sessionsGetter is what a presenter may implement to describe many of its sessions at
// once: a ListSessions page then costs it one call instead of one GetSession per session.
type sessionsGetter interface {
	// GetSessions returns the sessions among sessionIDs that the agent knows, in any
	// order; an id it does not know is left out.
	GetSessions(ctx context.Context, sessionIDs []string) ([]presenters.SessionInfo, error)
}

// listedSessions asks the owners for a page of sessions: each agent that implements
// sessionsGetter once, the others session by session. A session its agent can no longer
// describe is still listed, from the stored record, with the reason as its status; one
// whose agent is no longer configured is listed closed, as its stored history has it.
func (s *Service) listedSessions(ctx context.Context, recs []store.SessionOwner) []presenters.SessionInfo {
	type batch struct {
		getter sessionsGetter
		recs   []int // indexes in recs
	}
	out := make([]presenters.SessionInfo, len(recs))
	batches := map[string]*batch{}
	var orphans []int // indexes in recs of sessions whose agent is not configured
	for i, rec := range recs {
		p, err := s.registry.Agent(rec.AgentID)
		if err != nil {
			orphans = append(orphans, i)
			continue
		}
		if getter, ok := p.(sessionsGetter); ok {
			if batches[rec.AgentID] == nil {
				batches[rec.AgentID] = &batch{getter: getter}
			}
			batches[rec.AgentID].recs = append(batches[rec.AgentID].recs, i)
			continue
		}
		info, err := p.GetSession(ctx, rec.SessionID)
		out[i] = s.listedSession(ctx, rec, info, err)
	}
	for _, b := range batches {
		ids := make([]string, len(b.recs))
		for j, i := range b.recs {
			ids[j] = recs[i].SessionID
		}
		infos, err := b.getter.GetSessions(ctx, ids)
		byID := make(map[string]presenters.SessionInfo, len(infos))
		for _, info := range infos {
			byID[info.SessionID] = info
		}
		for _, i := range b.recs {
			info, ok := byID[recs[i].SessionID]
			known := err
			if known == nil && !ok {
				known = presenters.ErrNotFound
			}
			out[i] = s.listedSession(ctx, recs[i], info, known)
		}
	}
	if len(orphans) > 0 {
		orphanRecs := make([]store.SessionOwner, len(orphans))
		for j, i := range orphans {
			orphanRecs[j] = recs[i]
		}
		infos, err := s.unconfiguredSnapshots(ctx, orphanRecs)
		for j, i := range orphans {
			out[i] = infos[j]
		}
		if err != nil {
			s.logger.ErrorContext(ctx, "could not read the stored history of listed sessions", "sessions", len(orphans), "err", err)
		}
	}
	return out
}

// unconfiguredSnapshots describes sessions whose agent is no longer configured from the
// store; if the stored history cannot be read, from their owner records alone (the error
// says why, for the log).
func (s *Service) unconfiguredSnapshots(ctx context.Context, recs []store.SessionOwner) ([]presenters.SessionInfo, error) {
	infos, err := s.registry.storedSnapshots(ctx, recs)
	if err == nil {
		return infos, nil
	}
	infos = make([]presenters.SessionInfo, len(recs))
	for i, rec := range recs {
		infos[i] = storedSession(rec, presenters.SessionClosed, agentNotConfiguredReason(rec.AgentID))
	}
	return infos, err
}

// listedSession is what a listed session's owner answered, or its stored record with the
// reason the owner could not describe it.
func (s *Service) listedSession(ctx context.Context, rec store.SessionOwner, info presenters.SessionInfo, err error) presenters.SessionInfo {
	switch {
	case err == nil:
		return info
	case errors.Is(err, presenters.ErrNotFound):
		return storedSession(rec, presenters.SessionError, fmt.Sprintf("agent %s no longer has this session", rec.AgentID))
	}
	st, correlationID := toStatus(err)
	if correlationID != "" {
		s.logger.ErrorContext(ctx, "could not describe a listed session", "session_id", rec.SessionID, "agent_id", rec.AgentID, "correlation_id", correlationID, "err", err)
	}
	return storedSession(rec, presenters.SessionError, st.Message())
}

func (s *Service) LoadSession(ctx context.Context, req *pb.LoadSessionRequest) (*pb.LoadSessionResponse, error) {
	const method = "LoadSession"
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

func (s *Service) CloseSession(ctx context.Context, req *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	const method = "CloseSession"
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

func (s *Service) SendMessage(ctx context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	const method = "SendMessage"
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

func (s *Service) CancelMessage(ctx context.Context, req *pb.CancelMessageRequest) (*pb.CancelMessageResponse, error) {
	const method = "CancelMessage"
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

func (s *Service) SetModel(ctx context.Context, req *pb.SetModelRequest) (*pb.SetModelResponse, error) {
	const method = "SetModel"
	info, err := s.choose(ctx, method, req.GetSessionId(), choice{
		field: "model_id", id: req.GetModelId(), what: "models",
		offered: func(info presenters.SessionInfo) []string {
			return idsOf(info.AvailableModels, func(m presenters.Model) string { return m.ID })
		},
		apply: func(ctx context.Context, p presenters.Presenter, sessionID, modelID string) (presenters.SessionInfo, error) {
			return p.SetModel(ctx, sessionID, modelID)
		},
	})
	if err != nil {
		return nil, err
	}
	return &pb.SetModelResponse{Session: info}, nil
}

func (s *Service) SetMode(ctx context.Context, req *pb.SetModeRequest) (*pb.SetModeResponse, error) {
	const method = "SetMode"
	info, err := s.choose(ctx, method, req.GetSessionId(), choice{
		field: "mode_id", id: req.GetModeId(), what: "modes",
		offered: func(info presenters.SessionInfo) []string {
			return idsOf(info.AvailableModes, func(m presenters.Mode) string { return m.ID })
		},
		apply: func(ctx context.Context, p presenters.Presenter, sessionID, modeID string) (presenters.SessionInfo, error) {
			return p.SetMode(ctx, sessionID, modeID)
		},
	})
	if err != nil {
		return nil, err
	}
	return &pb.SetModeResponse{Session: info}, nil
}

// choice is a SetModel or SetMode request: an id from one of the session's lists.
type choice struct {
	field, id, what string // "model_id", the id chosen, "models"
	offered         func(presenters.SessionInfo) []string
	apply           func(ctx context.Context, p presenters.Presenter, sessionID, id string) (presenters.SessionInfo, error)
}

// choose validates a choice against the session's list, applies it and converts the
// session; its errors are already converted for the client.
func (s *Service) choose(ctx context.Context, method, sessionID string, c choice) (*pb.SessionInfo, error) {
	if err := requireSession(sessionID); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required(c.field, c.id, "one of the session's available_"+c.what+" (GetSession)"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	p, err := s.owner(ctx, sessionID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	current, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID, "agent_id", p.AgentID())
	}
	if err := offered(c.field, c.id, c.what, c.offered(current)); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID, "agent_id", p.AgentID())
	}
	info, err := c.apply(ctx, p, sessionID, c.id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID, "agent_id", p.AgentID())
	}
	return s.afterChange(info), nil
}

// idsOf lists the ids of a session's modes or models.
func idsOf[T any](items []T, id func(T) string) []string {
	ids := make([]string, len(items))
	for i, item := range items {
		ids[i] = id(item)
	}
	return ids
}

// offered checks an id against the session's list, so every agent refuses an unknown
// model or mode the same way: INVALID_ARGUMENT.
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

func (s *Service) RespondPermission(ctx context.Context, req *pb.RespondPermissionRequest) (*pb.RespondPermissionResponse, error) {
	const method = "RespondPermission"
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

func (s *Service) GetMessages(ctx context.Context, req *pb.GetMessagesRequest) (*pb.GetMessagesResponse, error) {
	const method = "GetMessages"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if req.GetLimit() < 0 {
		return nil, s.fail(ctx, method, invalidArgument("limit must not be negative (0 returns all messages)"), "session_id", id)
	}
	q := presenters.MessageQuery{Limit: int(req.GetLimit()), BeforeMessageID: req.GetBeforeMessageId()}
	var msgs []presenters.Message
	attrs := []any{"session_id", id}
	p, err := s.owner(ctx, id)
	var notConfigured *agentNotConfiguredError
	switch {
	case errors.As(err, &notConfigured):
		// The history outlives its agent: read it from the store.
		attrs = append(attrs, "agent_id", notConfigured.rec.AgentID)
		msgs, err = s.registry.storedMessages(ctx, id, q)
	case err == nil:
		attrs = append(attrs, "agent_id", p.AgentID())
		msgs, err = p.GetMessages(ctx, id, q)
	}
	if err != nil {
		return nil, s.fail(ctx, method, err, attrs...)
	}
	resp := &pb.GetMessagesResponse{Messages: make([]*pb.Message, len(msgs))}
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		resp.Messages[i], sizes[i] = s.messageForResponse(ctx, m)
	}
	if err := fitsResponse(sizes); err != nil {
		return nil, s.fail(ctx, method, err, attrs...)
	}
	return resp, nil
}

// messageForResponse converts a stored message, cut to MaxEventBytes (its largest texts
// end with "[truncated: N bytes]"; a message that cannot be cut enough keeps only an
// error block saying so), and returns its encoded size.
func (s *Service) messageForResponse(ctx context.Context, m presenters.Message) (*pb.Message, int) {
	out := messageToPB(m)
	size := proto.Size(out)
	if size <= MaxEventBytes {
		return out, size
	}
	if !fitWithin(out, MaxEventBytes) {
		out.Blocks = []*pb.Block{{Content: &pb.Block_Error{Error: &pb.ErrorBlock{
			Code:    "message_too_large",
			Message: fmt.Sprintf("this message takes %d bytes, more than one response may carry, even with its texts cut", size),
		}}}}
	}
	s.logger.WarnContext(ctx, "stored message over the size cap sent cut", "session_id", m.SessionID, "message_id", m.ID, "bytes", size)
	return out, proto.Size(out)
}

// fitsResponse checks that messages of these encoded sizes fit in one GetMessages
// response; if not, it says how many of the newest would.
func fitsResponse(sizes []int) error {
	total, fit := 0, 0
	for i := len(sizes) - 1; i >= 0; i-- {
		total += protowire.SizeTag(1) + protowire.SizeBytes(sizes[i])
		if total <= MaxEventBytes {
			fit++
		}
	}
	if total <= MaxEventBytes {
		return nil
	}
	return &responseTooLargeError{Bytes: total, Fit: fit}
}

// Subscribe replays the held events after after_sequence, then streams live ones, until
// the client leaves, the server stops, or the client falls a whole queue behind.
func (s *Service) Subscribe(req *pb.SubscribeRequest, stream pb.AgenticService_SubscribeServer) error {
	const method = "Subscribe"
	ctx := stream.Context()
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
	if err := s.checkSubscriptionTargets(ctx, req.GetSessionIds(), req.GetAgentIds()); err != nil {
		return s.fail(ctx, method, err)
	}
	sub, err := s.hub.subscribe(req.GetSessionIds(), req.GetAgentIds(), req.GetAfterSequence())
	if err != nil {
		return s.fail(ctx, method, err)
	}
	defer sub.Close()
	// Headers go out only now, so a client that waits for them knows it is registered:
	// every event published from here on reaches it.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
	}
	last := req.GetAfterSequence()
	for {
		// The replay first, then live events; each one's wire bytes are shared by every
		// stream that sends it.
		seq, wire, err := sub.Next(ctx)
		if err != nil {
			return s.fail(ctx, method, endError(err), "last_sequence", last)
		}
		if err := stream.SendMsg(wire); err != nil {
			return s.fail(ctx, method, cmp.Or(ctx.Err(), err))
		}
		last = seq
	}
}

// checkSubscriptionTargets checks that every session and agent a subscription names
// exists, since a stream filtered on a name that does not would wait forever: a session
// the store knows (loaded or not) or the hub has events of (one being created), a
// registered agent.
func (s *Service) checkSubscriptionTargets(ctx context.Context, sessionIDs, agentIDs []string) error {
	for i, id := range agentIDs {
		if _, err := s.registry.Agent(id); err != nil {
			return fmt.Errorf("agent_ids[%d]: %w", i, err)
		}
	}
	var notHeld []string // the sessions without events in the hub, for the store to know
	for _, id := range sessionIDs {
		if s.hub.agentOf(id) == "" {
			notHeld = append(notHeld, id)
		}
	}
	if len(notHeld) == 0 {
		return nil
	}
	stored, err := s.registry.store.KnownSessions(ctx, notHeld)
	if err != nil {
		return err
	}
	// The hub is asked again: a session created while the store was read has events now.
	for i, id := range sessionIDs {
		if !stored[id] && s.hub.agentOf(id) == "" {
			return fmt.Errorf("session_ids[%d]: %w: unknown session %q; ListSessions shows the sessions this server knows",
				i, presenters.ErrNotFound, id)
		}
	}
	return nil
}

// endError is why a subscription ended, with the client's resume point when the hub
// ended it.
func endError(err error) error {
	var overflow *events.OverflowError
	var closed *events.ClosedError
	switch {
	case errors.As(err, &overflow):
		return &overflowError{Queue: overflow.Queue, Last: overflow.Last}
	case errors.As(err, &closed):
		return &shutdownError{Last: closed.Last}
	}
	return err
}

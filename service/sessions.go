package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// maxTitleBytes bounds a session title a client gives: it is stored, listed with every
// session and echoed in events, so a page of sessions must not be carried by titles.
const maxTitleBytes = 1024

func (s *Service) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	const method = "CreateSession"
	agentID, cfg := req.GetAgentId(), req.GetConfig()
	if err := required("agent_id", agentID, "one of the agents ListAgents shows"); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("config.workspace", cfg.GetWorkspace(), "an absolute directory under one of the server's workspace_roots"); err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	if n := len(cfg.GetTitle()); n > maxTitleBytes {
		return nil, s.fail(ctx, method, invalidField("config.title", "config.title has %d bytes, more than the %d a title may have: shorten it", n, maxTitleBytes), "agent_id", agentID)
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
	servers, err := mcpServersFromPB(cfg.GetMcpServers())
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	dirs, err := s.openAdditionalDirectories(cfg.GetAdditionalDirectories(), ws)
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	grants, err := aclFromPB("acl", req.GetAcl())
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	// Only a setup beyond the workspace asks the agent's description (its capabilities).
	if len(servers) > 0 || len(dirs) > 0 {
		if err := supportsSetup(p.Describe(ctx), servers, dirs); err != nil {
			return nil, s.fail(ctx, method, err, "agent_id", agentID)
		}
	}
	hook, hasHook, err := s.sessionWebhook(cfg.GetWebhook())
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	info, err := p.CreateSession(ctx, presenters.SessionConfig{
		Workspace:             ws,
		ModelID:               cfg.GetModelId(),
		ModeID:                cfg.GetModeId(),
		Title:                 cfg.GetTitle(),
		AdditionalDirectories: dirs,
		Creator:               callerOf(ctx).Name,
		MCPServers:            servers,
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
	isNew, err := s.registry.recordSession(ctx, info, agentID, callerOf(ctx).Name, grants, setupOf(info.SessionID, dirs, servers))
	if err != nil {
		// A session nobody can find again must not stay open.
		if closeErr := p.CloseSession(context.WithoutCancel(ctx), info.SessionID); closeErr != nil {
			s.logger.ErrorContext(ctx, "could not close an unrecorded session", "session_id", info.SessionID, "agent_id", agentID, "err", closeErr)
		}
		return nil, s.fail(ctx, method, err, "agent_id", agentID, "session_id", info.SessionID)
	}
	if hasHook {
		// Stored, so that it outlives a restart and reaches the replica that takes the
		// session over; a hook that cannot be kept is refused with the session.
		if err := s.registry.store.SaveSessionWebhook(ctx, storedWebhook(info.SessionID, hook)); err != nil {
			if closeErr := p.CloseSession(context.WithoutCancel(ctx), info.SessionID); closeErr != nil {
				s.logger.ErrorContext(ctx, "could not close a session whose webhook was not stored", "session_id", info.SessionID, "agent_id", agentID, "err", closeErr)
			}
			return nil, s.fail(ctx, method, err, "agent_id", agentID, "session_id", info.SessionID)
		}
		// Before the session is returned, so no turn of it can end unseen; nothing the
		// session does before (its creation) is a notice.
		if err := s.webhooks.WatchSession(info.SessionID, hook); err != nil {
			s.logger.ErrorContext(ctx, "the session's webhook was checked but not taken", "session_id", info.SessionID, "agent_id", agentID, "err", err)
		}
	}
	s.logger.InfoContext(ctx, "session created", "session_id", info.SessionID, "agent_id", agentID, "workspace", info.Workspace, "principal", callerOf(ctx).Name)
	out := s.afterChange(info)
	s.withRecordedOwnership(ctx, out, isNew, grants)
	return &pb.CreateSessionResponse{Session: out}, nil
}

func (s *Service) ForkSession(ctx context.Context, req *pb.ForkSessionRequest) (*pb.ForkSessionResponse, error) {
	const method = "ForkSession"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	agentID := p.AgentID()
	forker, ok := p.(presenters.SessionForker)
	if !ok {
		err := presenters.WithDetail(fmt.Errorf("agent %s cannot fork sessions: %w", agentID, presenters.ErrUnsupported), "unsupported", "session/fork")
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", agentID)
	}
	setup, err := s.registry.store.SessionSetup(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", agentID)
	}
	info, err := forker.ForkSession(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(id, err), "session_id", id, "agent_id", agentID)
	}
	setup.SessionID = info.SessionID
	isNew, err := s.registry.recordSession(ctx, info, agentID, callerOf(ctx).Name, nil, setup)
	if err != nil {
		// A session nobody can find again must not stay open.
		if closeErr := p.CloseSession(context.WithoutCancel(ctx), info.SessionID); closeErr != nil {
			s.logger.ErrorContext(ctx, "could not close an unrecorded session", "session_id", info.SessionID, "agent_id", agentID, "err", closeErr)
		}
		return nil, s.fail(ctx, method, err, "agent_id", agentID, "session_id", info.SessionID)
	}
	s.logger.InfoContext(ctx, "session forked", "session_id", info.SessionID, "forked_from", id, "agent_id", agentID, "principal", callerOf(ctx).Name)
	out := s.afterChange(info)
	s.withRecordedOwnership(ctx, out, isNew, nil)
	return &pb.ForkSessionResponse{Session: out}, nil
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
		resp := s.unconfiguredSession(ctx, notConfigured.rec)
		s.withOwnership(ctx, resp.GetSession())
		return resp, nil
	}
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	snap := s.hub.snapshot(id)
	info, err := p.GetSession(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	if q := s.hub.queue; q != nil {
		if info.QueuedMessages, err = q.st.QueuedMessages(ctx, id); err != nil {
			return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
		}
	}
	out := sessionToPB(info, snap)
	s.withOwnership(ctx, out)
	return &pb.GetSessionResponse{Session: out}, nil
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

// ListSessions lists sessions most recently updated first (ties by session id), as the
// store orders them by their stored update time. Agent, workspace and updated_after
// narrow the store's query; statuses are the agents' live view, so they are matched on
// the described sessions, reading at most maxSessionsScanned per call: a page may then
// hold fewer than page_size sessions, or none, with a token to go on.
func (s *Service) ListSessions(ctx context.Context, req *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	const method = "ListSessions"
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	filter, err := sessionFilterOf(req)
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	switch req.GetView() {
	case pb.SessionView_SESSION_VIEW_UNSPECIFIED, pb.SessionView_SESSION_VIEW_BASIC, pb.SessionView_SESSION_VIEW_FULL:
	default:
		return nil, s.fail(ctx, method, invalidField("view", "view %d is not a SessionView: use SESSION_VIEW_BASIC or SESSION_VIEW_FULL", req.GetView()))
	}
	filter.store.Reader = callerOf(ctx).reader()
	fingerprint := filter.fingerprint()
	cursor, err := decodeSessionPageToken(req.GetPageToken(), fingerprint)
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	page, next, err := s.scanSessions(ctx, filter, size, cursor)
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", filter.store.AgentID)
	}
	if len(page) == 0 && cursor == nil && next == nil && filter.store.AgentID != "" {
		// Nothing stored or live: a configured agent has no session yet; any other id
		// names no agent this server has or had.
		if _, err := s.registry.Agent(filter.store.AgentID); err != nil {
			return nil, s.fail(ctx, method, fmt.Errorf("%w; no stored session belongs to it either", err), "agent_id", filter.store.AgentID)
		}
	}
	resp := &pb.ListSessionsResponse{}
	total := 0
	for i, l := range page {
		if req.GetView() != pb.SessionView_SESSION_VIEW_FULL {
			basicView(l.info)
		}
		n := protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(l.info))
		if i > 0 && total+n > maxResponseBytes {
			next = &page[i-1].at
			break
		}
		resp.Sessions = append(resp.Sessions, l.info)
		total += n
	}
	if next != nil {
		resp.NextPageToken = encodeSessionPageToken(*next, fingerprint)
	}
	return resp, nil
}

// maxSessionsScanned bounds how many sessions one ListSessions describes while looking
// for sessions in the statuses asked for.
const maxSessionsScanned = maxPageSize

// listed is one session of a ListSessions page and its place in the order.
type listed struct {
	info *pb.SessionInfo
	at   store.SessionCursor
}

// scanSessions reads sessions from the store after the cursor, describes them and keeps
// those in the statuses asked for, until the page is full, the store has no more, or
// maxSessionsScanned were described. next is where the following page starts, nil when
// the list is over.
func (s *Service) scanSessions(ctx context.Context, f sessionFilter, size int, cursor *store.SessionCursor) (page []listed, next *store.SessionCursor, err error) {
	// Without a status filter every session matches: one more than the page tells
	// whether the list goes on, and only the page is described.
	batch := size + 1
	if len(f.statuses) > 0 {
		batch = min(max(batch, 100), maxSessionsScanned)
	}
	scanned := 0
	for {
		recs, err := s.registry.store.ListSessions(ctx, f.store, batch, cursor)
		if err != nil {
			return nil, nil, err
		}
		described := recs
		if len(f.statuses) == 0 {
			described = recs[:min(len(recs), size)]
		}
		infos := s.describeSessions(ctx, described)
		for i, rec := range described {
			if !f.matches(infos[i]) {
				continue
			}
			if len(page) == size {
				return page, &page[size-1].at, nil
			}
			page = append(page, listed{info: infos[i], at: rec.Cursor()})
		}
		scanned += len(described)
		switch {
		case len(recs) < batch:
			return page, nil, nil
		case len(described) < len(recs):
			return page, &page[len(page)-1].at, nil // the record beyond the page
		}
		last := recs[len(recs)-1].Cursor()
		if scanned >= maxSessionsScanned {
			// Go on after the last session described, not the last one kept.
			return page, &last, nil
		}
		cursor = &last
	}
}

// describeSessions describes listed sessions as GetSession would (listedSessions), each
// with the hub's snapshot.
func (s *Service) describeSessions(ctx context.Context, recs []store.ListedSession) []*pb.SessionInfo {
	owners := make([]store.SessionOwner, len(recs))
	ids := make([]string, len(recs))
	for i, rec := range recs {
		owners[i], ids[i] = rec.SessionOwner, rec.SessionID
	}
	snaps := s.hub.snapshots(ids)
	infos := s.listedSessions(ctx, owners)
	out := make([]*pb.SessionInfo, len(recs))
	for i := range recs {
		out[i] = sessionToPB(infos[i], snaps[i])
	}
	s.withOwnership(ctx, out...)
	return out
}

// basicView leaves out of a listed session what SESSION_VIEW_BASIC does not carry.
func basicView(info *pb.SessionInfo) {
	info.AvailableModes, info.AvailableModels, info.AvailableCommands, info.ConfigOptions = nil, nil, nil, nil
	info.Capabilities, info.Usage, info.PendingPermissions, info.PendingElicitations = nil, nil, nil, nil
}

// sessionFilter is a ListSessions request's filters: those the store holds, and the
// statuses, matched on the described sessions.
type sessionFilter struct {
	store    store.SessionFilter
	statuses []pb.SessionStatus // sorted, without repeats
}

func sessionFilterOf(req *pb.ListSessionsRequest) (sessionFilter, error) {
	f := sessionFilter{store: store.SessionFilter{AgentID: req.GetAgentId()}}
	if ws := req.GetWorkspace(); ws != "" {
		if !filepath.IsAbs(ws) {
			return f, invalidField("workspace", "workspace %q is not an absolute path: give a session's workspace as SessionInfo shows it", ws)
		}
		f.store.Workspace = filepath.Clean(ws)
	}
	if t := req.GetUpdatedAfter(); t != nil {
		if err := t.CheckValid(); err != nil {
			return f, invalidArgument("updated_after is not a valid time: %v", err)
		}
		f.store.UpdatedAfter = t.AsTime().UnixNano()
	}
	for i, st := range req.GetStatuses() {
		if _, known := pb.SessionStatus_name[int32(st)]; !known || st == pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
			return f, invalidArgument("statuses[%d] = %d is not a session status: use SESSION_STATUS_IDLE, _GENERATING, _PAUSED, _ERROR or _CLOSED", i, st)
		}
		f.statuses = append(f.statuses, st)
	}
	slices.Sort(f.statuses)
	f.statuses = slices.Compact(f.statuses)
	return f, nil
}

func (f sessionFilter) matches(info *pb.SessionInfo) bool {
	return len(f.statuses) == 0 || slices.Contains(f.statuses, info.GetStatus())
}

// fingerprint identifies the filters, so that a page token is refused under others.
func (f sessionFilter) fingerprint() string {
	raw, _ := json.Marshal([]any{f.store.AgentID, f.store.Workspace, f.store.UpdatedAfter, f.statuses}) // cannot fail
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
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
	defer s.hub.noteCall(ctx, loadKey(id))()
	info, err := p.LoadSession(ctx, id, presenters.LoadContext{
		MaxHistory:            int(req.GetMaxHistory()),
		IncludeSystemMessages: req.GetIncludeSystemMessages(),
	})
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.LoadSessionResponse{Session: s.afterChange(info)}, nil
}

// DeleteSession ends the session (the agent deletes its own copy where it can), then
// removes what the server stored of it. A session whose agent is no longer configured
// loses only the server's copy. Subscribers see a SESSION_CLOSED event with the reason
// "deleted", the one event of the session the log keeps.
func (s *Service) DeleteSession(ctx context.Context, req *pb.DeleteSessionRequest) (*pb.DeleteSessionResponse, error) {
	const method = "DeleteSession"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	rec, err := s.registry.store.SessionOwner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(id, err), "session_id", id)
	}
	defer s.hub.noteCall(ctx, closeKey(id))()
	if q := s.hub.queue; q != nil {
		// Deleted with the session's rows; none may start or reopen it meanwhile.
		defer q.closing(id)()
	}
	if p, err := s.registry.Agent(rec.AgentID); err == nil {
		if err := endForDeletion(ctx, p, id); err != nil {
			return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", rec.AgentID)
		}
	}
	if err := s.registry.store.DeleteSession(ctx, id); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", rec.AgentID)
	}
	s.hub.Publish(presenters.Event{SessionID: id, AgentID: rec.AgentID, Payload: presenters.SessionClosedPayload{Reason: deletedReason, Principal: callerOf(ctx).Name}})
	s.logger.InfoContext(ctx, "session deleted", "session_id", id, "agent_id", rec.AgentID)
	return &pb.DeleteSessionResponse{}, nil
}

// deletedReason is the SESSION_CLOSED reason of a deleted session.
const deletedReason = "deleted"

// sessionDeleter is a presenter that ends a session and deletes the agent's own copy of
// it; the service deletes its stored rows afterwards.
type sessionDeleter interface {
	DeleteSession(ctx context.Context, sessionID string) error
}

// endForDeletion ends a session before its rows go: through the presenter's
// DeleteSession when it has one, else by closing it if it is open.
func endForDeletion(ctx context.Context, p presenters.Presenter, sessionID string) error {
	if d, ok := p.(sessionDeleter); ok {
		return d.DeleteSession(ctx, sessionID)
	}
	err := p.CloseSession(ctx, sessionID)
	if errors.Is(err, presenters.ErrSessionClosed) || errors.Is(err, presenters.ErrNotFound) {
		return nil
	}
	return err
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
	defer s.hub.noteCall(ctx, closeKey(id))()
	undo := func() {}
	if q := s.hub.queue; q != nil {
		undo = q.closing(id)
	}
	if err := p.CloseSession(ctx, id); err != nil {
		undo()
		return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
	}
	if q := s.hub.queue; q != nil {
		q.drain(ctx, id, p.AgentID())
	}
	if s.webhooks != nil {
		// A session's webhook lasts until it closes (its SESSION_CLOSED was the last notice).
		if err := s.registry.store.DeleteSessionWebhook(ctx, id); err != nil {
			s.logger.WarnContext(ctx, "could not forget a closed session's webhook", "session_id", id, "agent_id", p.AgentID(), "err", err)
		}
	}
	s.logger.InfoContext(ctx, "session closed", "session_id", id, "agent_id", p.AgentID())
	return &pb.CloseSessionResponse{}, nil
}

// Package deepchat is the built-in agent: a tool-using LLM chat agent speaking the
// OpenAI-compatible chat completions API, whose conversations live in SQLite.
//
// Decisions this package makes:
//   - A session id is the conversation id (a UUIDv7), so LoadSession and GetMessages
//     read the same SQLite rows after a restart.
//   - Modes are the permission policies strict, balanced (the default) and permissive.
//   - Permission requests offer allow_once, allow_always (when rememberable) and
//     reject_once. An allow-always answer holds for the rest of the session for the same
//     tool and command signature, up to the risk level it was given for. Critical
//     commands are never rememberable.
//   - The API key is read from the variable named by api_key_env on every request.
//   - An idle session holds no goroutine and no buffer: only a small struct, loaded
//     lazily from SQLite. A turn owns one goroutine, which ends with the turn.
//   - Text deltas are coalesced in memory; the partial reply is checkpointed at most
//     every checkpointInterval or checkpointBytes, and the finished message is committed
//     before MESSAGE_END is published.
package deepchat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/transcript"
)

var _ presenters.Presenter = (*Presenter)(nil)

// Presenter drives every session of one deepchat agent id.
type Presenter struct {
	cfg          Config
	provider     provider
	deps         Deps
	log          *slog.Logger
	http         *http.Client
	client       *providerClient
	models       []presenters.Model
	defaultModel string

	mu       sync.Mutex
	sessions map[string]*session // sessions used since start-up and not closed
	closed   bool
	turns    sync.WaitGroup
}

// session is the runtime state of one open session. Everything else is in SQLite.
type session struct {
	mu         sync.Mutex
	conv       transcript.Conversation
	turn       *turn // nil when idle
	closed     bool
	lastError  string                          // why the last turn failed; cleared by the next
	remembered map[string]presenters.RiskLevel // allow-always key -> highest risk allowed
}

// New builds a presenter from its config. A config without a provider is valid: the
// agent then reports needs_configuration and refuses only SendMessage.
func New(cfg Config, deps Deps) (*Presenter, error) {
	if !strings.HasPrefix(cfg.ID, string(presenters.AgentTypeDeepChat)+".") {
		return nil, fmt.Errorf("deepchat agent id %q must start with %q", cfg.ID, "deepchat.")
	}
	if deps.Publisher == nil || deps.Roots == nil || deps.Store == nil {
		return nil, fmt.Errorf("deepchat agent %s: publisher, workspace roots and store are required", cfg.ID)
	}
	prov, err := resolveProvider(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.MaxToolRounds <= 0 {
		cfg.MaxToolRounds = defaultMaxToolRounds
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = defaultCommandTimeout
	}
	if cfg.PermissionTimeout <= 0 {
		cfg.PermissionTimeout = defaultPermissionTimeout
	}
	if cfg.ProviderIdleTimeout <= 0 {
		cfg.ProviderIdleTimeout = defaultProviderIdleTimeout
	}
	p := &Presenter{cfg: cfg, provider: prov, deps: deps, log: deps.Logger, http: deps.HTTPClient,
		sessions: make(map[string]*session)}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log = p.log.With("agent_id", cfg.ID)
	if p.http == nil {
		p.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	ids := slices.Clone(cfg.Models)
	p.defaultModel = cfg.DefaultModel
	if p.defaultModel == "" && len(ids) > 0 {
		p.defaultModel = ids[0]
	}
	if p.defaultModel != "" && !slices.Contains(ids, p.defaultModel) {
		ids = append([]string{p.defaultModel}, ids...)
	}
	for _, id := range ids {
		p.models = append(p.models, presenters.Model{ID: id, Name: id})
	}
	p.client = &providerClient{
		http: p.http, baseURL: prov.baseURL, apiKey: p.apiKey, idleTimeout: cfg.ProviderIdleTimeout,
		maxRetries: 2, maxWait: 30 * time.Second,
		backoff: func(attempt int) time.Duration { return time.Duration(attempt+1) * time.Second },
	}
	return p, nil
}

func (p *Presenter) AgentID() string { return p.cfg.ID }

func (p *Presenter) capabilities() presenters.Capabilities {
	return presenters.Capabilities{SupportsVision: true, SupportsTools: true, SupportsModes: true,
		SupportsLoad: true, SupportsModels: len(p.models) > 0, SupportsResources: true}
}

// Describe reports the agent; it never calls the provider.
func (p *Presenter) Describe(ctx context.Context) presenters.AgentInfo {
	info := presenters.AgentInfo{
		ID: p.cfg.ID, Name: "DeepChat", Type: presenters.AgentTypeDeepChat,
		Description:    "Built-in chat agent with file and command tools, history in SQLite",
		Status:         presenters.AgentReady,
		Capabilities:   p.capabilities(),
		Implementation: "agenticd deepchat",
	}
	if p.cfg.Provider != "" {
		info.Description += " (provider " + p.cfg.Provider + ")"
	}
	if reason := p.readiness(); reason != "" {
		info.Status, info.StatusReason = presenters.AgentNeedsConfiguration, reason
	}
	return info
}

func (p *Presenter) emitter(sessionID string) presenters.Emitter {
	return presenters.NewEmitter(p.deps.Publisher, p.cfg.ID, sessionID)
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func (p *Presenter) modelOffered(id string) bool {
	for _, m := range p.models {
		if m.ID == id {
			return true
		}
	}
	return false
}

func (p *Presenter) modelIDs() string {
	if len(p.models) == 0 {
		return "none (the agent has no models configured)"
	}
	ids := make([]string, len(p.models))
	for i, m := range p.models {
		ids[i] = m.ID
	}
	return strings.Join(ids, ", ")
}

// CreateSession stores a new conversation and emits SESSION_CREATED.
func (p *Presenter) CreateSession(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
	if cfg.Workspace == "" || !filepath.IsAbs(cfg.Workspace) {
		return presenters.SessionInfo{}, fmt.Errorf("workspace %q must be an absolute directory: %w", cfg.Workspace, presenters.ErrInvalidArgument)
	}
	if _, err := p.deps.Roots.Open(cfg.Workspace); err != nil {
		return presenters.SessionInfo{}, fmt.Errorf("workspace %s: %v: %w", cfg.Workspace, err, presenters.ErrInvalidArgument)
	}
	model := cfg.ModelID
	if model == "" {
		model = p.defaultModel
	} else if !p.modelOffered(model) {
		return presenters.SessionInfo{}, fmt.Errorf("model %q is not offered by %s; choose one of: %s: %w", model, p.cfg.ID, p.modelIDs(), presenters.ErrInvalidArgument)
	}
	mode := cfg.ModeID
	if mode == "" {
		mode = ModeBalanced
	} else if !validMode(mode) {
		return presenters.SessionInfo{}, fmt.Errorf("mode %q is not offered; choose one of: %s: %w", mode, modeIDs(), presenters.ErrInvalidArgument)
	}
	now := time.Now()
	conv := transcript.Conversation{ID: newID(), AgentID: p.cfg.ID, Workspace: filepath.Clean(cfg.Workspace),
		Title: cfg.Title, ModelID: model, ModeID: mode, CreatedAt: now, UpdatedAt: now}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return presenters.SessionInfo{}, errShuttingDown
	}
	if err := p.deps.Store.CreateConversation(ctx, conv); err != nil {
		return presenters.SessionInfo{}, err
	}
	s := &session{conv: conv}
	p.mu.Lock()
	p.sessions[conv.ID] = s
	p.mu.Unlock()
	s.mu.Lock()
	info := p.sessionInfo(s, 0)
	p.emitter(conv.ID).SessionCreated(info)
	s.mu.Unlock()
	p.log.Debug("session created", "session_id", conv.ID, "workspace", conv.Workspace)
	return info, nil
}

var errShuttingDown = fmt.Errorf("the deepchat agent is shutting down: %w", presenters.ErrAgentUnavailable)

// conversation reads a stored conversation of this agent.
func (p *Presenter) conversation(ctx context.Context, id string) (transcript.Conversation, error) {
	conv, err := p.deps.Store.GetConversation(ctx, id)
	if err != nil {
		return conv, err
	}
	if conv.AgentID != p.cfg.ID {
		return conv, fmt.Errorf("session %s belongs to agent %s, not %s: %w", id, conv.AgentID, p.cfg.ID, presenters.ErrNotFound)
	}
	return conv, nil
}

// open returns the runtime state of an open session, loading it from SQLite on first
// use after a restart. A closed session is ErrFailedPrecondition.
func (p *Presenter) open(ctx context.Context, id string) (*session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errShuttingDown
	}
	s := p.sessions[id]
	p.mu.Unlock()
	if s != nil {
		return s, nil
	}
	conv, err := p.conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	if conv.Closed {
		return nil, fmt.Errorf("session %s is closed; reopen it with LoadSession: %w", id, presenters.ErrFailedPrecondition)
	}
	return p.adopt(conv), nil
}

// adopt registers a stored conversation as open (or returns the one already registered).
func (p *Presenter) adopt(conv transcript.Conversation) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[conv.ID]; s != nil {
		return s
	}
	s := &session{conv: conv}
	p.sessions[conv.ID] = s
	return s
}

// sessionInfo describes an open session; s.mu must be held.
func (p *Presenter) sessionInfo(s *session, messageCount int64) presenters.SessionInfo {
	info := p.storedInfo(s.conv, messageCount)
	info.Status = presenters.SessionIdle
	if s.lastError != "" {
		info.Status, info.StatusReason = presenters.SessionError, s.lastError
	}
	if t := s.turn; t != nil {
		info.Status, info.StatusReason = presenters.SessionGenerating, ""
		info.MessageInFlight = t.messageID
		for _, id := range t.pendingOrder {
			info.PendingPermissions = append(info.PendingPermissions, t.pending[id].req)
		}
		if len(info.PendingPermissions) > 0 {
			info.Status = presenters.SessionPaused
		}
	}
	return info
}

// storedInfo describes a session from its stored conversation alone.
func (p *Presenter) storedInfo(conv transcript.Conversation, messageCount int64) presenters.SessionInfo {
	info := presenters.SessionInfo{
		SessionID: conv.ID, AgentID: p.cfg.ID, Status: presenters.SessionIdle, Workspace: conv.Workspace,
		Title: conv.Title, CreatedAt: conv.CreatedAt, UpdatedAt: conv.UpdatedAt,
		AvailableModes: modes, CurrentModeID: conv.ModeID,
		AvailableModels: p.models, CurrentModelID: conv.ModelID,
		Capabilities: p.capabilities(), Usage: conv.Usage, MessageCount: messageCount,
	}
	if conv.Closed {
		info.Status = presenters.SessionClosed
	}
	return info
}

// GetSession describes a session, open or stored.
func (p *Presenter) GetSession(ctx context.Context, sessionID string) (presenters.SessionInfo, error) {
	count, err := p.deps.Store.CountMessages(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	p.mu.Lock()
	s := p.sessions[sessionID]
	p.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return p.sessionInfo(s, count), nil
	}
	conv, err := p.conversation(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	return p.storedInfo(conv, count), nil
}

// ListSessions describes every stored session of this agent, newest first.
func (p *Presenter) ListSessions(ctx context.Context) ([]presenters.SessionInfo, error) {
	convs, err := p.deps.Store.ListConversations(ctx, p.cfg.ID)
	if err != nil {
		return nil, err
	}
	counts, err := p.deps.Store.MessageCounts(ctx, p.cfg.ID)
	if err != nil {
		return nil, err
	}
	out := make([]presenters.SessionInfo, 0, len(convs))
	for _, conv := range convs {
		p.mu.Lock()
		s := p.sessions[conv.ID]
		p.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			out = append(out, p.sessionInfo(s, counts[conv.ID]))
			s.mu.Unlock()
			continue
		}
		out = append(out, p.storedInfo(conv, counts[conv.ID]))
	}
	return out, nil
}

// LoadSession reopens a stored session, replays its history as events (user and
// assistant text as MESSAGE_DELTA, other blocks as MESSAGE_BLOCK, each message closed by
// MESSAGE_END) and emits SESSION_READY with the number of messages replayed.
func (p *Presenter) LoadSession(ctx context.Context, sessionID string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
	if lc.MaxHistory < 0 {
		return presenters.SessionInfo{}, fmt.Errorf("max_history must not be negative: %w", presenters.ErrInvalidArgument)
	}
	conv, err := p.conversation(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	em := p.emitter(sessionID)
	if conv.Closed {
		conv.Closed = false
		conv.UpdatedAt = time.Now()
		if err := p.deps.Store.UpdateConversation(ctx, conv); err != nil {
			return presenters.SessionInfo{}, err
		}
		idle := presenters.SessionIdle
		em.SessionUpdated(presenters.SessionPatch{Status: &idle, UpdatedAt: &conv.UpdatedAt})
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return presenters.SessionInfo{}, errShuttingDown
	}
	s := p.adopt(conv)
	msgs, err := p.deps.Store.Messages(ctx, sessionID, presenters.MessageQuery{})
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	if !lc.IncludeSystemMessages {
		msgs = slices.DeleteFunc(msgs, func(m presenters.Message) bool { return m.Role == presenters.RoleSystem })
	}
	if lc.MaxHistory > 0 && len(msgs) > lc.MaxHistory {
		msgs = msgs[len(msgs)-lc.MaxHistory:]
	}
	for _, m := range msgs {
		replayMessage(em, m)
	}
	em.SessionReady(int64(len(msgs)))
	count, err := p.deps.Store.CountMessages(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.sessionInfo(s, count), nil
}

func replayMessage(em presenters.Emitter, m presenters.Message) {
	for _, b := range m.Blocks {
		if b.Type == presenters.BlockText {
			if b.Text != "" {
				em.MessageDelta(m.ID, m.Role, b.Text)
			}
			continue
		}
		em.MessageBlock(m.ID, m.Role, b)
	}
	stop := m.StopReason
	if stop == "" && m.Role == presenters.RoleAssistant && m.Status == presenters.MessageIncomplete {
		stop = presenters.StopCancelled
	}
	em.MessageEnd(presenters.MessageEndPayload{MessageID: m.ID, StopReason: stop, Usage: m.Usage, Role: m.Role})
}

// CloseSession cancels the session's turn, waits for it to end, marks the conversation
// closed and emits SESSION_CLOSED. Closing a closed session does nothing.
func (p *Presenter) CloseSession(ctx context.Context, sessionID string) error {
	p.mu.Lock()
	s := p.sessions[sessionID]
	p.mu.Unlock()
	if s == nil {
		conv, err := p.conversation(ctx, sessionID)
		if err != nil {
			return err
		}
		if conv.Closed {
			return nil
		}
		s = p.adopt(conv)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	t := s.turn
	if t != nil {
		t.cancel(errSessionClosed)
	}
	s.mu.Unlock()
	if t != nil {
		select {
		case <-t.done:
		case <-ctx.Done():
			return fmt.Errorf("close session %s: the running turn did not end in time: %w", sessionID, presenters.ErrCancelled)
		}
	}
	p.mu.Lock()
	delete(p.sessions, sessionID)
	p.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conv.Closed = true
	s.conv.UpdatedAt = time.Now()
	if err := p.deps.Store.UpdateConversation(context.WithoutCancel(ctx), s.conv); err != nil {
		return err
	}
	p.emitter(sessionID).SessionClosed("closed by client")
	return nil
}

var (
	errSessionClosed   = errors.New("session closed")
	errCancelledByUser = errors.New("cancelled by client")
)

// SetModel switches the session's model; the next provider call uses it.
func (p *Presenter) SetModel(ctx context.Context, sessionID, modelID string) (presenters.SessionInfo, error) {
	if !p.modelOffered(modelID) {
		return presenters.SessionInfo{}, fmt.Errorf("model %q is not offered by %s; choose one of: %s: %w", modelID, p.cfg.ID, p.modelIDs(), presenters.ErrInvalidArgument)
	}
	return p.update(ctx, sessionID, func(c *transcript.Conversation, patch *presenters.SessionPatch) {
		c.ModelID = modelID
		patch.CurrentModelID = &modelID
	})
}

// SetMode switches the permission policy; it applies to the next tool call, also
// within a running turn.
func (p *Presenter) SetMode(ctx context.Context, sessionID, modeID string) (presenters.SessionInfo, error) {
	if !validMode(modeID) {
		return presenters.SessionInfo{}, fmt.Errorf("mode %q is not offered; choose one of: %s: %w", modeID, modeIDs(), presenters.ErrInvalidArgument)
	}
	return p.update(ctx, sessionID, func(c *transcript.Conversation, patch *presenters.SessionPatch) {
		c.ModeID = modeID
		patch.CurrentModeID = &modeID
	})
}

func (p *Presenter) update(ctx context.Context, sessionID string, change func(*transcript.Conversation, *presenters.SessionPatch)) (presenters.SessionInfo, error) {
	s, err := p.open(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	count, err := p.deps.Store.CountMessages(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return presenters.SessionInfo{}, fmt.Errorf("session %s is closed; reopen it with LoadSession: %w", sessionID, presenters.ErrFailedPrecondition)
	}
	conv := s.conv
	var patch presenters.SessionPatch
	change(&conv, &patch)
	conv.UpdatedAt = time.Now()
	if err := p.deps.Store.UpdateConversation(ctx, conv); err != nil {
		return presenters.SessionInfo{}, err
	}
	s.conv = conv
	patch.UpdatedAt = &conv.UpdatedAt
	p.emitter(sessionID).SessionUpdated(patch)
	return p.sessionInfo(s, count), nil
}

// GetMessages returns stored history, oldest first.
func (p *Presenter) GetMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("limit must not be negative: %w", presenters.ErrInvalidArgument)
	}
	if _, err := p.conversation(ctx, sessionID); err != nil {
		return nil, err
	}
	return p.deps.Store.Messages(ctx, sessionID, q)
}

// Close cancels every running turn, waits for them to end (each commits its partial
// reply) and releases idle HTTP connections. Sessions stay open in SQLite.
func (p *Presenter) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	sessions := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		sessions = append(sessions, s)
	}
	p.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		if s.turn != nil {
			s.turn.cancel(errShuttingDown)
		}
		s.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		p.turns.Wait()
		close(done)
	}()
	defer p.http.CloseIdleConnections()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("deepchat %s: turns still running at shutdown: %w", p.cfg.ID, ctx.Err())
	}
}

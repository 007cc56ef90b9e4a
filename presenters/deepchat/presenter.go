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
//     lazily from SQLite. A turn owns one goroutine, which ends with the turn; the
//     presenter owns one more, its transcript writer.
//   - Text deltas are coalesced in memory; the partial reply is checkpointed at most
//     every checkpointInterval or checkpointBytes, through the transcript writer
//     (presenters/transcript), so that a database that is away holds up no turn. The
//     finished message is stored before MESSAGE_END is published: through an outage
//     its write is tried again until it lands, and the turn's end waits for it.
//   - No event or stored block carries a whole large file (bounds.go): a diff side over
//     256 KiB becomes an excerpt around the change with marker lines saying what was
//     left out; an image attached from a workspace file is stored with its file:// URL
//     and its data (which the model is sent) and shown to clients by URL when its base64
//     is over 1 MiB. Tool results to the model are capped at 100 KiB.
//   - Text from outside (provider error bodies, file names in tool errors) is made valid
//     UTF-8 and cut at character boundaries (presenters/textutil) before it reaches an
//     event or the history.
//   - ERROR events say what happened and what to do, naming the provider by host only;
//     URLs, addresses, network and database errors go to the log with session_id.
//   - CloseSession cancels the running turn; the turn's end also stores the close.
//     Close (shutdown) cancels every turn and waits for each to store its reply (tried
//     once each: a database that is away cannot hold the shutdown).
//   - MCP servers (the agent's configured ones, and a session's own, which replace a
//     configured one of the same name) are connected at the session's first turn, a
//     stdio one started confined to the workspace, and stopped with the session. Their
//     tools are offered as <server>__<tool>; a tool's annotations choose its permission
//     (mcpToolSpec). After a restart a session's own servers come from the store's
//     SessionSetup.
package deepchat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/mcp"
	"github.com/agenticd/agenticd/presenters/risk"
	"github.com/agenticd/agenticd/presenters/transcript"
	"github.com/agenticd/agenticd/store"
)

var (
	_ presenters.Presenter = (*Presenter)(nil)
	// The service's optional batch for ListSessions (its sessionsGetter).
	_ interface {
		GetSessions(ctx context.Context, sessionIDs []string) ([]presenters.SessionInfo, error)
	} = (*Presenter)(nil)
)

// Presenter drives every session of one deepchat agent id.
type Presenter struct {
	cfg Config
	// classifier rates commands, with agenticd's own files as the critical ones.
	classifier   *risk.Classifier
	provider     provider
	deps         Deps
	log          *slog.Logger
	http         *http.Client
	client       *providerClient
	models       []presenters.Model
	defaultModel string
	// transcript writes checkpoints and final replies; its goroutine runs until Close.
	transcript *transcript.Writer

	// now is the clock that spaces checkpoints of partial replies (tests replace it).
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]*session // sessions used since start-up and not closed
	closed   bool
	turns    sync.WaitGroup
	// stopping counts the MCP servers of closed sessions still being stopped after
	// CloseSession gave up waiting for the session's turn; Close waits for them.
	stopping sync.WaitGroup
	// loadMu makes reading a stored conversation and registering it one step, so that
	// a load that read the row before a close wrote Closed cannot register the session
	// again after the close unregistered it.
	loadMu sync.Mutex
}

// session is the runtime state of one open session. Everything else is in SQLite.
//
// closed is set by CloseSession. A closed session is unregistered right away when it is
// idle, or by its turn's end, which also stores the close; while both are set (closed
// and a turn) the session is closing.
type session struct {
	mu         sync.Mutex
	conv       store.Conversation
	turn       *turn // nil when idle
	closed     bool
	lastError  string                          // why the last turn failed; cleared by the next
	remembered map[string]presenters.RiskLevel // allow-always key -> highest risk allowed
	// servers are the session's own MCP servers: SessionConfig.MCPServers, or after a
	// restart what the store kept of them. tools is the client of these and the
	// configured ones, made by the session's first turn.
	servers []presenters.MCPServer
	tools   sessionTools
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
	if err := presenters.CheckMCPServers("mcp_servers", cfg.MCPServers); err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.ID, err)
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
		now: time.Now, sessions: make(map[string]*session), classifier: risk.NewClassifier(deps.Roots.Excluded())}
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
	host := ""
	if u, err := url.Parse(prov.baseURL); err == nil {
		host = u.Host // never the userinfo: a base_url may carry credentials
	}
	p.client = &providerClient{
		http: p.http, baseURL: prov.baseURL, host: host, apiKey: p.apiKey, idleTimeout: cfg.ProviderIdleTimeout,
		maxRetries: 2, maxWait: 30 * time.Second,
		backoff: func(attempt int) time.Duration { return time.Duration(attempt+1) * time.Second },
		sleep:   sleepContext,
	}
	p.transcript = transcript.New(deps.Store, p.log)
	go p.transcript.Run()
	return p, nil
}

func (p *Presenter) AgentID() string { return p.cfg.ID }

func (p *Presenter) capabilities() presenters.Capabilities {
	return presenters.Capabilities{SupportsVision: true, SupportsTools: true, SupportsModes: true,
		SupportsLoad: true, SupportsModels: len(p.models) > 0, SupportsResources: true,
		SupportsMCP: true, SupportsMCPHTTP: true}
}

// Describe reports the agent; it never calls the provider.
func (p *Presenter) Describe(ctx context.Context) presenters.AgentInfo {
	info := presenters.AgentInfo{
		ID: p.cfg.ID, Name: "DeepChat", Type: presenters.AgentTypeDeepChat,
		Description:    "Built-in chat agent with file and command tools, history in SQLite",
		Status:         presenters.AgentReady,
		Capabilities:   p.capabilities(),
		Implementation: presenters.Implementation{Name: "agenticd-deepchat", Version: version.Number(), Title: "DeepChat"},
		ConfigSource:   p.cfg.Source,
		Confinement:    p.deps.Roots.ConfinementState(),
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

// CreateSession stores a new conversation in the workspace the service opened and emits
// SESSION_CREATED. Only the workspace's directory is kept: each turn opens it again.
func (p *Presenter) CreateSession(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
	model := cfg.ModelID
	if model == "" {
		model = p.defaultModel
	} else if !p.modelOffered(model) {
		return presenters.SessionInfo{}, fmt.Errorf("model %q is not offered by %s; choose one of: %s: %w", model, p.cfg.ID, p.modelIDs(), presenters.ErrInvalidArgument)
	}
	if err := presenters.CheckMCPServers("config.mcp_servers", cfg.MCPServers); err != nil {
		return presenters.SessionInfo{}, err
	}
	mode := cfg.ModeID
	if mode == "" {
		mode = ModeBalanced
	} else if _, err := presenters.ParsePermissionMode(mode); err != nil {
		return presenters.SessionInfo{}, err
	}
	now := time.Now()
	conv := store.Conversation{ID: newID(), AgentID: p.cfg.ID, Workspace: cfg.Workspace.Root(),
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
	s := &session{conv: conv, servers: slices.Clone(cfg.MCPServers)}
	p.mu.Lock()
	p.sessions[conv.ID] = s
	p.mu.Unlock()
	s.mu.Lock()
	info := p.sessionInfo(s, 0)
	created := info
	created.Owner = cfg.Creator
	p.emitter(conv.ID).SessionCreated(created)
	s.mu.Unlock()
	p.log.Debug("session created", "session_id", conv.ID, "workspace", conv.Workspace)
	return info, nil
}

var errShuttingDown = fmt.Errorf("the deepchat agent is shutting down: %w", presenters.ErrAgentUnavailable)

// conversation reads a stored conversation of this agent.
func (p *Presenter) conversation(ctx context.Context, id string) (store.Conversation, error) {
	conv, err := p.deps.Store.GetConversation(ctx, id)
	if err != nil {
		return conv, err
	}
	if conv.AgentID != p.cfg.ID {
		return conv, fmt.Errorf("session %s belongs to agent %s, not %s: %w", id, conv.AgentID, p.cfg.ID, presenters.ErrNotFound)
	}
	return conv, nil
}

// registered returns the runtime state of a session used since start-up, or nil.
func (p *Presenter) registered(id string) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[id]
}

func (p *Presenter) unregister(id string) {
	p.mu.Lock()
	delete(p.sessions, id)
	p.mu.Unlock()
}

// lookup returns the runtime state of a session, loading an open stored conversation
// and registering it on first use after a restart. For a stored closed conversation it
// returns a nil session.
func (p *Presenter) lookup(ctx context.Context, id string) (*session, error) {
	if s := p.registered(id); s != nil {
		return s, nil
	}
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if s := p.registered(id); s != nil {
		return s, nil
	}
	conv, err := p.conversation(ctx, id)
	if err != nil || conv.Closed {
		return nil, err
	}
	return p.register(ctx, conv)
}

// register makes a stored open conversation a registered session, with the MCP servers
// it was created with; p.loadMu is held.
func (p *Presenter) register(ctx context.Context, conv store.Conversation) (*session, error) {
	setup, err := p.deps.Store.SessionSetup(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	s := &session{conv: conv, servers: setup.MCPServers}
	p.mu.Lock()
	p.sessions[conv.ID] = s
	p.mu.Unlock()
	return s, nil
}

// open returns the runtime state of an open session. A closed session is
// ErrFailedPrecondition.
func (p *Presenter) open(ctx context.Context, id string) (*session, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, errShuttingDown
	}
	s, err := p.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errClosed(id)
	}
	return s, nil
}

func errClosed(id string) error {
	return presenters.WithDetail(fmt.Errorf("session %s is closed; reopen it with LoadSession: %w", id, presenters.ErrSessionClosed), "session_id", id)
}

// sessionInfo describes a registered session; s.mu must be held.
func (p *Presenter) sessionInfo(s *session, messageCount int64) presenters.SessionInfo {
	info := p.storedInfo(s.conv, messageCount)
	info.MCPServerNames = serverNames(mcp.Merge(p.cfg.MCPServers, s.servers))
	if s.closed {
		info.Status = presenters.SessionClosed
		return info
	}
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
func (p *Presenter) storedInfo(conv store.Conversation, messageCount int64) presenters.SessionInfo {
	info := presenters.SessionInfo{
		SessionID: conv.ID, AgentSessionID: conv.AgentSessionID, AgentID: p.cfg.ID, Status: presenters.SessionIdle, Workspace: conv.Workspace,
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
	if s := p.registered(sessionID); s != nil {
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

// GetSessions describes many sessions of this agent at once (the service's ListSessions
// batch): two queries per 500 ids instead of two per session. An id this agent does not
// have is left out.
func (p *Presenter) GetSessions(ctx context.Context, sessionIDs []string) ([]presenters.SessionInfo, error) {
	convs, err := p.deps.Store.GetConversations(ctx, sessionIDs)
	if err != nil {
		return nil, err
	}
	counts, err := p.deps.Store.CountMessagesOf(ctx, sessionIDs)
	if err != nil {
		return nil, err
	}
	out := make([]presenters.SessionInfo, 0, len(convs))
	for _, conv := range convs {
		if conv.AgentID != p.cfg.ID {
			continue
		}
		if s := p.registered(conv.ID); s != nil {
			s.mu.Lock()
			out = append(out, p.sessionInfo(s, counts[conv.ID]))
			s.mu.Unlock()
			continue
		}
		out = append(out, p.storedInfo(conv, counts[conv.ID]))
	}
	return out, nil
}

// LoadSession reopens a stored session, replays its history as events marked replay
// (user and assistant text as MESSAGE_DELTA, other blocks as MESSAGE_BLOCK, each message
// closed by MESSAGE_END) and emits SESSION_READY with the number of messages replayed.
// Large images are replayed by reference (see presentBlocks).
func (p *Presenter) LoadSession(ctx context.Context, sessionID string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
	if lc.MaxHistory < 0 {
		return presenters.SessionInfo{}, fmt.Errorf("max_history must not be negative: %w", presenters.ErrInvalidArgument)
	}
	s, err := p.reopen(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	em := p.emitter(sessionID)
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
	replay := em.Replaying()
	for _, m := range msgs {
		replayMessage(replay, m)
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

// reopen returns a session as open: a stored closed conversation is marked open again
// (SESSION_UPDATED status idle), and a session that is closing is first let finish.
func (p *Presenter) reopen(ctx context.Context, id string) (*session, error) {
	for {
		p.loadMu.Lock()
		p.mu.Lock()
		shutdown, s := p.closed, p.sessions[id]
		p.mu.Unlock()
		if shutdown {
			p.loadMu.Unlock()
			return nil, errShuttingDown
		}
		if s == nil {
			s, err := p.loadReopened(ctx, id)
			p.loadMu.Unlock()
			return s, err
		}
		p.loadMu.Unlock()
		s.mu.Lock()
		closing, t := s.closed, s.turn
		s.mu.Unlock()
		if !closing {
			return s, nil
		}
		if t != nil { // the turn's end stores the close and unregisters the session
			select {
			case <-t.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("session %s is still closing; load it again once SESSION_CLOSED was sent: %w", id, presenters.ErrCancelled)
			}
		}
	}
}

// loadReopened registers a stored conversation, marking it open first if it is closed;
// p.loadMu is held.
func (p *Presenter) loadReopened(ctx context.Context, id string) (*session, error) {
	conv, err := p.conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	if conv.Closed {
		conv.Closed = false
		conv.UpdatedAt = time.Now()
		if err := p.deps.Store.UpdateConversation(ctx, conv); err != nil {
			return nil, err
		}
		idle := presenters.SessionIdle
		p.emitter(id).SessionUpdated(presenters.SessionPatch{Status: &idle, UpdatedAt: &conv.UpdatedAt})
	}
	return p.register(ctx, conv)
}

func replayMessage(em presenters.Emitter, m presenters.Message) {
	for _, b := range presentBlocks(m.Blocks) {
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

// CloseSession cancels the session's turn and marks the conversation closed, then
// emits SESSION_CLOSED. An idle session closes at once; a running turn stores the close
// when it ends (it ends promptly once cancelled), and CloseSession waits for that. If
// ctx ends first, CloseSession returns ErrCancelled but the close still completes. Closing
// a closed session does nothing.
func (p *Presenter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := p.lookup(ctx, sessionID)
	if err != nil || s == nil {
		return err
	}
	s.mu.Lock()
	t := s.turn
	if !s.closed {
		s.closed = true
		if t == nil {
			err := p.storeClose(ctx, s)
			tools := s.detachTools()
			s.mu.Unlock()
			tools.Close()
			return err
		}
		t.cancel(errSessionClosed)
	}
	s.mu.Unlock()
	if t == nil {
		return nil
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		p.stopping.Go(func() {
			<-t.done
			p.stopToolsIfClosed(s)
		})
		return fmt.Errorf("close session %s: its turn is still ending; SESSION_CLOSED follows when it has: %w", sessionID, presenters.ErrCancelled)
	}
	if !p.stopToolsIfClosed(s) { // the turn's end could not store the close
		return fmt.Errorf("session %s could not be closed: its history could not be saved (see the server log); try again: %w",
			sessionID, presenters.ErrFailedPrecondition)
	}
	return nil
}

// stopToolsIfClosed stops the MCP servers of a session whose close is stored, and
// reports whether it is.
func (p *Presenter) stopToolsIfClosed(s *session) bool {
	s.mu.Lock()
	closed := s.closed
	var tools *mcp.Set
	if closed {
		tools = s.detachTools()
	}
	s.mu.Unlock()
	tools.Close()
	return closed
}

// storeClose writes the close of an idle session (s.mu held, s.closed set), then
// unregisters it and emits SESSION_CLOSED. On failure the session stays open. The write
// comes before unregistering, so a SendMessage that loads the session afresh finds it
// closed. A write fenced out because another replica took the session over closes it
// here only: it is that replica's, open, and this one lets go of it.
func (p *Presenter) storeClose(ctx context.Context, s *session) error {
	conv := s.conv
	conv.Closed = true
	conv.UpdatedAt = time.Now()
	if err := p.deps.Store.UpdateConversation(ctx, conv); err != nil && !errors.Is(err, store.ErrFenced) {
		s.closed = false
		return err
	}
	s.conv = conv
	p.unregister(conv.ID)
	p.emitter(conv.ID).SessionClosed("closed by client")
	return nil
}

// Causes of a turn's cancellation, logged when the turn ends.
var (
	errSessionClosed   = errors.New("session closed")
	errCancelledByUser = errors.New("cancelled by client")
)

// SetModel switches the session's model; the next provider call uses it.
func (p *Presenter) SetModel(ctx context.Context, sessionID, modelID string) (presenters.SessionInfo, error) {
	if !p.modelOffered(modelID) {
		return presenters.SessionInfo{}, fmt.Errorf("model %q is not offered by %s; choose one of: %s: %w", modelID, p.cfg.ID, p.modelIDs(), presenters.ErrInvalidArgument)
	}
	return p.update(ctx, sessionID, func(c *store.Conversation, patch *presenters.SessionPatch) {
		c.ModelID = modelID
		patch.CurrentModelID = &modelID
	})
}

// SetMode switches the permission policy; it applies to the next tool call, also
// within a running turn.
func (p *Presenter) SetMode(ctx context.Context, sessionID, modeID string) (presenters.SessionInfo, error) {
	if _, err := presenters.ParsePermissionMode(modeID); err != nil {
		return presenters.SessionInfo{}, err
	}
	return p.update(ctx, sessionID, func(c *store.Conversation, patch *presenters.SessionPatch) {
		c.ModeID = modeID
		patch.CurrentModeID = &modeID
	})
}

func (p *Presenter) update(ctx context.Context, sessionID string, change func(*store.Conversation, *presenters.SessionPatch)) (presenters.SessionInfo, error) {
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
		return presenters.SessionInfo{}, errClosed(sessionID)
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

// GetMessages returns stored history, oldest first, large images by reference (see
// presentBlocks).
func (p *Presenter) GetMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("limit must not be negative: %w", presenters.ErrInvalidArgument)
	}
	if _, err := p.conversation(ctx, sessionID); err != nil {
		return nil, err
	}
	msgs, err := p.deps.Store.Messages(ctx, sessionID, q)
	for i := range msgs {
		msgs[i].Blocks = presentBlocks(msgs[i].Blocks)
	}
	return msgs, err
}

// Close cancels every running turn and waits until each has stored its partial reply
// and sent MESSAGE_END, then releases idle HTTP connections. Sessions stay open in
// SQLite. It waits whatever its context says: a cancelled turn ends promptly (the
// provider request is aborted, a running command killed, a permission wait given up;
// the final write is tried once, bounded by the store), and the history must be written
// before the database closes.
func (p *Presenter) Close(context.Context) error {
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
	// The writer stops retrying first: the cancelled turns' replies are then written
	// once each, by their turns, and a database that is away cannot hold the shutdown.
	p.transcript.Close()
	p.turns.Wait()
	var wg sync.WaitGroup
	for _, s := range sessions {
		s.mu.Lock()
		tools := s.detachTools()
		s.mu.Unlock()
		wg.Go(tools.Close)
	}
	wg.Wait()
	p.stopping.Wait()
	p.http.CloseIdleConnections()
	return nil
}

package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/risk"
	"github.com/agenticd/agenticd/presenters/transcript"
	"github.com/agenticd/agenticd/store"
)

// Presenter drives one ACP agent: a process per workspace (and set of additional
// directories), shared by the sessions there.
type Presenter struct {
	cfg Config
	// classifier rates execute tools' commands, with agenticd's own files as the
	// critical ones.
	classifier *risk.Classifier
	deps       Deps
	log        *slog.Logger
	persist    *transcript.Writer

	closing     chan struct{} // closed by Close: background loops end
	cancelGrace time.Duration
	wg          sync.WaitGroup

	// importMu makes session imports (importSessions) one at a time, so that two
	// processes starting in one workspace do not import the same session twice. Session
	// creation holds it for reading from session/new until the conversation is stored, so
	// that an import never lists a session agenticd is creating before it is stored.
	importMu sync.RWMutex

	mu sync.Mutex
	// conns are the running agent processes by procScope.key: a process is confined to
	// one workspace and its sessions' additional directories, so sessions share a process
	// only when they share those.
	conns map[string]*agentConn
	// starting holds, by procScope.key, a channel closed when that start ends.
	starting     map[string]chan struct{}
	closed       bool
	status       presenters.AgentStatus
	statusReason string
	authMethods  []presenters.AuthMethod
	caps         sdk.AgentCapabilities
	initialized  bool // caps are the agent's answer (it has started once)
	impl         presenters.Implementation
	// reported is the known agent the agent said it is at initialize when its launch did
	// not show it (reportedKnown); it starts with what that agent needs from then on.
	reported  *knownAgent
	crashes   int // consecutive crashes, for the restart backoff
	lastCrash time.Time
	// sessions are the sessions that are live, being opened, or in error after a
	// crash (so that GetSession shows why); stored ones are read from the store.
	sessions map[string]*session
}

var _ presenters.Presenter = (*Presenter)(nil)
var _ presenters.ConfigOptionSetter = (*Presenter)(nil)

// Restart backoff after crashes in a row: the first restart is immediate, then 1 s,
// 2 s, ... up to maxBackoff. A connection that lived stableAfter resets the count.
const (
	maxBackoff  = 30 * time.Second
	stableAfter = time.Minute
	// cancelGrace is how long a cancelled turn waits for the agent's answer before
	// the turn is ended without it.
	cancelGrace = 10 * time.Second
	// checkpointEvery is how often a running turn's message is written to the store.
	checkpointEvery = 2 * time.Second
	// checkpointBytes is how much new text of a running turn makes it checkpoint before
	// checkpointEvery is up: in a flood the text not stored yet is all the builder holds
	// of the reply, so this bounds its memory (a flood of 25 MB/s would otherwise hold
	// 50 MB between two timed checkpoints). Each checkpoint is one write transaction.
	checkpointBytes = 1 << 20
)

// New validates cfg and returns a presenter; the agent starts on first use.
func New(cfg Config, deps Deps) (*Presenter, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if deps.Publisher == nil || deps.Roots == nil || deps.Store == nil {
		return nil, fmt.Errorf("agent %s: publisher, workspace roots and store are required: %w", cfg.ID, presenters.ErrInvalidArgument)
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("agent_id", cfg.ID)
	cfg = cfg.withLaunch(deps.Roots.ConfinesFiles())
	if cfg.known != nil {
		log.Info("recognized a known agent", "known_agent", cfg.known.id, "how", cfg.knownHow)
	}
	if cfg.policyNote != "" {
		log.Warn(cfg.policyNote)
	}
	p := &Presenter{
		cfg:         cfg,
		deps:        deps,
		log:         log,
		closing:     make(chan struct{}),
		cancelGrace: cancelGrace,
		classifier:  risk.NewClassifier(deps.Roots.Excluded()),
		status:      presenters.AgentNotStarted,
		sessions:    map[string]*session{},
		conns:       map[string]*agentConn{},
		starting:    map[string]chan struct{}{},
	}
	p.persist = transcript.New(deps.Store, log)
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.persist.Run() }()
	go func() { defer p.wg.Done(); p.checkpointLoop() }()
	return p, nil
}

// RunningProcesses is how many agent processes run, one per workspace (and set of
// additional directories) in use, for the metrics.
func (p *Presenter) RunningProcesses() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Presenter) AgentID() string { return p.cfg.ID }

// Describe reports the agent; it never starts it.
func (p *Presenter) Describe(ctx context.Context) presenters.AgentInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.describeLocked()
}

func (p *Presenter) describeLocked() presenters.AgentInfo {
	return presenters.AgentInfo{
		ID:             p.cfg.ID,
		Name:           p.cfg.Name,
		Type:           presenters.AgentTypeACP,
		Description:    p.cfg.Description,
		Status:         p.status,
		StatusReason:   p.statusReason,
		AuthMethods:    append([]presenters.AuthMethod(nil), p.authMethods...),
		Capabilities:   p.capabilities(),
		Implementation: p.impl,
		ConfigSource:   p.cfg.Source,
		Confinement:    p.deps.Roots.ProcessConfinement(p.cfg.bounds()),
	}
}

// setStatusLocked changes the agent's status and, when status or reason changed,
// publishes AGENT_STATUS_CHANGED with the whole AgentInfo (p.mu held, so that the
// events come in the order of the changes).
func (p *Presenter) setStatusLocked(status presenters.AgentStatus, reason string) {
	if p.status == status && p.statusReason == reason {
		return
	}
	p.status, p.statusReason = status, reason
	presenters.NewAgentEmitter(p.deps.Publisher, p.cfg.ID).AgentStatusChanged(p.describeLocked())
}

// capabilities are the agent-wide ones (p.mu held); modes and models are known per
// session. Before the agent first started, only what holds for every ACP agent is said.
func (p *Presenter) capabilities() presenters.Capabilities {
	if !p.initialized {
		// Stdio MCP servers are part of every ACP agent's session/new, so a first session
		// may name them before the agent has started; http support is not known yet.
		return presenters.Capabilities{SupportsTools: true, SupportsCommands: true, SupportsLoad: true, SupportsElicitation: true,
			SupportsMCP: true}
	}
	return p.agentCapabilities(p.caps)
}

// agentCapabilities are what an agent that answered initialize with c can do here.
func (p *Presenter) agentCapabilities(c sdk.AgentCapabilities) presenters.Capabilities {
	return presenters.Capabilities{
		SupportsVision:                c.PromptCapabilities.Image,
		SupportsTools:                 true,
		SupportsCommands:              true,
		SupportsLoad:                  true, // session/load, or the stored transcript
		SupportsResources:             c.PromptCapabilities.EmbeddedContext,
		SupportsMCP:                   true, // every ACP agent takes stdio MCP servers
		SupportsMCPHTTP:               c.McpCapabilities.Http,
		SupportsAdditionalDirectories: c.SessionCapabilities.AdditionalDirectories != nil,
		SupportsDelete:                c.SessionCapabilities.Delete != nil,
		SupportsSessionList:           p.cfg.ImportSessions && c.SessionCapabilities.List != nil,
		SupportsLogout:                c.Auth.Logout != nil,
		SupportsElicitation:           true, // every ACP agent may ask (elicitation/create)
	}
}

// newID mints session and message ids: UUIDv7, as DeepChat's, so ids sort by time.
func (p *Presenter) newID() string { return uuid.Must(uuid.NewV7()).String() }

// ensureConn returns the agent process of a scope, starting (or restarting, after the
// backoff) it when needed. Concurrent callers for one scope share one start.
func (p *Presenter) ensureConn(ctx context.Context, scope procScope) (*agentConn, error) {
	workspace := scope.key()
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: agent %s is shutting down", presenters.ErrAgentUnavailable, p.cfg.ID)
		}
		if c := p.conns[workspace]; c != nil && c.alive() {
			c.idleSince = time.Time{}
			p.mu.Unlock()
			return c, nil
		}
		if old := p.conns[workspace]; old != nil {
			// Dead (crashed, or its connection ended): make sure it is stopped and
			// its exit handled before a new agent starts.
			delete(p.conns, workspace)
			p.mu.Unlock()
			old.stop(context.WithoutCancel(ctx))
			p.mu.Lock()
			continue
		}
		if ch := p.starting[workspace]; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for agent %s to start: %w", p.cfg.ID, presenters.ErrCancelled)
			}
			p.mu.Lock()
			continue
		}
		if wait := p.backoff(); wait > 0 {
			at := time.Now().Add(wait)
			if dl, ok := ctx.Deadline(); ok && dl.Before(at) {
				p.mu.Unlock()
				return nil, fmt.Errorf("%w: agent %s crashed %d times in a row; it restarts at %s, retry then",
					presenters.ErrAgentUnavailable, p.cfg.ID, p.crashes, at.Format(time.RFC3339))
			}
			p.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("waiting to restart agent %s: %w", p.cfg.ID, presenters.ErrCancelled)
			}
			p.mu.Lock()
			continue // someone else may have started it meanwhile
		}
		break
	}
	ch := make(chan struct{})
	p.starting[workspace] = ch
	// Close waits (p.wg) for this start, including stopping its agent if Close came
	// meanwhile.
	p.wg.Add(1)
	defer p.wg.Done()
	p.setStatusLocked(presenters.AgentStarting, "")
	p.mu.Unlock()

	// Other callers may share this start: one caller hanging up must not abort it (it
	// is bounded by the start timeout) nor count as a crash.
	c, err := p.start(context.WithoutCancel(ctx), scope)

	p.mu.Lock()
	delete(p.starting, workspace)
	close(ch)
	if err != nil {
		var authErr *presenters.AuthRequiredError
		status := presenters.AgentNeedsAuth
		if !errors.As(err, &authErr) {
			status = presenters.AgentCrashed
			p.crashes++
			p.lastCrash = time.Now()
		}
		p.setStatusLocked(status, err.Error())
		p.mu.Unlock()
		return nil, err
	}
	if p.closed {
		p.mu.Unlock()
		// Close waits for this start to end: the agent is gone when it returns.
		c.stop(context.Background())
		return nil, fmt.Errorf("%w: agent %s is shutting down", presenters.ErrAgentUnavailable, p.cfg.ID)
	}
	p.conns[workspace] = c
	p.setStatusLocked(presenters.AgentReady, "")
	p.mu.Unlock()
	return c, nil
}

// backoff is how long a restart must still wait (p.mu held).
func (p *Presenter) backoff() time.Duration {
	return time.Until(p.lastCrash.Add(backoffFor(p.crashes)))
}

// backoffFor is the pause before a restart after crashes crashes in a row: none after
// the first, then 1 s, 2 s, 4 s ... up to maxBackoff.
func backoffFor(crashes int) time.Duration {
	if crashes <= 1 {
		return 0
	}
	return min(time.Second<<min(crashes-2, 5), maxBackoff)
}

// start launches the agent for a scope, initializes and authenticates it, and imports
// the agent's sessions of the workspace when configured to (before any session can be
// opened on the process, so that none of agenticd's own is taken for the agent's).
func (p *Presenter) start(ctx context.Context, scope procScope) (*agentConn, error) {
	newClient := func(c *agentConn) sdk.Client { return &client{c: c} }
	p.mu.Lock()
	cfg := p.launchConfigLocked()
	p.mu.Unlock()
	c, err := dial(ctx, cfg, scope, p.deps.Roots, p.log, newClient, p.connGone)
	if err != nil {
		return nil, err
	}
	if k := reportedKnown(cfg, c.init, p.deps.Roots.ConfinesFiles()); k != nil {
		// A known agent its launch did not show (a wrapper script, a renamed binary): its
		// state, keys and arguments may decide whether it works at all, so it starts
		// again, once, with them.
		p.log.Info("the agent says it is a known agent; restarting it with what that agent needs", "known_agent", k.id)
		c.stop(context.Background())
		p.mu.Lock()
		p.reported = k
		cfg = p.launchConfigLocked()
		p.mu.Unlock()
		if c, err = dial(ctx, cfg, scope, p.deps.Roots, p.log, newClient, p.connGone); err != nil {
			return nil, err
		}
	}
	var impl presenters.Implementation
	if info := c.init.AgentInfo; info != nil {
		impl = presenters.Implementation{Name: info.Name, Version: info.Version, Title: deref(info.Title)}
	}
	p.mu.Lock()
	p.caps = c.init.AgentCapabilities
	p.initialized = true
	p.authMethods = authMethods(c.init.AuthMethods)
	p.impl = impl
	p.mu.Unlock()
	if p.cfg.AuthMethod != "" {
		if err := c.authenticate(ctx, p.cfg); err != nil {
			c.stop(context.Background())
			return nil, err
		}
	}
	p.log.Info("agent started", "pid", c.proc.Pid(), "workspace", scope.workspace, "additional_directories", scope.extra,
		"implementation", impl.Name, "version", impl.Version)
	if p.cfg.ImportSessions {
		p.importSessions(ctx, c)
	}
	return c, nil
}

// launchConfigLocked is the config the agent starts with: with what the known agent it
// said it is at initialize needs, when its launch did not show that (p.mu held).
func (p *Presenter) launchConfigLocked() Config {
	if p.reported == nil {
		return p.cfg
	}
	return p.cfg.withKnown(p.reported, p.deps.Roots.ConfinesFiles())
}

// missingIsEmpty reports whether the agent is one that reads a missing file as empty
// (knownAgent.missingIsEmpty).
func (p *Presenter) missingIsEmpty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.launchConfigLocked().known
	return k != nil && k.missingIsEmpty
}

// reportedKnown is the known agent an agent launched as cfg says it is in its initialize
// answer, when cfg did not recognise it and what that agent needs would change its
// launch; nil otherwise.
func reportedKnown(cfg Config, init sdk.InitializeResponse, confinesFiles bool) *knownAgent {
	if cfg.known != nil || init.AgentInfo == nil {
		return nil
	}
	k := byReported(init.AgentInfo.Name)
	if k == nil {
		return nil
	}
	with := cfg.withKnown(k, confinesFiles)
	if slices.Equal(with.WritePaths, cfg.WritePaths) && slices.Equal(with.KeepEnv, cfg.KeepEnv) &&
		slices.Equal(with.Args, cfg.Args) && len(with.Env) == len(cfg.Env) {
		return nil
	}
	return k
}

// needsAuth records that the agent refused to work without authentication and returns
// the error for the caller.
func (p *Presenter) needsAuth(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := &presenters.AuthRequiredError{AgentID: p.cfg.ID, Methods: append([]presenters.AuthMethod(nil), p.authMethods...)}
	if len(e.Methods) == 0 {
		e.Keys = p.launchConfigLocked().missingKeys()
	}
	p.setStatusLocked(presenters.AgentNeedsAuth, fmt.Sprintf("%s (the agent said: %s)", e.Error(), agentErrorText(p.log, err)))
	return e
}

// connGone runs when an agent process ended. Unless it was asked to stop, that is a
// crash: the sessions that lived on it are marked error.
func (p *Presenter) connGone(c *agentConn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	crashed := !c.stopping.Load()
	reason := c.goneReason()
	if crashed {
		if time.Since(c.proc.started) > stableAfter {
			p.crashes = 0
		}
		p.crashes++
		p.lastCrash = time.Now()
		p.setStatusLocked(presenters.AgentCrashed, reason+"; the next request restarts it")
	}
	p.mu.Unlock()
	if crashed {
		p.log.Error("agent crashed", "reason", reason)
	}
	for _, s := range c.liveSessions() {
		s.connGone(c, crashed, reason)
	}
}

// session returns a session known in memory, or a stored one as not live. Stored
// sessions are not kept: memory holds only what is live, opening or in error.
func (p *Presenter) session(ctx context.Context, id string) (*session, error) {
	p.mu.Lock()
	s := p.sessions[id]
	p.mu.Unlock()
	if s != nil {
		return s, nil
	}
	conv, err := p.storedConversation(ctx, id)
	if err != nil {
		return nil, err
	}
	s = newStoredSession(p, conv, p.capabilitiesLocked())
	// What it was created with, as it would be opened again (the agent may still leave
	// out an http MCP server then).
	dirs, own, err := p.storedSetup(ctx, id)
	if err != nil {
		return nil, err
	}
	s.info.AdditionalDirectories = dirs
	for _, m := range p.mergedMCPServers(own) {
		s.info.MCPServerNames = append(s.info.MCPServerNames, m.Name)
	}
	return s, nil
}

// openableSession is session, with a stored session kept in memory, so that
// concurrent LoadSession calls meet on the same session: the first one kept wins.
func (p *Presenter) openableSession(ctx context.Context, id string) (*session, error) {
	s, err := p.session(ctx, id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if kept := p.sessions[id]; kept != nil {
		return kept, nil
	}
	p.sessions[id] = s
	return s, nil
}

// forget drops a closed session from memory (one that is open, being opened or closed,
// or failed stays).
func (p *Presenter) forget(s *session) {
	s.mu.Lock()
	keep := s.phase != phaseClosed
	s.mu.Unlock()
	if keep {
		return
	}
	p.mu.Lock()
	if p.sessions[s.id] == s {
		delete(p.sessions, s.id)
	}
	p.mu.Unlock()
}

func (p *Presenter) storedConversation(ctx context.Context, id string) (store.Conversation, error) {
	conv, err := p.deps.Store.GetConversation(ctx, id)
	if err != nil {
		if errors.Is(err, presenters.ErrNotFound) {
			return store.Conversation{}, fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
		}
		return store.Conversation{}, err
	}
	if conv.AgentID != p.cfg.ID {
		return store.Conversation{}, fmt.Errorf("session %s belongs to agent %s, not %s: %w", id, conv.AgentID, p.cfg.ID, presenters.ErrNotFound)
	}
	return conv, nil
}

func (p *Presenter) capabilitiesLocked() presenters.Capabilities {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.capabilities()
}

// liveSession returns a session that can take requests now.
func (p *Presenter) liveSession(ctx context.Context, id string) (*session, error) {
	s, err := p.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.checkLive(); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *Presenter) GetSession(ctx context.Context, sessionID string) (presenters.SessionInfo, error) {
	s, err := p.session(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	info := s.snapshot()
	if n, err := p.deps.Store.CountMessages(ctx, sessionID); err == nil {
		info.MessageCount = n
	}
	return info, nil
}

func (p *Presenter) GetMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	if _, err := p.session(ctx, sessionID); err != nil {
		return nil, err
	}
	return p.deps.Store.Messages(ctx, sessionID, q)
}

func (p *Presenter) SendMessage(ctx context.Context, sessionID string, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	s, err := p.liveSession(ctx, sessionID)
	if err != nil {
		return presenters.SendResult{}, err
	}
	return s.send(ctx, content, opts)
}

func (p *Presenter) CancelMessage(ctx context.Context, sessionID, messageID string) (string, error) {
	s, err := p.session(ctx, sessionID)
	if err != nil {
		return "", err
	}
	return s.cancel(ctx, messageID)
}

func (p *Presenter) RespondPermission(ctx context.Context, sessionID string, resp presenters.PermissionResponse) error {
	s, err := p.session(ctx, sessionID)
	if err != nil {
		return err
	}
	return s.respondPermission(resp)
}

func (p *Presenter) SetMode(ctx context.Context, sessionID, modeID string) (presenters.SessionInfo, error) {
	s, err := p.liveSession(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	if err := s.setMode(ctx, modeID); err != nil {
		return presenters.SessionInfo{}, err
	}
	return s.snapshot(), nil
}

func (p *Presenter) SetModel(ctx context.Context, sessionID, modelID string) (presenters.SessionInfo, error) {
	s, err := p.liveSession(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	if err := s.setModel(ctx, modelID); err != nil {
		return presenters.SessionInfo{}, err
	}
	return s.snapshot(), nil
}

// SetConfigOption sets one of the session's config options (presenters.ConfigOptionSetter).
func (p *Presenter) SetConfigOption(ctx context.Context, sessionID, configID, value string) (presenters.SessionInfo, error) {
	s, err := p.liveSession(ctx, sessionID)
	if err != nil {
		return presenters.SessionInfo{}, err
	}
	if err := s.setConfigOptionValue(ctx, configID, value); err != nil {
		return presenters.SessionInfo{}, err
	}
	return s.snapshot(), nil
}

func (p *Presenter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := p.session(ctx, sessionID)
	if err != nil {
		return err
	}
	err = s.close(ctx)
	p.forget(s)
	return err
}

// checkpointLoop writes running turns' messages every checkpointEvery, so a crash of
// agenticd loses at most that much of a turn, and stops the agent processes that have
// been idle for the idle timeout.
func (p *Presenter) checkpointLoop() {
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-p.closing:
			return
		case <-t.C:
		}
		p.mu.Lock()
		sessions := make([]*session, 0, len(p.sessions))
		for _, s := range p.sessions {
			sessions = append(sessions, s)
		}
		p.mu.Unlock()
		for _, s := range sessions {
			s.checkpoint()
		}
		for _, c := range p.idleConns(time.Now()) {
			p.log.Info("stopping an idle agent process", "workspace", c.workspace, "idle_timeout", p.cfg.IdleTimeout)
			c.stop(context.Background())
		}
	}
}

// idleConns notes which agent processes have no session and returns those that have
// had none for the idle timeout, taken out of p.conns so no new session can pick them.
func (p *Presenter) idleConns(now time.Time) []*agentConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var idle []*agentConn
	for ws, c := range p.conns {
		switch {
		case len(c.liveSessions()) > 0:
			c.idleSince = time.Time{}
		case c.idleSince.IsZero():
			c.idleSince = now
		case now.Sub(c.idleSince) >= p.cfg.IdleTimeout:
			delete(p.conns, ws)
			idle = append(idle, c)
		}
	}
	return idle
}

// Close ends every turn, session, process and goroutine of the presenter.
func (p *Presenter) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	starting := make([]chan struct{}, 0, len(p.starting))
	for _, ch := range p.starting {
		starting = append(starting, ch)
	}
	sessions := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		sessions = append(sessions, s)
	}
	p.mu.Unlock()
	// A start is bounded by the start timeout; when it ends it stops its agent itself
	// (p.closed), so waiting for it leaves no process behind.
	for _, ch := range starting {
		<-ch
	}
	p.mu.Lock()
	conns := make([]*agentConn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	// The writer stops retrying first: a turn's end that shutdown waits for is then
	// written once, in the session, and a database that is away cannot hold the close.
	p.persist.Close()
	for _, s := range sessions {
		s.shutdown()
	}
	var stops sync.WaitGroup
	for _, c := range conns {
		stops.Go(func() { c.stop(ctx) })
	}
	stops.Wait()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("closing agent %s: %w", p.cfg.ID, ctx.Err())
	}
}

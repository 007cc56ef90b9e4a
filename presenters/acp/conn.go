package acp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/presenters"
)

// clientInfo is what agenticd tells agents about itself in initialize.
var clientInfo = sdk.Implementation{Name: "agenticd", Version: version.Number()}

// clientCapabilities are exactly what sandbox/ serves for every session: text file
// read and write inside the workspace, and pty terminals; and elicitations, forms and
// URLs, which clients answer (elicitation.go). (The prompt content we send is limited by
// the agent's promptCapabilities, not declared here.)
var clientCapabilities = sdk.ClientCapabilities{
	Fs:          sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
	Terminal:    true,
	Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.ElicitationFormCapabilities{}, Url: &sdk.ElicitationUrlCapabilities{}},
}

// ACP error codes agents use.
const (
	codeAuthRequired     = -32000
	codeResourceNotFound = -32002
)

// drainTimeout bounds how long the lines an exited agent left in its stdout may take
// to be handled (a process that escaped the group could hold the pipe open).
const drainTimeout = 3 * time.Second

// exitAfterDisconnect is how long a process whose connection ended may take to exit on
// its own before it is stopped.
const exitAfterDisconnect = time.Second

// agentConn is one agent process and the ACP connection to it. Sessions route
// through it by their ACP session id.
type agentConn struct {
	workspace string // the workspace root the process is confined to and started in
	key       string // its procScope.key in Presenter.conns
	proc      *process
	reader    *agentReader
	stdin     *agentWriter // the SDK's and agenticd's own requests (legacymodels.go)
	legacy    *legacyCalls
	rpc       *sdk.ClientSideConnection
	init      sdk.InitializeResponse
	log       *slog.Logger
	confined  bool // its files are bounded: a failure may be the boundary's

	stopping     atomic.Bool   // Close/stop asked for the exit: not a crash
	disconnected atomic.Bool   // the connection ended while the process still ran
	gone         chan struct{} // closed once the exit was fully handled
	onGone       func(*agentConn)

	// idleSince is when the process was last seen with no session (zero while it has
	// some); the presenter's mutex guards it.
	idleSince time.Time

	mu       sync.Mutex
	closed   bool // the exit is being handled: no session may register any more
	sessions map[sdk.SessionId]*session
	// early holds session-level updates for ids not registered yet: agents may send
	// available_commands_update before session/new has answered.
	early map[sdk.SessionId][]sdk.SessionUpdate
}

// maxEarlySessions and maxEarlyUpdates bound what is kept for unknown session ids.
const (
	maxEarlySessions = 16
	maxEarlyUpdates  = 64
)

// dial starts the agent and initializes the connection. newClient builds the handler
// for the agent's requests and notifications; onGone runs after the process exited
// (crash or stop) and every notification it sent was handled.
func dial(ctx context.Context, cfg Config, scope procScope, conf confiner, log *slog.Logger, newClient func(*agentConn) sdk.Client, onGone func(*agentConn)) (*agentConn, error) {
	workspace := scope.workspace
	log = log.With("workspace", workspace)
	cfg = cfg.withPaths(scope.mcp)
	createState(cfg.State, log)
	paths := cfg.bounds()
	paths.Read, paths.Write = expandHome(cfg.ReadPaths), expandHome(cfg.WritePaths)
	for _, p := range paths.Write {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			log.Warn("a write path of the agent does not exist, and confined it cannot create it: create it or take it out of write_paths", "path", p)
		}
	}
	// The sessions' additional directories, admitted by the service as the workspace was.
	paths.Write = append(paths.Write, scope.extra...)
	proc, err := startProcess(cfg.Command, cfg.Args, cfg.Env, cfg.KeepEnv, workspace, conf, paths, log)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", presenters.ErrAgentUnavailable, err)
	}
	c := &agentConn{
		workspace: workspace,
		key:       scope.key(),
		proc:      proc,
		log:       log,
		confined:  conf.ConfinesFiles(),
		gone:      make(chan struct{}),
		onGone:    onGone,
		sessions:  map[sdk.SessionId]*session{},
		early:     map[sdk.SessionId][]sdk.SessionUpdate{},
	}
	handler := newClient(c)
	c.legacy = newLegacyCalls()
	c.stdin = &agentWriter{w: proc.Stdin, legacy: c.legacy}
	c.reader = newAgentReader(proc.Stdout, handler, log)
	c.reader.legacy = c.legacy
	c.rpc = sdk.NewClientSideConnection(handler, c.stdin, c.reader)
	c.rpc.SetLogger(log)
	go c.supervise()

	initCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	resp, err := c.rpc.Initialize(initCtx, sdk.InitializeRequest{
		ProtocolVersion:    sdk.ProtocolVersionNumber,
		ClientCapabilities: clientCapabilities,
		ClientInfo:         &clientInfo,
	})
	if err != nil {
		reason := c.failReason(initCtx, err)
		c.stop(context.Background())
		if keys := cfg.missingKeys(); len(keys) > 0 {
			reason += fmt.Sprintf("; none of the API keys it reads (%s) reaches it: set one for agenticd, name the variable holding it with api_key_env, or set it in the agent's env:",
				strings.Join(keys, ", "))
		}
		return nil, fmt.Errorf("%w: agent %s did not initialize: %s", presenters.ErrAgentUnavailable, cfg.ID, reason)
	}
	c.init = resp
	return c, nil
}

// failReason explains why a request to the agent failed, preferring how the process
// ended when it did. It never shows the SDK's internals: those go to the log.
func (c *agentConn) failReason(ctx context.Context, err error) string {
	select {
	case <-c.proc.Exited():
		return c.goneReason()
	case <-c.rpc.Done():
		// Its output closed: the process is ending; wait a moment to say how.
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-c.proc.Exited():
		case <-t.C:
		}
		return c.goneReason()
	default:
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "no answer in time; the agent may be stuck or need a longer start_timeout"
	}
	return agentErrorText(c.log, err)
}

// goneReason says why the connection ended, for status_reason, ERROR events and logs.
func (c *agentConn) goneReason() string {
	if err := c.reader.fatalError(); err != nil {
		return err.Error() + "; it was stopped"
	}
	select {
	case <-c.proc.Exited():
	default:
		return "the agent closed its connection"
	}
	if c.disconnected.Load() {
		return "the agent closed its connection; it was stopped"
	}
	if c.stopping.Load() {
		return "the agent process " + c.proc.ExitReason()
	}
	return fmt.Sprintf("the agent process %s%s", c.proc.ExitReason(), c.stderrNote())
}

// stderrNote quotes the agent's last stderr lines and, when it ran confined, names the
// boundary, the paths its stderr says it was refused and the settings that widen it.
func (c *agentConn) stderrNote() string {
	// What it wrote just before it exited may still be in the pipe.
	t := time.NewTimer(time.Second)
	select {
	case <-c.proc.StderrRead():
	case <-t.C:
	}
	t.Stop()
	lines, refused := c.proc.tail.snapshot()
	var b strings.Builder
	if len(lines) > 0 {
		b.WriteString("; its last stderr lines: ")
		for i, l := range lines {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(strconv.Quote(l))
		}
	} else {
		b.WriteString("; it wrote nothing to stderr")
	}
	if !c.confined {
		return b.String()
	}
	if len(refused) > 0 {
		b.WriteString("; it was refused " + strings.Join(refused, ", ") + " by the boundary agenticd runs it in")
	} else {
		b.WriteString("; it ran inside the boundary agenticd runs agents in")
	}
	b.WriteString(": if it needs files outside its workspace and state, add them to the agent's write_paths or read_paths, " +
		"or set confinement: off (for every agent)")
	return b.String()
}

// supervise waits for the process to end or the connection to close. A process whose
// connection ended is stopped: nothing can reach it any more. The lines it wrote
// before exiting are still handled, then the pipes are released and the exit reported.
func (c *agentConn) supervise() {
	select {
	case <-c.proc.Exited():
	case <-c.rpc.Done():
		t := time.NewTimer(exitAfterDisconnect)
		select {
		case <-c.proc.Exited():
		case <-t.C:
			c.disconnected.Store(true)
			c.log.Error("the agent connection ended while its process runs; stopping it", "reason", c.goneReason())
			c.proc.Stop(context.Background(), time.Second)
		}
		t.Stop()
	}
	t := time.NewTimer(drainTimeout)
	select {
	case <-c.rpc.Done():
	case <-t.C:
		c.log.Warn("the agent's output stayed open after it exited; closing it")
	}
	t.Stop()
	// Closing stdout ends a Read still waiting on a pipe held by an escaped process.
	if err := c.proc.Close(); err != nil {
		c.log.Warn("reading agent stderr failed", "err", err)
	}
	<-c.rpc.Done()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.log.Info("agent connection closed", "reason", c.goneReason())
	if c.onGone != nil {
		c.onGone(c)
	}
	close(c.gone)
}

// alive reports whether the process still runs and the connection is open.
func (c *agentConn) alive() bool {
	select {
	case <-c.proc.Exited():
		return false
	case <-c.rpc.Done():
		return false
	default:
		return !c.stopping.Load()
	}
}

// stop ends the process and waits until its exit was handled (or ctx ends).
func (c *agentConn) stop(ctx context.Context) {
	c.stopping.Store(true)
	c.proc.Stop(ctx, 2*time.Second)
	select {
	case <-c.gone:
	case <-ctx.Done():
	}
}

// errConnClosed refuses a session on a connection whose exit is being handled.
var errConnClosed = errors.New("the agent connection has closed")

// register routes a session's updates to s and hands it what arrived early. It
// refuses once the connection is closed: that session would never hear of the exit.
func (c *agentConn) register(id sdk.SessionId, s *session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%w: agent session %s", errConnClosed, id)
	}
	c.sessions[id] = s
	early := c.early[id]
	delete(c.early, id)
	// Applied while c.mu is held so that no later update of this session overtakes them.
	for _, u := range early {
		s.applyUpdate(u)
	}
	return nil
}

func (c *agentConn) unregister(id sdk.SessionId) {
	c.mu.Lock()
	delete(c.sessions, id)
	delete(c.early, id)
	c.mu.Unlock()
}

func (c *agentConn) session(id sdk.SessionId) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *agentConn) liveSessions() []*session {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		out = append(out, s)
	}
	return out
}

// route hands an update to its session, or keeps a session-level one for a session
// that is not registered yet. It never blocks.
func (c *agentConn) route(n sdk.SessionNotification) {
	c.mu.Lock()
	s := c.sessions[n.SessionId]
	if s == nil {
		kind := updateKind(n.Update)
		sessionLevel := strings.HasSuffix(kind, "_update") && kind != "tool_call_update"
		if sessionLevel && len(c.early[n.SessionId]) < maxEarlyUpdates &&
			(len(c.early) < maxEarlySessions || c.early[n.SessionId] != nil) {
			c.early[n.SessionId] = append(c.early[n.SessionId], n.Update)
		} else {
			c.log.Info("dropping an update for a session this server does not know", "acp_session_id", n.SessionId, "kind", kind)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	s.applyUpdate(n.Update)
}

// authenticate calls authenticate with the configured method. env_var methods need
// their variables in the agent's environment (agenticd's plus the config's env).
func (c *agentConn) authenticate(ctx context.Context, cfg Config) error {
	methods := authMethods(c.init.AuthMethods)
	var chosen *sdk.AuthMethod
	for i, m := range c.init.AuthMethods {
		if authMethodID(m) == cfg.AuthMethod {
			chosen = &c.init.AuthMethods[i]
		}
	}
	if chosen == nil {
		return fmt.Errorf("auth_method %q is not one the agent offers: %w", cfg.AuthMethod,
			&presenters.AuthRequiredError{AgentID: cfg.ID, Methods: methods})
	}
	if chosen.EnvVar != nil {
		for _, v := range chosen.EnvVar.Vars {
			if v.Optional {
				continue
			}
			if _, inConfig := cfg.Env[v.Name]; !inConfig && os.Getenv(v.Name) == "" {
				return fmt.Errorf("auth method %s needs the environment variable %s: set it for agenticd or in the agent's env: %w",
					cfg.AuthMethod, v.Name, &presenters.AuthRequiredError{AgentID: cfg.ID, Methods: methods})
			}
		}
	}
	actx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if _, err := c.rpc.Authenticate(actx, sdk.AuthenticateRequest{MethodId: cfg.AuthMethod}); err != nil {
		return fmt.Errorf("authenticate with %s failed: %s: %w", cfg.AuthMethod, c.failReason(actx, err),
			&presenters.AuthRequiredError{AgentID: cfg.ID, Methods: methods})
	}
	return nil
}

func authMethodID(m sdk.AuthMethod) string {
	switch {
	case m.EnvVar != nil:
		return m.EnvVar.Id
	case m.Terminal != nil:
		return m.Terminal.Id
	case m.Agent != nil:
		return m.Agent.Id
	}
	return ""
}

func authMethods(ms []sdk.AuthMethod) []presenters.AuthMethod {
	out := make([]presenters.AuthMethod, 0, len(ms))
	for _, m := range ms {
		switch {
		case m.EnvVar != nil:
			desc := deref(m.EnvVar.Description)
			var names []string
			for _, v := range m.EnvVar.Vars {
				names = append(names, v.Name)
			}
			if len(names) > 0 {
				desc = strings.TrimSpace(desc + " (environment: " + strings.Join(names, ", ") + ")")
			}
			out = append(out, presenters.AuthMethod{ID: m.EnvVar.Id, Name: m.EnvVar.Name, Description: desc})
		case m.Terminal != nil:
			out = append(out, presenters.AuthMethod{ID: m.Terminal.Id, Name: m.Terminal.Name, Description: deref(m.Terminal.Description)})
		case m.Agent != nil:
			out = append(out, presenters.AuthMethod{ID: m.Agent.Id, Name: m.Agent.Name, Description: deref(m.Agent.Description)})
		}
	}
	return out
}

// isAuthRequired reports whether an agent answered "authentication required".
func isAuthRequired(err error) bool {
	var re *sdk.RequestError
	return errors.As(err, &re) && re.Code == codeAuthRequired
}

// agentErrorText is an agent's error as a client may see it: the agent's message
// only. Its data and any other error go to the log (with the logger's agent_id and
// session_id).
func agentErrorText(log *slog.Logger, err error) string {
	var re *sdk.RequestError
	if errors.As(err, &re) {
		if re.Data != nil {
			log.Warn("agent error", "code", re.Code, "message", re.Message, "data", re.Data)
		}
		if re.Message != "" {
			return re.Message
		}
		return fmt.Sprintf("error %d", re.Code)
	}
	log.Warn("request to the agent failed", "err", err)
	return "the request to the agent failed (see the server log)"
}

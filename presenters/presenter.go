package presenters

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agenticd/agenticd/sandbox"
)

// Presenter drives one agent: every session of one agent id goes through it.
// Implementations publish everything that happens in a session through an Emitter
// bound to that session, never straight to clients.
//
// Methods return sentinel errors of this package (wrapped with detail) so that the
// service can map them to transport codes.
type Presenter interface {
	// AgentID is `<type>.<provider>.<name>`.
	AgentID() string
	// Describe reports the agent and its current status (cheap; never starts the agent).
	Describe(ctx context.Context) AgentInfo

	// CreateSession starts a session in cfg.Workspace and returns only after the agent
	// answered, so the returned id is final. It emits SESSION_CREATED. The workspace
	// was opened and admitted by the service (see SessionConfig.Workspace): presenters
	// use it as given and never turn a path a client sent into a workspace themselves.
	CreateSession(ctx context.Context, cfg SessionConfig) (SessionInfo, error)
	// GetSession returns the session as the presenter knows it, also for sessions that
	// are stored but not live (after a restart).
	GetSession(ctx context.Context, sessionID string) (SessionInfo, error)
	// LoadSession reopens a stored session, replays its history as events and emits
	// SESSION_READY. A presenter that needs the stored session's workspace again opens
	// its stored directory with ReopenWorkspace.
	LoadSession(ctx context.Context, sessionID string, lc LoadContext) (SessionInfo, error)
	// CloseSession ends a live session (cancels its turn, releases its terminals) and
	// emits SESSION_CLOSED. The history stays.
	CloseSession(ctx context.Context, sessionID string) error

	// SendMessage starts a turn and returns at once; the turn streams as events and ends
	// with MESSAGE_END. ErrSessionBusy while another turn runs; ErrMessageIDInUse when a
	// client-chosen id in opts is taken (CheckSendOptions states the rules).
	SendMessage(ctx context.Context, sessionID string, content MessageContent, opts SendOptions) (SendResult, error)
	// CancelMessage cancels the running turn and returns its assistant message id. An
	// empty messageID cancels whatever runs (nothing running: "" and no error); any other
	// id that is not the running turn is ErrMessageNotRunning. The turn still ends with
	// MESSAGE_END(StopCancelled).
	CancelMessage(ctx context.Context, sessionID, messageID string) (string, error)

	// SetModel and SetMode take ids from the session's available lists; any other id is
	// ErrInvalidArgument.
	SetModel(ctx context.Context, sessionID, modelID string) (SessionInfo, error)
	SetMode(ctx context.Context, sessionID, modeID string) (SessionInfo, error)

	// RespondPermission answers a pending permission request. ErrNotFound when the
	// request is not pending (already answered by someone else, or unknown).
	RespondPermission(ctx context.Context, sessionID string, resp PermissionResponse) error

	// GetMessages returns stored history, oldest first.
	GetMessages(ctx context.Context, sessionID string, q MessageQuery) ([]Message, error)

	// Close ends every session, process and goroutine the presenter owns.
	Close(ctx context.Context) error
}

// Steerer is a Presenter that can deliver a message into a session's running turn, so
// that the agent reads it before it goes on (between model calls, or as the agent itself
// takes steering) instead of after the turn. Steer stores and echoes the user's message
// under opts.UserMessageID (minted when empty), emits MESSAGE_STEERED, and returns the
// running turn's message id with it. It is ErrMessageNotRunning when no turn runs or the
// running one is ending, and ErrUnsupported when this session's agent takes no steering:
// the caller then queues the message.
type Steerer interface {
	Steer(ctx context.Context, sessionID string, content MessageContent, opts SendOptions) (SendResult, error)
}

// ConfigOptionSetter is a Presenter whose sessions may have settings their agent
// defines (SessionInfo.ConfigOptions). SetConfigOption sets one: value is one of a
// select's choice values, or "true" or "false" for a boolean. An id or value the
// session does not offer is ErrInvalidArgument.
type ConfigOptionSetter interface {
	SetConfigOption(ctx context.Context, sessionID, configID, value string) (SessionInfo, error)
}

// SessionForker is a Presenter whose agents may copy a session (ACP session/fork).
// ForkSession starts a new session with the history of sessionID, in its workspace,
// directories and MCP servers, and emits SESSION_CREATED for it; the original goes on
// unchanged. ErrUnsupported when the session's agent cannot fork.
type SessionForker interface {
	ForkSession(ctx context.Context, sessionID string) (SessionInfo, error)
}

// QueuedMessage is a message that waits in its session's queue for the running turn to
// end, under the ids its turn will use.
type QueuedMessage struct {
	SessionID     string
	MessageID     string // the assistant reply its turn will produce
	UserMessageID string // the user message it will be stored as
	Content       MessageContent
	Reason        string // why it waits, for a person
	QueuedAt      time.Time
	// Principal sent it: its turn runs on that principal's behalf, wherever and whenever
	// it starts (set by the service).
	Principal string
}

// SendOptions are a SendMessage's client-chosen ids; empty ones are minted. An id taken
// in the session is ErrMessageIDInUse.
type SendOptions struct {
	MessageID     string // the assistant message the turn produces
	UserMessageID string // the stored user message
}

// maxMessageIDBytes bounds a client-chosen message id.
const maxMessageIDBytes = 128

// CheckSend checks a message before it is sent or steered into a turn: it has content,
// and its client-chosen ids are well formed (CheckSendOptions).
func CheckSend(content MessageContent, o SendOptions) error {
	if content.Empty() {
		return fmt.Errorf("the message is empty; send text, images, files or resources: %w", ErrInvalidArgument)
	}
	return CheckSendOptions(o)
}

// CheckSendOptions checks the form of client-chosen ids: each empty or 1 to 128 of
// A-Z a-z 0-9 . _ : -, and the two different. Whether an id is taken is the store's to
// say (ErrMessageIDInUse).
func CheckSendOptions(o SendOptions) error {
	for _, f := range []struct{ name, id string }{{"message_id", o.MessageID}, {"user_message_id", o.UserMessageID}} {
		if f.id == "" {
			continue
		}
		if len(f.id) > maxMessageIDBytes {
			return fmt.Errorf("%s is %d bytes long; use at most %d: %w", f.name, len(f.id), maxMessageIDBytes, ErrInvalidArgument)
		}
		for _, r := range f.id {
			if !validMessageIDRune(r) {
				return fmt.Errorf("%s %q holds %q; use only A-Z a-z 0-9 . _ : -: %w", f.name, f.id, r, ErrInvalidArgument)
			}
		}
	}
	if o.MessageID != "" && o.MessageID == o.UserMessageID {
		return fmt.Errorf("message_id and user_message_id are both %q; the assistant's and the user's messages need different ids: %w", o.MessageID, ErrInvalidArgument)
	}
	return nil
}

func validMessageIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-'
}

// SendResult names the messages of a turn that SendMessage started.
type SendResult struct {
	MessageID     string // the assistant message the turn produces
	UserMessageID string // the stored user message
}

// SessionConfig is what CreateSession gets.
type SessionConfig struct {
	// Workspace is the session's directory, opened by the service from the path the
	// client sent (sandbox.Roots.Open), and never nil. Presenters can rely on it being
	// an existing directory under a configured workspace root and outside agenticd's
	// own files, with Root absolute and symlink-free; every file and terminal
	// operation through it checks that the directory is still the one that was opened.
	Workspace *sandbox.Workspace
	ModelID   string
	ModeID    string
	Title     string
	// AdditionalDirectories are further directories the session works in, opened and
	// admitted by the service as Workspace is (each under a workspace root), in the
	// order the client gave them.
	AdditionalDirectories []*sandbox.Workspace
	// MCPServers are the session's own MCP servers, checked by CheckMCPServers; the
	// presenter merges them with the agent's configured ones (a session's server
	// replaces a configured one of the same name).
	MCPServers []MCPServer
	// Creator is the principal creating the session: SESSION_CREATED's SessionInfo.Owner.
	Creator string
}

// MCPServer is an MCP server: a command spoken to over stdio (Command, Args, Env) or a
// streamable HTTP endpoint (URL, Headers).
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// MergeMCPServers are an agent's configured MCP servers with a session's own: a
// session's server replaces a configured one of the same name in its place, the others
// follow in their order.
func MergeMCPServers(configured, own []MCPServer) []MCPServer {
	out := slices.Clone(configured)
	for _, m := range own {
		if i := slices.IndexFunc(out, func(c MCPServer) bool { return c.Name == m.Name }); i >= 0 {
			out[i] = m
			continue
		}
		out = append(out, m)
	}
	return out
}

// IsHTTP reports whether the server is reached over HTTP rather than run.
func (m MCPServer) IsHTTP() bool { return m.URL != "" }

// maxMCPServerNameBytes bounds a server's name, which becomes part of tool names.
const maxMCPServerNameBytes = 64

// CheckMCPServers checks a list of MCP servers: each has a name of 1 to 64 of
// A-Z a-z 0-9 _ - (it prefixes tool names, `<name>__<tool>`), no two share one, and
// each has exactly one of a command and an http(s) URL. It returns ErrInvalidArgument
// with what is wrong, naming the server as field[i] (field is where the list came from,
// e.g. config.mcp_servers).
func CheckMCPServers(field string, servers []MCPServer) error {
	seen := make(map[string]bool, len(servers))
	for i, m := range servers {
		switch {
		case m.Name == "" || len(m.Name) > maxMCPServerNameBytes || strings.ContainsFunc(m.Name, func(r rune) bool {
			return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}):
			return fmt.Errorf("%s[%d]: name %q must be 1 to %d of A-Z a-z 0-9 _ -: %w", field, i, m.Name, maxMCPServerNameBytes, ErrInvalidArgument)
		case strings.Contains(m.Name, "__"):
			return fmt.Errorf("%s[%d]: name %q may not contain \"__\", which separates server and tool in tool names: %w", field, i, m.Name, ErrInvalidArgument)
		case seen[m.Name]:
			return fmt.Errorf("%s[%d]: name %q is used twice; give each server its own: %w", field, i, m.Name, ErrInvalidArgument)
		case (m.Command == "") == (m.URL == ""):
			return fmt.Errorf("%s[%d] (%s): give either a command (stdio) or a url (http): %w", field, i, m.Name, ErrInvalidArgument)
		case m.URL != "" && !strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://"):
			return fmt.Errorf("%s[%d] (%s): url %q must start with http:// or https://: %w", field, i, m.Name, m.URL, ErrInvalidArgument)
		}
		seen[m.Name] = true
	}
	return nil
}

// WorkspaceOpener opens a directory as a session's workspace (sandbox.Roots does).
type WorkspaceOpener interface {
	Open(dir string) (*sandbox.Workspace, error)
}

// ReopenWorkspace opens the stored workspace directory of an existing session again,
// when a presenter brings the session back (after a restart, or for a turn of a session
// it keeps no workspace for). This is a re-check, not a second admission: the directory
// may have vanished, been swapped for a symlink out of the roots, or the roots may have
// changed since the service admitted it. A workspace that fails is ErrWorkspaceGone (a
// failed precondition): the request is fine, but the session cannot work where it was
// started.
func ReopenWorkspace(roots WorkspaceOpener, sessionID, dir string) (*sandbox.Workspace, error) {
	ws, err := roots.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("the workspace %s of session %s cannot be used any more (%v); start a new session in an existing workspace: %w",
			dir, sessionID, err, ErrWorkspaceGone)
	}
	return ws, nil
}

// LoadContext bounds a LoadSession replay.
type LoadContext struct {
	MaxHistory            int // newest N messages; 0 = all
	IncludeSystemMessages bool
}

// MessageQuery selects part of a session's stored history, which GetMessages returns
// oldest first. The zero value selects the whole history.
type MessageQuery struct {
	// AfterMessageID and BeforeMessageID bound the range, the named messages excluded;
	// empty leaves that end open. Naming a message the session does not hold is
	// ErrNotFound.
	AfterMessageID  string
	BeforeMessageID string
	// Limit keeps at most this many messages of the range (0 = all): the newest ones, or
	// the oldest with FromOldest. Paging forward is FromOldest after the last message of
	// the previous page; paging back is before its first message.
	Limit      int
	FromOldest bool
	// MessageID, when set, narrows the range to that one message: the result is empty
	// when the session does not hold it.
	MessageID string
}

// PermissionResponse answers one pending permission request with one of its options.
type PermissionResponse struct {
	RequestID string
	OptionID  string
}

package presenters

import "context"

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

	// CreateSession starts a session and returns only after the agent answered, so the
	// returned id is final. It emits SESSION_CREATED.
	CreateSession(ctx context.Context, cfg SessionConfig) (SessionInfo, error)
	// GetSession returns the session as the presenter knows it, also for sessions that
	// are stored but not live (after a restart).
	GetSession(ctx context.Context, sessionID string) (SessionInfo, error)
	// LoadSession reopens a stored session, replays its history as events and emits
	// SESSION_READY.
	LoadSession(ctx context.Context, sessionID string, lc LoadContext) (SessionInfo, error)
	// CloseSession ends a live session (cancels its turn, releases its terminals) and
	// emits SESSION_CLOSED. The history stays.
	CloseSession(ctx context.Context, sessionID string) error

	// SendMessage starts a turn and returns at once; the turn streams as events and ends
	// with MESSAGE_END. ErrSessionBusy while another turn runs.
	SendMessage(ctx context.Context, sessionID string, content MessageContent) (SendResult, error)
	// CancelMessage cancels the running turn (messageID empty: whatever runs). The turn
	// still ends with MESSAGE_END(StopCancelled).
	CancelMessage(ctx context.Context, sessionID, messageID string) error

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

// SendResult names the messages of a turn that SendMessage started.
type SendResult struct {
	MessageID     string // the assistant message the turn produces
	UserMessageID string // the stored user message
}

// SessionConfig is what CreateSession gets. Workspace is already validated by the
// service: an absolute, existing directory under a configured workspace root.
type SessionConfig struct {
	Workspace string
	ModelID   string
	ModeID    string
	Title     string
}

// LoadContext bounds a LoadSession replay.
type LoadContext struct {
	MaxHistory            int // newest N messages; 0 = all
	IncludeSystemMessages bool
}

// MessageQuery pages GetMessages backwards from the newest.
type MessageQuery struct {
	Limit           int    // 0 = all
	BeforeMessageID string // empty = newest
}

// PermissionResponse answers one pending permission request with one of its options.
type PermissionResponse struct {
	RequestID string
	OptionID  string
}

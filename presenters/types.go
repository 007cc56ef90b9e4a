package presenters

import (
	"encoding/json"
	"time"
)

// AgentType is the first segment of an agent id.
type AgentType string

const (
	AgentTypeACP      AgentType = "acp"
	AgentTypeDeepChat AgentType = "deepchat"
)

// AgentStatus says whether an agent can take work now.
type AgentStatus string

const (
	AgentNotStarted         AgentStatus = "not_started"
	AgentStarting           AgentStatus = "starting"
	AgentReady              AgentStatus = "ready"
	AgentNeedsAuth          AgentStatus = "needs_auth"
	AgentNeedsConfiguration AgentStatus = "needs_configuration"
	AgentCrashed            AgentStatus = "crashed"
)

type AuthMethod struct {
	ID          string
	Name        string
	Description string
}

type Capabilities struct {
	SupportsVision    bool
	SupportsTools     bool
	SupportsModes     bool
	SupportsCommands  bool
	SupportsLoad      bool
	SupportsModels    bool
	SupportsResources bool
	// SupportsMCP: the agent uses SessionConfig.MCPServers (stdio ones; http ones too
	// with SupportsMCPHTTP).
	SupportsMCP     bool
	SupportsMCPHTTP bool
	// SupportsAdditionalDirectories: the agent works in SessionConfig.AdditionalDirectories.
	SupportsAdditionalDirectories bool
	// SupportsDelete: the agent deletes its own copy of a session (ACP session/delete).
	SupportsDelete bool
	// SupportsSessionList: the agent's sessions made elsewhere show in ListSessions.
	SupportsSessionList bool
	// SupportsLogout: the agent can log out of its account.
	SupportsLogout bool
	// SupportsElicitation: the agent may ask the user for input (ElicitationRequest).
	SupportsElicitation bool
}

// AgentInfo describes an agent for ListAgents.
type AgentInfo struct {
	ID             string
	Name           string
	Type           AgentType
	Description    string
	Status         AgentStatus
	StatusReason   string
	AuthMethods    []AuthMethod
	Capabilities   Capabilities
	Implementation Implementation
	// ConfigSource says where the agent's configuration came from, for a person: "config
	// file /path", "environment: OPENAI_API_KEY", "ollama at http://127.0.0.1:11434",
	// "found on PATH: /usr/bin/codex-acp", "built-in: not configured". It names
	// variables, never their values.
	ConfigSource string
	// Confinement describes the OS boundary the agent's processes run under.
	Confinement string
}

// Implementation is a program's name and version as it reports them (ACP initialize's
// agentInfo); empty when unknown.
type Implementation struct {
	Name    string
	Version string
	Title   string // a display name, when the program gives one
}

// SessionStatus is the state of a session.
type SessionStatus string

const (
	SessionIdle       SessionStatus = "idle"
	SessionGenerating SessionStatus = "generating"
	SessionPaused     SessionStatus = "paused"
	SessionError      SessionStatus = "error"
	SessionClosed     SessionStatus = "closed"
)

type Mode struct {
	ID          string
	Name        string
	Description string
}

type Model struct {
	ID          string
	Name        string
	Description string
}

// ConfigOption is a setting of a session that its agent defines (ACP session config
// options), such as a reasoning effort or a fast mode: a choice among values, or an
// on/off toggle.
type ConfigOption struct {
	ID          string
	Name        string
	Description string
	// Category is what it sets: "mode", "model", "thought_level", or the agent's own.
	Category string
	Type     ConfigOptionType
	// CurrentValue is a select's value id, or "true" or "false" for a boolean.
	CurrentValue string
	// Choices are a select's values (none for a boolean).
	Choices []ConfigChoice
}

// ConfigOptionType says how a config option is set.
type ConfigOptionType string

const (
	ConfigSelect  ConfigOptionType = "select"
	ConfigBoolean ConfigOptionType = "boolean"
)

// ConfigChoice is one value of a select config option; Group names the group it is
// listed under, if the agent groups them.
type ConfigChoice struct {
	Value       string
	Name        string
	Description string
	Group       string
}

type Command struct {
	Name        string
	Description string
	InputHint   string
}

// TokenUsage counts tokens and cost. A nil count was not reported by the agent; zero is
// a real value.
type TokenUsage struct {
	InputTokens       *int64
	OutputTokens      *int64
	TotalTokens       *int64
	CachedInputTokens *int64
	ReasoningTokens   *int64
	ContextUsed       *int64
	ContextSize       *int64
	Cost              *float64
	CostCurrency      string
}

// Reported is a reported count, for TokenUsage's fields.
func Reported[T int64 | float64](v T) *T { return &v }

// Add sums two usages: a count is reported when either reported it. Context figures
// are snapshots: the newer reported one wins.
func (u TokenUsage) Add(o TokenUsage) TokenUsage {
	u.InputTokens = sum(u.InputTokens, o.InputTokens)
	u.OutputTokens = sum(u.OutputTokens, o.OutputTokens)
	u.TotalTokens = sum(u.TotalTokens, o.TotalTokens)
	u.CachedInputTokens = sum(u.CachedInputTokens, o.CachedInputTokens)
	u.ReasoningTokens = sum(u.ReasoningTokens, o.ReasoningTokens)
	u.Cost = sum(u.Cost, o.Cost)
	if o.CostCurrency != "" {
		u.CostCurrency = o.CostCurrency
	}
	if o.ContextUsed != nil {
		u.ContextUsed = Reported(*o.ContextUsed)
	}
	if o.ContextSize != nil {
		u.ContextSize = Reported(*o.ContextSize)
	}
	return u
}

// Equal reports whether two usages report the same counts.
func (u TokenUsage) Equal(o TokenUsage) bool {
	return sameCount(u.InputTokens, o.InputTokens) && sameCount(u.OutputTokens, o.OutputTokens) &&
		sameCount(u.TotalTokens, o.TotalTokens) && sameCount(u.CachedInputTokens, o.CachedInputTokens) &&
		sameCount(u.ReasoningTokens, o.ReasoningTokens) && sameCount(u.ContextUsed, o.ContextUsed) &&
		sameCount(u.ContextSize, o.ContextSize) && sameCount(u.Cost, o.Cost) && u.CostCurrency == o.CostCurrency
}

// sum adds two counts into a new one (never sharing either's memory); nil when neither
// was reported.
func sum[T int64 | float64](a, b *T) *T {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return Reported(*b)
	case b == nil:
		return Reported(*a)
	}
	return Reported(*a + *b)
}

func sameCount[T int64 | float64](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// SessionInfo is a session as its presenter knows it. The service adds what it
// derives from the event stream (LastSequence, and PendingPermissions and
// MessageInFlight when the presenter leaves them empty).
type SessionInfo struct {
	SessionID string
	// AgentSessionID is the agent's own id for the session (ACP sessionId; DeepChat's
	// conversation id, the same as SessionID). Never used where a SessionID goes.
	AgentSessionID string
	// AdditionalDirectories are the directories the session works in besides the
	// workspace; MCPServerNames name its MCP servers (configured and its own).
	AdditionalDirectories []string
	MCPServerNames        []string
	AgentID               string
	Status                SessionStatus
	StatusReason          string
	Workspace             string
	Title                 string
	CreatedAt             time.Time
	UpdatedAt             time.Time
	AvailableModes        []Mode
	CurrentModeID         string
	AvailableModels       []Model
	CurrentModelID        string
	AvailableCommands     []Command
	ConfigOptions         []ConfigOption
	Capabilities          Capabilities
	Usage                 TokenUsage
	MessageInFlight       string
	PendingPermissions    []PermissionRequest
	PendingElicitations   []ElicitationRequest
	// Owner is the principal that created the session, in SESSION_CREATED only: the
	// service knows the owners of sessions (the presenter does not keep it).
	Owner string
	// QueuedMessages wait for the running turn; the service fills them from its queue.
	QueuedMessages []QueuedMessage
	LastSequence   uint64
	MessageCount   int64
}

// SessionPatch is a partial SessionInfo for SESSION_UPDATED: only non-nil fields changed.
type SessionPatch struct {
	Status            *SessionStatus
	StatusReason      *string
	Title             *string
	UpdatedAt         *time.Time
	AvailableModes    *[]Mode
	CurrentModeID     *string
	AvailableModels   *[]Model
	CurrentModelID    *string
	AvailableCommands *[]Command
	ConfigOptions     *[]ConfigOption
	Capabilities      *Capabilities
	Usage             *TokenUsage
}

// Apply copies the patch's set fields into info.
func (p SessionPatch) Apply(info *SessionInfo) {
	if p.Status != nil {
		info.Status = *p.Status
	}
	if p.StatusReason != nil {
		info.StatusReason = *p.StatusReason
	}
	if p.Title != nil {
		info.Title = *p.Title
	}
	if p.UpdatedAt != nil {
		info.UpdatedAt = *p.UpdatedAt
	}
	if p.AvailableModes != nil {
		info.AvailableModes = *p.AvailableModes
	}
	if p.CurrentModeID != nil {
		info.CurrentModeID = *p.CurrentModeID
	}
	if p.AvailableModels != nil {
		info.AvailableModels = *p.AvailableModels
	}
	if p.CurrentModelID != nil {
		info.CurrentModelID = *p.CurrentModelID
	}
	if p.AvailableCommands != nil {
		info.AvailableCommands = *p.AvailableCommands
	}
	if p.ConfigOptions != nil {
		info.ConfigOptions = *p.ConfigOptions
	}
	if p.Capabilities != nil {
		info.Capabilities = *p.Capabilities
	}
	if p.Usage != nil {
		info.Usage = *p.Usage
	}
}

// ImageSourceKind says how an image's Data is to be read.
type ImageSourceKind string

const (
	ImageURL    ImageSourceKind = "url"
	ImageBase64 ImageSourceKind = "base64"
	ImageFile   ImageSourceKind = "file"
)

type Image struct {
	Kind     ImageSourceKind
	Data     string // the URL, the base64 bytes, or a workspace path
	MimeType string
}

type File struct {
	Path     string
	Name     string
	MimeType string
}

// Resource is an embedded resource: Text or Blob (base64) set.
type Resource struct {
	URI      string
	MimeType string
	Text     string
	Blob     string
}

// ContentPart is one part of what a user sends: exactly one field set (Text non-empty,
// or one of the others).
type ContentPart struct {
	Text     string
	Image    *Image
	File     *File
	Resource *Resource
}

// MessageContent is what a user sends: its parts in order, as the agent receives them.
type MessageContent struct {
	Parts []ContentPart
}

// TextContent is a message of one text part.
func TextContent(text string) MessageContent {
	return MessageContent{Parts: []ContentPart{{Text: text}}}
}

// Empty reports whether there is nothing to send.
func (c MessageContent) Empty() bool {
	for _, p := range c.Parts {
		if p.Text != "" || p.Image != nil || p.File != nil || p.Resource != nil {
			return false
		}
	}
	return true
}

type RiskLevel string

const (
	RiskLow      RiskLevel = "low"
	RiskMedium   RiskLevel = "medium"
	RiskHigh     RiskLevel = "high"
	RiskCritical RiskLevel = "critical"
)

// Rank orders risk levels from low (0) to critical (3). A level it does not know ranks
// as critical: whatever compares risks errs on the side of asking.
func (l RiskLevel) Rank() int {
	switch l {
	case RiskLow:
		return 0
	case RiskMedium:
		return 1
	case RiskHigh:
		return 2
	}
	return 3
}

// CommandInfo is the server's reading of a command a tool wants to run.
type CommandInfo struct {
	Command     string
	RiskLevel   RiskLevel
	Reason      string
	Suggestion  string
	Signature   string
	BaseCommand string
	// Cwd is the directory the command runs in, when known.
	Cwd string
}

type PermissionType string

const (
	PermissionRead    PermissionType = "read"
	PermissionWrite   PermissionType = "write"
	PermissionCommand PermissionType = "command"
	PermissionAll     PermissionType = "all"
)

// PermissionOptionKind values are ACP's.
type PermissionOptionKind string

const (
	AllowOnce    PermissionOptionKind = "allow_once"
	AllowAlways  PermissionOptionKind = "allow_always"
	RejectOnce   PermissionOptionKind = "reject_once"
	RejectAlways PermissionOptionKind = "reject_always"
)

// Allows reports whether choosing an option of this kind lets the tool run.
func (k PermissionOptionKind) Allows() bool { return k == AllowOnce || k == AllowAlways }

type PermissionOption struct {
	ID   string
	Name string
	Kind PermissionOptionKind
}

// PermissionRequest is a tool call waiting for a decision.
type PermissionRequest struct {
	RequestID      string
	ToolID         string
	ToolName       string
	PermissionType PermissionType
	Description    string
	CommandInfo    *CommandInfo
	Paths          []string
	Options        []PermissionOption
	Rememberable   bool
	ServerName     string
	Arguments      json.RawMessage // raw JSON as the agent sent it (object, array or string)
	MessageID      string
	RequestedAt    time.Time
	// Diffs are the file changes the call would make, shown before anyone answers.
	Diffs []DiffBlock
}

// Option returns the option with the given id.
func (r PermissionRequest) Option(id string) (PermissionOption, bool) {
	for _, o := range r.Options {
		if o.ID == id {
			return o, true
		}
	}
	return PermissionOption{}, false
}

// OptionOfKind returns the first option of the given kind.
func (r PermissionRequest) OptionOfKind(kind PermissionOptionKind) (PermissionOption, bool) {
	for _, o := range r.Options {
		if o.Kind == kind {
			return o, true
		}
	}
	return PermissionOption{}, false
}

// ToolKind values are ACP's.
type ToolKind string

const (
	ToolRead       ToolKind = "read"
	ToolEdit       ToolKind = "edit"
	ToolDelete     ToolKind = "delete"
	ToolMove       ToolKind = "move"
	ToolSearch     ToolKind = "search"
	ToolExecute    ToolKind = "execute"
	ToolThink      ToolKind = "think"
	ToolFetch      ToolKind = "fetch"
	ToolSwitchMode ToolKind = "switch_mode"
	ToolOther      ToolKind = "other"
)

// ToolStatus values are ACP's plus cancelled.
type ToolStatus string

const (
	ToolPending    ToolStatus = "pending"
	ToolInProgress ToolStatus = "in_progress"
	ToolCompleted  ToolStatus = "completed"
	ToolFailed     ToolStatus = "failed"
	ToolCancelled  ToolStatus = "cancelled"
)

// Finished reports whether the status is final.
func (s ToolStatus) Finished() bool {
	return s == ToolCompleted || s == ToolFailed || s == ToolCancelled
}

type ToolLocation struct {
	Path string
	Line int
}

type DiffBlock struct {
	Path    string
	OldText string
	NewText string
}

type TerminalBlock struct {
	TerminalID string
	Command    string
	Output     string
	Truncated  bool
	ExitCode   *int
	Signal     string
	// OutputOffset is where Output starts in all the terminal printed: TOOL_RUNNING
	// events carry only what is new since the tool call's previous event, everything
	// else all that is held (after a truncation from the beginning, from the first
	// byte still held).
	OutputOffset uint64
}

// ToolContent is one produced piece of a tool call: exactly one field set.
type ToolContent struct {
	Text     string
	Diff     *DiffBlock
	Terminal *TerminalBlock
	Image    *ImageBlock
	Resource *ResourceBlock
}

// ToolCall is the whole current state of one tool call.
type ToolCall struct {
	ToolID      string
	ToolName    string
	Title       string
	Kind        ToolKind
	Status      ToolStatus
	Arguments   json.RawMessage
	Result      json.RawMessage
	Error       string
	Locations   []ToolLocation
	Content     []ToolContent
	CommandInfo *CommandInfo
}

type ImageBlock struct {
	MimeType string
	URL      string
	Base64   string
}

type ErrorBlock struct {
	Message string
	Code    string
}

type ActionBlock struct {
	ActionType  string
	Description string
	Permission  *PermissionRequest
}

type SearchResult struct {
	Title   string
	URL     string
	Snippet string
}

type SearchBlock struct {
	Query   string
	Results []SearchResult
}

type McpUIResourceBlock struct {
	URI      string
	MimeType string
	Text     string
}

type PlanEntry struct {
	Content  string
	Status   string // pending, in_progress, completed
	Priority string // low, medium, high
}

type PlanBlock struct {
	Entries []PlanEntry
}

type ResourceBlock struct {
	URI      string
	Name     string
	MimeType string
	Text     string
	Blob     string
}

// BlockType names a Block's variant.
type BlockType string

const (
	BlockText          BlockType = "text"
	BlockReasoning     BlockType = "reasoning"
	BlockTool          BlockType = "tool"
	BlockError         BlockType = "error"
	BlockImage         BlockType = "image"
	BlockAction        BlockType = "action"
	BlockSearch        BlockType = "search"
	BlockMcpUIResource BlockType = "mcp_ui_resource"
	BlockPlan          BlockType = "plan"
	BlockDiff          BlockType = "diff"
	BlockTerminal      BlockType = "terminal"
	BlockResource      BlockType = "resource"
)

// Block is one typed piece of a message. Type says which field is set; Text holds the
// text of text and reasoning blocks.
type Block struct {
	Type          BlockType
	Text          string
	Tool          *ToolCall
	Error         *ErrorBlock
	Image         *ImageBlock
	Action        *ActionBlock
	Search        *SearchBlock
	McpUIResource *McpUIResourceBlock
	Plan          *PlanBlock
	Diff          *DiffBlock
	Terminal      *TerminalBlock
	Resource      *ResourceBlock
}

type MessageRole string

const (
	RoleUser      MessageRole = "user"
	RoleAssistant MessageRole = "assistant"
	RoleSystem    MessageRole = "system"
)

type MessageStatus string

const (
	MessageComplete   MessageStatus = "complete"
	MessageIncomplete MessageStatus = "incomplete"
	MessageCancelled  MessageStatus = "cancelled"
	MessageError      MessageStatus = "error"
)

// StopReason values are ACP's plus error and interrupted.
type StopReason string

const (
	StopEndTurn         StopReason = "end_turn"
	StopMaxTokens       StopReason = "max_tokens"
	StopMaxTurnRequests StopReason = "max_turn_requests"
	StopRefusal         StopReason = "refusal"
	StopCancelled       StopReason = "cancelled"
	StopError           StopReason = "error"
	// StopInterrupted: agenticd stopped, or the replica running the turn was lost.
	StopInterrupted StopReason = "interrupted"
)

// Message is one stored message of a session's history.
type Message struct {
	ID         string
	SessionID  string
	Role       MessageRole
	Status     MessageStatus
	Blocks     []Block
	CreatedAt  time.Time
	StopReason StopReason
	Usage      *TokenUsage
	// Sender is the principal that sent a user message, when known (the store keeps it
	// from the event that ended the message); presenters leave it empty.
	Sender string
}

// ElicitationMode says how an elicitation asks for input.
type ElicitationMode string

const (
	ElicitationForm ElicitationMode = "form"
	ElicitationURL  ElicitationMode = "url"
)

// ElicitationAction is the answer to an elicitation (ACP's and MCP's words).
type ElicitationAction string

const (
	ElicitationAccept  ElicitationAction = "accept"
	ElicitationDecline ElicitationAction = "decline"
	ElicitationCancel  ElicitationAction = "cancel"
)

// ElicitationRequest is the agent asking the user for input: a form described by
// RequestedSchema (a JSON Schema object of primitive properties), or a URL to open.
type ElicitationRequest struct {
	ElicitationID   string
	ToolID          string
	MessageID       string
	Message         string
	Mode            ElicitationMode
	RequestedSchema map[string]any // form mode; decoded JSON
	URL             string         // url mode
	RequestedAt     time.Time
}

// ElicitationResponse answers one pending elicitation; Content is the form's values for
// an accept (decoded JSON).
type ElicitationResponse struct {
	ElicitationID string
	Action        ElicitationAction
	Content       map[string]any
}

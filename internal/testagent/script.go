package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Script drives the agent. Every field is optional; an empty script is an agent that
// answers each prompt with end_turn and nothing else.
type Script struct {
	Agent   AgentSpec   `json:"agent"`
	Session SessionSpec `json:"session"`
	// Turns[i] is what the i-th prompt of a session does; prompts past the end repeat
	// the last entry.
	Turns [][]Step `json:"turns"`
	// Load is what session/load streams before it answers (the replayed history).
	Load []Step `json:"load"`
	// Sessions are SessionInfo objects session/list shows besides the process's own
	// sessions (agent.list); {cwd} is the listing's cwd.
	Sessions []json.RawMessage `json:"sessions"`
}

// AgentSpec shapes the initialize answer and the authentication behaviour.
type AgentSpec struct {
	Name string `json:"name"`
	// Title is initialize's agentInfo.title (none when empty).
	Title       string `json:"title"`
	LoadSession bool   `json:"loadSession"`
	Resume      bool   `json:"resume"`
	Close       bool   `json:"close"`
	// Delete, List, AdditionalDirectories and Logout advertise session/delete,
	// session/list, additionalDirectories and logout; MCPHTTP MCP servers over http.
	Delete                bool `json:"delete"`
	List                  bool `json:"list"`
	AdditionalDirectories bool `json:"additionalDirectories"`
	Logout                bool `json:"logout"`
	// Fork advertises session/fork: a fork is a new session of the forked one's process.
	Fork    bool `json:"fork"`
	MCPHTTP bool `json:"mcpHttp"`
	// PageSize splits session/list answers into pages of this many (0: one page).
	PageSize        int               `json:"pageSize"`
	Image           bool              `json:"image"`
	EmbeddedContext bool              `json:"embeddedContext"`
	AuthMethods     []json.RawMessage `json:"authMethods"`
	// RequireAuth: session/new fails with "authentication required" until authenticate
	// was called with an advertised method whose env_var variables are all set.
	RequireAuth bool `json:"requireAuth"`
	// CrashOnStart exits during initialize with this status (non-zero).
	CrashOnStart int `json:"crashOnStart"`
	// StartShell runs `sh -c StartShell` during initialize, as agents create their state
	// at start; its output goes to stderr, and if it fails the agent exits with status 1.
	StartShell string `json:"startShell"`
	// Steering advertises _session/steering (_meta.steering.supported), as
	// claude-agent-acp and codex-acp do (steer.go).
	Steering bool `json:"steering"`
}

// SessionSpec shapes the answers of session/new, session/load and session/resume.
type SessionSpec struct {
	Modes         json.RawMessage `json:"modes"`         // SessionModeState
	Models        json.RawMessage `json:"models"`        // SessionModelState
	ConfigOptions json.RawMessage `json:"configOptions"` // []SessionConfigOption
	// ID is the session id every session/new answers with (default: one unique to the
	// process and the session), so tests can make agents pick the same id.
	ID string `json:"id"`
	// AfterNew are steps run right after session/new answered (e.g. commands).
	AfterNew []Step `json:"afterNew"`
}

// Step is one thing the agent does; exactly one field is set.
type Step struct {
	// Update sends a session/update through the SDK (decoded into its union type).
	Update json.RawMessage `json:"update,omitempty"`
	// Raw sends {"sessionId":..., "update": Raw} as a session/update line as is, for
	// kinds or shapes the SDK's types cannot express.
	Raw json.RawMessage `json:"raw,omitempty"`
	// Text and Thought are shorthands for agent_message_chunk / agent_thought_chunk.
	Text    *string `json:"text,omitempty"`
	Thought *string `json:"thought,omitempty"`

	Permission *PermissionStep `json:"permission,omitempty"`
	Read       *ReadStep       `json:"read,omitempty"`
	Write      *WriteStep      `json:"write,omitempty"`
	Terminal   *TerminalStep   `json:"terminal,omitempty"`
	Flood      *FloodStep      `json:"flood,omitempty"`
	Replay     *ReplayStep     `json:"replay,omitempty"`
	Paced      *PacedStep      `json:"paced,omitempty"`
	Elicit     *ElicitStep     `json:"elicit,omitempty"`

	Sleep string `json:"sleep,omitempty"`
	// WaitCancel blocks until session/cancel arrives for this session.
	WaitCancel bool `json:"waitCancel,omitempty"`
	// WaitSteer blocks until a _session/steering message arrives for this session, then
	// answers it with the text chunk "steered: <its text>".
	WaitSteer bool `json:"waitSteer,omitempty"`
	// EchoPrompt sends the prompt's content blocks back as one text chunk of JSON.
	EchoPrompt bool `json:"echoPrompt,omitempty"`
	// EchoMeta sends the session/prompt request's _meta back as one text chunk of JSON.
	EchoMeta bool `json:"echoMeta,omitempty"`
	// EchoSetup sends what the session was opened with as one text chunk of JSON:
	// {"mcpServers": [...], "additionalDirectories": [...]}.
	EchoSetup bool `json:"echoSetup,omitempty"`
	// Spawn starts `sh -c Spawn` as a child (in the agent's process group) and reports
	// "spawned <pid>", as agents that re-spawn themselves do.
	Spawn string `json:"spawn,omitempty"`
	// Shell runs `sh -c Shell` inside the agent's own process, as agents with built-in
	// Bash and Write tools do (never through the client), waits for it and says
	// "shell exit N: OUTPUT". {cwd} is the session's directory.
	Shell string `json:"shell,omitempty"`
	// Crash exits the process with this status at once.
	Crash *int `json:"crash,omitempty"`
	// CrashOnce exits with status 3 unless the marker file it names exists; it creates
	// the marker first, so the restarted agent goes on.
	CrashOnce string `json:"crashOnce,omitempty"`
	// LateAfterCancel waits for session/cancel, then still sends a text chunk after a
	// pause and ends the turn cancelled: an agent slow to stop.
	LateAfterCancel *LateStep `json:"lateAfterCancel,omitempty"`
	// Line writes this line to stdout as it is ({cwd} expanded): malformed messages.
	Line string `json:"line,omitempty"`
	// LongLine sends a session/update line with a text of this many bytes.
	LongLine int `json:"longLine,omitempty"`
	// CloseOutput closes stdout and blocks for good: the process lives, its connection
	// does not.
	CloseOutput bool `json:"closeOutput,omitempty"`
	// Hang blocks the turn for good, ignoring session/cancel.
	Hang bool `json:"hang,omitempty"`
	// Stop ends the turn with this stop reason (default end_turn) and Usage.
	Stop  string          `json:"stop,omitempty"`
	Usage json.RawMessage `json:"usage,omitempty"`
	// Fail ends the turn with a JSON-RPC error.
	Fail *FailStep `json:"fail,omitempty"`
}

// LateStep is what LateAfterCancel sends, and when.
type LateStep struct {
	After string `json:"after"` // a time.Duration
	Text  string `json:"text"`
}

// PermissionStep asks session/request_permission and branches on the answer.
type PermissionStep struct {
	ToolCall json.RawMessage `json:"toolCall"` // ToolCallUpdate
	Options  json.RawMessage `json:"options"`  // []PermissionOption; default allow/reject once
	// Report sends "permission: <outcome>" as a text chunk.
	Report   bool   `json:"report"`
	OnAllow  []Step `json:"onAllow"`
	OnReject []Step `json:"onReject"`
	OnCancel []Step `json:"onCancel"`
}

// ReadStep calls fs/read_text_file and reports the result as a text chunk.
type ReadStep struct {
	Path  string `json:"path"`
	Line  *int   `json:"line"`
	Limit *int   `json:"limit"`
}

// WriteStep calls fs/write_text_file and reports the result as a text chunk.
type WriteStep struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// TerminalStep runs terminal/create, optionally shows the terminal in a tool call,
// then wait_for_exit (or kill), output and release, and reports the result.
type TerminalStep struct {
	Command         string            `json:"command"`
	Args            []string          `json:"args"`
	Cwd             *string           `json:"cwd"`
	Env             map[string]string `json:"env"`
	OutputByteLimit *int              `json:"outputByteLimit"`
	ToolCallID      string            `json:"toolCallId"`
	Kill            bool              `json:"kill"`
	NoRelease       bool              `json:"noRelease"`
}

// FloodStep sends Count chunks of Size bytes without pause. Each chunk starts with
// its zero-padded index so a client can check order. PermissionAt >= 1 asks a
// permission (from another goroutine, while the flood goes on) after that many chunks
// and reports its outcome after the flood.
type FloodStep struct {
	Count        int    `json:"count"`
	Size         int    `json:"size"`
	Kind         string `json:"kind"` // agent_message_chunk (default) or agent_thought_chunk
	PermissionAt int    `json:"permissionAt"`
}

// ReplayStep streams Messages history messages alternating user and agent chunks of
// Size bytes (used by session/load).
type ReplayStep struct {
	Messages int `json:"messages"`
	Size     int `json:"size"`
}

// FailStep is a JSON-RPC error answer.
type FailStep struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// loadScript reads the script named by -script or TESTAGENT_SCRIPT; TESTAGENT_FLOOD_COUNT
// and TESTAGENT_FLOOD_SIZE (with no script) make a flood agent for benchmarks.
func loadScript(path string) (Script, error) {
	var s Script
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return s, fmt.Errorf("read script: %w", err)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("parse script %s: %w", path, err)
		}
		return s, nil
	}
	if c := os.Getenv("TESTAGENT_FLOOD_COUNT"); c != "" {
		count, err := strconv.Atoi(c)
		if err != nil {
			return s, fmt.Errorf("TESTAGENT_FLOOD_COUNT: %w", err)
		}
		size := 64
		if v := os.Getenv("TESTAGENT_FLOOD_SIZE"); v != "" {
			if size, err = strconv.Atoi(v); err != nil {
				return s, fmt.Errorf("TESTAGENT_FLOOD_SIZE: %w", err)
			}
		}
		step := Step{Flood: &FloodStep{Count: count, Size: size}}
		if step.Paced, err = pacedFromEnv(count, size); err != nil {
			return s, err
		} else if step.Paced != nil {
			step.Flood = nil
		}
		s.Turns = [][]Step{{step}}
	}
	return s, nil
}

func parseSleep(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("sleep %q: %w", s, err)
	}
	return d, nil
}

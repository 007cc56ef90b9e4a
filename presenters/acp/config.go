// Package acp drives Agent Client Protocol agents (claude-code-acp, claude-agent-acp,
// codex-acp, gemini --acp, any other) as presenters: one confined child process per
// agent, workspace and set of additional directories, shared by the sessions that have
// those (see procScope), spoken to with github.com/coder/acp-go-sdk through a
// flow-controlled reader (see flowreader.go) and, for what the SDK no longer knows, beside
// it (legacymodels.go). Session updates are normalized into presenters events; fs/* and
// terminal/* requests are served by sandbox/ inside the session's workspace (fs/* also in
// its additional directories); permission requests pass a
// server-side policy before any user is asked; every turn is stored through
// the store package.
package acp

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// policy_mode takes the permission modes every agent shares (presenters.PermissionMode:
// strict, the default, then balanced and permissive). "Allow" means the server answers
// the agent's allow-once option itself. Whatever the mode, a request whose target paths
// lie outside the session's workspace is refused first.
//
// The values policy_mode took before are still read, as aliases of strict: an alias must
// not let a call run that its old meaning put to a person or refused, and no other mode
// keeps that promise for all of them. Their old auto-allowing and auto-refusing by command
// risk is gone; the difference each alias makes now is what the deprecation warning says.
var policyAliases = map[string]string{
	"ask":            "it is the old name of strict, with the same meaning",
	"auto_allow_low": "low-risk commands are asked for instead of allowed",
	"auto_deny_high": "high- and critical-risk commands are asked for instead of refused",
	"auto":           "low-risk commands are asked for instead of allowed, and high- and critical-risk ones instead of refused",
}

// ParsePolicyMode reads a policy_mode value: "" is strict, an old value is an alias of
// strict (note then says what it meant and what to write instead, for a warning), and
// anything else is ErrInvalidArgument naming the valid values.
func ParsePolicyMode(value string) (mode presenters.PermissionMode, note string, err error) {
	if value == "" {
		return presenters.PermissionModeStrict, "", nil
	}
	if diff, ok := policyAliases[value]; ok {
		note = fmt.Sprintf("policy_mode %q is deprecated and now means %q: %s; write policy_mode: %s to keep this, "+
			"or balanced (reads run without asking) or permissive (only high-risk, critical-risk and unclassified commands ask)",
			value, presenters.PermissionModeStrict, diff, presenters.PermissionModeStrict)
		return presenters.PermissionModeStrict, note, nil
	}
	mode, err = presenters.ParsePermissionMode(value)
	if err != nil {
		return "", "", fmt.Errorf("policy_mode %q is not one of strict (the default: ask for every tool call), balanced (reads run, the rest asks), "+
			"permissive (only high-risk, critical-risk and unclassified commands ask): %w", value, presenters.ErrInvalidArgument)
	}
	return mode, "", nil
}

// Defaults for Config's zero values.
const (
	DefaultPermissionTimeout = 5 * time.Minute
	// DefaultStartTimeout bounds start-up to an answered initialize: some agents take
	// seconds (gemini-cli ~3 s alone, ~11 s when several start at once on 2 cores).
	DefaultStartTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long an agent process with no open session lives on, so
	// that a session opened soon after in the same workspace starts at once.
	DefaultIdleTimeout = 10 * time.Minute
	minStartTimeout    = 30 * time.Second
)

// Config is one ACP agent from the configuration file.
type Config struct {
	ID      string // acp.<provider>.<name>
	Command string
	Args    []string
	Env     map[string]string // added to agenticd's own environment
	// KeepEnv names API-key variables of agenticd's environment this agent keeps,
	// although agents' keys are otherwise hidden from every process agenticd starts:
	// the agent's own api_key_env and the keys its known CLI reads.
	KeepEnv    []string
	AuthMethod string // an advertised auth method id to call authenticate with
	// Source says where this configuration came from (AgentInfo.ConfigSource).
	Source string
	// ReadPaths and WritePaths are what the confined agent process may read, and write,
	// beyond its workspace, a private temp dir, the system and its own installation:
	// its state and login (e.g. ~/.claude). "~" is the home directory; missing paths are
	// left out.
	ReadPaths  []string
	WritePaths []string
	// State is created, when missing, before the agent starts: a confined agent cannot
	// create what its write paths name, since its home directory is not writable.
	State []StatePath
	// PermissionTimeout: a permission request nobody answers in this time is answered
	// `cancelled` (default 5 min).
	PermissionTimeout time.Duration
	// PolicyMode is a presenters.PermissionMode (strict, balanced, permissive), "" for
	// strict, or an old alias (see ParsePolicyMode); validate leaves the mode it means.
	PolicyMode string
	// policyNote is the deprecation warning for an old PolicyMode value, set by validate.
	policyNote   string
	StartTimeout time.Duration // default 60 s; values below 30 s are raised to 30 s
	// IdleTimeout stops a workspace's agent process that has had no open session for
	// this long (default 10 min).
	IdleTimeout time.Duration
	// Name and Description are shown by ListAgents (defaults derive from ID and Command).
	Name        string
	Description string
	// MCPServers are passed to every session (session/new, load, resume) with the
	// session's own; none: [].
	MCPServers []MCPServer
	// ImportSessions: the agent's own sessions of a workspace (session/list, when the
	// agent offers it) are recorded as agenticd sessions whenever a process starts there,
	// so that ListSessions shows them and LoadSession opens them.
	ImportSessions bool
	// Limits bound the agent's process tree; nil: the Roots' own (sandbox.Options.Limits).
	Limits *sandbox.Limits
	// Network, when not nil, restricts the TCP ports the agent's tree may connect to.
	Network *sandbox.Network

	// known is the known agent the command launches (withLaunch), and knownHow how it
	// was recognised; nil for an agent agenticd does not know.
	known    *knownAgent
	knownHow string
}

// missingKeys are the API-key variables of the known agent c launches when none of
// them, nor any other variable c keeps, reaches it; nil when one does or the agent is not
// known.
func (c Config) missingKeys() []string {
	if c.known == nil || len(c.known.keys) == 0 {
		return nil
	}
	for _, k := range c.KeepEnv {
		if os.Getenv(k) != "" {
			return nil
		}
	}
	for _, k := range c.known.keys {
		if c.Env[k] != "" {
			return nil
		}
	}
	return slices.Clone(c.known.keys)
}

// bounds are the limits and network policy of the agent's tree, as Roots takes them.
func (c Config) bounds() sandbox.ProcessPaths {
	return sandbox.ProcessPaths{Limits: c.Limits, Network: c.Network}
}

// MCPServer is an MCP server an agent should connect its sessions to: a command run
// over stdio, or an http URL with headers (passed only when the agent supports MCP over
// http).
type MCPServer = presenters.MCPServer

// Deps are the shared services a presenter uses.
type Deps struct {
	Publisher presenters.Publisher
	Roots     *sandbox.Roots
	Store     *store.Store
	Logger    *slog.Logger
}

func (c Config) validate() (Config, error) {
	parts := strings.Split(c.ID, ".")
	if len(parts) < 3 || parts[0] != string(presenters.AgentTypeACP) || parts[1] == "" || parts[2] == "" {
		return c, fmt.Errorf("agent id %q must look like acp.<provider>.<name>: %w", c.ID, presenters.ErrInvalidArgument)
	}
	if strings.TrimSpace(c.Command) == "" {
		return c, fmt.Errorf("agent %s: command is empty; set the agent binary in the config: %w", c.ID, presenters.ErrInvalidArgument)
	}
	mode, note, err := ParsePolicyMode(c.PolicyMode)
	if err != nil {
		return c, fmt.Errorf("agent %s: %w", c.ID, err)
	}
	c.PolicyMode, c.policyNote = string(mode), note
	for _, m := range c.MCPServers {
		if m.Name == "" || (m.Command == "") == (m.URL == "") {
			return c, fmt.Errorf("agent %s: mcp server %q needs a name and either a command or a url: %w", c.ID, m.Name, presenters.ErrInvalidArgument)
		}
	}
	if c.PermissionTimeout <= 0 {
		c.PermissionTimeout = DefaultPermissionTimeout
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	c.StartTimeout = max(c.StartTimeout, minStartTimeout)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Name == "" {
		c.Name = parts[len(parts)-1]
	}
	if c.Description == "" {
		c.Description = "ACP agent: " + strings.Join(append([]string{c.Command}, c.Args...), " ")
	}
	return c, nil
}

// StatePath is a directory, or a file with initial content, an agent needs to exist.
type StatePath struct {
	Path string // "~" is the home directory
	File bool
	Seed string // a new file's content
}

// Discover returns a Config for every known ACP agent found by lookPath (exec.LookPath
// in production), in a fixed order. New adds what each needs to run confined.
func Discover(lookPath func(string) (string, error)) []Config {
	var out []Config
	for _, k := range knownAgents {
		path, err := lookPath(k.binaries[0])
		if err != nil || path == "" {
			continue
		}
		out = append(out, Config{ID: k.id, Command: path, Args: slices.Clone(k.args), Name: k.name, Description: k.description})
	}
	return out
}

// Package daemon is agenticd itself: its configuration, and the wiring of database, event
// hub, sandbox, agents and gRPC server, with a graceful stop. cmd/agenticd parses flags
// and calls Run; tests call Start and Stop.
package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/service"
)

// Defaults of the settings a config file may leave out.
const (
	DefaultListen           = "127.0.0.1:50051"
	DefaultShutdownTimeout  = 10 * time.Second
	DefaultEventBuffer      = 100_000
	DefaultEventBufferBytes = service.DefaultEventBytes
	DefaultSubscriberQueue  = 4096
)

// Config is agenticd's configuration: a YAML file (see README.md), then flags.
type Config struct {
	// Listen is host:port; anything but a loopback address requires Token.
	Listen string `yaml:"listen"`
	// DataDir holds the SQLite database (agenticd.db). Default ~/.local/share/agenticd
	// ($XDG_DATA_HOME/agenticd when set).
	DataDir string `yaml:"data_dir"`
	// Token, when set, is required as `authorization: Bearer <token>` on every RPC but
	// health. AGENTICD_TOKEN overrides it (cmd/agenticd).
	Token string `yaml:"token"`
	// TLS serves over TLS when both files are set.
	TLS TLSConfig `yaml:"tls"`
	// WorkspaceRoots are the directories below which sessions may work. Default: the
	// user's home directory. Whatever the roots, sessions never reach agenticd's own
	// files: the data dir, the config file and the TLS key.
	WorkspaceRoots []string `yaml:"workspace_roots"`
	// ShutdownTimeout bounds the graceful stop (RPCs finishing, agents closing).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// EventBuffer is how many recent events are held for subscribers that resume.
	EventBuffer int `yaml:"event_buffer"`
	// EventBufferBytes bounds the held events' memory too (estimated: their text once,
	// plus a small overhead each); the oldest go first. Default 64 MiB: about 50,000
	// chunks of 1 KiB (small events meet EventBuffer first). It is the resume window
	// traded against resident memory: the held events are live heap, and the Go heap
	// grows to about twice its live data, so raising it raises agenticd's RSS during a
	// long flood by up to twice as much.
	EventBufferBytes int64 `yaml:"event_buffer_bytes"`
	// SubscriberQueue is how many events may wait for one subscriber before its stream is
	// ended with RESOURCE_EXHAUSTED (it then resumes with after_sequence).
	SubscriberQueue int `yaml:"subscriber_queue"`
	// LogLevel is debug, info, warn or error (default info); LogFormat is text or json.
	LogLevel  string `yaml:"log_level"`
	LogFormat string `yaml:"log_format"`
	// Agents are the agents to register, in order.
	Agents []AgentConfig `yaml:"agents"`

	// File is the config file Load read (empty without one); sessions may not reach it.
	File string `yaml:"-"`
}

// TLSConfig names a certificate and its key (PEM files).
type TLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// AgentConfig is one entry under agents:. Which fields apply depends on Type.
type AgentConfig struct {
	// ID is `<type>.<provider>.<name>` (e.g. acp.anthropic.claude, deepchat.openai.gpt).
	ID string `yaml:"id"`
	// Type is acp or deepchat.
	Type        presenters.AgentType `yaml:"type"`
	Name        string               `yaml:"name"`
	Description string               `yaml:"description"`

	// acp: the agent program, its arguments and extra environment.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// AuthMethod is an advertised method to call authenticate with.
	AuthMethod string `yaml:"auth_method"`
	// PermissionTimeout is how long a permission request waits for an answer.
	PermissionTimeout time.Duration `yaml:"permission_timeout"`
	// StartupTimeout bounds the agent's start and initialize.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// PolicyMode is the server-side permission policy for the agent's requests.
	PolicyMode string `yaml:"policy_mode"`

	// deepchat: an OpenAI-compatible chat completions API.
	Provider      string   `yaml:"provider"`
	BaseURL       string   `yaml:"base_url"`
	APIKeyEnv     string   `yaml:"api_key_env"`
	Models        []string `yaml:"models"`
	DefaultModel  string   `yaml:"default_model"`
	MaxToolRounds int      `yaml:"max_tool_rounds"`
	// CommandTimeout bounds one run_command tool call.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// ProviderIdleTimeout fails a provider call that sends nothing for this long.
	ProviderIdleTimeout time.Duration `yaml:"provider_idle_timeout"`
	// MCPServers give the agent their tools.
	MCPServers []MCPServerConfig `yaml:"mcp_servers"`
}

// MCPServerConfig is an MCP server: a command over stdio, or a URL.
type MCPServerConfig struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
}

// Load reads a YAML config file; a leading ~ in the path or in any path setting is the
// home directory. Unknown keys are errors (a typo must not silently do nothing). Unset
// settings stay empty: WithDefaults fills them.
func Load(path string) (Config, error) {
	var cfg Config
	expanded, err := sandbox.ExpandHome(path)
	if err != nil {
		return cfg, err
	}
	data, err := os.ReadFile(expanded)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.expandPaths(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if cfg.File, err = filepath.Abs(expanded); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

func (c *Config) expandPaths() error {
	var err error
	expand := func(p *string) {
		if err == nil {
			*p, err = sandbox.ExpandHome(*p)
		}
	}
	expand(&c.DataDir)
	expand(&c.TLS.CertFile)
	expand(&c.TLS.KeyFile)
	for i := range c.WorkspaceRoots {
		expand(&c.WorkspaceRoots[i])
	}
	return err
}

// WithDefaults returns the config with every unset setting at its default.
func (c Config) WithDefaults() (Config, error) {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		dir, err := defaultDataDir()
		if err != nil {
			return c, err
		}
		c.DataDir = dir
	}
	if len(c.WorkspaceRoots) == 0 {
		// Where a user's projects are. The data dir and the config file below it are
		// kept out of every workspace (sandboxOptions).
		home, err := os.UserHomeDir()
		if err != nil {
			return c, fmt.Errorf("no workspace_roots configured and no home directory to default to: %w", err)
		}
		c.WorkspaceRoots = []string{home}
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	if c.EventBufferBytes <= 0 {
		c.EventBufferBytes = DefaultEventBufferBytes
	}
	if c.SubscriberQueue <= 0 {
		c.SubscriberQueue = DefaultSubscriberQueue
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
	if err := c.expandPaths(); err != nil {
		return c, err
	}
	return c, nil
}

func defaultDataDir() (string, error) {
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
		return filepath.Join(xdg, "agenticd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data_dir configured and no home directory to default to: %w", err)
	}
	return filepath.Join(home, ".local", "share", "agenticd"), nil
}

// Validate reports the first thing wrong with a (defaulted) config, saying what to change.
func (c Config) Validate() error {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen %q is not host:port (e.g. %s): %w", c.Listen, DefaultListen, err)
	}
	if c.Token == "" && !isLoopback(host) {
		return fmt.Errorf("refusing to listen on %s without a token: anyone who can reach that address could run agents that read, write and execute in your workspaces; set token in the config file or AGENTICD_TOKEN, or listen on 127.0.0.1", c.Listen)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("tls needs both cert_file and key_file")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("log_format %q: use text or json", c.LogFormat)
	}
	seen := make(map[string]bool, len(c.Agents))
	for i, a := range c.Agents {
		if err := a.validate(); err != nil {
			return fmt.Errorf("agents[%d]: %w", i, err)
		}
		if seen[a.ID] {
			return fmt.Errorf("agents[%d]: id %q is used twice; give each agent its own id", i, a.ID)
		}
		seen[a.ID] = true
	}
	return nil
}

func (a AgentConfig) validate() error {
	switch a.Type {
	case presenters.AgentTypeACP, presenters.AgentTypeDeepChat:
	case "":
		return fmt.Errorf("agent %q: type is required (acp or deepchat)", a.ID)
	default:
		return fmt.Errorf("agent %q: unknown type %q (use acp or deepchat)", a.ID, a.Type)
	}
	if a.ID == "" {
		return fmt.Errorf("id is required, like %s.<provider>.<name>", a.Type)
	}
	if !strings.HasPrefix(a.ID, string(a.Type)+".") || strings.ContainsAny(a.ID, " \t\n/") {
		return fmt.Errorf("agent id %q must look like %s.<provider>.<name> (no spaces or slashes)", a.ID, a.Type)
	}
	if a.Type == presenters.AgentTypeACP && a.Command == "" {
		return fmt.Errorf("agent %q: command is required for an acp agent (the program that speaks ACP on stdio)", a.ID)
	}
	return nil
}

// isLoopback reports whether a listen host only accepts local connections. An empty host
// (":50051") listens on every interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Package daemon is agenticd itself: its configuration, and the wiring of database, event
// hub, sandbox, agents and gRPC server, with a graceful stop. cmd/agenticd parses flags
// and calls Run; tests call Start and Stop.
package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/internal/strictyaml"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/acp"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/service/replicas"
	"github.com/agenticd/agenticd/store"
)

// Defaults of the settings a config file may leave out.
const (
	DefaultListen           = "127.0.0.1:50051"
	DefaultShutdownTimeout  = 10 * time.Second
	DefaultEventBuffer      = 100_000
	DefaultEventBufferBytes = events.DefaultMaxBytes
	DefaultSubscriberQueue  = 4096
	// The event log's retention: whichever bound is met first drops the oldest events.
	DefaultEventLogMaxEvents       = 1_000_000
	DefaultEventLogMaxBytes  int64 = 1 << 30
	DefaultEventLogMaxAge          = 7 * 24 * time.Hour
	// The audit log's retention: an audit trail is read long after the fact.
	DefaultAuditMaxEntries int64 = 10_000_000
	DefaultAuditMaxAge           = 90 * 24 * time.Hour
)

// Config is agenticd's configuration: a YAML file (see docs/configuration.md), then flags.
type Config struct {
	// Listen is host:port; anything but a loopback address requires Token.
	Listen string `yaml:"listen"`
	// DataDir holds the SQLite database (agenticd.db). Default ~/.local/share/agenticd
	// ($XDG_DATA_HOME/agenticd when set).
	DataDir string `yaml:"data_dir"`
	// Database, when set, is a postgres:// URL (postgres://user:password@host:port/db?...)
	// of the database that holds the history, the event log and the registry in place of
	// the SQLite file in DataDir; the database must exist, agenticd creates its tables.
	// DataDir still holds agenticd's other files.
	Database string `yaml:"database"`
	// Replica places this agenticd among the replicas sharing the Postgres database
	// (database set); SQLite has one replica.
	Replica ReplicaConfig `yaml:"replica"`
	// Token, when set, is accepted as `authorization: Bearer <token>` besides the local
	// credentials (the token file and the Unix socket in DataDir): every RPC but health
	// needs one of them. AGENTICD_TOKEN overrides it (cmd/agenticd).
	Token string `yaml:"token"`
	// TLS serves over TLS when both files are set.
	TLS TLSConfig `yaml:"tls"`
	// Principals are callers besides the owner (token and the local credentials), with
	// their own tokens or client certificates and scopes (principals.go).
	Principals []PrincipalConfig `yaml:"principals"`
	// OIDC, when set, accepts JWTs from an OpenID Connect issuer as bearer tokens.
	OIDC *OIDCConfig `yaml:"oidc"`
	// AllowedOrigins are the web origins (scheme://host[:port]) whose pages may call the
	// API from a browser. The page agenticd serves itself always may; by default no
	// other may.
	AllowedOrigins []string `yaml:"allowed_origins"`
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
	// HeartbeatInterval is how long a Subscribe stream may stay silent before a heartbeat
	// frame keeps idle proxies from closing it (default 15s).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// MaxProcs is how many CPUs run agenticd's own Go code at once (GOMAXPROCS) when it
	// runs as the program. 0, the default: the runtime's own choice (every CPU the
	// process may use; see procs.go). The GOMAXPROCS environment variable, when set, wins.
	MaxProcs int `yaml:"max_procs"`
	// EventLog bounds the durable log of events in the database, from which subscribers
	// resume beyond event_buffer and across restarts.
	EventLog EventLogConfig `yaml:"event_log"`
	// Audit bounds the audit log in the database (ListAuditEvents): file writes,
	// commands, permission requests and decisions, policy denials, session lifecycle.
	Audit AuditConfig `yaml:"audit"`
	// LogLevel is debug, info, warn or error (default info); LogFormat is text or json.
	LogLevel  string `yaml:"log_level"`
	LogFormat string `yaml:"log_format"`
	// Confinement is the OS boundary of every process started for sessions: on (required:
	// a process that cannot be confined is not started), off, or auto (the default: on
	// where the kernel supports it, with a loud warning about what it does not).
	Confinement string `yaml:"confinement"`
	// Limits bound every confined process tree (an agent and what it starts, a terminal,
	// a command) unless an acp agent's own limits say otherwise.
	Limits LimitsConfig `yaml:"limits"`
	// Metrics serves Prometheus metrics on a listener of its own (off by default).
	Metrics MetricsConfig `yaml:"metrics"`
	// Webhooks are where agenticd POSTs a signed notice when any session needs someone
	// (a permission, an elicitation), ends a turn, fails or closes (webhooks.go).
	Webhooks []WebhookConfig `yaml:"webhooks"`
	// SessionWebhooks lets CreateSession give a session a webhook of its own.
	SessionWebhooks SessionWebhooksConfig `yaml:"session_webhooks"`
	// Agents are the agents to register, in order.
	Agents []AgentConfig `yaml:"agents"`

	// File is the config file Load read (empty without one); sessions may not reach it.
	File string `yaml:"-"`
	// agentLines are the lines of the file where the agents: entries start, for messages.
	agentLines []int
}

// ReplicaConfig is one replica's place in the group (AGENTICD_REPLICA_ID and
// AGENTICD_REPLICA_ADVERTISE override the file, for containers).
type ReplicaConfig struct {
	// Advertise is the host:port where the other replicas reach this one to forward a
	// session's calls to its owner. Default: listen's host (the host name when listen's
	// host is unspecified, 0.0.0.0 or ::) and the port it listens on.
	Advertise string `yaml:"advertise"`
	// ID names this replica in the session leases. Default: the advertised address.
	ID string `yaml:"id"`
	// LeaseTTL is how long a session stays with a replica that stopped renewing its
	// lease (renewed every third of it): the time a dead replica's sessions wait before
	// another takes them over. Default 15s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// EventLogConfig is the event log's retention. Unset (or 0) takes the default; a negative
// value lifts that bound.
type EventLogConfig struct {
	MaxEvents int64         `yaml:"max_events"`
	MaxBytes  int64         `yaml:"max_bytes"`
	MaxAge    time.Duration `yaml:"max_age"`
}

// AuditConfig is the audit log's retention. Unset (or 0) takes the default; a negative
// value lifts that bound.
type AuditConfig struct {
	MaxEntries int64         `yaml:"max_entries"`
	MaxAge     time.Duration `yaml:"max_age"`
}

// retention is the audit log's bounds as the hub takes them: 0 for none.
func (c AuditConfig) retention() service.AuditRetention {
	return service.AuditRetention{MaxEntries: max(c.MaxEntries, 0), MaxAge: max(c.MaxAge, 0)}
}

// retention is the log's bounds as the hub takes them: 0 for none.
func (c EventLogConfig) retention() events.LogRetention {
	return events.LogRetention{MaxEvents: max(c.MaxEvents, 0), MaxBytes: max(c.MaxBytes, 0), MaxAge: max(c.MaxAge, 0)}
}

// MetricsConfig is the Prometheus metrics listener.
type MetricsConfig struct {
	// Listen is host:port for GET /metrics (e.g. 127.0.0.1:9464); empty turns metrics off.
	// Anything but a loopback address requires Token.
	Listen string `yaml:"listen"`
	// Token, when set, is required as `Authorization: Bearer <token>` on every scrape. It
	// is a token of its own, not the API's: whoever scrapes reads counts (sessions, turns,
	// tokens per agent), never contents, and must not be able to drive agents.
	Token string `yaml:"token"`
}

// validate says what is wrong with the metrics settings.
func (c MetricsConfig) validate(apiToken string) error {
	if c.Listen == "" {
		if c.Token != "" {
			return errors.New("metrics: token is set but listen is not; set metrics.listen (e.g. 127.0.0.1:9464) to serve metrics, or drop the token")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("metrics: listen %q is not host:port (e.g. 127.0.0.1:9464): %w", c.Listen, err)
	}
	if c.Token == "" && !isLoopback(host) {
		return fmt.Errorf("metrics: refusing to serve metrics on %s without metrics.token: anyone who can reach that address would see how many sessions, turns and tokens each agent has; set metrics.token (and the scraper's bearer token) or listen on 127.0.0.1", c.Listen)
	}
	if c.Token != "" {
		if err := checkToken(c.Token); err != nil {
			return fmt.Errorf("metrics: refusing the token: %w; use at least %d random characters, e.g. `%s`", err, MinTokenLength, tokenCommand)
		}
		if c.Token == apiToken {
			return errors.New("metrics: token is the API's token; give metrics a token of its own, so that a scraper cannot drive agents")
		}
	}
	return nil
}

// TLSConfig names a certificate and its key (PEM files).
type TLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile (PEM), when set, asks clients for a certificate signed by it; one
	// whose subject or URI SAN is a principal's cert_subject authenticates as that
	// principal.
	ClientCAFile string `yaml:"client_ca_file"`
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
	// IdleTimeout stops a workspace's agent process that has had no open session this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ReadPaths and WritePaths are what the confined agent may read, and write, beyond its
	// workspace, a private temp dir, the system and its own installation (its login and
	// state, e.g. ~/.claude). Agents found on PATH come with theirs.
	ReadPaths  []string `yaml:"read_paths"`
	WritePaths []string `yaml:"write_paths"`
	// PolicyMode (acp only) is the permission mode for the agent's requests, the
	// vocabulary DeepChat sessions use: strict (the default: every request is asked),
	// balanced (reads run without asking) or permissive (only high-risk, critical-risk and
	// unclassified commands are asked). The old values ask, auto_allow_low,
	// auto_deny_high and auto still load, as strict, with a deprecation warning.
	PolicyMode string `yaml:"policy_mode"`
	// ImportSessions (acp only): the agent's own sessions of a workspace (ACP
	// session/list) are recorded whenever its process starts there, so that
	// ListSessions shows them and LoadSession opens them.
	ImportSessions bool `yaml:"import_sessions"`
	// Limits (acp only) override the top-level limits, key by key, for the agent's tree.
	Limits LimitsConfig `yaml:"limits"`
	// Network (acp only), when set, lets the agent's tree connect only to the listed
	// TCP ports (see NetworkConfig for what Landlock cannot restrict).
	Network *NetworkConfig `yaml:"network"`

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

// MCPServerConfig is an MCP server: a command over stdio, or a URL (streamable HTTP)
// with the headers sent on every request to it.
type MCPServerConfig struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

// Load reads a YAML config file; a leading ~ in the path or in any path setting is the
// home directory. Unknown keys are errors (a typo must not silently do nothing), with the
// known key nearest to the typo suggested. Unset settings stay empty: WithDefaults fills
// them. Errors name keys and lines in the file's own terms, never Go types.
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
	root, err := strictyaml.Decode("config "+path, data, &cfg)
	if err != nil {
		return cfg, err
	}
	if root != nil {
		cfg.agentLines = agentLines(root)
	}
	if err := cfg.expandPaths(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if cfg.File, err = filepath.Abs(expanded); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// source is where the config's agents: entries come from (AgentInfo.ConfigSource).
func (c Config) source() string {
	if c.File == "" {
		return "config (no file)"
	}
	return "config file " + c.File
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
	expand(&c.TLS.ClientCAFile)
	for i := range c.Principals {
		expand(&c.Principals[i].TokenFile)
	}
	for i := range c.Webhooks {
		expand(&c.Webhooks[i].SecretFile)
	}
	expand(&c.SessionWebhooks.SecretFile)
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
		c.WorkspaceRoots = defaultWorkspaceRoots(home)
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
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = service.DefaultHeartbeatInterval
	}
	if c.EventLog.MaxEvents == 0 {
		c.EventLog.MaxEvents = DefaultEventLogMaxEvents
	}
	if c.EventLog.MaxBytes == 0 {
		c.EventLog.MaxBytes = DefaultEventLogMaxBytes
	}
	if c.Audit.MaxEntries == 0 {
		c.Audit.MaxEntries = DefaultAuditMaxEntries
	}
	if c.Audit.MaxAge == 0 {
		c.Audit.MaxAge = DefaultAuditMaxAge
	}
	if c.EventLog.MaxAge == 0 {
		c.EventLog.MaxAge = DefaultEventLogMaxAge
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

// DefaultConfigFile is where agenticd looks for its config file when --config is not
// given: $XDG_CONFIG_HOME/agenticd/agenticd.yaml, else ~/.config/agenticd/agenticd.yaml.
// A missing file there is not an error: agenticd then runs on its defaults.
func DefaultConfigFile() (string, error) {
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
		return filepath.Join(xdg, "agenticd", "agenticd.yaml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory to look for the config file in (pass --config FILE): %w", err)
	}
	return filepath.Join(home, ".config", "agenticd", "agenticd.yaml"), nil
}

// defaultWorkspaceRoots are the home directory and, when it lies elsewhere, the directory
// agenticd was started in: someone who runs it from a project outside their home (a clone
// under /work, /srv, /tmp) means to work there. The file system root is never a default
// root, so a service manager's working directory "/" opens nothing beyond home.
func defaultWorkspaceRoots(home string) []string {
	roots := []string{home}
	cwd, err := os.Getwd()
	if err != nil || cwd == string(filepath.Separator) || within(cwd, home) {
		return roots
	}
	return append(roots, cwd)
}

// within reports whether path is dir or below it (both clean and absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func defaultDataDir() (string, error) { return localcred.DefaultDataDir() }

// Validate reports the first thing wrong with a (defaulted) config, saying what to change.
func (c Config) Validate() error {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen %q is not host:port (e.g. %s): %w", c.Listen, DefaultListen, err)
	}
	if c.Token == "" && !isLoopback(host) {
		return fmt.Errorf("refusing to listen on %s without a token: anyone who can reach that address could run agents that read, write and execute in your workspaces; set token in the config file or AGENTICD_TOKEN, or listen on 127.0.0.1", c.Listen)
	}
	if c.Token != "" {
		if err := checkToken(c.Token); err != nil {
			return fmt.Errorf("refusing the token (config token, AGENTICD_TOKEN or --token): %w; use at least %d random characters, e.g. `%s`", err, MinTokenLength, tokenCommand)
		}
	}
	if err := checkDatabase(c.Database); err != nil {
		return err
	}
	if c.Database != "" && c.Token == "" {
		return errors.New("database is set, and replicas forward calls to each other with the token they all accept: set token in the config file or AGENTICD_TOKEN, the same on every replica")
	}
	if err := c.Replica.validate(c); err != nil {
		return err
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("tls needs both cert_file and key_file")
	}
	if err := c.validatePrincipals(); err != nil {
		return err
	}
	if err := c.Metrics.validate(c.Token); err != nil {
		return err
	}
	if err := c.validateWebhooks(); err != nil {
		return err
	}
	for _, o := range c.AllowedOrigins {
		if err := service.CheckOrigin(o); err != nil {
			return fmt.Errorf("allowed_origins: %w", err)
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if _, err := sandbox.ParseConfinementMode(c.Confinement); err != nil {
		return err
	}
	if _, err := c.treeLimits(); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("log_format %q: use text or json", c.LogFormat)
	}
	if c.MaxProcs < 0 {
		return fmt.Errorf("max_procs is %d: give how many CPUs agenticd's own code may use at once, or 0 (the default) for the Go runtime's choice", c.MaxProcs)
	}
	seen := make(map[string]bool, len(c.Agents))
	for i, a := range c.Agents {
		if err := a.validate(); err != nil {
			return fmt.Errorf("%s: %w", c.agentEntry(i), err)
		}
		if err := c.validateBounds(a); err != nil {
			return fmt.Errorf("%s: %w", c.agentEntry(i), err)
		}
		if seen[a.ID] {
			return fmt.Errorf("%s: id %q is used twice; give each agent its own id", c.agentEntry(i), a.ID)
		}
		seen[a.ID] = true
	}
	return nil
}

// validate checks the replica settings, which only a Postgres database uses.
func (r ReplicaConfig) validate(c Config) error {
	if c.Database == "" && r != (ReplicaConfig{}) {
		return errors.New("replica: set only with database (a postgres:// URL the replicas share); on SQLite agenticd is one replica: remove the replica settings (or AGENTICD_REPLICA_*)")
	}
	if r.LeaseTTL < 0 || (r.LeaseTTL > 0 && r.LeaseTTL < time.Second) {
		return fmt.Errorf("replica.lease_ttl %s: use 1s or more (default %s)", r.LeaseTTL, replicas.DefaultLeaseTTL)
	}
	if r.Advertise != "" {
		if _, port, err := net.SplitHostPort(r.Advertise); err != nil || port == "" || port == "0" {
			return fmt.Errorf("replica.advertise %q is not host:port with a port (e.g. 10.0.0.7:50051), where the other replicas reach this one", r.Advertise)
		}
	}
	if c.Database != "" && c.TLS.CertFile != "" {
		// Replicas forward a session's calls to its owner in plain gRPC.
		return errors.New("tls with database set: replicas talk to each other in plain gRPC; terminate TLS in front of agenticd (a proxy or an ingress) and leave tls unset")
	}
	return nil
}

// checkDatabase accepts an empty database (SQLite in data_dir) or a postgres:// URL
// with a host and a database name.
func checkDatabase(database string) error {
	if database == "" {
		return nil
	}
	u, err := url.Parse(database)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("database: %s is not a postgres:// URL; set it to postgres://USER:PASSWORD@HOST:PORT/DATABASE, or remove it to keep the history in data_dir (SQLite)", store.RedactDSN(database))
	}
	if u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return fmt.Errorf("database: %s lacks a host or a database name; write postgres://USER:PASSWORD@HOST:PORT/DATABASE", u.Redacted())
	}
	return nil
}

// MinTokenLength is the shortest token agenticd accepts. It holds on loopback too: there
// the token is what keeps out the machine's other users and local programs, which can
// reach 127.0.0.1 as easily as agenticd's own clients, and a config that passes on
// loopback should not start failing when only the listen address changes.
const MinTokenLength = 16

// minTokenSymbols is how many different characters a token needs: "aaaaaaaaaaaaaaaa" is
// long but guessable, while 16 random hex digits have fewer than 5 different ones about
// once in two million tries.
const minTokenSymbols = 5

// tokenCommand makes a good token.
const tokenCommand = "openssl rand -hex 24"

// TrimToken drops the whitespace around a token given in AGENTICD_TOKEN or --token: such a
// token is often read from a file (an env file, a Kubernetes secret, $(cat token)) and
// ends with a newline that is no part of it. A value of nothing but whitespace is kept as
// it is, for Validate to refuse, rather than agenticd starting without the token its user
// meant to set.
func TrimToken(token string) string {
	if trimmed := strings.TrimSpace(token); trimmed != "" {
		return trimmed
	}
	return token
}

// checkToken says what makes a token unusable or guessable. A token must be printable
// ASCII without surrounding spaces, or clients could not send it: gRPC refuses other
// bytes in metadata, HTTP/2 makes a header value that starts or ends with whitespace
// malformed, and the server drops the spaces after "Bearer" (so a token of spaces alone
// would lock every client out).
func checkToken(token string) error {
	if strings.TrimSpace(token) == "" {
		return fmt.Errorf("token is %d whitespace characters and nothing else, which no client can send", len(token))
	}
	if strings.TrimSpace(token) != token {
		return errors.New("token begins or ends with whitespace (a newline from the file it was copied from?), which clients cannot send reliably; remove it")
	}
	for i, r := range token {
		if r < 0x20 || r > 0x7e {
			return fmt.Errorf("token has %q at byte %d; a client can send only printable ASCII characters in a token", r, i)
		}
	}
	if len(token) < MinTokenLength {
		return fmt.Errorf("token is %d characters, too short to resist guessing", len(token))
	}
	symbols := make(map[rune]bool)
	for _, r := range token {
		symbols[r] = true
	}
	if len(symbols) < minTokenSymbols {
		return fmt.Errorf("token is %d characters but only %d different ones, too easy to guess", len(token), len(symbols))
	}
	return nil
}

// agentEntry names the i-th agents: entry, with its line when it came from a file.
func (c Config) agentEntry(i int) string {
	if i < len(c.agentLines) && c.File != "" {
		return fmt.Sprintf("agents[%d] (line %d of %s)", i, c.agentLines[i], c.File)
	}
	return fmt.Sprintf("agents[%d]", i)
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
	if a.PolicyMode != "" {
		if a.Type != presenters.AgentTypeACP {
			return fmt.Errorf("agent %q: policy_mode applies to acp agents only; a DeepChat session's permission mode (strict, balanced, permissive) is chosen per session with its mode id: remove policy_mode", a.ID)
		}
		if _, _, err := acp.ParsePolicyMode(a.PolicyMode); err != nil {
			return fmt.Errorf("agent %q: %w", a.ID, err)
		}
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

// agentLines are the lines where the entries of the top-level agents: list start.
func agentLines(root *yaml.Node) []int {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "agents" && root.Content[i+1].Kind == yaml.SequenceNode {
			lines := make([]int, len(root.Content[i+1].Content))
			for j, item := range root.Content[i+1].Content {
				lines[j] = item.Line
			}
			return lines
		}
	}
	return nil
}

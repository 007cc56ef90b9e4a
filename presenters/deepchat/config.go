package deepchat

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// Config is one deepchat agent entry of the configuration file.
type Config struct {
	ID string // deepchat.<provider>.<name>, or deepchat.default
	// Provider names an OpenAI-compatible API: openai, openrouter, deepseek, ollama,
	// lmstudio, vllm, or any other name together with BaseURL.
	Provider  string
	BaseURL   string // e.g. https://api.openai.com/v1; empty takes the provider's default
	APIKeyEnv string // environment variable holding the API key, read at request time
	Models    []string
	// DefaultModel is used when a session names none; empty means Models[0].
	DefaultModel string
	// MaxToolRounds bounds the model calls that end in tool calls within one turn (default 25).
	MaxToolRounds int
	// CommandTimeout bounds one run_command (default 2m).
	CommandTimeout time.Duration
	// PermissionTimeout is how long a permission request waits for an answer before it
	// counts as denied (default 5m).
	PermissionTimeout time.Duration
	// ProviderIdleTimeout fails a provider call that sends nothing for this long (default 2m).
	ProviderIdleTimeout time.Duration
	// MCPServers give every session of the agent their tools; a session's own server of
	// the same name replaces one of these.
	MCPServers []presenters.MCPServer
	// Source says where this configuration came from (AgentInfo.ConfigSource).
	Source string
	// NeedsConfiguration, when set, is why the agent cannot answer and what to do about
	// it: the agent then reports needs_configuration with this reason whatever else is
	// set. The daemon uses it for an agent it could not configure from the environment.
	NeedsConfiguration string
}

// Deps are the shared services a presenter uses.
type Deps struct {
	Publisher  presenters.Publisher
	Roots      *sandbox.Roots
	Store      *store.Store
	Logger     *slog.Logger
	HTTPClient *http.Client // nil: a client of the presenter's own
}

const (
	defaultMaxToolRounds       = 25
	defaultCommandTimeout      = 2 * time.Minute
	defaultPermissionTimeout   = 5 * time.Minute
	defaultProviderIdleTimeout = 2 * time.Minute
	// commandOutputLimit is what run_command keeps of a command's output (the newest bytes).
	commandOutputLimit = 64 << 10
)

// knownProviders are the OpenAI-compatible APIs with a well-known address.
var knownProviders = map[string]struct {
	baseURL  string
	needsKey bool
}{
	"openai":     {"https://api.openai.com/v1", true},
	"openrouter": {"https://openrouter.ai/api/v1", true},
	"deepseek":   {"https://api.deepseek.com/v1", true},
	"ollama":     {"http://127.0.0.1:11434/v1", false},
	"lmstudio":   {"http://127.0.0.1:1234/v1", false},
	"vllm":       {"http://127.0.0.1:8000/v1", false},
}

// keyedHosts are hosted APIs that refuse requests without a key.
var keyedHosts = []string{"api.openai.com", "openrouter.ai", "api.deepseek.com"}

// provider is the resolved provider settings of an agent.
type provider struct {
	baseURL  string
	needsKey bool
	// missing lists the config keys to set before the agent can answer (empty: ready).
	missing []string
}

func resolveProvider(cfg Config) (provider, error) {
	var p provider
	known, isKnown := knownProviders[strings.ToLower(cfg.Provider)]
	p.baseURL = strings.TrimRight(cfg.BaseURL, "/")
	if p.baseURL == "" && isKnown {
		p.baseURL = known.baseURL
	}
	if cfg.Provider == "" && cfg.BaseURL == "" {
		p.missing = append(p.missing, "provider", "base_url")
	} else if p.baseURL == "" {
		return p, fmt.Errorf("agent %s: provider %q has no default address; set base_url", cfg.ID, cfg.Provider)
	}
	if p.baseURL != "" {
		u, err := url.Parse(p.baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p, fmt.Errorf("agent %s: base_url %q is not an http(s) URL", cfg.ID, cfg.BaseURL)
		}
		// A provider's name asks for a key only at its own address: an explicit base_url
		// (a local OpenAI-compatible server, say) needs one only on a keyed host.
		p.needsKey = isKnown && known.needsKey && cfg.BaseURL == ""
		for _, h := range keyedHosts {
			if u.Hostname() == h || strings.HasSuffix(u.Hostname(), "."+h) {
				p.needsKey = true
			}
		}
	}
	if p.needsKey && cfg.APIKeyEnv == "" {
		p.missing = append(p.missing, "api_key_env")
	}
	if len(cfg.Models) == 0 && cfg.DefaultModel == "" {
		p.missing = append(p.missing, "models")
	}
	return p, nil
}

// readiness says why the agent cannot answer now ("" when it can). It runs before every
// turn: a key is required only of a provider that refuses requests without one.
func (p *Presenter) readiness() string {
	if p.cfg.NeedsConfiguration != "" {
		return p.cfg.NeedsConfiguration
	}
	if len(p.provider.missing) > 0 {
		return fmt.Sprintf("%s has no usable LLM provider; missing settings: %s. Set them in the agents: entry with id: %s, type: deepchat "+
			"(for example provider: openai, base_url: https://api.openai.com/v1, api_key_env: OPENAI_API_KEY, models: [gpt-4o-mini]; "+
			"or provider: ollama, models: [llama3.2])",
			p.cfg.ID, strings.Join(p.provider.missing, ", "), p.cfg.ID)
	}
	if p.provider.needsKey && os.Getenv(p.cfg.APIKeyEnv) == "" {
		return fmt.Sprintf("the API key for %s is missing: %s (named by api_key_env) is not set in agenticd's environment; set it and restart agenticd", p.cfg.ID, p.cfg.APIKeyEnv)
	}
	return ""
}

func (p *Presenter) apiKey() string {
	if p.cfg.APIKeyEnv == "" {
		return ""
	}
	return os.Getenv(p.cfg.APIKeyEnv)
}

// Modes are the permission policies.
const (
	ModeStrict     = string(presenters.PermissionModeStrict)
	ModeBalanced   = string(presenters.PermissionModeBalanced)
	ModePermissive = string(presenters.PermissionModePermissive)
)

var modes = []presenters.Mode{
	{ID: ModeStrict, Name: "Strict", Description: "Every tool call asks for permission."},
	{ID: ModeBalanced, Name: "Balanced", Description: "Reading, listing and searching files run at once; writes, edits and commands ask."},
	{ID: ModePermissive, Name: "Permissive", Description: "Everything runs at once except commands classified high or critical risk, which ask."},
}

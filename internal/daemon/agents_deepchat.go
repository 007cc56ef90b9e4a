package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/deepchat"
)

// DefaultDeepChatID is the DeepChat agent that is always registered. With no agents:
// entry of that id it configures itself from the environment (defaultDeepChat).
const DefaultDeepChatID = "deepchat.default"

// The variables that configure deepchat.default when the config has no entry for it: the
// OpenAI SDKs' own, and Ollama's.
const (
	EnvOpenAIBaseURL = "OPENAI_BASE_URL"
	EnvOpenAIAPIKey  = "OPENAI_API_KEY"
	EnvOpenAIModel   = "OPENAI_MODEL"
	EnvOllamaHost    = "OLLAMA_HOST"
)

const (
	openAIBaseURL = "https://api.openai.com/v1"
	// openAIFallbackModel is offered when api.openai.com cannot list its models at start-up.
	openAIFallbackModel = "gpt-4o-mini"
	// DefaultOllamaAddr is where a local Ollama listens unless OLLAMA_HOST says otherwise.
	DefaultOllamaAddr = "127.0.0.1:11434"
	// ollamaProbeTimeout keeps start-up quick where no Ollama runs (a closed loopback port
	// is refused at once; a filtered one would wait). An OLLAMA_HOST set on purpose may be
	// another machine, so it gets modelListTimeout.
	ollamaProbeTimeout = 300 * time.Millisecond
	modelListTimeout   = 3 * time.Second
	// modelListLimit bounds a model list's body (OpenRouter's, with descriptions, is a few MiB).
	modelListLimit = 16 << 20
)

// Config sources of deepchat.default (AgentInfo.ConfigSource) besides the environment's.
const (
	sourceNotConfigured = "built-in: not configured"
	sourceOllamaPrefix  = "ollama at "
)

// notConfiguredReason keeps the words of an agent without provider settings
// (deepchat.Config) and adds the variables that would configure it.
var notConfiguredReason = DefaultDeepChatID + " has no usable LLM provider; missing settings: provider, base_url, models. " +
	"Nothing in agenticd's environment configures it: set " + EnvOpenAIAPIKey + " (OpenAI), or " + EnvOpenAIBaseURL + " and " +
	EnvOpenAIModel + " (plus " + EnvOpenAIAPIKey + " if it wants a key) for another OpenAI-compatible server, or start Ollama on " +
	DefaultOllamaAddr + " (" + EnvOllamaHost + " for another address), then restart agenticd; or add an agents: entry with id: " +
	DefaultDeepChatID + ", type: deepchat (see docs/configuration.md)"

// deepchatPresenters builds the DeepChat agents of the config, plus deepchat.default when
// the config has no entry for it.
func deepchatPresenters(ctx context.Context, cfg Config, deps Deps) ([]presenters.Presenter, error) {
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	var out []presenters.Presenter
	add := func(c deepchat.Config) error {
		p, err := deepchat.New(c, deepchat.Deps{Publisher: deps.Publisher, Roots: deps.Roots, Store: deps.Store, Logger: logger})
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	}
	for _, a := range cfg.Agents {
		if a.Type != presenters.AgentTypeDeepChat {
			continue
		}
		servers := make([]presenters.MCPServer, len(a.MCPServers))
		for i, m := range a.MCPServers {
			servers[i] = presenters.MCPServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env, URL: m.URL, Headers: m.Headers}
		}
		err := add(deepchat.Config{
			ID: a.ID, Provider: a.Provider, BaseURL: a.BaseURL, APIKeyEnv: a.APIKeyEnv,
			Models: a.Models, DefaultModel: a.DefaultModel, MaxToolRounds: a.MaxToolRounds,
			CommandTimeout: a.CommandTimeout, PermissionTimeout: a.PermissionTimeout,
			ProviderIdleTimeout: a.ProviderIdleTimeout, MCPServers: servers, Source: cfg.source(),
		})
		if err != nil {
			return out, err
		}
	}
	if !cfg.hasAgent(DefaultDeepChatID) {
		if err := add(defaultDeepChat(ctx, logger)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// defaultDeepChatSecrets are the variables deepchat.default reads its key from when the
// config has no entry for it, to be kept out of terminals as api_key_env variables are.
func defaultDeepChatSecrets(cfg Config) []string {
	if cfg.hasAgent(DefaultDeepChatID) {
		return nil
	}
	return []string{EnvOpenAIAPIKey}
}

// hasAgent reports whether the config has an agents: entry of that id.
func (c Config) hasAgent(id string) bool {
	return slices.ContainsFunc(c.Agents, func(a AgentConfig) bool { return a.ID == id })
}

// defaultDeepChat configures deepchat.default from what agenticd's environment offers, in
// this order: the OPENAI_* variables (when OPENAI_BASE_URL or OPENAI_API_KEY is set), a
// local Ollama, else nothing (the agent then says which variables to set). Start-up asks
// the server for its models only when no OPENAI_MODEL names one, with a short timeout.
func defaultDeepChat(ctx context.Context, logger *slog.Logger) deepchat.Config {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = true // nothing is left behind once start-up is done
	client := &http.Client{Transport: transport}
	defer transport.CloseIdleConnections()
	log := logger.With("agent_id", DefaultDeepChatID)

	if os.Getenv(EnvOpenAIBaseURL) != "" || os.Getenv(EnvOpenAIAPIKey) != "" {
		return openAIFromEnv(ctx, client, log)
	}
	if c, ok := ollamaFromEnv(ctx, client, log); ok {
		return c
	}
	log.Info(DefaultDeepChatID+" is not configured: no "+EnvOpenAIAPIKey+" or "+EnvOpenAIBaseURL+" and no Ollama answering",
		"ollama", ollamaAddrForLog())
	return deepchat.Config{ID: DefaultDeepChatID, Source: sourceNotConfigured, NeedsConfiguration: notConfiguredReason}
}

// openAIFromEnv is deepchat.default on the OpenAI-compatible server the OPENAI_* variables name.
func openAIFromEnv(ctx context.Context, client *http.Client, log *slog.Logger) deepchat.Config {
	var set []string
	for _, name := range []string{EnvOpenAIBaseURL, EnvOpenAIAPIKey, EnvOpenAIModel} {
		if os.Getenv(name) != "" {
			set = append(set, name)
		}
	}
	c := deepchat.Config{ID: DefaultDeepChatID, Source: "environment: " + strings.Join(set, ", ")}
	base := strings.TrimRight(os.Getenv(EnvOpenAIBaseURL), "/")
	if base == "" {
		base = openAIBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.NeedsConfiguration = fmt.Sprintf("%s %q is not an http(s) URL such as %s or http://127.0.0.1:8000/v1; fix it and restart agenticd",
			EnvOpenAIBaseURL, os.Getenv(EnvOpenAIBaseURL), openAIBaseURL)
		return c
	}
	c.Provider, c.BaseURL, c.APIKeyEnv = "openai-compatible", base, EnvOpenAIAPIKey
	isOpenAI := u.Hostname() == "api.openai.com"
	if isOpenAI {
		c.Provider = "openai"
	}
	if model := os.Getenv(EnvOpenAIModel); model != "" {
		c.Models = []string{model}
		log.Info(DefaultDeepChatID+" configured from the environment", "provider_host", u.Host, "model", model)
		return c
	}
	listCtx, cancel := context.WithTimeout(ctx, modelListTimeout)
	defer cancel()
	models, err := listOpenAIModels(listCtx, client, base, os.Getenv(EnvOpenAIAPIKey))
	switch {
	case err == nil && len(models) > 0:
		c.Models, c.DefaultModel = models, pickDefaultModel(models)
		log.Info(DefaultDeepChatID+" configured from the environment", "provider_host", u.Host,
			"models", len(models), "default_model", c.DefaultModel)
	case isOpenAI:
		c.Models = []string{openAIFallbackModel}
		log.Warn(DefaultDeepChatID+" could not list the provider's models; offering "+openAIFallbackModel+" (set "+EnvOpenAIModel+" to choose)",
			"provider_host", u.Host, "err", err)
	default:
		what := "listed no models"
		if err != nil {
			what = "did not answer with a model list (the server log says why)"
			log.Warn(DefaultDeepChatID+" could not list the provider's models", "provider_host", u.Host, "err", err)
		}
		c.NeedsConfiguration = fmt.Sprintf("%s was set up from %s, but GET /models on %s %s: set %s to the model to use and restart agenticd",
			DefaultDeepChatID, strings.Join(set, ", "), u.Host, what, EnvOpenAIModel)
	}
	return c
}

// ollamaFromEnv is deepchat.default on a local Ollama's OpenAI-compatible API, when one
// answers; ok is false when none does.
func ollamaFromEnv(ctx context.Context, client *http.Client, log *slog.Logger) (deepchat.Config, bool) {
	base, err := ollamaBaseURL(os.Getenv(EnvOllamaHost))
	if err != nil {
		log.Warn("ignoring "+EnvOllamaHost, "err", err)
		return deepchat.Config{}, false
	}
	timeout := ollamaProbeTimeout
	if os.Getenv(EnvOllamaHost) != "" {
		timeout = modelListTimeout
	}
	probeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	models, err := listOllamaModels(probeCtx, client, base)
	if err != nil {
		log.Debug("no Ollama answered", "addr", base, "err", err)
		return deepchat.Config{}, false
	}
	c := deepchat.Config{ID: DefaultDeepChatID, Source: sourceOllamaPrefix + base, Provider: "ollama", BaseURL: base + "/v1"}
	if len(models) == 0 {
		c.NeedsConfiguration = fmt.Sprintf("%s found Ollama at %s, but it has no models: pull one (ollama pull llama3.2) and restart agenticd",
			DefaultDeepChatID, base)
		log.Warn(DefaultDeepChatID+" found Ollama without models", "addr", base)
		return c, true
	}
	c.Models, c.DefaultModel = models, pickDefaultModel(models)
	log.Info(DefaultDeepChatID+" configured from a local Ollama", "addr", base, "models", len(models), "default_model", c.DefaultModel)
	return c, true
}

// ollamaBaseURL reads OLLAMA_HOST as Ollama does: host, host:port or a URL; no port means
// 11434 unless a scheme is given. A listen-everywhere host is reached on loopback.
func ollamaBaseURL(env string) (string, error) {
	if env == "" {
		return "http://" + DefaultOllamaAddr, nil
	}
	s, explicitScheme := env, strings.Contains(env, "://")
	if !explicitScheme {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%s=%q is not host:port or an http(s) URL", EnvOllamaHost, env)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if port == "" && !explicitScheme {
		port = "11434"
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return u.Scheme + "://" + host + strings.TrimRight(u.Path, "/"), nil
}

func ollamaAddrForLog() string {
	base, err := ollamaBaseURL(os.Getenv(EnvOllamaHost))
	if err != nil {
		return os.Getenv(EnvOllamaHost)
	}
	return base
}

// listOpenAIModels asks GET {base}/models (OpenAI wire format) for the model ids, in the
// server's order.
func listOpenAIModels(ctx context.Context, client *http.Client, base, key string) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	header := http.Header{}
	if key != "" {
		header.Set("Authorization", "Bearer "+key)
	}
	if err := getJSON(ctx, client, base+"/models", header, &list); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return chatModels(ids), nil
}

// listOllamaModels asks Ollama's GET /api/tags for its local models, newest first.
func listOllamaModels(ctx context.Context, client *http.Client, base string) ([]string, error) {
	var tags struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := getJSON(ctx, client, base+"/api/tags", nil, &tags); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(tags.Models))
	for _, m := range tags.Models {
		ids = append(ids, m.Name)
	}
	return chatModels(ids), nil
}

func getJSON(ctx context.Context, client *http.Client, url string, header http.Header, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", req.URL.Path, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, modelListLimit)).Decode(into); err != nil {
		return fmt.Errorf("GET %s: the answer is not the expected JSON: %w", req.URL.Path, err)
	}
	return nil
}

// notChatModel are parts of the names of models that cannot hold a chat (embeddings,
// speech, images, moderation, legacy completions), which servers list beside chat models.
var notChatModel = []string{"embed", "minilm", "whisper", "tts", "transcribe", "dall-e", "gpt-image", "moderation", "babbage", "davinci"}

// chatModels drops the models that cannot chat and duplicates, keeping the order; a list
// of nothing but such models is kept whole rather than offering none.
func chatModels(ids []string) []string {
	var out []string
	for _, id := range ids {
		lower := strings.ToLower(id)
		if id == "" || slices.Contains(out, id) || slices.ContainsFunc(notChatModel, func(s string) bool { return strings.Contains(lower, s) }) {
			continue
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		return slices.Compact(slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == "" }))
	}
	return out
}

// pickDefaultModel prefers OpenAI's small general model where the server offers it, else
// the first listed (Ollama lists the most recently pulled first).
func pickDefaultModel(models []string) string {
	if slices.Contains(models, openAIFallbackModel) {
		return openAIFallbackModel
	}
	return models[0]
}

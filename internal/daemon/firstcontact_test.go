package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// fakeLLM is a local OpenAI-compatible server (and, with tags set, an Ollama): it lists
// models and answers every chat completion with one streamed reply, recording what it
// was asked.
type fakeLLM struct {
	*httptest.Server
	models      []string // GET /v1/models; nil answers 404
	tags        []string // GET /api/tags; nil answers 404
	reply       string
	wantsKey    string // non-empty: completions without this bearer key get 401
	mu          sync.Mutex
	completions []fakeCompletion
}

type fakeCompletion struct{ auth, model string }

func newFakeLLM(t *testing.T, reply string) *fakeLLM {
	f := &fakeLLM{reply: reply}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	list := func(v any, ok bool) {
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/models":
		data := []map[string]string{}
		for _, m := range f.models {
			data = append(data, map[string]string{"id": m, "object": "model"})
		}
		list(map[string]any{"object": "list", "data": data}, f.models != nil)
	case "GET /api/tags":
		models := []map[string]string{}
		for _, m := range f.tags {
			models = append(models, map[string]string{"name": m, "model": m})
		}
		list(map[string]any{"models": models}, f.tags != nil)
	case "POST /v1/chat/completions":
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.completions = append(f.completions, fakeCompletion{auth: r.Header.Get("Authorization"), model: req.Model})
		f.mu.Unlock()
		if f.wantsKey != "" && r.Header.Get("Authorization") != "Bearer "+f.wantsKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []map[string]any{
			{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": f.reply}}}},
			{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}},
		} {
			b, _ := json.Marshal(chunk)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeLLM) asked() []fakeCompletion {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.completions)
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// setEnv sets the variables that configure deepchat.default, "" unsetting one for the test.
func setEnv(t *testing.T, vars map[string]string) {
	for _, name := range []string{EnvOpenAIBaseURL, EnvOpenAIAPIKey, EnvOpenAIModel, EnvOllamaHost} {
		t.Setenv(name, vars[name])
		if vars[name] == "" {
			_ = os.Unsetenv(name) // t.Setenv restores it
		}
	}
}

// running is a started daemon and a client of it.
type running struct {
	client pb.AgenticServiceClient
	roots  []string
}

func startDaemon(t *testing.T, cfg Config) running {
	t.Helper()
	srv, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Addr(), clientOptions(srv)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		if err := srv.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return running{client: pb.NewAgenticServiceClient(conn), roots: cfg.WorkspaceRoots}
}

func (r running) agent(t *testing.T, id string) *pb.AgentInfo {
	t.Helper()
	resp, err := r.client.ListAgents(context.Background(), &pb.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range resp.GetAgents() {
		if a.GetAgentId() == id {
			return a
		}
	}
	t.Fatalf("no agent %s in %v", id, resp.GetAgents())
	return nil
}

// turn opens a session of the agent, sends text and returns the session and the reply's
// text as subscribers saw it.
func (r running) turn(t *testing.T, agentID, text string) (*pb.SessionInfo, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := r.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: agentID, Config: &pb.SessionConfig{Workspace: r.roots[0]}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	session := created.GetSession()
	stream, err := r.client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{session.GetSessionId()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	sent, err := r.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: session.GetSessionId(), Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: text}}}}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	var reply strings.Builder
	for {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for the reply (%q so far): %v", reply.String(), err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if d := ev.GetMessageDelta(); d.GetMessageId() == sent.GetMessageId() {
				reply.WriteString(d.GetText())
			}
			if ev.GetError() != nil {
				t.Errorf("error event: %v", ev.GetError())
			}
			if ev.GetMessageEnd().GetMessageId() == sent.GetMessageId() {
				return session, reply.String()
			}
		}
	}
}

// With only OPENAI_BASE_URL and OPENAI_API_KEY set, deepchat.default answers a first
// turn: its models are what the server lists (chat models only), the key goes with
// every request, and ListAgents says the environment configured it.
func TestDefaultDeepChatFromOpenAIEnvironment(t *testing.T) {
	llm := newFakeLLM(t, "hello from the fake")
	llm.models = []string{"text-embedding-3-small", "model-a", "model-b"}
	llm.wantsKey = "sk-test"
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1", EnvOpenAIAPIKey: "sk-test", EnvOllamaHost: closedAddr(t)})
	d := startDaemon(t, testConfig(t))

	a := d.agent(t, DefaultDeepChatID)
	if a.GetStatus() != pb.AgentStatus_AGENT_STATUS_READY || a.GetConfigSource() != "environment: OPENAI_BASE_URL, OPENAI_API_KEY" {
		t.Fatalf("deepchat.default = %v", a)
	}
	session, reply := d.turn(t, DefaultDeepChatID, "hi")
	if reply != "hello from the fake" {
		t.Errorf("reply %q", reply)
	}
	var models []string
	for _, m := range session.GetAvailableModels() {
		models = append(models, m.GetId())
	}
	if strings.Join(models, ",") != "model-a,model-b" || session.GetCurrentModelId() != "model-a" {
		t.Errorf("models %v, current %q; want the chat models the server listed, the first by default", models, session.GetCurrentModelId())
	}
	if asked := llm.asked(); len(asked) != 1 || asked[0].auth != "Bearer sk-test" || asked[0].model != "model-a" {
		t.Errorf("the provider was asked %+v", asked)
	}
}

// A local OpenAI-compatible server needs no key: OPENAI_BASE_URL and OPENAI_MODEL alone
// make a turn, and no Authorization header is sent.
func TestDefaultDeepChatFromBaseURLAndModelWithoutKey(t *testing.T) {
	llm := newFakeLLM(t, "no key needed")
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1/", EnvOpenAIModel: "local-model", EnvOllamaHost: closedAddr(t)})
	d := startDaemon(t, testConfig(t))

	if a := d.agent(t, DefaultDeepChatID); a.GetStatus() != pb.AgentStatus_AGENT_STATUS_READY ||
		a.GetConfigSource() != "environment: OPENAI_BASE_URL, OPENAI_MODEL" {
		t.Fatalf("deepchat.default = %v", a)
	}
	if _, reply := d.turn(t, DefaultDeepChatID, "hi"); reply != "no key needed" {
		t.Errorf("reply %q", reply)
	}
	if asked := llm.asked(); len(asked) != 1 || asked[0].auth != "" || asked[0].model != "local-model" {
		t.Errorf("the provider was asked %+v; want local-model and no Authorization header", asked)
	}
}

// Without OPENAI_* variables, a local Ollama configures deepchat.default with the models
// it has pulled (embedding models left out), through its OpenAI-compatible API.
func TestDefaultDeepChatFromOllama(t *testing.T) {
	ollama := newFakeLLM(t, "hello from ollama")
	ollama.tags = []string{"qwen2.5-coder:7b", "nomic-embed-text:latest", "llama3.2:latest"}
	setEnv(t, map[string]string{EnvOllamaHost: strings.TrimPrefix(ollama.URL, "http://")})
	d := startDaemon(t, testConfig(t))

	if a := d.agent(t, DefaultDeepChatID); a.GetStatus() != pb.AgentStatus_AGENT_STATUS_READY ||
		a.GetConfigSource() != "ollama at "+ollama.URL {
		t.Fatalf("deepchat.default = %v", a)
	}
	session, reply := d.turn(t, DefaultDeepChatID, "hi")
	if reply != "hello from ollama" {
		t.Errorf("reply %q", reply)
	}
	if got := len(session.GetAvailableModels()); got != 2 || session.GetCurrentModelId() != "qwen2.5-coder:7b" {
		t.Errorf("models %v, current %q", session.GetAvailableModels(), session.GetCurrentModelId())
	}
}

// With nothing to use, deepchat.default says which variables or config entry would
// configure it.
func TestDefaultDeepChatNotConfigured(t *testing.T) {
	setEnv(t, map[string]string{EnvOllamaHost: closedAddr(t)})
	d := startDaemon(t, testConfig(t))
	a := d.agent(t, DefaultDeepChatID)
	if a.GetStatus() != pb.AgentStatus_AGENT_STATUS_NEEDS_CONFIGURATION || a.GetConfigSource() != "built-in: not configured" {
		t.Fatalf("deepchat.default = %v", a)
	}
	for _, want := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "Ollama", "OLLAMA_HOST", "agents: entry with id: deepchat.default"} {
		if !strings.Contains(a.GetStatusReason(), want) {
			t.Errorf("the reason does not mention %s: %s", want, a.GetStatusReason())
		}
	}
}

// The config's own deepchat.default wins over the environment, and its source is the file.
func TestConfigEntryWinsOverTheEnvironment(t *testing.T) {
	fromEnv, fromFile := newFakeLLM(t, "from the environment"), newFakeLLM(t, "from the file")
	setEnv(t, map[string]string{EnvOpenAIBaseURL: fromEnv.URL + "/v1", EnvOpenAIModel: "m"})
	path := writeFile(t, fmt.Sprintf("agents:\n  - id: deepchat.default\n    type: deepchat\n    provider: openai\n    base_url: %s/v1\n    models: [m]\n", fromFile.URL))
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir, cfg.WorkspaceRoots = "127.0.0.1:0", t.TempDir(), []string{t.TempDir()}
	d := startDaemon(t, cfg)
	// provider: openai with a base_url of its own needs no key there.
	if a := d.agent(t, DefaultDeepChatID); a.GetStatus() != pb.AgentStatus_AGENT_STATUS_READY || a.GetConfigSource() != "config file "+path {
		t.Fatalf("deepchat.default = %v", a)
	}
	if _, reply := d.turn(t, DefaultDeepChatID, "hi"); reply != "from the file" {
		t.Errorf("reply %q", reply)
	}
}

// A server that cannot list its models leaves deepchat.default asking for OPENAI_MODEL;
// api.openai.com falls back to gpt-4o-mini; a model list that fails leaves start-up going.
func TestOpenAIEnvironmentWithoutModels(t *testing.T) {
	ctx := context.Background()
	llm := newFakeLLM(t, "unused") // models nil: GET /v1/models is 404
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1"})
	c := openAIFromEnv(ctx, http.DefaultClient, quiet)
	if !strings.Contains(c.NeedsConfiguration, "set OPENAI_MODEL") || len(c.Models) != 0 {
		t.Errorf("a server without a model list: %+v", c)
	}
	llm.models = []string{}
	if c := openAIFromEnv(ctx, http.DefaultClient, quiet); !strings.Contains(c.NeedsConfiguration, "listed no models") {
		t.Errorf("a server listing no models: %+v", c)
	}

	setEnv(t, map[string]string{EnvOpenAIAPIKey: "sk-test"})
	offline := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("no network in tests")
	})}
	c = openAIFromEnv(ctx, offline, quiet)
	if c.NeedsConfiguration != "" || c.BaseURL != "https://api.openai.com/v1" || c.Provider != "openai" ||
		strings.Join(c.Models, ",") != "gpt-4o-mini" || c.APIKeyEnv != EnvOpenAIAPIKey || c.Source != "environment: OPENAI_API_KEY" {
		t.Errorf("OPENAI_API_KEY alone, api.openai.com unreachable: %+v", c)
	}

	setEnv(t, map[string]string{EnvOpenAIBaseURL: "localhost:8000"})
	if c := openAIFromEnv(ctx, offline, quiet); !strings.Contains(c.NeedsConfiguration, `OPENAI_BASE_URL "localhost:8000" is not an http(s) URL`) || c.BaseURL != "" {
		t.Errorf("a base URL without a scheme: %+v", c)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An Ollama without models says to pull one; a bad OLLAMA_HOST is passed over.
func TestOllamaEdges(t *testing.T) {
	ollama := newFakeLLM(t, "unused")
	ollama.tags = []string{}
	setEnv(t, map[string]string{EnvOllamaHost: ollama.URL})
	c, ok := ollamaFromEnv(context.Background(), http.DefaultClient, quiet)
	if !ok || !strings.Contains(c.NeedsConfiguration, "ollama pull") {
		t.Errorf("an Ollama without models: %v, %+v", ok, c)
	}
	setEnv(t, map[string]string{EnvOllamaHost: "ftp://x"})
	if _, ok := ollamaFromEnv(context.Background(), http.DefaultClient, quiet); ok {
		t.Error("an OLLAMA_HOST that is no address was used")
	}
}

func TestOllamaBaseURL(t *testing.T) {
	for env, want := range map[string]string{
		"":                        "http://127.0.0.1:11434",
		"127.0.0.1:11500":         "http://127.0.0.1:11500",
		"0.0.0.0":                 "http://127.0.0.1:11434",
		"gpu-box":                 "http://gpu-box:11434",
		"[::1]:11434":             "http://[::1]:11434",
		"https://ollama.example/": "https://ollama.example",
		"http://10.1.2.3:8080":    "http://10.1.2.3:8080",
	} {
		if got, err := ollamaBaseURL(env); err != nil || got != want {
			t.Errorf("OLLAMA_HOST=%q: %q, %v; want %q", env, got, err, want)
		}
	}
	if _, err := ollamaBaseURL("ftp://x"); err == nil {
		t.Error("ftp:// accepted")
	}
}

func TestChatModelsAndDefault(t *testing.T) {
	got := chatModels([]string{"whisper-1", "gpt-4o", "text-embedding-3-large", "gpt-4o-mini", "gpt-4o", "dall-e-3", "tts-1"})
	if strings.Join(got, ",") != "gpt-4o,gpt-4o-mini" || pickDefaultModel(got) != "gpt-4o-mini" {
		t.Errorf("chat models %v, default %q", got, pickDefaultModel(got))
	}
	if got := chatModels([]string{"nomic-embed-text"}); strings.Join(got, ",") != "nomic-embed-text" {
		t.Errorf("a list of only embedding models became %v; keep it rather than offer none", got)
	}
}

// The key deepchat.default reads from the environment stays out of terminals, as every
// api_key_env variable does, unless the config gives deepchat.default its own entry.
func TestDefaultDeepChatSecrets(t *testing.T) {
	if got := defaultDeepChatSecrets(Config{}); strings.Join(got, ",") != EnvOpenAIAPIKey {
		t.Errorf("without an entry: %v", got)
	}
	cfg := Config{Agents: []AgentConfig{{ID: DefaultDeepChatID, Type: presenters.AgentTypeDeepChat}}}
	if got := defaultDeepChatSecrets(cfg); len(got) != 0 {
		t.Errorf("with an entry: %v", got)
	}
}

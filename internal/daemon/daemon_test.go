package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox/confine"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/store"
)

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	// deepchat.default configures itself from these; the tests that want them set them.
	for _, name := range []string{EnvOpenAIBaseURL, EnvOpenAIAPIKey, EnvOpenAIModel} {
		_ = os.Unsetenv(name)
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agenticd.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFullConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	path := writeFile(t, `
listen: 127.0.0.1:6000
data_dir: ~/data
token: abc-0123456789abcdef
tls: {cert_file: ~/c.pem, key_file: /k.pem}
workspace_roots: [~/src, /srv/work]
shutdown_timeout: 3s
event_buffer: 500
subscriber_queue: 64
log_level: debug
log_format: json
agents:
  - id: acp.anthropic.claude
    type: acp
    command: claude-agent-acp
    args: [--verbose]
    env: {IS_SANDBOX: "1"}
    auth_method: api-key
    permission_timeout: 5m
    startup_timeout: 45s
    policy_mode: balanced
  - id: deepchat.openai.gpt
    type: deepchat
    provider: openai
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
    models: [gpt-4o-mini, gpt-4o]
    default_model: gpt-4o-mini
    max_tool_rounds: 12
    command_timeout: 90s
    provider_idle_timeout: 1m
    mcp_servers:
      - {name: files, command: mcp-files, args: [--root, /srv]}
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:6000" || cfg.DataDir != filepath.Join(home, "data") || cfg.Token != "abc-0123456789abcdef" ||
		cfg.TLS.CertFile != filepath.Join(home, "c.pem") || cfg.TLS.KeyFile != "/k.pem" ||
		strings.Join(cfg.WorkspaceRoots, ",") != filepath.Join(home, "src")+",/srv/work" ||
		cfg.ShutdownTimeout != 3*time.Second || cfg.EventBuffer != 500 || cfg.SubscriberQueue != 64 ||
		cfg.LogLevel != "debug" || cfg.LogFormat != "json" {
		t.Errorf("config = %+v", cfg)
	}
	if len(cfg.Agents) != 2 {
		t.Fatalf("agents = %+v", cfg.Agents)
	}
	acp, dc := cfg.Agents[0], cfg.Agents[1]
	if acp.ID != "acp.anthropic.claude" || acp.Type != presenters.AgentTypeACP || acp.Command != "claude-agent-acp" || acp.Args[0] != "--verbose" ||
		acp.Env["IS_SANDBOX"] != "1" || acp.AuthMethod != "api-key" || acp.PermissionTimeout != 5*time.Minute ||
		acp.StartupTimeout != 45*time.Second || acp.PolicyMode != "balanced" {
		t.Errorf("acp agent = %+v", acp)
	}
	if dc.Provider != "openai" || dc.BaseURL != "https://api.openai.com/v1" || dc.APIKeyEnv != "OPENAI_API_KEY" ||
		strings.Join(dc.Models, ",") != "gpt-4o-mini,gpt-4o" || dc.DefaultModel != "gpt-4o-mini" || dc.MaxToolRounds != 12 ||
		dc.CommandTimeout != 90*time.Second || dc.ProviderIdleTimeout != time.Minute ||
		dc.MCPServers[0].Name != "files" || dc.MCPServers[0].Args[1] != "/srv" {
		t.Errorf("deepchat agent = %+v", dc)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.File != path {
		t.Errorf("File = %q, want %q", cfg.File, path)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(writeFile(t, "listen: 127.0.0.1:1\nworkspace_root: [/tmp]\n"))
	if err == nil || !strings.Contains(err.Error(), "workspace_root") {
		t.Errorf("a misspelt key: %v, want an error naming it", err)
	}
	_, err = Load(writeFile(t, "agents:\n  - id: acp.x.y\n    permission_timeout: soon\n"))
	if err == nil {
		t.Error("a bad duration was accepted")
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file was accepted")
	}
	cfg, err := Load(writeFile(t, ""))
	if err != nil || cfg.Listen != "" {
		t.Errorf("an empty file: %+v, %v; want an empty config", cfg, err)
	}
}

func TestDefaults(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	t.Chdir(home)
	cfg, err := Config{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != DefaultListen || cfg.DataDir != filepath.Join(home, ".local", "share", "agenticd") ||
		len(cfg.WorkspaceRoots) != 1 || cfg.WorkspaceRoots[0] != home || cfg.ShutdownTimeout != DefaultShutdownTimeout ||
		cfg.EventBuffer != DefaultEventBuffer || cfg.SubscriberQueue != DefaultSubscriberQueue || cfg.HeartbeatInterval != service.DefaultHeartbeatInterval || cfg.LogLevel != "info" || cfg.LogFormat != "text" {
		t.Errorf("defaults = %+v", cfg)
	}
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "xdg"))
	if cfg, _ := (Config{}).WithDefaults(); cfg.DataDir != filepath.Join(home, "xdg", "agenticd") {
		t.Errorf("with XDG_DATA_HOME the data dir is %s", cfg.DataDir)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestValidate(t *testing.T) {
	base := func() Config {
		c, err := Config{DataDir: "/d", WorkspaceRoots: []string{"/w"}}.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ok := map[string]func(*Config){
		"loopback v4":         func(c *Config) { c.Listen = "127.0.0.1:0" },
		"loopback v6":         func(c *Config) { c.Listen = "[::1]:0" },
		"localhost":           func(c *Config) { c.Listen = "localhost:0" },
		"anywhere with token": func(c *Config) { c.Listen = "0.0.0.0:50051"; c.Token = "t-0123456789abcdef" },
		"tls":                 func(c *Config) { c.TLS = TLSConfig{CertFile: "c", KeyFile: "k"} },
		"allowed origins":     func(c *Config) { c.AllowedOrigins = []string{"https://app.example.com", "http://localhost:5173"} },
	}
	for name, change := range ok {
		c := base()
		change(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]struct {
		change func(*Config)
		says   string
	}{
		"every interface, no token": {func(c *Config) { c.Listen = ":50051" }, "without a token"},
		"public address, no token":  {func(c *Config) { c.Listen = "0.0.0.0:50051" }, "AGENTICD_TOKEN"},
		"tls is no token":           {func(c *Config) { c.Listen = "10.0.0.1:1"; c.TLS = TLSConfig{CertFile: "c", KeyFile: "k"} }, "without a token"},
		"not host:port":             {func(c *Config) { c.Listen = "50051" }, "host:port"},
		"half tls":                  {func(c *Config) { c.TLS.CertFile = "c" }, "key_file"},
		"any origin":                {func(c *Config) { c.AllowedOrigins = []string{"*"} }, "allowed_origins"},
		"origin with a path":        {func(c *Config) { c.AllowedOrigins = []string{"https://a.example/app"} }, "scheme, a host and an optional port"},
		"log level":                 {func(c *Config) { c.LogLevel = "loud" }, "log_level"},
		"log format":                {func(c *Config) { c.LogFormat = "xml" }, "log_format"},
		"max procs":                 {func(c *Config) { c.MaxProcs = -1 }, "max_procs is -1"},
		"agent type":                {func(c *Config) { c.Agents = []AgentConfig{{ID: "x.y", Type: "x"}} }, "unknown type"},
		"agent no type":             {func(c *Config) { c.Agents = []AgentConfig{{ID: "acp.y"}} }, "type is required"},
		"agent no id":               {func(c *Config) { c.Agents = []AgentConfig{{Type: "deepchat"}} }, "id is required"},
		"agent id prefix":           {func(c *Config) { c.Agents = []AgentConfig{{ID: "deepchat.x", Type: "acp", Command: "a"}} }, "acp.<provider>.<name>"},
		"acp without command":       {func(c *Config) { c.Agents = []AgentConfig{{ID: "acp.x.y", Type: "acp"}} }, "command is required"},
		"acp policy_mode": {func(c *Config) {
			c.Agents = []AgentConfig{{ID: "acp.x.y", Type: "acp", Command: "a", PolicyMode: "yolo"}}
		}, `policy_mode "yolo" is not one of strict`},
		"deepchat policy_mode": {func(c *Config) {
			c.Agents = []AgentConfig{{ID: "deepchat.x", Type: "deepchat", PolicyMode: "strict"}}
		}, "acp agents only"},
		"duplicate ids": {func(c *Config) {
			c.Agents = []AgentConfig{{ID: "deepchat.a", Type: "deepchat"}, {ID: "deepchat.a", Type: "deepchat"}}
		}, "used twice"},
	}
	for name, c := range bad {
		cfg := base()
		c.change(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.says)
		}
	}
}

func testConfig(t *testing.T) Config {
	return Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), WorkspaceRoots: []string{t.TempDir()}}
}

func TestStartServesAndStops(t *testing.T) {
	cfg := testConfig(t)
	srv, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Addr(), clientOptions(srv)...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	health := healthpb.NewHealthClient(conn)
	resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", resp, err)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-srv.Done()
	if err := srv.Stop(context.Background()); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	// The data dir is free again: a new server opens the same database.
	again, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	if err := again.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Start-up marks the replies a crash left in progress as incomplete, whichever agent's
// (here one no longer configured), and ends them in the event log, before any agent serves.
func TestStartMarksInterruptedReplies(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(cfg.DataDir, DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateConversation(ctx, store.Conversation{ID: "s1", AgentID: "acp.gone.agent", Workspace: "/w"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveMessage(ctx, presenters.Message{ID: "a1", SessionID: "s1", Role: presenters.RoleAssistant, Status: store.StatusInProgress,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "half"}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	warned := &lineWatch{want: "kept as incomplete", seen: make(chan struct{})}
	srv, err := Start(ctx, cfg, slog.New(slog.NewTextHandler(warned, nil)))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-warned.seen:
	default:
		t.Error("start-up did not warn about the interrupted reply")
	}
	// Before anything serves, the log holds the reply's end, for a subscriber resuming
	// from the last event it saw.
	logged, err := srv.store.MessageEvents(ctx, "s1", "a1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, le := range logged {
		var ev pb.AgenticEvent
		if err := proto.Unmarshal(le.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetAgentId() != "acp.gone.agent" {
			t.Errorf("event %d has agent id %q, want acp.gone.agent", ev.GetSequence(), ev.GetAgentId())
		}
		switch {
		case ev.GetError() != nil:
			got = append(got, "error "+ev.GetError().GetReason().String())
		case ev.GetMessageEnd() != nil:
			got = append(got, "end "+ev.GetMessageEnd().GetStopReason().String())
		}
	}
	if want := []string{"error ERROR_REASON_SERVER_RESTARTED", "end STOP_REASON_INTERRUPTED"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the interrupted reply's logged events: %q, want %q", got, want)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(ctx, filepath.Join(cfg.DataDir, DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if marked, err := st.MarkInterrupted(ctx); err != nil || len(marked) != 0 {
		t.Errorf("replies still in progress after start-up: %+v (%v); want none", marked, err)
	}
}

func TestStartRefusals(t *testing.T) {
	cfg := testConfig(t)
	cfg.Listen = "0.0.0.0:0"
	if _, err := Start(context.Background(), cfg, quiet); err == nil || !strings.Contains(err.Error(), "refusing to listen on 0.0.0.0:0 without a token") {
		t.Errorf("non-loopback without a token: %v", err)
	}
	cfg = testConfig(t)
	cfg.WorkspaceRoots = []string{filepath.Join(t.TempDir(), "missing")}
	if _, err := Start(context.Background(), cfg, quiet); err == nil || !strings.Contains(err.Error(), "workspace_roots") {
		t.Errorf("a missing workspace root: %v", err)
	}
	// The address is taken: the error says so, and nothing is left running (goleak).
	first, err := Start(context.Background(), testConfig(t), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Stop(context.Background()) }()
	cfg = testConfig(t)
	cfg.Listen = first.Addr()
	if _, err := Start(context.Background(), cfg, quiet); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("a taken address: %v", err)
	}
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	serving := &lineWatch{want: "agenticd serving", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, testConfig(t), slog.New(slog.NewTextHandler(serving, nil))) }()
	<-serving.seen
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// lineWatch closes seen when a log line containing want is written.
type lineWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	logger, err := NewLogger(&b, Config{LogLevel: "warn", LogFormat: "json"})
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("hidden")
	logger.Warn("shown", "session_id", "s1")
	if out := b.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"session_id":"s1"`) {
		t.Errorf("log output %q", out)
	}
}

// Sessions get neither the agents' API keys in their terminals nor a way to agenticd's
// own files, whatever the workspace roots.
func TestSandboxOptionsHideTheServersSecrets(t *testing.T) {
	cfg := Config{
		DataDir: "/data", File: "/etc/agenticd.yaml", TLS: TLSConfig{CertFile: "/tls/cert.pem", KeyFile: "/tls/key.pem"},
		Agents: []AgentConfig{
			{ID: "deepchat.openai.gpt", Type: presenters.AgentTypeDeepChat, APIKeyEnv: "OPENAI_API_KEY"},
			{ID: "deepchat.local.llama", Type: presenters.AgentTypeDeepChat},
			{ID: "deepchat.ds.chat", Type: presenters.AgentTypeDeepChat, APIKeyEnv: "DEEPSEEK_API_KEY"},
		},
	}
	opts := sandboxOptions(cfg)
	// The configured keys, then those of every agent agenticd knows (found on PATH or not).
	if got := strings.Join(opts.HiddenEnv, " "); !strings.HasPrefix(got, "OPENAI_API_KEY DEEPSEEK_API_KEY ") ||
		!strings.Contains(got, "ANTHROPIC_API_KEY") || !strings.Contains(got, "GEMINI_API_KEY") || strings.Count(got, "OPENAI_API_KEY") != 1 {
		t.Errorf("hidden variables %q", got)
	}
	if got := strings.Join(opts.Excluded, " "); got != "/data /etc/agenticd.yaml /tls/key.pem" {
		t.Errorf("excluded paths %q", got)
	}
	// deepchat.default configured from the environment reads OPENAI_API_KEY.
	if got := strings.Join(sandboxOptions(Config{}).HiddenEnv, " "); !strings.HasPrefix(got, "OPENAI_API_KEY ") || !strings.Contains(got, "CLAUDE_CODE_OAUTH_TOKEN") {
		t.Errorf("hidden variables without agents: entries %q, want OPENAI_API_KEY and the known agents' keys", got)
	}
}

// closingAgent is an agent whose Close writes to the store (as a cancelled turn saves
// its last message) and records the context it got. Only AgentID and Close are called.
type closingAgent struct {
	presenters.Presenter
	store     *store.Store
	sessionID string
	ctxErr    error
	writeErr  error
}

func (a *closingAgent) AgentID() string { return "deepchat.closing" }

func (a *closingAgent) Close(ctx context.Context) error {
	a.ctxErr = ctx.Err()
	a.writeErr = a.store.CreateConversation(ctx, store.Conversation{ID: a.sessionID, AgentID: a.AgentID()})
	return nil
}

// The agents close with a budget of their own, even when the graceful stop used up its
// deadline, and the database closes only after them.
func TestAgentsCloseOnTheirOwnBudgetBeforeTheDatabase(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	agents := []*closingAgent{{store: st, sessionID: "s1"}, {store: st, sessionID: "s2"}}
	s := &Server{cfg: Config{ShutdownTimeout: time.Minute}, logger: quiet, store: st}
	for _, a := range agents {
		s.presenters = append(s.presenters, a)
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel() // the graceful stop's deadline has passed
	if err := s.release(expired); err != nil {
		t.Fatal(err)
	}
	for i, a := range agents {
		if a.ctxErr != nil || a.writeErr != nil {
			t.Errorf("agent %d closed with context %v; its write: %v", i, a.ctxErr, a.writeErr)
		}
	}
	if _, err := st.GetConversation(context.Background(), "s1"); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Errorf("the database is still open after release: reading it gave %v", err)
	}
}

// event_log: takes its defaults where unset, and a negative bound lifts it.
func TestEventLogConfig(t *testing.T) {
	cfg, err := Load(writeFile(t, "event_log: {max_events: 500, max_bytes: -1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithDefaults(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.EventLog.retention(); got != (events.LogRetention{MaxEvents: 500, MaxAge: DefaultEventLogMaxAge}) {
		t.Errorf("retention = %+v; want 500 events, no bytes bound, the default age", got)
	}
	cfg, _ = Config{DataDir: "/d", WorkspaceRoots: []string{"/w"}}.WithDefaults()
	if got := cfg.EventLog.retention(); got != (events.LogRetention{MaxEvents: 1_000_000, MaxBytes: 1 << 30, MaxAge: 168 * time.Hour}) {
		t.Errorf("default retention = %+v", got)
	}
	if _, err := Load(writeFile(t, "event_log: {max_event: 5}\n")); err == nil || !strings.Contains(err.Error(), "max_events") {
		t.Errorf("a typo in event_log: %v, want the key suggested", err)
	}
}

// The server keeps its events in the database's log, applies the configured retention at
// start, and resumes a subscriber from the log across a restart; a point retention took
// is OUT_OF_RANGE with the log's oldest.
func TestEventLogServesResumeAfterRestart(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(cfg.DataDir, DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	// What an earlier run logged: 20 events of agent a.
	var logged []store.LoggedEvent
	for seq := uint64(1); seq <= 20; seq++ {
		data, err := proto.Marshal(&pb.AgenticEvent{Sequence: seq, AgentId: "acp.test.agent", Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_AGENT_STATUS_CHANGED})
		if err != nil {
			t.Fatal(err)
		}
		logged = append(logged, store.LoggedEvent{Sequence: seq, AgentID: "acp.test.agent", Type: int(presenters.EventAgentStatusChanged), Time: time.Now(), Data: data})
	}
	if err := st.AppendEvents(ctx, logged); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSequenceFloor(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.EventLog.MaxEvents = 5
	srv, err := Start(ctx, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop(ctx) }()
	conn, err := grpc.NewClient(srv.Addr(), clientOptions(srv)...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := pb.NewAgenticServiceClient(conn)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := client.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if info.GetOldestSequence() == 16 && info.GetNewestSequence() >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held range %d..%d; want it to start at 16, the oldest of the 5 events retention keeps", info.GetOldestSequence(), info.GetNewestSequence())
		}
	}
	streamCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := client.Subscribe(streamCtx, &pb.SubscribeRequest{Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: 17}})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for len(got) < 3 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		for _, ev := range resp.GetEvents().GetEvents() {
			got = append(got, ev.GetSequence())
		}
	}
	if got[0] != 18 || got[1] != 19 || got[2] != 20 {
		t.Errorf("resumed after 17: %v, want 18 19 20 from the log", got)
	}
	cancel()
	expired, err := client.Subscribe(ctx, &pb.SubscribeRequest{Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: 10}})
	if err == nil {
		_, err = expired.Recv()
	}
	st2, _ := status.FromError(err)
	var reason string
	for _, d := range st2.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason() + " oldest " + info.GetMetadata()["oldest_sequence"]
		}
	}
	if st2.Code() != codes.OutOfRange || reason != "RESUME_POINT_EXPIRED oldest 16" || !strings.Contains(st2.Message(), "GetSession") {
		t.Errorf("resume after a point retention took: %v (%s), want OUT_OF_RANGE RESUME_POINT_EXPIRED with oldest 16 and how to rebuild", err, reason)
	}
}

// Command testagent is a scripted ACP agent built with acp-go-sdk, for agenticd's tests
// and benchmarks. A JSON script (-script FILE or TESTAGENT_SCRIPT) says what each
// prompt does: session updates of every kind, permission requests, fs and terminal
// calls, sleeps, crashes, floods; see Script and testdata/demo.json. With no script and
// -flood-count N (TESTAGENT_FLOOD_COUNT; -flood-size / TESTAGENT_FLOOD_SIZE, default 64)
// every prompt streams N chunks of that many bytes without pause.
//
// Paths and commands in a script may use {cwd}: the session's working directory.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/acpmodels"
)

func main() {
	scriptPath := flag.String("script", os.Getenv("TESTAGENT_SCRIPT"), "JSON script file (env TESTAGENT_SCRIPT)")
	floodCount := flag.Int("flood-count", 0, "without a script: every prompt streams this many chunks (env TESTAGENT_FLOOD_COUNT)")
	floodSize := flag.Int("flood-size", 0, "bytes per flood chunk, default 64 (env TESTAGENT_FLOOD_SIZE)")
	flag.Parse()
	if *floodCount > 0 {
		os.Setenv("TESTAGENT_FLOOD_COUNT", strconv.Itoa(*floodCount))
	}
	if *floodSize > 0 {
		os.Setenv("TESTAGENT_FLOOD_SIZE", strconv.Itoa(*floodSize))
	}
	log.SetPrefix("testagent: ")
	log.SetFlags(0)

	script, err := loadScript(*scriptPath)
	if err != nil {
		log.Fatal(err)
	}
	out := &lineWriter{w: os.Stdout}
	a := &agent{script: script, out: out, sessions: map[sdk.SessionId]*session{}, deleted: map[sdk.SessionId]bool{}}
	a.conn = sdk.NewAgentSideConnection(a, out, &legacyReader{src: bufio.NewReader(os.Stdin), a: a})
	<-a.conn.Done()
}

// lineWriter serializes whole-line writes of the SDK and of raw steps, gives answers
// their old `models` (legacy.go) and elicitations their scope (elicit.go).
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(withElicitationScope(acpmodels.MoveFromMeta(p, legacyMetaKey))); err != nil {
		return 0, err
	}
	return len(p), nil
}

type session struct {
	id      sdk.SessionId
	cwd     string
	prompts int

	mu      sync.Mutex
	cancel  context.CancelFunc // of the running turn
	modeID  string
	modelID string
	configs []sdk.SessionConfigOption
	// What session/new, load or resume brought: reported by the echoSetup step.
	mcpServers []sdk.McpServer
	dirs       []string
	canceled   chan struct{} // closed by session/cancel during a turn
	// steered carries the prompts of _session/steering requests to the running turn.
	steered chan []sdk.ContentBlock
}

type agent struct {
	script Script
	out    *lineWriter
	conn   *sdk.AgentSideConnection

	mu            sync.Mutex
	sessions      map[sdk.SessionId]*session
	nextID        int
	authenticated bool
	deleted       map[sdk.SessionId]bool // by session/delete: no longer listed
}

var (
	_ sdk.Agent       = (*agent)(nil)
	_ sdk.AgentLoader = (*agent)(nil)
)

func (a *agent) Initialize(ctx context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	spec := a.script.Agent
	if spec.CrashOnStart != 0 {
		os.Exit(spec.CrashOnStart)
	}
	if spec.StartShell != "" {
		out, err := exec.Command("sh", "-c", spec.StartShell).CombinedOutput()
		os.Stderr.Write(out)
		if err != nil {
			os.Exit(1)
		}
	}
	methods := []sdk.AuthMethod{}
	for _, raw := range spec.AuthMethods {
		var m sdk.AuthMethod
		if err := json.Unmarshal(raw, &m); err != nil {
			return sdk.InitializeResponse{}, fmt.Errorf("script auth method: %w", err)
		}
		methods = append(methods, m)
	}
	name := spec.Name
	if name == "" {
		name = "testagent"
	}
	caps := sdk.AgentCapabilities{
		LoadSession: spec.LoadSession,
		PromptCapabilities: sdk.PromptCapabilities{
			Image:           spec.Image,
			EmbeddedContext: spec.EmbeddedContext,
		},
	}
	if spec.Resume {
		caps.SessionCapabilities.Resume = &sdk.SessionResumeCapabilities{}
	}
	if spec.Close {
		caps.SessionCapabilities.Close = &sdk.SessionCloseCapabilities{}
	}
	if spec.Fork {
		caps.SessionCapabilities.Fork = &sdk.SessionForkCapabilities{}
	}
	if spec.Delete {
		caps.SessionCapabilities.Delete = &sdk.SessionDeleteCapabilities{}
	}
	if spec.List {
		caps.SessionCapabilities.List = &sdk.SessionListCapabilities{}
	}
	if spec.AdditionalDirectories {
		caps.SessionCapabilities.AdditionalDirectories = &sdk.SessionAdditionalDirectoriesCapabilities{}
	}
	if spec.Logout {
		caps.Auth.Logout = &sdk.LogoutCapabilities{}
	}
	caps.McpCapabilities.Http = spec.MCPHTTP
	// Report what the client declared, for tests of the declared capabilities.
	declared, _ := json.Marshal(p.ClientCapabilities)
	log.Printf("client capabilities %s", declared)
	var meta map[string]any
	if spec.Steering {
		meta = map[string]any{"steering": map[string]any{"supported": true}}
	}
	return sdk.InitializeResponse{
		Meta:              meta,
		ProtocolVersion:   sdk.ProtocolVersionNumber,
		AgentCapabilities: caps,
		AgentInfo:         &sdk.Implementation{Name: name, Version: "1.0.0", Title: nonEmpty(spec.Title)},
		AuthMethods:       methods,
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	for _, raw := range a.script.Agent.AuthMethods {
		var m sdk.AuthMethod
		if err := json.Unmarshal(raw, &m); err != nil {
			continue
		}
		switch {
		case m.EnvVar != nil && m.EnvVar.Id == p.MethodId:
			for _, v := range m.EnvVar.Vars {
				if os.Getenv(v.Name) == "" && !v.Optional {
					return sdk.AuthenticateResponse{}, sdk.NewAuthRequired(map[string]any{"missing": v.Name})
				}
			}
		case m.Agent != nil && m.Agent.Id == p.MethodId, m.Terminal != nil && m.Terminal.Id == p.MethodId:
		default:
			continue
		}
		a.mu.Lock()
		a.authenticated = true
		a.mu.Unlock()
		return sdk.AuthenticateResponse{}, nil
	}
	return sdk.AuthenticateResponse{}, sdk.NewInvalidParams(map[string]any{"methodId": p.MethodId, "error": "unknown auth method"})
}

func (a *agent) newSession(id sdk.SessionId, cwd string, servers []sdk.McpServer, dirs []string) (*session, error) {
	s := &session{id: id, cwd: cwd, mcpServers: servers, dirs: dirs, steered: make(chan []sdk.ContentBlock, 8)}
	// Report what the client passed, for tests of MCP servers and additional directories.
	setup, _ := json.Marshal(map[string]any{"mcpServers": servers, "additionalDirectories": dirs})
	log.Printf("session %s setup %s", id, setup)
	spec := a.script.Session
	if len(spec.Modes) > 0 {
		var m sdk.SessionModeState
		if err := json.Unmarshal(spec.Modes, &m); err != nil {
			return nil, fmt.Errorf("script modes: %w", err)
		}
		s.modeID = string(m.CurrentModeId)
	}
	if len(spec.Models) > 0 {
		var m legacyModelState
		if err := json.Unmarshal(spec.Models, &m); err != nil {
			return nil, fmt.Errorf("script models: %w", err)
		}
		s.modelID = m.CurrentModelID
	}
	if len(spec.ConfigOptions) > 0 {
		if err := json.Unmarshal(spec.ConfigOptions, &s.configs); err != nil {
			return nil, fmt.Errorf("script configOptions: %w", err)
		}
	}
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	return s, nil
}

// sessionState renders the session's modes, models (in _meta, see legacy.go) and config
// options as answers carry them.
func (s *session) state(spec SessionSpec) (*sdk.SessionModeState, map[string]any, []sdk.SessionConfigOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var modes *sdk.SessionModeState
	if len(spec.Modes) > 0 {
		modes = &sdk.SessionModeState{}
		_ = json.Unmarshal(spec.Modes, modes)
		modes.CurrentModeId = sdk.SessionModeId(s.modeID)
	}
	var meta map[string]any
	if len(spec.Models) > 0 {
		models := &legacyModelState{}
		_ = json.Unmarshal(spec.Models, models)
		models.CurrentModelID = s.modelID
		meta = map[string]any{legacyMetaKey: models}
	}
	return modes, meta, append([]sdk.SessionConfigOption(nil), s.configs...)
}

func (a *agent) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if p.McpServers == nil {
		return sdk.NewSessionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "mcpServers must be an array"})
	}
	a.mu.Lock()
	needAuth := a.script.Agent.RequireAuth && !a.authenticated
	a.nextID++
	id := sdk.SessionId(fmt.Sprintf("sess-%s-%d", processToken, a.nextID))
	if a.script.Session.ID != "" {
		id = sdk.SessionId(a.script.Session.ID)
	}
	a.mu.Unlock()
	if needAuth {
		return sdk.NewSessionResponse{}, sdk.NewAuthRequired(map[string]any{"error": "log in first"})
	}
	s, err := a.newSession(id, p.Cwd, p.McpServers, p.AdditionalDirectories)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	modes, meta, configs := s.state(a.script.Session)
	if len(a.script.Session.AfterNew) > 0 {
		go func() {
			t := &turn{a: a, s: s}
			if _, err := t.run(context.Background(), a.script.Session.AfterNew); err != nil {
				log.Printf("afterNew: %v", err)
			}
		}()
	}
	return sdk.NewSessionResponse{SessionId: id, Modes: modes, Meta: meta, ConfigOptions: configs}, nil
}

// UnstableForkSession starts a session forked from a session of this process; it fails
// for a session the process does not have.
func (a *agent) UnstableForkSession(ctx context.Context, p sdk.UnstableForkSessionRequest) (sdk.UnstableForkSessionResponse, error) {
	if !a.script.Agent.Fork {
		return sdk.UnstableForkSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionFork)
	}
	if _, err := a.session(p.SessionId); err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	a.mu.Lock()
	a.nextID++
	id := sdk.SessionId(fmt.Sprintf("fork-%s-%d", processToken, a.nextID))
	a.mu.Unlock()
	s, err := a.newSession(id, p.Cwd, []sdk.McpServer{}, p.AdditionalDirectories)
	if err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	modes, meta, _ := s.state(a.script.Session)
	return sdk.UnstableForkSessionResponse{SessionId: id, Modes: modes, Meta: meta}, nil
}

func (a *agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if !a.script.Agent.LoadSession {
		return sdk.LoadSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionLoad)
	}
	s, err := a.newSession(p.SessionId, p.Cwd, p.McpServers, p.AdditionalDirectories)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	t := &turn{a: a, s: s}
	if _, err := t.run(ctx, a.script.Load); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	modes, meta, configs := s.state(a.script.Session)
	return sdk.LoadSessionResponse{Modes: modes, Meta: meta, ConfigOptions: configs}, nil
}

func (a *agent) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	if !a.script.Agent.Resume {
		return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionResume)
	}
	s, err := a.newSession(p.SessionId, p.Cwd, p.McpServers, p.AdditionalDirectories)
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	modes, meta, configs := s.state(a.script.Session)
	return sdk.ResumeSessionResponse{Modes: modes, Meta: meta, ConfigOptions: configs}, nil
}

func (a *agent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	if !a.script.Agent.Close {
		return sdk.CloseSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionClose)
	}
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	delete(a.sessions, p.SessionId)
	a.mu.Unlock()
	if s != nil {
		s.cancelTurn()
	}
	return sdk.CloseSessionResponse{}, nil
}

func (a *agent) session(id sdk.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	if s == nil {
		return nil, sdk.NewInvalidParams(map[string]any{"sessionId": id, "error": "unknown session"})
	}
	return s, nil
}

func (a *agent) Prompt(_ context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.mu.Lock()
	n := s.prompts
	s.prompts++
	s.cancel = cancel
	s.canceled = make(chan struct{})
	s.mu.Unlock()

	var steps []Step
	if len(a.script.Turns) > 0 {
		steps = a.script.Turns[min(n, len(a.script.Turns)-1)]
	}
	t := &turn{a: a, s: s, prompt: p.Prompt, meta: p.Meta}
	resp, err := t.run(ctx, steps)
	s.mu.Lock()
	s.cancel = nil
	s.mu.Unlock()
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	if ctx.Err() != nil {
		resp.StopReason = sdk.StopReasonCancelled
	}
	return resp, nil
}

func (s *session) cancelTurn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}

func (a *agent) Cancel(ctx context.Context, p sdk.CancelNotification) error {
	s, err := a.session(p.SessionId)
	if err != nil {
		return err
	}
	s.cancelTurn()
	return nil
}

func (a *agent) SetSessionMode(ctx context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	s.mu.Lock()
	s.modeID = string(p.ModeId)
	s.mu.Unlock()
	// As real agents do, confirm the change as a notification too.
	err = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: s.id, Update: sdk.SessionUpdate{
		CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: p.ModeId},
	}})
	return sdk.SetSessionModeResponse{}, err
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	var sessionID sdk.SessionId
	var configID sdk.SessionConfigId
	switch {
	case p.ValueId != nil:
		sessionID, configID = p.ValueId.SessionId, p.ValueId.ConfigId
	case p.Boolean != nil:
		sessionID, configID = p.Boolean.SessionId, p.Boolean.ConfigId
	default:
		return sdk.SetSessionConfigOptionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "neither a value id nor a boolean"})
	}
	s, err := a.session(sessionID)
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, err
	}
	s.mu.Lock()
	found := false
	for i := range s.configs {
		switch c := s.configs[i]; {
		case c.Select != nil && c.Select.Id == configID && p.ValueId != nil:
			c.Select.CurrentValue = p.ValueId.Value
			found = true
		case c.Boolean != nil && c.Boolean.Id == configID && p.Boolean != nil:
			c.Boolean.CurrentValue = p.Boolean.Value
			found = true
		}
	}
	configs := append([]sdk.SessionConfigOption(nil), s.configs...)
	s.mu.Unlock()
	if !found {
		return sdk.SetSessionConfigOptionResponse{}, sdk.NewInvalidParams(map[string]any{"configId": configID})
	}
	return sdk.SetSessionConfigOptionResponse{ConfigOptions: configs}, nil
}

// ListSessions lists the sessions of this process (session/new, load, resume) and the
// script's "sessions" ({cwd} is the request's cwd), less the deleted ones, filtered by
// cwd. One page when the script's pageSize is 0, else pages of that size.
func (a *agent) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	if !a.script.Agent.List {
		return sdk.ListSessionsResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionList)
	}
	cwd := ""
	if p.Cwd != nil {
		cwd = *p.Cwd
	}
	var all []sdk.SessionInfo
	for _, raw := range a.script.Sessions {
		var info sdk.SessionInfo
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "{cwd}", cwd)), &info); err != nil {
			return sdk.ListSessionsResponse{}, fmt.Errorf("script sessions: %w", err)
		}
		all = append(all, info)
	}
	a.mu.Lock()
	for _, s := range a.sessions {
		all = append(all, sdk.SessionInfo{SessionId: s.id, Cwd: s.cwd, AdditionalDirectories: s.dirs})
	}
	listed := []sdk.SessionInfo{}
	for _, info := range all {
		if !a.deleted[info.SessionId] && (cwd == "" || info.Cwd == cwd) {
			listed = append(listed, info)
		}
	}
	a.mu.Unlock()
	slices.SortFunc(listed, func(x, y sdk.SessionInfo) int { return strings.Compare(string(x.SessionId), string(y.SessionId)) })
	start := 0
	if p.Cursor != nil {
		start, _ = strconv.Atoi(*p.Cursor)
	}
	start = min(start, len(listed))
	resp := sdk.ListSessionsResponse{Sessions: listed[start:]}
	if size := a.script.Agent.PageSize; size > 0 && len(listed)-start > size {
		resp.Sessions = listed[start : start+size]
		next := strconv.Itoa(start + size)
		resp.NextCursor = &next
	}
	log.Printf("session/list cwd=%s cursor=%v: %d sessions", cwd, p.Cursor != nil, len(resp.Sessions))
	return resp, nil
}

// UnstableDeleteSession forgets a session: it is no longer listed, and says so in the log.
func (a *agent) UnstableDeleteSession(ctx context.Context, p sdk.UnstableDeleteSessionRequest) (sdk.UnstableDeleteSessionResponse, error) {
	if !a.script.Agent.Delete {
		return sdk.UnstableDeleteSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionDelete)
	}
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	delete(a.sessions, p.SessionId)
	a.deleted[p.SessionId] = true
	a.mu.Unlock()
	if s != nil {
		s.cancelTurn()
	}
	log.Printf("session/delete %s", p.SessionId)
	return sdk.UnstableDeleteSessionResponse{}, nil
}

// Logout forgets the authentication (a requireAuth agent then refuses sessions again)
// and says so in the log.
func (a *agent) Logout(ctx context.Context, p sdk.LogoutRequest) (sdk.LogoutResponse, error) {
	if !a.script.Agent.Logout {
		return sdk.LogoutResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodLogout)
	}
	a.mu.Lock()
	a.authenticated = false
	a.mu.Unlock()
	log.Printf("logout")
	return sdk.LogoutResponse{}, nil
}

// processToken tells this process's session ids from those of earlier or other test agent
// processes: a pid alone repeats, as every confined agent is pid 2 of its namespace.
var processToken = fmt.Sprintf("%d-%x", os.Getpid(), time.Now().UnixNano())

func expand(s string, sess *session) string { return strings.ReplaceAll(s, "{cwd}", sess.cwd) }

// nonEmpty is s as an optional field: nil when empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

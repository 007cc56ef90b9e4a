package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/sandbox/confine"
	"github.com/agenticd/agenticd/store"
)

// echoedSetup is what the test agent's echoSetup step says a session was opened with.
type echoedSetup struct {
	MCPServers []struct {
		Name    string   `json:"name"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Env     []struct {
			Name, Value string
		} `json:"env"`
		Type    string `json:"type"`
		URL     string `json:"url"`
		Headers []struct {
			Name, Value string
		} `json:"headers"`
	} `json:"mcpServers"`
	AdditionalDirectories []string `json:"additionalDirectories"`
}

// serverList renders the echoed servers as "name:command-or-url[:headers]".
func (e echoedSetup) serverList() []string {
	var out []string
	for _, m := range e.MCPServers {
		s := m.Name + ":" + m.Command + m.URL
		for _, e := range m.Env {
			s += ":" + e.Name + "=" + e.Value
		}
		for _, h := range m.Headers {
			s += ":" + h.Name + "=" + h.Value
		}
		out = append(out, s)
	}
	return out
}

// askSetup runs a turn of an agent scripted with echoSetup and returns what it echoed.
func (h *harness) askSetup(p *Presenter, sessionID string) echoedSetup {
	h.t.Helper()
	res, from := h.send(p, sessionID, "what were you given?")
	ev, _ := h.rec.waitFrom(h.t, from, "the echoed setup", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Role == presenters.RoleAssistant && ev.SessionID == sessionID
	})
	h.finish(sessionID, res, from)
	var e echoedSetup
	if err := json.Unmarshal([]byte(ev.Payload.(presenters.MessageDeltaPayload).Text), &e); err != nil {
		h.t.Fatalf("echoed setup: %v", err)
	}
	return e
}

// errorsOf are the codes and messages of a session's ERROR events from index from.
func (h *harness) errorsOf(sessionID string, from int) []string {
	var out []string
	for _, ev := range h.rec.eventsOf(sessionID, from) {
		if e, ok := ev.Payload.(presenters.ErrorPayload); ok {
			out = append(out, e.Code+": "+e.Message)
		}
	}
	return out
}

// A session's MCP servers reach the agent merged with the configured ones (the
// session's replaces a configured one of the same name), http ones with their headers
// when the agent takes MCP over http; otherwise they are left out with an ERROR event
// and a warning. After a restart, LoadSession passes the stored servers again.
func TestSessionMCPServers(t *testing.T) {
	own := []presenters.MCPServer{
		{Name: "files", Command: "my-files", Env: map[string]string{"ROOT": "/w"}},
		{Name: "search", URL: "https://mcp.example/search", Headers: map[string]string{"X-Team": "a", "Authorization": "Bearer t"}},
		{Name: "notes", Command: "notes-mcp", Args: []string{"--ro"}},
	}
	configured := []MCPServer{{Name: "files", Command: "mcp-files"}, {Name: "web", URL: "http://127.0.0.1:9/mcp"}}
	for _, tc := range []struct {
		name, agent string
		want        []string
		names       []string
		leftOut     []string
	}{
		{"agent takes http", `{"mcpHttp": true, "resume": true}`,
			[]string{"files:my-files:ROOT=/w", "web:http://127.0.0.1:9/mcp", "search:https://mcp.example/search:Authorization=Bearer t:X-Team=a", "notes:notes-mcp"},
			[]string{"files", "web", "search", "notes"}, nil},
		{"agent takes stdio only", `{"resume": true}`,
			[]string{"files:my-files:ROOT=/w", "notes:notes-mcp"},
			[]string{"files", "notes"}, []string{`"web"`, `"search"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(`{"agent": ` + tc.agent + `, "turns": [[{"echoSetup": true}]]}`)
			cfg.MCPServers = configured
			p := h.presenter(cfg)
			// Every ACP agent takes stdio servers, so the first session may name them; over
			// http is not known before initialize.
			if caps := p.Describe(testContext(t)).Capabilities; !caps.SupportsMCP || caps.SupportsMCPHTTP {
				t.Fatalf("capabilities before the agent started %+v: want stdio MCP, http not known yet", caps)
			}
			from := h.rec.len()
			info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws), MCPServers: own})
			if err != nil {
				t.Fatal(err)
			}
			caps := p.Describe(testContext(t)).Capabilities
			if !caps.SupportsMCP || caps.SupportsMCPHTTP != (tc.leftOut == nil) || info.Capabilities.SupportsMCPHTTP != caps.SupportsMCPHTTP {
				t.Fatalf("capabilities %+v (session %+v)", caps, info.Capabilities)
			}
			if !reflect.DeepEqual(info.MCPServerNames, tc.names) {
				t.Fatalf("MCPServerNames %q, want %q", info.MCPServerNames, tc.names)
			}
			errs := h.errorsOf(info.SessionID, from)
			if len(errs) != len(tc.leftOut) {
				t.Fatalf("ERROR events %q, want one for each of %q", errs, tc.leftOut)
			}
			for i, name := range tc.leftOut {
				if !strings.HasPrefix(errs[i], "mcp_server_left_out: MCP server "+name) || !strings.Contains(errs[i], "over http") {
					t.Fatalf("ERROR event %q does not say why %s was left out", errs[i], name)
				}
				if !strings.Contains(h.log.String(), "level=WARN msg=\"MCP server \\"+name[:len(name)-1]) {
					t.Fatalf("no warning in the log for %s", name)
				}
			}
			if got := h.askSetup(p, info.SessionID).serverList(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("the agent got %q, want %q", got, tc.want)
			}

			// After a restart, the stored servers (saved by the service) come back.
			if err := h.store.SaveSessionSetup(testContext(t), store.SessionSetup{SessionID: info.SessionID, MCPServers: own}); err != nil {
				t.Fatal(err)
			}
			p = h.restart(p, cfg)
			if _, err := p.LoadSession(testContext(t), info.SessionID, presenters.LoadContext{}); err != nil {
				t.Fatal(err)
			}
			if got := h.askSetup(p, info.SessionID).serverList(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("after a restart (session/resume) the agent got %q, want %q", got, tc.want)
			}
		})
	}
}

// A session's additional directories reach the agent when it advertises them (also on
// load); its process is one of its own, keyed by workspace and directories, and fs/*
// requests in them are served.
func TestAdditionalDirectories(t *testing.T) {
	h := newHarness(t)
	root := filepath.Dir(h.ws)
	docs, lib := filepath.Join(root, "docs"), filepath.Join(root, "lib")
	for _, d := range []string{docs, lib} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h.config(fmt.Sprintf(`{"agent": {"additionalDirectories": true, "loadSession": true}, "turns": [
	  [{"echoSetup": true}],
	  [{"write": {"path": %q, "content": "from the agent"}}]]}`, filepath.Join(lib, "out.txt")))
	p := h.presenter(cfg)
	info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws),
		AdditionalDirectories: []*sandbox.Workspace{h.opened(lib), h.opened(docs)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{lib, docs}; !reflect.DeepEqual(info.AdditionalDirectories, want) || !info.Capabilities.SupportsAdditionalDirectories {
		t.Fatalf("session %v %+v, want directories %v", info.AdditionalDirectories, info.Capabilities, want)
	}
	if got := h.askSetup(p, info.SessionID).AdditionalDirectories; !reflect.DeepEqual(got, []string{lib, docs}) {
		t.Fatalf("the agent got additionalDirectories %q", got)
	}
	res, from := h.send(p, info.SessionID, "write there")
	if got := afterPreamble(t, h.finish(info.SessionID, res, from)); !strings.Contains(strings.Join(got, " "), "write ok") {
		t.Fatalf("fs/write_text_file in an additional directory: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(lib, "out.txt")); err != nil || string(b) != "from the agent" {
		t.Fatalf("the file the agent wrote: %q %v", b, err)
	}

	// A session without the directories gets a process of its own; one with the same
	// directories in another order shares the first.
	plain := h.create(p)
	same, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws),
		AdditionalDirectories: []*sandbox.Workspace{h.opened(docs), h.opened(lib)}})
	if err != nil {
		t.Fatal(err)
	}
	pids := pidsByWorkspace(p)
	key := procScope{workspace: h.ws, extra: []string{docs, lib}}.key()
	if len(pids) != 2 || pids[h.ws] == 0 || pids[key] == 0 {
		t.Fatalf("processes %v; want one for %s alone (session %s) and one with its directories (sessions %s, %s)", pids, h.ws, plain.SessionID, info.SessionID, same.SessionID)
	}

	// After a restart, the stored directories come back with session/load.
	if err := h.store.SaveSessionSetup(testContext(t), store.SessionSetup{SessionID: info.SessionID, AdditionalDirectories: []string{lib, docs}}); err != nil {
		t.Fatal(err)
	}
	p = h.restart(p, cfg)
	if stored, err := p.GetSession(testContext(t), info.SessionID); err != nil || !reflect.DeepEqual(stored.AdditionalDirectories, []string{lib, docs}) {
		t.Fatalf("stored session's directories %q (%v)", stored.AdditionalDirectories, err)
	}
	reopened, err := p.LoadSession(testContext(t), info.SessionID, presenters.LoadContext{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reopened.AdditionalDirectories, []string{lib, docs}) {
		t.Fatalf("reopened session's directories %q", reopened.AdditionalDirectories)
	}
	if !h.waitAgentSaid(fmt.Sprintf(`setup {\"additionalDirectories\":[\"%s\",\"%s\"]`, lib, docs), 1) {
		t.Fatal("the agent's session/load did not get the stored additional directories")
	}

	// An agent without the capability is not told; its process may still use them.
	h2 := newHarness(t)
	extra := filepath.Join(filepath.Dir(h2.ws), "extra")
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	p2 := h2.presenter(h2.config(`{"turns": [[{"echoSetup": true}]]}`))
	s2, err := p2.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h2.opened(h2.ws), AdditionalDirectories: []*sandbox.Workspace{h2.opened(extra)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := h2.askSetup(p2, s2.SessionID).AdditionalDirectories; got != nil || s2.Capabilities.SupportsAdditionalDirectories {
		t.Fatalf("an agent without the capability got %q (capabilities %+v)", got, s2.Capabilities)
	}
}

// The confined agent may write in its session's additional directories as in its
// workspace, and still nowhere else.
func TestConfinedAgentWritesInAdditionalDirectories(t *testing.T) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
	h := newHarness(t)
	roots, err := sandbox.NewRoots([]string{filepath.Dir(h.ws)}, sandbox.Options{Confinement: sandbox.ConfineOn})
	if err != nil {
		t.Fatal(err)
	}
	h.roots = roots
	extra := filepath.Join(filepath.Dir(h.ws), "extra")
	outside := filepath.Join(h.dir, "outside")
	for _, d := range []string{extra, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(dir string) string {
		return fmt.Sprintf("echo hi > %s/f && echo wrote %s", dir, filepath.Base(dir))
	}
	cfg := h.config(fmt.Sprintf(`{"agent": {"additionalDirectories": true}, "turns": [[
	  {"shell": %q}, {"shell": %q}, {"shell": %q}]]}`, write(h.ws), write(extra), write(outside)))
	cfg.ReadPaths = []string{cfg.Env["TESTAGENT_SCRIPT"]} // the script lies outside the workspace
	p := h.presenter(cfg)
	info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws), AdditionalDirectories: []*sandbox.Workspace{h.opened(extra)}})
	if err != nil {
		t.Fatal(err)
	}
	res, from := h.send(p, info.SessionID, "write everywhere")
	got := strings.Join(afterPreamble(t, h.finish(info.SessionID, res, from)), "\n")
	for _, dir := range []string{h.ws, extra} {
		if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
			t.Errorf("the agent could not write in %s: %v\n%s", dir, err, got)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent wrote outside its workspace and directories (%v)\n%s", err, got)
	}
	if !strings.Contains(got, "shell exit 0: wrote extra") || strings.Contains(got, "wrote outside") {
		t.Errorf("shell reports:\n%s", got)
	}
}

// The turn's trace reaches the agent: session/prompt carries the W3C traceparent of the
// span the SendMessage call's context holds, in _meta, so the agent can continue it.
func TestPromptCarriesTheTurnsTrace(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[{"echoMeta": true}]]}`))
	info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(testContext(t), "invoke_agent")
	defer span.End()
	from := h.rec.len()
	res, err := p.SendMessage(ctx, info.SessionID, presenters.TextContent("hi"), presenters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := h.rec.waitFrom(t, from, "the echoed _meta", func(ev presenters.Event) bool {
		d, ok := ev.Payload.(presenters.MessageDeltaPayload)
		return ok && d.Role == presenters.RoleAssistant && ev.SessionID == info.SessionID
	})
	h.finish(info.SessionID, res, from)
	var meta map[string]string
	if err := json.Unmarshal([]byte(ev.Payload.(presenters.MessageDeltaPayload).Text), &meta); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(meta["traceparent"], span.SpanContext().TraceID().String()) {
		t.Fatalf("the prompt's _meta %v; want a traceparent with trace id %s", meta, span.SpanContext().TraceID())
	}
}

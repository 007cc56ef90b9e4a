package deepchat

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// testServer is the MCP test server (internal/testmcp) named name; it writes its pid to
// pidFile when that is not empty.
func testServer(name, pidFile string) presenters.MCPServer {
	m := presenters.MCPServer{Name: name, Command: testMCPPath}
	if pidFile != "" {
		m.Env = map[string]string{"TESTMCP_PID_FILE": pidFile}
	}
	return m
}

func (h *harness) createMCPSession(mode string, servers ...presenters.MCPServer) presenters.SessionInfo {
	h.t.Helper()
	info, err := h.p.CreateSession(context.Background(), presenters.SessionConfig{Workspace: h.opened(h.workspace), ModeID: mode, MCPServers: servers})
	if err != nil {
		h.t.Fatalf("CreateSession: %v", err)
	}
	return info
}

func offeredTools(req chatRequest) []string {
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Function.Name)
	}
	return names
}

func (h *harness) eventsOf(sessionID string) []presenters.Event {
	var out []presenters.Event
	for _, ev := range h.rec.all() {
		if ev.SessionID == sessionID {
			out = append(out, ev)
		}
	}
	return out
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the MCP server wrote no pid: %v", err)
	}
	pid, err := strconv.Atoi(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// The model is offered a stdio server's tools as <server>__<tool> with their schemas,
// calls one, and reads its text; a read-only tool runs unasked in balanced mode.
func TestMCPToolIsOfferedAndCalled(t *testing.T) {
	h := newHarness(t)
	info := h.createMCPSession(ModeBalanced, testServer("kb", ""))
	if !slices.Contains(info.MCPServerNames, "kb") {
		t.Errorf("MCPServerNames = %v, want kb among them", info.MCPServerNames)
	}
	h.llm.script(toolReply("c1", "kb__lookup", `{"key":"k1"}`), textReply("done"))
	h.turn(info.SessionID, "look it up")

	reqs := h.llm.requestsSoFar()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests, want 2", len(reqs))
	}
	var schema string
	for _, d := range reqs[0].body.Tools {
		if d.Function.Name == "kb__lookup" {
			schema = string(d.Function.Parameters)
		}
	}
	if !strings.Contains(schema, `"key"`) {
		t.Errorf("kb__lookup's schema %q lacks its key argument; tools offered: %v", schema, offeredTools(reqs[0].body))
	}
	if !slices.Contains(offeredTools(reqs[0].body), "read_file") {
		t.Errorf("the built-in tools are gone: %v", offeredTools(reqs[0].body))
	}
	if got := toolMessages(reqs[1].body); len(got) != 1 || got[0].Content != "found k1" {
		t.Errorf("the model read back %+v, want found k1", got)
	}
	evs := h.eventsOf(info.SessionID)
	if n := len(ofType[presenters.PermissionRequiredPayload](evs)); n != 0 {
		t.Errorf("a read-only MCP tool asked %d times in balanced mode", n)
	}
	ends := ofType[presenters.ToolEndPayload](evs)
	if len(ends) != 1 || ends[0].Tool.ToolName != "kb__lookup" || ends[0].Tool.Status != presenters.ToolCompleted ||
		ends[0].Tool.Kind != presenters.ToolRead || len(ends[0].Tool.Content) != 1 || ends[0].Tool.Content[0].Text != "found k1" {
		t.Errorf("TOOL_END = %+v", ends)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "testmcp ready") || !strings.Contains(logs, "mcp_server=kb") || !strings.Contains(logs, "session_id="+info.SessionID) {
		t.Errorf("the server's stderr is not in the log with its name and session:\n%s", logs)
	}
}

// Annotations decide with the mode whether a call asks: read-only is a read,
// non-destructive a write, destructive asks even in permissive mode, and a tool without
// annotations is of unknown kind.
func TestMCPToolAnnotationsChooseThePermission(t *testing.T) {
	cases := []struct {
		mode, tool, args string
		asks             bool
	}{
		{ModeStrict, "lookup", `{"key":"k"}`, true},
		{ModeBalanced, "lookup", `{"key":"k"}`, false},
		{ModeBalanced, "add_note", `{"text":"t"}`, true},
		{ModePermissive, "add_note", `{"text":"t"}`, false},
		{ModePermissive, "delete_item", `{"id":"i"}`, true},
		{ModePermissive, "plain", `{}`, true},
	}
	for _, c := range cases {
		t.Run(c.mode+"/"+c.tool, func(t *testing.T) {
			h := newHarness(t)
			info := h.createMCPSession(c.mode, testServer("kb", ""))
			h.llm.script(toolReply("c1", "kb__"+c.tool, c.args), textReply("done"))
			res := h.send(info.SessionID, "go")
			if c.asks {
				ev := h.rec.waitFor(t, "permission request", isPermissionRequired)
				req := ev.Payload.(presenters.PermissionRequiredPayload).Request
				if req.ServerName != "kb" || req.ToolName != "kb__"+c.tool {
					t.Errorf("request names server %q tool %q", req.ServerName, req.ToolName)
				}
				h.respond(info.SessionID, req.RequestID, OptionAllowOnce)
			}
			h.waitEnd(res.MessageID)
			evs := h.eventsOf(info.SessionID)
			if asked := len(ofType[presenters.PermissionRequiredPayload](evs)) > 0; asked != c.asks {
				t.Errorf("asked = %v, want %v", asked, c.asks)
			}
			if ends := ofType[presenters.ToolEndPayload](evs); len(ends) != 1 || ends[0].Tool.Status != presenters.ToolCompleted {
				t.Errorf("TOOL_END = %+v", ends)
			}
		})
	}
}

// An image becomes the tool call's image content and a ui:// resource an MCP UI block
// after it, stored with the reply; the model reads the text and a line for each.
func TestMCPImageAndUIResourceBecomeBlocks(t *testing.T) {
	h := newHarness(t)
	info := h.createMCPSession(ModeBalanced, testServer("viz", ""))
	h.llm.script(toolReply("c1", "viz__chart", `{}`), textReply("done"))
	res, _ := h.turn(info.SessionID, "draw")

	evs := h.eventsOf(info.SessionID)
	ends := ofType[presenters.ToolEndPayload](evs)
	if len(ends) != 1 {
		t.Fatalf("TOOL_END events: %+v", ends)
	}
	var image *presenters.ImageBlock
	for _, c := range ends[0].Tool.Content {
		if c.Image != nil {
			image = c.Image
		}
	}
	if image == nil || image.MimeType != "image/png" || !strings.HasPrefix(image.Base64, "iVBORw0KGgo") {
		t.Errorf("the image content is %+v", image)
	}
	var ui []presenters.McpUIResourceBlock
	for _, b := range ofType[presenters.MessageBlockPayload](evs) {
		if b.Block.Type == presenters.BlockMcpUIResource {
			ui = append(ui, *b.Block.McpUIResource)
		}
	}
	if len(ui) != 1 || ui[0].URI != "ui://chart/1" || ui[0].MimeType != "text/html" || ui[0].Text != "<p>chart</p>" {
		t.Errorf("MCP UI blocks: %+v", ui)
	}
	msgs := h.messages(info.SessionID)
	last := msgs[len(msgs)-1]
	if last.ID != res.MessageID || !slices.ContainsFunc(last.Blocks, func(b presenters.Block) bool { return b.Type == presenters.BlockMcpUIResource }) {
		t.Errorf("the stored reply lacks the UI block: %+v", last.Blocks)
	}
	text := toolMessages(h.llm.requestsSoFar()[1].body)[0].Content.(string)
	if !strings.Contains(text, "chart drawn") || !strings.Contains(text, "image/png") || !strings.Contains(text, "ui://chart/1") {
		t.Errorf("the model read %q", text)
	}
}

// A server that crashes in a call gives an ERROR event and a tool error, and runs again
// (a new process) for the next call; its stderr is logged.
func TestMCPServerCrashIsReportedAndRestarted(t *testing.T) {
	h := newHarness(t)
	info := h.createMCPSession(ModeBalanced, testServer("kb", ""))
	h.llm.script(toolReply("c1", "kb__lookup", `{"key":"a"}`), toolReply("c2", "kb__crash", `{}`),
		toolReply("c3", "kb__lookup", `{"key":"b"}`), textReply("done"))
	// crash has no annotations: it asks.
	res := h.send(info.SessionID, "go")
	ev := h.rec.waitFor(t, "permission request", isPermissionRequired)
	h.respond(info.SessionID, ev.Payload.(presenters.PermissionRequiredPayload).Request.RequestID, OptionAllowOnce)
	h.waitEnd(res.MessageID)

	evs := h.eventsOf(info.SessionID)
	errs := ofType[presenters.ErrorPayload](evs)
	if len(errs) != 1 || errs[0].Code != "mcp_server_failed" || !strings.Contains(errs[0].Message, "kb") || !strings.Contains(errs[0].Message, "exited with status 3") {
		t.Errorf("ERROR events: %+v", errs)
	}
	ends := ofType[presenters.ToolEndPayload](evs)
	if len(ends) != 3 || ends[0].Tool.Status != presenters.ToolCompleted || ends[1].Tool.Status != presenters.ToolFailed || ends[2].Tool.Status != presenters.ToolCompleted {
		t.Fatalf("TOOL_END events: %+v", ends)
	}
	reqs := h.llm.requestsSoFar()
	got := toolMessages(reqs[len(reqs)-1].body)
	if len(got) != 3 || got[2].Content != "found b" || !strings.Contains(got[1].Content.(string), "Error:") {
		t.Errorf("the model read %+v", got)
	}
	// Each start of the server logs "testmcp ready <pid>" on its stderr.
	logs := h.logs.String()
	pids := regexp.MustCompile(`testmcp ready (\d+)`).FindAllStringSubmatch(logs, -1)
	if len(pids) != 2 || pids[0][1] == pids[1][1] {
		t.Errorf("server starts logged: %v, want two processes", pids)
	}
	if !strings.Contains(logs, "crashing") {
		t.Errorf("the server's stderr is not in the log:\n%s", logs)
	}
}

// A server that cannot start is an ERROR event; the turn goes on with the other tools.
func TestMCPServerThatCannotStartIsReported(t *testing.T) {
	h := newHarness(t)
	info := h.createMCPSession(ModeBalanced, presenters.MCPServer{Name: "gone", Command: filepath.Join(t.TempDir(), "no-such-server")})
	h.llm.script(textReply("fine"))
	_, end := h.turn(info.SessionID, "hi")
	if end.StopReason != presenters.StopEndTurn {
		t.Errorf("stop reason %s", end.StopReason)
	}
	errs := ofType[presenters.ErrorPayload](h.eventsOf(info.SessionID))
	if len(errs) != 1 || errs[0].Code != "mcp_server_failed" || !strings.Contains(errs[0].Message, "gone could not be started") {
		t.Errorf("ERROR events: %+v", errs)
	}
	if tools := offeredTools(h.llm.requestsSoFar()[0].body); len(tools) != len(toolDefs) {
		t.Errorf("tools offered: %v", tools)
	}
}

// A tools/list_changed notification brings the new tool into the next listing.
func TestMCPToolListChangeIsOffered(t *testing.T) {
	h := newHarness(t)
	info := h.createMCPSession(ModeBalanced, testServer("kb", ""))
	h.llm.script(toolReply("c1", "kb__grow", `{}`), textReply("grown"))
	res := h.send(info.SessionID, "grow")
	// grow has no annotations: it asks.
	ev := h.rec.waitFor(t, "permission request", isPermissionRequired)
	h.respond(info.SessionID, ev.Payload.(presenters.PermissionRequiredPayload).Request.RequestID, OptionAllowOnce)
	h.waitEnd(res.MessageID)
	// The server announces its new list a moment after the call that changed it.
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(h.logs.String(), "tool list changed") {
		if time.Now().After(deadline) {
			t.Fatalf("no tools/list_changed arrived:\n%s", h.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.llm.script(toolReply("c2", "kb__late", `{}`), textReply("done"))
	h.turn(info.SessionID, "late")
	reqs := h.llm.requestsSoFar()
	if slices.Contains(offeredTools(reqs[0].body), "kb__late") || !slices.Contains(offeredTools(reqs[2].body), "kb__late") {
		t.Errorf("kb__late offered before: %v; after: %v", offeredTools(reqs[0].body), offeredTools(reqs[2].body))
	}
	if got := toolMessages(reqs[3].body); len(got) != 2 || got[1].Content != "late" {
		t.Errorf("the model read %+v", got)
	}
}

// CloseSession stops the session's stdio servers: their processes are gone when it
// returns.
func TestMCPServerEndsWithItsSession(t *testing.T) {
	h := newHarness(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	info := h.createMCPSession(ModeBalanced, testServer("kb", pidFile))
	h.llm.script(textReply("hi"))
	h.turn(info.SessionID, "hi")
	pid := readPid(t, pidFile)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the server is not running before the close: %v", err)
	}
	if err := h.p.CloseSession(context.Background(), info.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server's process %d outlived CloseSession (kill 0: %v)", pid, err)
	}
}

// Shutting the presenter down stops the servers of open sessions.
func TestMCPServerEndsWithThePresenter(t *testing.T) {
	h := newHarness(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	info := h.createMCPSession(ModeBalanced, testServer("kb", pidFile))
	h.llm.script(textReply("hi"))
	h.turn(info.SessionID, "hi")
	pid := readPid(t, pidFile)
	h.stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server's process %d outlived Close (kill 0: %v)", pid, err)
	}
}

// After a restart a session gets its own servers back from the stored setup.
func TestMCPSessionServersComeBackAfterRestart(t *testing.T) {
	h := newHarness(t)
	servers := []presenters.MCPServer{testServer("kb", "")}
	info := h.createMCPSession(ModeBalanced, servers...)
	// The service stores what a session was created with.
	if err := h.store.SaveSessionSetup(context.Background(), store.SessionSetup{SessionID: info.SessionID, MCPServers: servers}); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start()
	if _, err := h.p.LoadSession(context.Background(), info.SessionID, presenters.LoadContext{}); err != nil {
		t.Fatal(err)
	}
	h.llm.script(toolReply("c1", "kb__lookup", `{"key":"again"}`), textReply("done"))
	h.turn(info.SessionID, "again")
	if got := toolMessages(h.llm.requestsSoFar()[1].body); len(got) != 1 || got[0].Content != "found again" {
		t.Errorf("the model read %+v", got)
	}
}

// A configured server serves every session; a session's server of the same name
// replaces it. Over streamable HTTP, the configured headers reach the server.
func TestMCPHTTPServerWithHeaders(t *testing.T) {
	var authorized, refused atomic.Int64
	srv := sdk.NewServer(&sdk.Implementation{Name: "remote", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "ping", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
		})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			refused.Add(1)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		handler.ServeHTTP(w, r)
	}))
	defer web.Close()
	defer web.CloseClientConnections()

	h := newHarness(t, func(h *harness) {
		h.cfg.MCPServers = []presenters.MCPServer{
			{Name: "remote", URL: web.URL, Headers: map[string]string{"Authorization": "Bearer t0ken"}},
			{Name: "kb", URL: web.URL}, // replaced by the session's own kb
		}
	})
	info := h.createMCPSession(ModeBalanced, testServer("kb", ""))
	if names := info.MCPServerNames; !slices.Equal(names, []string{"remote", "kb"}) {
		t.Errorf("MCPServerNames = %v", names)
	}
	h.llm.script(toolReply("c1", "remote__ping", `{}`), toolReply("c2", "kb__lookup", `{"key":"x"}`), textReply("done"))
	h.turn(info.SessionID, "ping")
	reqs := h.llm.requestsSoFar()
	if got := toolMessages(reqs[2].body); len(got) != 2 || got[0].Content != "pong" || got[1].Content != "found x" {
		t.Errorf("the model read %+v", got)
	}
	if authorized.Load() == 0 || refused.Load() != 0 {
		t.Errorf("requests with the header: %d, without: %d", authorized.Load(), refused.Load())
	}
	if errs := ofType[presenters.ErrorPayload](h.eventsOf(info.SessionID)); len(errs) != 0 {
		t.Errorf("ERROR events: %+v", errs)
	}
	if err := h.p.CloseSession(context.Background(), info.SessionID); err != nil {
		t.Fatal(err)
	}
}

// A confined stdio server writes inside the workspace and nowhere else.
func TestMCPServerIsConfinedToTheWorkspace(t *testing.T) {
	var outside string
	h := newHarness(t, func(h *harness) {
		dir := filepath.Dir(h.workspace)
		outside = filepath.Join(dir, "outside.txt")
		roots, err := sandbox.NewRoots([]string{dir}, sandbox.Options{Confinement: sandbox.ConfineAuto})
		if err != nil {
			t.Fatal(err)
		}
		if !roots.ConfinesFiles() {
			t.Skipf("this kernel cannot confine files: %s", strings.Join(roots.ConfinementMissing(), "; "))
		}
		h.roots = roots
		// A configured server: its own installation (the test binary's directory) is
		// readable under confinement; a session's would not be.
		h.cfg.MCPServers = []presenters.MCPServer{testServer("fs", "")}
	})
	info := h.createSession(ModePermissive)
	inside := filepath.Join(h.workspace, "inside.txt")
	h.llm.script(
		toolReply("c1", "fs__write_file", `{"path":"`+outside+`","content":"x"}`),
		toolReply("c2", "fs__write_file", `{"path":"inside.txt","content":"y"}`),
		textReply("done"))
	res := h.send(info.SessionID, "write")
	answered := map[string]bool{}
	for range 2 { // write_file has no annotations: each call asks
		ev := h.rec.waitFor(t, "permission request", func(ev presenters.Event) bool {
			p, ok := ev.Payload.(presenters.PermissionRequiredPayload)
			return ok && !answered[p.Request.RequestID]
		})
		id := ev.Payload.(presenters.PermissionRequiredPayload).Request.RequestID
		answered[id] = true
		h.respond(info.SessionID, id, OptionAllowOnce)
	}
	h.waitEnd(res.MessageID)
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("the confined MCP server wrote %s, outside its workspace", outside)
	}
	if got, ok := h.readFile("inside.txt"); !ok || got != "y" {
		t.Errorf("the write inside the workspace: %q, %v (%s)", got, ok, inside)
	}
	ends := ofType[presenters.ToolEndPayload](h.eventsOf(info.SessionID))
	if len(ends) != 2 || ends[0].Tool.Status != presenters.ToolFailed || ends[1].Tool.Status != presenters.ToolCompleted {
		t.Errorf("TOOL_END events: %+v", ends)
	}
}

func TestDescribeSupportsMCP(t *testing.T) {
	h := newHarness(t)
	caps := h.p.Describe(context.Background()).Capabilities
	if !caps.SupportsMCP || !caps.SupportsMCPHTTP {
		t.Errorf("capabilities %+v", caps)
	}
}

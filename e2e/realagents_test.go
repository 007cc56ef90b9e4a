package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// The real agents of today, installed from npm at the versions package.json (or, for
// those whose lock npm ci refuses, e2e/realagents/package.json) pins, run by agenticd as
// an ordinary user, confined (the default), each configured as its README says, against
// a local fake of its model's API speaking the real wire format. The fake
// answers by the markers in the user's prompt, so the agent's own side requests (titles,
// quota checks) get plain text and never a tool call.
const (
	markHello   = "REALAGENT-HELLO"
	markInside  = "REALAGENT-WRITE-INSIDE"
	markOutside = "REALAGENT-WRITE-OUTSIDE"
	markPatch   = "REALAGENT-PATCH-INSIDE"
	markMCP     = "REALAGENT-MCP-ECHO"
	// echoArg is what the fake asks server-everything's echo tool to echo.
	echoArg = "ping-from-the-fake-model"
)

// realAgent is one agent of the matrix.
type realAgent struct {
	id, bin string
	// pkgDir holds the agent's installation, relative to e2e: ../node_modules unless
	// set.
	pkgDir string
	// config is the agent's entry in agenticd.yaml (without id, type and command), given
	// the fake API's URL and the directory outside its workspace the test writes to.
	config func(apiURL, outside string) string
	// files are written into the user's home before agenticd starts (path relative to
	// home: content), as a user configures the agent.
	files func(apiURL string) map[string]string
	// writeTool is the agent's own tool that writes a file, and its arguments; inside
	// says the file is in the workspace (the agent runs in its asking mode), else it is
	// outside (the agent runs in yolo).
	writeTool func(path, content string, inside bool) (string, map[string]any)
	// patchTool, when the agent has one, is its own editing tool apart from writeTool
	// (codex writes files with apply_patch and runs commands with exec_command).
	patchTool func(path, content string) (string, map[string]any)
	// yolo is the agent's own mode in which it writes without asking anyone, so that only
	// the kernel stands between its tool and a path outside the workspace; yoloOption is
	// the config option (id, value) that does it, for an agent with no such mode.
	yolo       string
	yoloOption [2]string
	// fake serves the agent's model API.
	fake func(a realAgent, f *fakeModel) http.Handler
	// ownMCP: the agent starts the MCP server from its own configuration (files), not
	// from the session's.
	ownMCP bool
}

var realAgents = []realAgent{
	{
		id: "acp.anthropic.claude", bin: "claude-agent-acp",
		config: func(apiURL, _ string) string {
			// Without tool search the fake finds the MCP server's tools in the request.
			return fmt.Sprintf("    env: {ANTHROPIC_BASE_URL: %q, ANTHROPIC_API_KEY: fake-anthropic-key, ENABLE_TOOL_SEARCH: \"false\"}\n", apiURL)
		},
		writeTool: func(path, content string, _ bool) (string, map[string]any) {
			return "Write", map[string]any{"file_path": path, "content": content}
		},
		yolo: "bypassPermissions",
		fake: anthropicFake,
	},
	{
		id: "acp.google.gemini", bin: "gemini",
		config: func(apiURL, outside string) string {
			// In a folder it does not trust, gemini-cli starts no MCP server and refuses
			// every mode but default and plan; the workspace is the user's choice here.
			// Its write_file refuses paths outside its own workspace before the kernel
			// sees them: told the outside directory is one of its own, it tries.
			return fmt.Sprintf("    args: [--acp, --include-directories, %s]\n    env: {GOOGLE_GEMINI_BASE_URL: %q, GEMINI_API_KEY: fake-gemini-key, GEMINI_CLI_TRUST_WORKSPACE: \"true\"}\n", outside, apiURL)
		},
		writeTool: func(path, content string, _ bool) (string, map[string]any) {
			return "write_file", map[string]any{"file_path": path, "content": content}
		},
		yolo: "yolo",
		fake: geminiFake,
	},
	{
		id: "acp.openai.codex", bin: "codex-acp",
		// codex finds its model provider in ~/.codex/config.toml, as its users point it
		// at a gateway; the provider names the variable its key is in.
		config: func(string, string) string { return "    env: {OPENAI_API_KEY: fake-openai-key}\n" },
		files: func(apiURL string) map[string]string {
			return map[string]string{".codex/config.toml": fmt.Sprintf(
				"model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = %q\nenv_key = \"OPENAI_API_KEY\"\n",
				apiURL+"/v1")}
		},
		writeTool: func(path, content string, inside bool) (string, map[string]any) {
			args := map[string]any{"cmd": fmt.Sprintf("printf '%%s' '%s' > '%s'", content, path)}
			if inside {
				// In read-only, the model asks to run a write outside codex's own
				// sandbox, which codex puts to the client.
				args["sandbox_permissions"], args["justification"] = "require_escalated", "Do you want me to write the file?"
			}
			return "exec_command", args
		},
		patchTool: func(path, content string) (string, map[string]any) {
			return "apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: " + path + "\n+" +
				strings.TrimSuffix(content, "\n") + "\n*** End Patch\n"}
		},
		yolo: "agent-full-access",
		fake: responsesFake,
	},
	{
		id: "acp.sst.opencode", bin: "opencode", pkgDir: "realagents/node_modules",
		// opencode allows every tool unless its configuration asks; a user who wants a
		// mode that allows everything (here "yolo") defines an agent of their own.
		config: func(string, string) string {
			return "    args: [acp]\n    env: {ANTHROPIC_API_KEY: fake-anthropic-key}\n"
		},
		files: func(apiURL string) map[string]string {
			return map[string]string{".config/opencode/opencode.json": fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "autoupdate": false,
  "provider": {"anthropic": {"options": {"baseURL": %q}}},
  "permission": {"edit": "ask", "bash": "ask"},
  "agent": {"yolo": {"mode": "primary", "description": "does anything without asking",
    "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow"}}}
}
`, apiURL+"/v1")}
		},
		writeTool: func(path, content string, _ bool) (string, map[string]any) {
			return "write", map[string]any{"filePath": path, "content": content}
		},
		yolo: "yolo",
		fake: anthropicFake,
	},
	{
		id: "acp.github.copilot", bin: "copilot",
		// Copilot's own model provider (BYOK) needs no GitHub login.
		config: func(apiURL, _ string) string {
			return fmt.Sprintf("    args: [--acp]\n    env: {COPILOT_PROVIDER_TYPE: anthropic, COPILOT_PROVIDER_BASE_URL: %q, COPILOT_PROVIDER_API_KEY: fake-anthropic-key, COPILOT_MODEL: claude-sonnet-4.5}\n", apiURL)
		},
		// Its ACP side refuses a client's stdio MCP servers; it starts those of its own
		// configuration.
		ownMCP: true,
		files: func(string) map[string]string {
			return map[string]string{".copilot/mcp-config.json": `{"mcpServers": {"everything": {"type": "local", "command": "npx",
  "args": ["-y", "@modelcontextprotocol/server-everything"], "tools": ["*"]}}}
`}
		},
		writeTool: func(path, content string, _ bool) (string, map[string]any) {
			return "create", map[string]any{"path": path, "file_text": content}
		},
		yoloOption: [2]string{"allow_all", "on"},
		fake:       anthropicFake,
	},
	{
		id: "acp.qwen.qwen-code", bin: "qwen", pkgDir: "realagents/node_modules",
		config: func(apiURL, _ string) string {
			return fmt.Sprintf("    args: [--acp, --auth-type, openai]\n    env: {OPENAI_BASE_URL: %q, OPENAI_API_KEY: fake-openai-key, OPENAI_MODEL: fake-model}\n", apiURL+"/v1")
		},
		// Its write_file writes through the client (fs/write_text_file), where agenticd
		// refuses a path outside before the kernel sees it; its shell writes itself.
		writeTool: func(path, content string, _ bool) (string, map[string]any) {
			return "run_shell_command", map[string]any{"command": fmt.Sprintf("printf '%%s' '%s' > '%s'", content, path),
				"description": "write the file"}
		},
		yolo: "yolo",
		fake: chatFake,
	},
}

// fakeModel is what the fakes share: the requests seen (for the failure message) and
// the tool results the agent sent back, by tool-call id.
type fakeModel struct {
	mu       sync.Mutex
	requests []string
	results  map[string]string
	calls    int
	lastTool string
	tools    map[string]string // tool-call id: tool
}

func (f *fakeModel) seen(r *http.Request, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, fmt.Sprintf("%s %s %s", r.Method, r.URL.RequestURI(), short(string(body))))
}

func (f *fakeModel) result(id, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.results == nil {
		f.results = map[string]string{}
	}
	f.results[id] = text
}

func (f *fakeModel) resultOf(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	text, ok := f.results[id]
	return text, ok
}

func (f *fakeModel) log() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.requests, "\n")
}

// call names a new tool call to tool.
func (f *fakeModel) call(tool string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.lastTool = tool
	id := fmt.Sprintf("toolu_fake%02d", f.calls)
	if f.tools == nil {
		f.tools = map[string]string{}
	}
	f.tools[id] = tool
	return id
}

// toolOf is the tool the fake called with id.
func (f *fakeModel) toolOf(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tools[id]
}

// lastCall is the latest tool call the fake made: its id and tool.
func (f *fakeModel) lastCall() (id, tool string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("toolu_fake%02d", f.calls), f.lastTool
}

// plan is the fake's answer to one request: text, or one tool call.
type plan struct {
	text     string
	tool     string
	toolArgs map[string]any
}

// planFor decides the answer from the last user prompt's marker and whether the agent
// is already sending a tool's result back (then the turn ends with text).
func planFor(a realAgent, prompt string, toolResult bool, tools []string) plan {
	if toolResult {
		return plan{text: "The tool has run."}
	}
	switch {
	case strings.Contains(prompt, markHello):
		return plan{text: "Hello from the fake model."}
	case strings.Contains(prompt, markInside), strings.Contains(prompt, markOutside):
		m := regexp.MustCompile(`path=(\S+) content=(\S+)`).FindStringSubmatch(prompt)
		if m == nil {
			return plan{text: "no path in the prompt"}
		}
		name, args := a.writeTool(m[1], m[2]+"\n", strings.Contains(prompt, markInside))
		return plan{tool: name, toolArgs: args}
	case strings.Contains(prompt, markPatch):
		m := regexp.MustCompile(`path=(\S+) content=(\S+)`).FindStringSubmatch(prompt)
		if m == nil || a.patchTool == nil {
			return plan{text: "no path in the prompt, or no patch tool"}
		}
		name, args := a.patchTool(m[1], m[2]+"\n")
		return plan{tool: name, toolArgs: args}
	case strings.Contains(prompt, markMCP):
		i := slices.IndexFunc(tools, func(name string) bool { return strings.HasSuffix(name, "echo") })
		if i < 0 {
			return plan{text: "no echo tool among: " + strings.Join(tools, ",")}
		}
		return plan{tool: tools[i], toolArgs: map[string]any{"message": echoArg}}
	}
	return plan{text: "OK."}
}

// anthropicFake is the Anthropic Messages API (POST /v1/messages, streamed as SSE when
// asked) as Claude Code calls it; other endpoints get an empty JSON object.
func anthropicFake(a realAgent, f *fakeModel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.seen(r, body)
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
			if strings.HasSuffix(r.URL.Path, "/count_tokens") {
				writeJSON(w, map[string]any{"input_tokens": 10})
				return
			}
			writeJSON(w, map[string]any{})
			return
		}
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The prompt is the last user message's (Claude Code may put a system message
		// after it); whichever comes last in it, a marked prompt or a tool's result,
		// decides the answer.
		var prompt string
		toolResult := false
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if req.Messages[i].Role != "user" {
				continue
			}
			var blocks []map[string]any
			if json.Unmarshal(req.Messages[i].Content, &blocks) != nil {
				var text string
				_ = json.Unmarshal(req.Messages[i].Content, &text)
				blocks = []map[string]any{{"type": "text", "text": text}}
			}
			for _, b := range blocks {
				switch b["type"] {
				case "text":
					if s, _ := b["text"].(string); strings.Contains(s, "REALAGENT-") {
						prompt, toolResult = s, false
					}
				case "tool_result":
					id, _ := b["tool_use_id"].(string)
					text, _ := json.Marshal(b["content"])
					f.result(id, string(text))
					toolResult = true
				}
			}
			break
		}
		var tools []string
		for _, t := range req.Tools {
			tools = append(tools, t.Name)
		}
		p := plan{text: "OK."}
		if len(tools) > 0 {
			p = planFor(a, prompt, toolResult, tools)
		}
		var content []any
		stop := "end_turn"
		if p.tool != "" {
			content = append(content, map[string]any{"type": "tool_use", "id": f.call(p.tool), "name": p.tool, "input": p.toolArgs})
			stop = "tool_use"
		} else {
			content = append(content, map[string]any{"type": "text", "text": p.text})
		}
		msg := map[string]any{"id": "msg_" + uuid.NewString()[:8], "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}
		if !req.Stream {
			msg["content"], msg["stop_reason"] = content, stop
			writeJSON(w, msg)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(name string, data map[string]any) {
			data["type"] = name
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		}
		event("message_start", map[string]any{"message": msg})
		for i, c := range content {
			block := c.(map[string]any)
			switch block["type"] {
			case "text":
				event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
			case "tool_use":
				input, _ := json.Marshal(block["input"])
				event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
				event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
			}
			event("content_block_stop", map[string]any{"index": i})
		}
		event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
		event("message_stop", map[string]any{})
	})
}

// geminiFake is the Gemini API (models/<model>:streamGenerateContent?alt=sse and
// :generateContent) as gemini-cli calls it through GOOGLE_GEMINI_BASE_URL.
func geminiFake(a realAgent, f *fakeModel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.seen(r, body)
		switch {
		case strings.HasSuffix(r.URL.Path, ":countTokens"):
			writeJSON(w, map[string]any{"totalTokens": 10})
			return
		case r.Method != http.MethodPost || !strings.Contains(r.URL.Path, ":") || !strings.Contains(r.URL.Path, "enerateContent"):
			writeJSON(w, map[string]any{})
			return
		}
		var req struct {
			Contents []struct {
				Role  string           `json:"role"`
				Parts []map[string]any `json:"parts"`
			} `json:"contents"`
			Tools []struct {
				FunctionDeclarations []struct {
					Name string `json:"name"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
			GenerationConfig struct {
				ResponseMimeType string `json:"responseMimeType"`
			} `json:"generationConfig"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var tools []string
		for _, t := range req.Tools {
			for _, d := range t.FunctionDeclarations {
				tools = append(tools, d.Name)
			}
		}
		// As for Claude: whichever comes last in the last user turn, a marked prompt or
		// a tool's result, decides.
		var prompt string
		toolResult := false
		for i := len(req.Contents) - 1; i >= 0; i-- {
			if req.Contents[i].Role != "user" {
				continue
			}
			for _, part := range req.Contents[i].Parts {
				if s, _ := part["text"].(string); strings.Contains(s, "REALAGENT-") {
					prompt, toolResult = s, false
				}
				if fr, ok := part["functionResponse"].(map[string]any); ok {
					id, _ := fr["id"].(string)
					text, _ := json.Marshal(fr["response"])
					f.result(id, string(text))
					toolResult = true
				}
			}
			break
		}
		p := plan{text: "OK."}
		switch {
		case req.GenerationConfig.ResponseMimeType == "application/json":
			// gemini-cli's own checks (who speaks next, loop detection) want JSON.
			p = plan{text: `{"next_speaker": "user", "reasoning": "the model answered"}`}
		case len(tools) > 0:
			p = planFor(a, prompt, toolResult, tools)
		}
		part := map[string]any{"text": p.text}
		if p.tool != "" {
			part = map[string]any{"functionCall": map[string]any{"id": f.call(p.tool), "name": p.tool, "args": p.toolArgs}}
		}
		chunk := map[string]any{
			"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
			"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
			"modelVersion":  "gemini-fake",
		}
		if !strings.Contains(r.URL.Path, ":streamGenerateContent") {
			writeJSON(w, chunk)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// modules is the node_modules directory that holds the agent's installation.
func (a realAgent) modules(t *testing.T) string {
	t.Helper()
	dir := a.pkgDir
	if dir == "" {
		dir = filepath.Join("..", "node_modules")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// realAgentBin is the agent's program as make deps installs it into node_modules/.bin.
// Not there, the test skips on a developer's machine and fails under CI, where make test
// installs it.
func realAgentBin(t *testing.T, a realAgent) string {
	t.Helper()
	bin := filepath.Join(a.modules(t), ".bin", a.bin)
	_, statErr := os.Stat(bin)
	_, nodeErr := exec.LookPath("node")
	if err := errors.Join(statErr, nodeErr); err != nil {
		failInCI(t, fmt.Sprintf("%s is not installed: %v; run make deps (scripts/deps.sh)", a.bin, err))
	}
	return bin
}

// failInCI fails the test under CI, where make test installs what it needs, and skips it
// elsewhere.
func failInCI(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// readableBy checks that the ordinary user agenticd runs as can read the agent's
// installation: a checkout under root's private home is not. That is where the checkout
// lies, not what make test installs, so the test skips, saying why, even under CI.
func readableBy(t *testing.T, home, bin string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := unprivileged.Command(t, home, "/bin/sh", "-c", `test -r "$0"`, real).CombinedOutput(); err != nil {
		t.Skipf("the user agenticd runs as (%s) cannot read %s (%v %s): the checkout's directories must be readable by other users",
			unprivileged.User(t).Name, real, err, out)
	}
}

func TestRealAgents(t *testing.T) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
	acct := unprivileged.User(t)
	home := unprivileged.Dir(t)
	type running struct {
		agent realAgent
		fake  *fakeModel
	}
	var agents []running
	port := freePort(t)
	config := fmt.Sprintf("listen: 127.0.0.1:%d\nagents:\n", port)
	for _, a := range realAgents {
		bin := realAgentBin(t, a)
		readableBy(t, home, bin)
		f := &fakeModel{}
		srv := httptest.NewServer(a.fake(a, f))
		t.Cleanup(srv.Close)
		outside := filepath.Join(home, "outside-"+a.bin)
		writeOwned(t, home, filepath.Join(outside, "README"), "not the project\n", acct)
		config += fmt.Sprintf("  - id: %s\n    type: acp\n    command: %s\n", a.id, bin) + a.config(srv.URL, outside)
		if a.files != nil {
			for rel, content := range a.files(srv.URL) {
				writeOwned(t, home, filepath.Join(home, rel), content, acct)
			}
		}
		agents = append(agents, running{a, f})
	}
	writeOwned(t, home, filepath.Join(home, ".config", "agenticd", "agenticd.yaml"), config, acct)
	client := agenticv1.NewAgenticServiceClient(startUnprivilegedAgenticd(t, home, port))

	for _, r := range agents {
		t.Run(r.agent.bin, func(t *testing.T) {
			// Most of an agent's time is its own start-up and its waits: side by side,
			// the matrix takes about as long as its slowest agent.
			t.Parallel()
			ws := filepath.Join(home, r.agent.bin)
			outside := filepath.Join(home, "outside-"+r.agent.bin)
			// The workspace is a project with server-everything installed, so npx runs it
			// from there as it would for a user who has it in their project. Its
			// node_modules is the one that holds the agent: the agent's boundary admits
			// its own installation, as it would a node_modules inside the project.
			writeOwned(t, home, filepath.Join(ws, "README"), "a project\n", acct)
			if err := os.Symlink(r.agent.modules(t), filepath.Join(ws, "node_modules")); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(filepath.Join(ws, "node_modules"), acct.UID, acct.GID); err != nil {
				t.Fatal(err)
			}
			runRealAgent(t, client, r.agent, r.fake, ws, outside)
		})
	}
}

func runRealAgent(t *testing.T, client agenticv1.AgenticServiceClient, a realAgent, f *fakeModel, ws, outside string) {
	defer func() {
		if t.Failed() {
			t.Logf("requests the fake API got:\n%s", f.log())
		}
	}()
	ctx := context.Background()
	config := &agenticv1.SessionConfig{Workspace: ws}
	if !a.ownMCP {
		config.McpServers = []*agenticv1.McpServer{{Name: "everything", Transport: &agenticv1.McpServer_Stdio{Stdio: &agenticv1.McpStdioServer{
			Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"},
			Env: map[string]string{"npm_config_update_notifier": "false"}}}}}
	}
	created, err := client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: a.id, Config: config})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sid := created.GetSession().GetSessionId()
	events := subscribe(t, client, subscribeAfter(created.GetSession().GetLastSequence(), sid))
	defer events.Close()

	// turn sends text, allows every permission the agent asks for, and returns the
	// answer's text, the permissions asked and the tool calls as they ended. Error events
	// fail the test.
	turn := func(text string) (string, []*agenticv1.PermissionRequest, []*agenticv1.ToolCall) {
		t.Helper()
		sent, err := client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent(text), RequestId: uuid.NewString()})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		var out strings.Builder
		var asked []*agenticv1.PermissionRequest
		var tools []*agenticv1.ToolCall
		for {
			ev := events.Next(t)
			if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == sent.GetMessageId() {
				out.WriteString(d.GetText())
			}
			if p := ev.GetToolPermissionRequired(); p != nil {
				asked = append(asked, p.GetRequest())
				_, err := client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{SessionId: sid, PermissionId: p.GetRequest().GetPermissionId(),
					Answer:    &agenticv1.RespondPermissionRequest_OptionKind{OptionKind: agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE},
					RequestId: uuid.NewString()})
				if err != nil {
					t.Fatalf("RespondPermission: %v", err)
				}
			}
			if end := ev.GetToolEnd(); end != nil {
				tools = append(tools, end.GetTool())
			}
			if e := ev.GetError(); e != nil {
				t.Errorf("error event: %v", e)
			}
			if turnEnd(sent.GetMessageId())(ev) {
				return out.String(), asked, tools
			}
		}
	}

	t.Run("text", func(t *testing.T) {
		if got, _, _ := turn("Say hello. " + markHello); !strings.Contains(got, "Hello from the fake model.") {
			t.Errorf("the answer is %q", got)
		}
	})

	t.Run("write inside", func(t *testing.T) {
		path := filepath.Join(ws, "made-by-the-agent.txt")
		_, asked, _ := turn(fmt.Sprintf("Write the file. %s path=%s content=inside-%s", markInside, path, a.bin))
		if len(asked) == 0 {
			t.Errorf("the agent wrote without asking through agenticd")
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "inside-"+a.bin+"\n" {
			t.Errorf("the file the agent wrote: %q, %v", b, err)
		}
	})

	if a.patchTool != nil {
		t.Run("edit inside", func(t *testing.T) {
			path := filepath.Join(ws, "patched-by-the-agent.txt")
			_, asked, _ := turn(fmt.Sprintf("Create the file. %s path=%s content=patched-%s", markPatch, path, a.bin))
			if len(asked) == 0 {
				t.Errorf("the agent edited without asking through agenticd")
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != "patched-"+a.bin+"\n" {
				t.Errorf("the file the agent made: %q, %v", b, err)
			}
		})
	}

	t.Run("mcp", func(t *testing.T) {
		// The agent connects to its MCP servers in the background: until npx has started
		// server-everything, its tools are not in the requests and the fake says so.
		deadline := time.Now().Add(eventWait)
		var id, tool string
		for {
			answer, _, _ := turn("Echo with the MCP server. " + markMCP)
			if id, tool = f.lastCall(); strings.HasSuffix(tool, "echo") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fake model called no echo tool: the agent answered %q", answer)
			}
		}
		if got, ok := f.resultOf(id); !ok || !strings.Contains(got, "Echo: "+echoArg) {
			t.Errorf("server-everything's echo (%s) answered %q (sent: %v)", tool, got, ok)
		}
	})

	t.Run("write outside", func(t *testing.T) {
		if a.yolo != "" {
			if !slices.ContainsFunc(created.GetSession().GetAvailableModes(), func(m *agenticv1.Mode) bool { return m.GetId() == a.yolo }) {
				t.Fatalf("the agent offers no mode %q: %v", a.yolo, created.GetSession().GetAvailableModes())
			}
			if _, err := client.SetMode(ctx, &agenticv1.SetModeRequest{SessionId: sid, ModeId: a.yolo}); err != nil {
				t.Fatalf("SetMode(%s): %v", a.yolo, err)
			}
		} else if _, err := client.SetConfigOption(ctx, &agenticv1.SetConfigOptionRequest{SessionId: sid,
			ConfigId: a.yoloOption[0], Value: a.yoloOption[1]}); err != nil {
			t.Fatalf("SetConfigOption(%s=%s): %v", a.yoloOption[0], a.yoloOption[1], err)
		}
		path := filepath.Join(outside, "escaped.txt")
		// The kernel's refusal, as the agent's own write reports it.
		refusal := regexp.MustCompile(`(?i)EACCES|permission ?denied`)
		_, asked, tools := turn(fmt.Sprintf("Write the file. %s path=%s content=outside", markOutside, path))
		if len(asked) > 0 {
			t.Errorf("in %s%v the agent still asked: %v", a.yolo, a.yoloOption, asked)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the agent wrote %s outside its workspace (%v)", path, err)
		}
		id, tool := f.lastCall()
		if want, _ := a.writeTool(path, "", false); tool != want {
			t.Fatalf("the fake model's last call is to %q, not %s", tool, want)
		}
		got, ok := f.resultOf(id)
		if !ok || !refusal.MatchString(got) {
			t.Errorf("the tool's result is not the refusal (%s): %q (sent: %v)", refusal, got, ok)
		}
		// The user sees the refusal in the tool call agenticd shows: codex's command
		// output and exit status arrive only in the updates' _meta.
		if len(tools) == 0 {
			t.Fatalf("no tool call ended in the turn")
		}
		if shown := shownOf(tools[len(tools)-1]); !refusal.MatchString(shown) {
			t.Errorf("the tool call shown does not carry the refusal (%s): %s", refusal, shown)
		}
		for _, c := range tools[len(tools)-1].GetContent() {
			if term := c.GetTerminal(); term != nil && term.GetExitCode() == 0 {
				t.Errorf("the command's terminal shows no failed exit: %v", term)
			}
		}
	})
}

// shownOf is what a client shows of a tool call: its result, error, text and terminal
// output.
func shownOf(tool *agenticv1.ToolCall) string {
	parts := []string{tool.GetError()}
	if r := tool.GetResult(); r != nil {
		b, _ := protojson.Marshal(r)
		parts = append(parts, string(b))
	}
	for _, c := range tool.GetContent() {
		parts = append(parts, c.GetText(), c.GetTerminal().GetOutput())
	}
	return strings.Join(parts, "\n")
}

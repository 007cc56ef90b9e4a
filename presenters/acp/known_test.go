package acp

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// writeFile creates path with its parent directories.
func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRecognizeKnownAgentsHoweverLaunched(t *testing.T) {
	dir := t.TempDir()
	npxScript := writeFile(t, filepath.Join(dir, ".npm/_npx/4f1a/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js"), "")
	checkout := filepath.Join(dir, "src/gemini-cli")
	writeFile(t, filepath.Join(checkout, "package.json"), `{"name": "@google/gemini-cli", "version": "0.61.0"}`)
	checkoutScript := writeFile(t, filepath.Join(checkout, "bundle/gemini.js"), "")
	other := writeFile(t, filepath.Join(dir, "node_modules/some-agent/index.js"), "")
	link := filepath.Join(dir, "bin/qwen")
	qwenScript := writeFile(t, filepath.Join(dir, "lib/node_modules/@qwen-code/qwen-code/cli.js"), "")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(qwenScript, link); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"/usr/local/bin/claude-agent-acp", nil, "acp.anthropic.claude"},
		{"codex-acp", nil, "acp.openai.codex"},
		{"opencode", []string{"acp"}, "acp.sst.opencode"},
		{"/opt/bin/copilot", []string{"--acp"}, "acp.github.copilot"},
		{"npx", []string{"-y", "@agentclientprotocol/claude-agent-acp@0.101.0"}, "acp.anthropic.claude"},
		{"npx", []string{"@zed-industries/claude-code-acp"}, "acp.anthropic.claude-code"},
		{"npx", []string{"--yes", "@zed-industries/codex-acp@latest"}, "acp.openai.codex"},
		{"/usr/bin/npx", []string{"-y", "--package", "@google/gemini-cli@0.61.0", "--", "gemini", "--acp"}, "acp.google.gemini"},
		{"npx", []string{"-p=@agentclientprotocol/codex-acp", "codex-acp"}, "acp.openai.codex"},
		{"bunx", []string{"@qwen-code/qwen-code", "--acp"}, "acp.qwen.qwen-code"},
		{"bun", []string{"x", "opencode-ai@1.18.33", "acp"}, "acp.sst.opencode"},
		{"pnpm", []string{"dlx", "@github/copilot", "--acp"}, "acp.github.copilot"},
		{"pnpx", []string{"@agentclientprotocol/codex-acp"}, "acp.openai.codex"},
		{"npm", []string{"exec", "--", "@google/gemini-cli", "--acp"}, "acp.google.gemini"},
		{"node", []string{npxScript}, "acp.anthropic.claude"},
		{"node", []string{"--max-old-space-size=4096", checkoutScript, "--acp"}, "acp.google.gemini"},
		{"node", []string{link, "--acp"}, "acp.qwen.qwen-code"},
		{"node", []string{other}, ""},
		{"node", []string{"relative.js"}, ""},
		{"npx", []string{"-y", "@modelcontextprotocol/server-everything"}, ""},
		{"my-agent", nil, ""},
		{"npm", []string{"install", "@google/gemini-cli"}, ""},
	} {
		if got := Recognize(tc.cmd, tc.args); got != tc.want {
			t.Errorf("Recognize(%s %q) = %q, want %q", tc.cmd, tc.args, got, tc.want)
		}
	}

	for name, want := range map[string]string{
		"@agentclientprotocol/claude-agent-acp": "acp.anthropic.claude",
		"codex-acp":                             "acp.openai.codex",
		"gemini-cli":                            "acp.google.gemini",
		"OpenCode":                              "acp.sst.opencode",
		"qwen-code":                             "acp.qwen.qwen-code",
		"testagent":                             "",
	} {
		got := ""
		if k := byReported(name); k != nil {
			got = k.id
		}
		if got != want {
			t.Errorf("byReported(%q) = %q, want %q", name, got, want)
		}
	}
}

// An agent launched through npx, with a HOME of its own in env, gets its state under that
// HOME, npx's cache writable, its keys and its confined arguments.
func TestLaunchProfileHonoursTheAgentsHome(t *testing.T) {
	home := t.TempDir()
	c := Config{ID: "acp.my.codex", Command: "npx", Args: []string{"-y", "@agentclientprotocol/codex-acp@2.6.0"},
		Env: map[string]string{"HOME": home}}.withLaunch(true)
	for _, want := range []string{filepath.Join(home, ".codex"), filepath.Join(home, ".npm")} {
		if !slices.Contains(c.WritePaths, want) || !slices.ContainsFunc(c.State, func(s StatePath) bool { return s.Path == want }) {
			t.Errorf("%s is not created and writable: write %q state %+v", want, c.WritePaths, c.State)
		}
	}
	if !slices.Contains(c.ReadPaths, filepath.Join(home, ".npmrc")) {
		t.Errorf("npm's settings are not readable: %q", c.ReadPaths)
	}
	if !slices.Contains(c.KeepEnv, "OPENAI_API_KEY") {
		t.Errorf("codex launched by npx loses its key: %q", c.KeepEnv)
	}
	if c.Env["INITIAL_AGENT_MODE"] != "read-only" {
		t.Errorf("confined codex through npx does not start in its asking mode: %q", c.Env)
	}
	if c.known == nil || c.known.id != "acp.openai.codex" {
		t.Errorf("not recognised: %+v", c.known)
	}

	// Without a HOME of its own, "~" stays for agenticd's home.
	c = Config{ID: "acp.x.y", Command: "bunx", Args: []string{"some-agent"}}.withLaunch(true)
	if c.known != nil || !slices.Contains(c.WritePaths, "~/.bun/install/cache") {
		t.Errorf("an unknown agent through bunx: known %v, write %q", c.known, c.WritePaths)
	}
}

// The MCP servers an agent starts run inside its boundary: their runners' caches are
// writable and their installations readable; a request's server opens only node_modules.
func TestMCPServersInstallationsAndRunners(t *testing.T) {
	dir := t.TempDir()
	script := writeFile(t, filepath.Join(dir, ".npm/_npx/ab12/node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "")
	secret := writeFile(t, filepath.Join(dir, "private/notes.txt"), "")
	servers := []presenters.MCPServer{
		{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}},
		{Name: "script", Command: "node", Args: []string{script}},
		{Name: "fetch", Command: "uvx", Args: []string{"mcp-server-fetch"}},
		{Name: "odd", Command: "node", Args: []string{secret}},
		{Name: "web", URL: "http://127.0.0.1:1/mcp"},
	}
	modules := filepath.Join(dir, ".npm/_npx/ab12/node_modules")
	configured := mcpPaths(servers, dir, true)
	if !slices.Contains(configured.read, modules) || !slices.Contains(configured.read, filepath.Join(dir, "private")) {
		t.Errorf("configured servers' installations are not readable: %q", configured.read)
	}
	for _, want := range []string{filepath.Join(dir, ".npm"), filepath.Join(dir, ".cache/uv")} {
		if !slices.ContainsFunc(configured.state, func(s StatePath) bool { return s.Path == want }) {
			t.Errorf("runner cache %s missing: %+v", want, configured.state)
		}
	}
	requested := mcpPaths(servers, dir, false)
	if !slices.Contains(requested.read, modules) || slices.Contains(requested.read, filepath.Join(dir, "private")) {
		t.Errorf("a request's servers open %q; want only node_modules trees", requested.read)
	}
}

// Copilot CLI unpacks itself into ~/.cache/copilot on first start, and its own model
// provider's key (BYOK) is one of its keys.
func TestCopilotCacheAndProviderKey(t *testing.T) {
	home := t.TempDir()
	c := Config{ID: "acp.github.copilot", Command: "copilot", Args: []string{"--acp"},
		Env: map[string]string{"HOME": home}}.withLaunch(true)
	for _, want := range []string{filepath.Join(home, ".copilot"), filepath.Join(home, ".cache", "copilot")} {
		if !slices.Contains(c.WritePaths, want) || !slices.ContainsFunc(c.State, func(s StatePath) bool { return s.Path == want }) {
			t.Errorf("%s is not created and writable: write %q state %+v", want, c.WritePaths, c.State)
		}
	}
	if !slices.Contains(c.KeepEnv, "COPILOT_PROVIDER_API_KEY") || !slices.Contains(AllKnownKeys(), "COPILOT_PROVIDER_API_KEY") {
		t.Errorf("Copilot's provider key is not kept for it and hidden from others: keep %q", c.KeepEnv)
	}
}

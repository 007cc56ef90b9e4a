package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// knownAgent is an ACP agent agenticd knows: how to find it on PATH, how to recognise it
// however it is launched, and what it needs to run inside the boundary.
type knownAgent struct {
	id          string
	name        string
	description string
	// binaries are its program names; Discover looks for the first on PATH.
	binaries []string
	// args are added when Discover finds it on PATH (its ACP mode).
	args []string
	// packages ship it (npm names, without a version): an npx/bunx/pnpm dlx launch that
	// names one, or a node script inside one, is this agent.
	packages []string
	// reported are the names it gives in initialize's agentInfo (compared lower-cased,
	// with an npm scope taken off).
	reported []string
	claude   bool // Claude's adapters refuse to run as root unless IS_SANDBOX=1
	// state is where the agent keeps its login, settings and history: created when
	// missing, and writable when it runs confined.
	state []StatePath
	// confinedEnv is set, unless the agent's env: sets it, when agenticd bounds the
	// agent's files: what the agent needs to work inside that boundary.
	confinedEnv map[string]string
	// keys are the API-key variables the agent reads.
	keys []string
	// askingModes are the agent's own modes, in order of preference, in which it puts its
	// tool calls to the client's permission requests rather than deciding itself; a new
	// session starts in the first one it offers unless the session asks for a mode.
	askingModes []string
	// missingIsEmpty: the agent reads a file before it writes it and cannot create one
	// when that read fails, as gemini-cli's write tool does. Zed answers a read of a
	// missing file in the project with empty content, and such agents rely on it.
	missingIsEmpty bool
}

// Claude's adapters fail session/new without ~/.claude.json ({} will do) and cannot
// resume sessions without ~/.claude; codex-acp exits at once without ~/.codex, gemini
// without ~/.gemini, qwen without ~/.qwen.
var claudeState = []StatePath{{Path: "~/.claude"}, {Path: "~/.claude.json", File: true, Seed: "{}\n"}}

var claudeKeys = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

var knownAgents = []knownAgent{
	{binaries: []string{"claude-code-acp"}, id: "acp.anthropic.claude-code", name: "Claude Code", claude: true,
		packages: []string{"@zed-industries/claude-code-acp"}, reported: []string{"claude-code-acp"},
		description: "Claude Code through Zed's claude-code-acp adapter", state: claudeState, keys: claudeKeys, askingModes: []string{"default"}},
	{binaries: []string{"claude-agent-acp"}, id: "acp.anthropic.claude", name: "Claude Agent", claude: true,
		packages: []string{"@agentclientprotocol/claude-agent-acp", "@zed-industries/claude-agent-acp"}, reported: []string{"claude-agent-acp"},
		description: "Claude through the claude-agent-acp adapter", state: claudeState, keys: claudeKeys, askingModes: []string{"default"}},
	{binaries: []string{"codex-acp"}, id: "acp.openai.codex", name: "Codex",
		packages: []string{"@agentclientprotocol/codex-acp", "@zed-industries/codex-acp"}, reported: []string{"codex-acp"},
		description: "OpenAI Codex through the codex-acp adapter", state: []StatePath{{Path: "~/.codex"}},
		keys: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}, askingModes: []string{"read-only"},
		// codex-acp 2.x reads its settings from its environment and ~/.codex/config.toml
		// and ignores -c arguments. Codex retired the approval policy that asked before
		// every command; read-only (on-request, answered by the user) asks before every
		// edit, and starting in it leaves no turn in codex's default mode. Its own sandbox
		// cannot run inside agenticd's boundary (bubblewrap's mounts are refused under
		// Landlock, and codex refuses its legacy Landlock sandbox for read-only), so a
		// command fails there and the model asks to run it outside that sandbox, which
		// comes to agenticd as a permission request.
		confinedEnv: map[string]string{"INITIAL_AGENT_MODE": "read-only"}},
	// gemini-cli 0.33+ takes --acp (--experimental-acp is its deprecated alias).
	{binaries: []string{"gemini"}, id: "acp.google.gemini", name: "Gemini CLI", args: []string{"--acp"},
		packages: []string{"@google/gemini-cli"}, reported: []string{"gemini-cli", "gemini"},
		description: "Google Gemini CLI in ACP mode", state: []StatePath{{Path: "~/.gemini"}},
		keys: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, askingModes: []string{"default"}, missingIsEmpty: true},
	// opencode keeps its data, config, cache and state under the XDG directories.
	{binaries: []string{"opencode"}, id: "acp.sst.opencode", name: "opencode", args: []string{"acp"},
		packages: []string{"opencode-ai"}, reported: []string{"opencode"},
		description: "opencode in ACP mode",
		state: []StatePath{{Path: "~/.local/share/opencode"}, {Path: "~/.config/opencode"}, {Path: "~/.cache/opencode"},
			{Path: "~/.local/state/opencode"}},
		keys: []string{"OPENCODE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"}},
	{binaries: []string{"qwen"}, id: "acp.qwen.qwen-code", name: "Qwen Code", args: []string{"--acp"},
		packages: []string{"@qwen-code/qwen-code"}, reported: []string{"qwen-code", "qwen"},
		description: "Qwen Code in ACP mode", state: []StatePath{{Path: "~/.qwen"}},
		keys: []string{"DASHSCOPE_API_KEY", "OPENAI_API_KEY"}, askingModes: []string{"default"}},
	{binaries: []string{"copilot"}, id: "acp.github.copilot", name: "Copilot CLI", args: []string{"--acp"},
		packages: []string{"@github/copilot"}, reported: []string{"copilot", "copilot-cli", "github-copilot", "github copilot"},
		description: "GitHub Copilot CLI in ACP mode",
		// It unpacks itself into ~/.cache/copilot on first start.
		state: []StatePath{{Path: "~/.copilot"}, {Path: "~/.cache/copilot"}},
		// The provider keys are its own model provider's (BYOK), used instead of GitHub.
		keys: []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_BEARER_TOKEN"}},
}

// AllKnownKeys is the API-key variables every known agent reads: hidden from the
// processes of all the others.
func AllKnownKeys() []string {
	var out []string
	for _, k := range knownAgents {
		for _, key := range k.keys {
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// Recognize returns the id of the known agent that command and args launch, however
// they launch it (see recognize); "" for an agent agenticd does not know.
func Recognize(command string, args []string) string {
	if k, _ := recognize(command, args); k != nil {
		return k.id
	}
	return ""
}

// recognize finds the known agent command and args launch: by the program's name, by the
// package a package runner (npx, bunx, pnpm dlx, npm exec) is told to run, or by the
// package a node (or bun) script lies in. how says which, for the log.
func recognize(command string, args []string) (k *knownAgent, how string) {
	if k := byBinary(filepath.Base(command)); k != nil {
		return k, "by its program's name"
	}
	if r := runnerOf(command, args); r.kind != "" && r.pkg != "" {
		if k := byPackage(r.pkg); k != nil {
			return k, "by the package " + r.kind + " runs"
		}
		if k := byBinary(r.bin); k != nil {
			return k, "by the program " + r.kind + " runs"
		}
	}
	if script := scriptOf(command, args); script != "" {
		if k := byScript(script); k != nil {
			return k, "by the package of the script " + filepath.Base(command) + " runs"
		}
	}
	return nil, ""
}

// byReported finds the known agent that gave name in initialize's agentInfo.
func byReported(name string) *knownAgent {
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndexByte(n, '/'); strings.HasPrefix(n, "@") && i > 0 {
		n = n[i+1:]
	}
	for i := range knownAgents {
		if slices.Contains(knownAgents[i].reported, n) {
			return &knownAgents[i]
		}
	}
	return nil
}

func byBinary(name string) *knownAgent {
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".js"), ".mjs")
	for i := range knownAgents {
		if slices.Contains(knownAgents[i].binaries, name) {
			return &knownAgents[i]
		}
	}
	return nil
}

func byPackage(pkg string) *knownAgent {
	for i := range knownAgents {
		if slices.Contains(knownAgents[i].packages, pkg) {
			return &knownAgents[i]
		}
	}
	return nil
}

// byScript finds the known agent whose package holds script: by the node_modules path
// it lies in, else by the name in the nearest package.json above it (a checkout), else
// by the script's own name (a bin link).
func byScript(script string) *knownAgent {
	if real, err := filepath.EvalSymlinks(script); err == nil {
		script = real
	}
	if pkg := packageInPath(script); pkg != "" {
		if k := byPackage(pkg); k != nil {
			return k
		}
	}
	dir := filepath.Dir(script)
	for range 8 {
		if data, err := os.ReadFile(filepath.Join(dir, "package.json")); err == nil {
			var pj struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(data, &pj) == nil && pj.Name != "" {
				if k := byPackage(pj.Name); k != nil {
					return k
				}
				break
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return byBinary(filepath.Base(script))
}

// packageInPath is the npm package a path lies in, from its last node_modules segment:
// .../node_modules/@scope/name/... is @scope/name.
func packageInPath(p string) string {
	parts := strings.Split(filepath.ToSlash(p), "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if parts[i] != "node_modules" {
			continue
		}
		name := parts[i+1]
		if strings.HasPrefix(name, "@") && i+2 < len(parts) {
			name += "/" + parts[i+2]
		}
		return name
	}
	return ""
}

// runner is a package runner's launch: which runner, the package it runs (version taken
// off) and the program it runs from it when named apart from the package.
type runner struct {
	kind string // npx, bunx, pnpm, uvx
	pkg  string
	bin  string
}

// runnerOf reads a package runner's command line; kind is "" when command is none.
func runnerOf(command string, args []string) runner {
	base := filepath.Base(command)
	var r runner
	switch base {
	case "npx", "bunx", "uvx":
		r.kind = base
	case "pnpx":
		r.kind = "pnpm"
	case "npm", "bun", "pnpm", "uv", "yarn":
		// npm exec|x, bun x, pnpm dlx|exec, uv tool run, yarn dlx
		i := slices.IndexFunc(args, func(a string) bool { return !strings.HasPrefix(a, "-") })
		if i < 0 {
			return runner{}
		}
		sub := args[i]
		rest := args[i+1:]
		switch {
		case base == "npm" && (sub == "exec" || sub == "x"):
			r.kind = "npx"
		case base == "bun" && sub == "x":
			r.kind = "bunx"
		case base == "pnpm" && sub == "dlx":
			r.kind = "pnpm"
		case base == "yarn" && sub == "dlx":
			r.kind = "yarn"
		case base == "uv" && sub == "tool" && len(rest) > 0 && rest[0] == "run":
			r.kind, rest = "uvx", rest[1:]
		default:
			return runner{}
		}
		// Options before the subcommand (pnpm --package=x dlx y) count too.
		args = append(slices.Clone(args[:i]), rest...)
	default:
		return runner{}
	}
	// The package is --package's (-p, --from for uvx) value when given, the program is
	// the first plain argument; without --package the first plain argument is both.
	var first string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) && first == "" {
				first = args[i+1]
			}
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		switch name {
		case "-p", "--package", "--from":
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			if r.pkg == "" {
				r.pkg = value
			}
			continue
		case "-c", "--call", "--cache", "--registry", "--python", "--with", "--userconfig":
			if !hasValue {
				i++
			}
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		first = a
		break
	}
	if r.pkg == "" {
		r.pkg = first
	} else {
		r.bin = first
	}
	r.pkg = withoutVersion(r.pkg)
	return r
}

// withoutVersion takes a version or tag off a package spec: @scope/name@1.2 is
// @scope/name, name@latest is name, tool==1.0 is tool.
func withoutVersion(spec string) string {
	if i := strings.LastIndexByte(spec, '@'); i > 0 {
		spec = spec[:i]
	}
	if i := strings.IndexAny(spec, "=<>~["); i > 0 {
		spec = spec[:i]
	}
	return spec
}

// scriptOf is the script an interpreter (node, bun, deno) is told to run, as an absolute
// path; "" when command is no such interpreter or names no script.
func scriptOf(command string, args []string) string {
	switch filepath.Base(command) {
	case "node", "nodejs", "bun", "deno", "tsx":
	default:
		return ""
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-r", "--require", "--import", "--loader", "--experimental-loader", "--env-file":
			i++
			continue
		case "run": // bun run x, deno run x
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if !filepath.IsAbs(a) {
			return ""
		}
		return a
	}
	return ""
}

package acp

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// runnerState is what a package runner writes when it fetches and runs a package: its
// cache, where the packages it runs are installed. Confined, these must exist and be
// writable, or the runner fails before the agent (or MCP server) starts.
var runnerState = map[string][]StatePath{
	"npx":  {{Path: "~/.npm"}},
	"bunx": {{Path: "~/.bun/install/cache"}},
	"pnpm": {{Path: "~/.local/share/pnpm"}, {Path: "~/.cache/pnpm"}},
	"yarn": {{Path: "~/.cache/yarn"}},
	"uvx":  {{Path: "~/.cache/uv"}, {Path: "~/.local/share/uv"}},
}

// runnerSettings are the user's settings a runner reads (registry, proxy, auth): read
// only, and only where they exist.
var runnerSettings = map[string][]string{
	"npx":  {"~/.npmrc"},
	"bunx": {"~/.bunfig.toml", "~/.npmrc"},
	"pnpm": {"~/.npmrc", "~/.config/pnpm"},
	"yarn": {"~/.yarnrc", "~/.yarnrc.yml", "~/.npmrc"},
	"uvx":  {"~/.config/uv"},
}

// launchPaths are what one launch (an agent's or an MCP server's command) needs beyond
// the boundary's defaults.
type launchPaths struct {
	read  []string
	state []StatePath // created when missing, and writable
}

func (l *launchPaths) add(o launchPaths) {
	for _, r := range o.read {
		if !slices.Contains(l.read, r) {
			l.read = append(l.read, r)
		}
	}
	for _, s := range o.state {
		if !slices.ContainsFunc(l.state, func(x StatePath) bool { return x.Path == s.Path }) {
			l.state = append(l.state, s)
		}
	}
}

// runnerPaths are the caches and settings of the package runner command and args launch,
// none when they launch none; "~" is home when home is set.
func runnerPaths(command string, args []string, home string) launchPaths {
	r := runnerOf(command, args)
	var out launchPaths
	for _, s := range runnerState[r.kind] {
		s.Path = atHome(s.Path, home)
		out.state = append(out.state, s)
	}
	for _, p := range runnerSettings[r.kind] {
		out.read = append(out.read, atHome(p, home))
	}
	return out
}

// mcpPaths are what the stdio MCP servers an agent starts need inside the agent's
// boundary: their runners' caches, and their installations (the command's directory, the
// node_modules holding a script they run). configured says the servers come from
// agenticd's configuration; a session's own come from a request, and of their
// installations only node_modules trees are admitted: a request must not open any
// directory to reading by naming a file in it.
func mcpPaths(servers []presenters.MCPServer, home string, configured bool) launchPaths {
	var out launchPaths
	for _, m := range servers {
		if m.IsHTTP() || m.Command == "" {
			continue
		}
		h := home
		if v, ok := m.Env["HOME"]; ok && filepath.IsAbs(v) {
			h = v
		}
		out.add(runnerPaths(m.Command, m.Args, h))
		for _, p := range sandbox.InstallPaths(m.Command, m.Args) {
			if configured || filepath.Base(p) == "node_modules" {
				out.add(launchPaths{read: []string{p}})
			}
		}
	}
	return out
}

// atHome replaces a leading "~" with home; with no home the path is left for
// sandbox.ExpandHome (agenticd's own home).
func atHome(p, home string) string {
	if home == "" || (p != "~" && !strings.HasPrefix(p, "~/")) {
		return p
	}
	return filepath.Join(home, p[1:])
}

// withLaunch adds to c what its launch needs to run confined: what a known agent gets
// when c's command launches one (withKnown), its package runner's caches, and its
// configured MCP servers' runners and installations. confinesFiles says whether agenticd
// bounds the agents' files.
func (c Config) withLaunch(confinesFiles bool) Config {
	if k, how := recognize(c.Command, c.Args); k != nil {
		c = c.withKnown(k, confinesFiles)
		c.knownHow = how
	}
	home := c.Env["HOME"]
	var l launchPaths
	l.add(runnerPaths(c.Command, c.Args, home))
	l.add(mcpPaths(c.MCPServers, home, true))
	return c.withPaths(l)
}

// withKnown gives c what the known agent k needs: its state (under the HOME c's env sets,
// if any), its keys, its confined environment, IS_SANDBOX for Claude as root.
func (c Config) withKnown(k *knownAgent, confinesFiles bool) Config {
	c.known = k
	home := c.Env["HOME"]
	var l launchPaths
	for _, s := range k.state {
		s.Path = atHome(s.Path, home)
		l.state = append(l.state, s)
	}
	c = c.withPaths(l)
	for _, key := range k.keys {
		if !slices.Contains(c.KeepEnv, key) {
			c.KeepEnv = append(slices.Clone(c.KeepEnv), key)
		}
	}
	if confinesFiles {
		for name, v := range k.confinedEnv {
			c = c.withDefaultEnv(name, v)
		}
	}
	if k.claude && os.Geteuid() == 0 {
		c = c.withDefaultEnv("IS_SANDBOX", "1")
	}
	return c
}

// withDefaultEnv sets name to v in c's environment unless c's env: sets it; the map is
// copied, as configs share theirs.
func (c Config) withDefaultEnv(name, v string) Config {
	if _, set := c.Env[name]; set {
		return c
	}
	env := make(map[string]string, len(c.Env)+1)
	maps.Copy(env, c.Env)
	env[name] = v
	c.Env = env
	return c
}

// withPaths adds l's state (created and writable) and read paths to c.
func (c Config) withPaths(l launchPaths) Config {
	for _, s := range l.state {
		if !slices.ContainsFunc(c.State, func(x StatePath) bool { return x.Path == s.Path }) {
			c.State = append(slices.Clone(c.State), s)
		}
		if !slices.Contains(c.WritePaths, s.Path) {
			c.WritePaths = append(slices.Clone(c.WritePaths), s.Path)
		}
	}
	for _, r := range l.read {
		if !slices.Contains(c.ReadPaths, r) {
			c.ReadPaths = append(slices.Clone(c.ReadPaths), r)
		}
	}
	return c
}

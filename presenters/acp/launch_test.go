package acp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// confinedHarness is a harness whose agents run under the whole boundary.
func confinedHarness(t *testing.T) *harness {
	t.Helper()
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
	h := newHarness(t)
	roots, err := sandbox.NewRoots([]string{filepath.Dir(h.ws)}, sandbox.Options{Confinement: sandbox.ConfineOn})
	if err != nil {
		t.Fatal(err)
	}
	h.roots = roots
	return h
}

// nodePackage lays out an npm package holding a node script that runs the test agent
// with script, as an agent installed by npm (or fetched by npx) is, and returns the
// script's path.
func nodePackage(t *testing.T, h *harness, pkg, script string) string {
	t.Helper()
	dir := filepath.Join(h.dir, "lib/node_modules", pkg)
	agent := filepath.Join(dir, "bin/agent")
	data, err := os.ReadFile(testAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, agent, string(data))
	writeFile(t, filepath.Join(dir, "script.json"), script)
	return writeFile(t, filepath.Join(dir, "dist/index.js"), `const path = require("path");
const r = require("child_process").spawnSync(path.join(__dirname, "../bin/agent"),
  {stdio: "inherit", env: {...process.env, TESTAGENT_SCRIPT: path.join(__dirname, "../script.json")}});
process.exit(r.status === null ? 1 : r.status);
`)
}

// A known agent run as `node <script>` from its npm package, with a HOME of its own in
// env, can create its state there inside the boundary; an agent agenticd does not know
// cannot, and the error says why: the path refused, its stderr and what widens the
// boundary.
func TestConfinedAgentLaunchedAsNodeScriptGetsItsState(t *testing.T) {
	if asOrdinaryUser(t) {
		return
	}
	h := confinedHarness(t)
	const script = `{"agent": {"startShell": "mkdir -p \"$HOME/.gemini/tmp\" && echo started > \"$HOME/.gemini/tmp/mark\""}}`
	home := filepath.Join(h.dir, "agent-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}

	known := nodePackage(t, h, "@google/gemini-cli", script)
	p := h.presenter(Config{ID: "acp.test.gemini", Command: "node", Args: []string{known}, Env: map[string]string{"HOME": home}})
	if _, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)}); err != nil {
		t.Fatalf("a known agent launched as a node script does not start confined: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(home, ".gemini/tmp/mark")); err != nil || string(data) != "started\n" {
		t.Fatalf("the agent's state under its own HOME: %q, %v", data, err)
	}

	unknown := nodePackage(t, h, "some-agent", strings.ReplaceAll(script, ".gemini", ".some-agent"))
	p2 := h.presenter(Config{ID: "acp.test.unknown", Command: "node", Args: []string{unknown}, Env: map[string]string{"HOME": home}})
	_, err := p2.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if !errors.Is(err, presenters.ErrAgentUnavailable) {
		t.Fatalf("an unknown agent writing outside its boundary: %v, want ErrAgentUnavailable", err)
	}
	for _, want := range []string{"exited with status 1", "its last stderr lines", "Permission denied",
		"it was refused " + filepath.Join(home, ".some-agent"), "write_paths", "read_paths", "confinement: off"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the start failure does not say %q:\n%v", want, err)
		}
	}
}

// An agent whose launch does not show which it is, but which says at initialize that it
// is a known agent, starts again once with what that agent needs: here its state dir.
func TestAgentRecognisedByItsNameAtInitializeRestartsWithItsState(t *testing.T) {
	if asOrdinaryUser(t) {
		return
	}
	h := confinedHarness(t)
	home := filepath.Join(h.dir, "agent-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := h.config(`{"agent": {"name": "qwen-code"}, "turns": [[{"shell": "echo hi > \"$HOME/.qwen/settings\" && echo wrote"}]]}`)
	cfg.Env["HOME"] = home
	cfg.ReadPaths = []string{cfg.Env["TESTAGENT_SCRIPT"]}
	p := h.presenter(cfg)
	info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err != nil {
		t.Fatal(err)
	}
	res, from := h.send(p, info.SessionID, "write your settings")
	got := strings.Join(afterPreamble(t, h.finish(info.SessionID, res, from)), "\n")
	if !strings.Contains(got, "shell exit 0: wrote") {
		t.Fatalf("the agent could not write its state after saying it is qwen-code:\n%s\nlog:\n%s", got, h.log.String())
	}
	if !strings.Contains(h.log.String(), "known_agent=acp.qwen.qwen-code") {
		t.Errorf("the restart is not logged:\n%s", h.log.String())
	}
}

// A known agent that needs a key and lists no auth method is told which keys it reads and
// how to pass one, not to set an auth_method it does not have.
func TestMissingKeyIsNamedWhenTheAgentListsNoAuthMethod(t *testing.T) {
	h := newHarness(t)
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	bin := filepath.Join(h.dir, "bin", "gemini")
	data, err := os.ReadFile(testAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, bin, string(data))
	cfg := h.config(`{"agent": {"requireAuth": true}}`)
	cfg.Command = bin
	p := h.presenter(cfg)
	_, err = p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	var authErr *presenters.AuthRequiredError
	if !errors.As(err, &authErr) {
		t.Fatalf("CreateSession: %v, want AuthRequiredError", err)
	}
	msg := err.Error()
	for _, want := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "api_key_env", "env:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not name %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "set auth_method") {
		t.Errorf("the error asks for an auth_method the agent does not offer: %s", msg)
	}
}

// What an agent wrote to stderr before it died at start reaches the caller, bounded.
func TestStartFailureCarriesTheLastStderrLines(t *testing.T) {
	h := newHarness(t)
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("echo line-%02d-%s >&2", i, strings.Repeat("x", 400)))
	}
	p := h.presenter(h.config(fmt.Sprintf(`{"agent": {"startShell": %q}}`, strings.Join(lines, "; ")+"; echo 'fatal: no config' >&2; exit 3")))
	_, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err == nil {
		t.Fatal("the agent started")
	}
	msg := err.Error()
	if !strings.Contains(msg, `"fatal: no config"`) || !strings.Contains(msg, "line-29-") || strings.Contains(msg, "line-20-") {
		t.Errorf("the error does not carry the last stderr lines alone: %s", msg)
	}
	if len(msg) > 4096 {
		t.Errorf("the error is %d bytes long", len(msg))
	}
	if strings.Contains(msg, "boundary") {
		t.Errorf("an unconfined agent's failure blames the boundary: %s", msg)
	}
}

func TestRefusedPathsFromStderr(t *testing.T) {
	for line, want := range map[string]string{
		`Error: EACCES: permission denied, mkdir '/home/u/.claude'`:                         "/home/u/.claude",
		`mkdir: cannot create directory '/home/u/.qwen': Permission denied`:                 "/home/u/.qwen",
		`Error: Permission denied (os error 13) at path "/home/u/.codex/config.toml"`:       "/home/u/.codex/config.toml",
		`open /home/u/.copilot/x: permission denied`:                                        "/home/u/.copilot/x",
		`npm error code EACCES npm error syscall open npm error path /home/u/.npm/_cacache`: "/home/u/.npm/_cacache",
		`Error: ENOENT: no such file or directory, open '/x/y'`:                             "",
	} {
		if got := strings.Join(refusedPaths(line), ","); got != want {
			t.Errorf("refusedPaths(%q) = %q, want %q", line, got, want)
		}
	}
}

// A known agent's session starts in the agent's asking mode, so that its tool calls reach
// agenticd's policy, unless the session asks for another mode; an unknown agent's stays
// in the mode it chose.
func TestSessionsStartInTheAgentsAskingMode(t *testing.T) {
	h := newHarness(t)
	bin := filepath.Join(h.dir, "bin", "claude-agent-acp")
	data, err := os.ReadFile(testAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, bin, string(data))
	const script = `{"session": {"modes": {"currentModeId": "auto", "availableModes": [
	  {"id": "auto", "name": "Auto"}, {"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan"}]}}}`
	cfg := h.config(script)
	cfg.Command = bin
	cfg.Env["HOME"] = filepath.Join(h.dir, "home")
	p := h.presenter(cfg)
	for mode, want := range map[string]string{"": "default", "auto": "auto", "plan": "plan"} {
		info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws), ModeID: mode})
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.GetSession(testContext(t), info.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if info.CurrentModeID != want || got.CurrentModeID != want {
			t.Errorf("asked for mode %q: created in %q, GetSession shows %q; want %q", mode, info.CurrentModeID, got.CurrentModeID, want)
		}
	}

	unknown := h.presenter(h.config(script))
	info, err := unknown.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err != nil {
		t.Fatal(err)
	}
	if info.CurrentModeID != "auto" {
		t.Errorf("an unknown agent's session was moved to mode %q", info.CurrentModeID)
	}
}

// gemini-cli reads a file before it writes it: a missing file in the workspace reads as
// empty for it, as Zed answers, so it can create files. Other agents still learn the file
// is missing, and nobody reads outside the workspace.
func TestMissingFileReadsAsEmptyForAgentsThatNeedIt(t *testing.T) {
	h := newHarness(t)
	bin := filepath.Join(h.dir, "bin", "gemini")
	data, err := os.ReadFile(testAgentPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, bin, string(data))
	script := fmt.Sprintf(`{"turns": [[{"read": {"path": "{cwd}/new/file.txt"}}, {"read": {"path": %q}}]]}`, filepath.Join(h.dir, "missing.txt"))
	turn := func(cfg Config) string {
		p := h.presenter(cfg)
		info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
		if err != nil {
			t.Fatal(err)
		}
		res, from := h.send(p, info.SessionID, "create a file")
		return strings.Join(afterPreamble(t, h.finish(info.SessionID, res, from)), "\n")
	}
	gemini := h.config(script)
	gemini.Command = bin
	gemini.Env["HOME"] = filepath.Join(h.dir, "home")
	got := turn(gemini)
	if !strings.Contains(got, `"read: "`) || !strings.Contains(got, "read error") {
		t.Errorf("gemini: a missing file in the workspace should read empty, one outside fail:\n%s", got)
	}
	got = turn(h.config(script))
	if strings.Contains(got, `"read: "`) || !strings.Contains(got, "Resource not found") {
		t.Errorf("another agent should learn the file is missing:\n%s", got)
	}
}

// A vendor's own notification (qwen's prompt suggestions) is passed over quietly, not
// logged as an error every turn.
func TestVendorNotificationsAreNotErrors(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"turns": [[
	  {"line": "{\"jsonrpc\":\"2.0\",\"method\":\"prompt-suggestion\",\"params\":{\"suggestion\":\"go on\"}}"},
	  {"line": "{\"jsonrpc\":\"2.0\",\"method\":\"_qwen/usage\",\"params\":{}}"},
	  {"text": "done"}]]}`))
	info, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err != nil {
		t.Fatal(err)
	}
	res, from := h.send(p, info.SessionID, "hi")
	got := strings.Join(afterPreamble(t, h.finish(info.SessionID, res, from)), "\n")
	if !strings.Contains(got, `"done"`) {
		t.Fatalf("the turn:\n%s", got)
	}
	if log := h.log.String(); strings.Contains(log, "level=ERROR") || strings.Contains(log, "level=WARN") {
		t.Errorf("a vendor notification was logged as a problem:\n%s", log)
	}
}

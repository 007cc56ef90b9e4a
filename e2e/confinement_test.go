package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// The attacks an agent's command makes with every permission allowed, each echoing its
// exit status as name=N so the test can read what the kernel answered.
type attackSite struct {
	config, dataDir, outside, marker string
}

func newAttackSite(t *testing.T) (attackSite, daemon.Config) {
	t.Helper()
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
	base := t.TempDir()
	site := attackSite{
		config:  filepath.Join(base, "etc", "agenticd.yaml"),
		dataDir: filepath.Join(base, "data"),
		outside: filepath.Join(base, "outside"),
		marker:  fmt.Sprintf("agenticd-e2e-orphan-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	for _, dir := range []string{filepath.Dir(site.config), site.dataDir, site.outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(site.config, []byte("token: e2e-s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// agenticd's own variables and another agent's API key are in agenticd's environment;
	// every check below fails on output holding "e2e-s3cret".
	t.Setenv("AGENTICD_TOKEN", "e2e-s3cret-env-token")
	t.Setenv("E2E_OTHER_AGENT_KEY", "e2e-s3cret-other-agents-key")
	other := daemon.AgentConfig{ID: "deepchat.other.chat", Type: presenters.AgentTypeDeepChat, Provider: "fake",
		BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "E2E_OTHER_AGENT_KEY", Models: []string{"other-model"}}
	// Confinement is on by default (auto, and complete on this kernel): the test does not
	// ask for it, as a user does not.
	return site, daemon.Config{DataDir: site.dataDir, File: site.config, Token: "e2e-s3cret-token", Agents: []daemon.AgentConfig{other}}
}

// script is one shell line making every attack, then one legitimate write, then leaving a
// background process (setsid) behind.
func (a attackSite) script() string {
	return strings.Join([]string{
		"tr '\\0' '\\n' </proc/self/environ; echo read_env=$?",
		"cat " + a.config + "; echo read_config=$?",
		"ls " + a.dataDir + "; echo list_data=$?",
		"cat " + filepath.Join(a.dataDir, daemon.DatabaseFile) + " >/dev/null; echo read_db=$?",
		"touch " + filepath.Join(a.dataDir, "planted") + "; echo write_data=$?",
		"echo x > " + filepath.Join(a.outside, "escaped") + "; echo write_outside=$?",
		"echo inside > made-inside.txt; echo write_inside=$?",
		fmt.Sprintf("setsid sh -c 'sleep 1000; :' %s >/dev/null 2>&1 & echo spawned", a.marker),
	}, "; ")
}

// check reads the command's output: every attack refused, the write inside done, and
// no secret in it.
func (a attackSite) check(t *testing.T, who, output, ws string) {
	t.Helper()
	if strings.Contains(output, "e2e-s3cret") {
		t.Errorf("%s read the config file's token, an AGENTICD_* variable or another agent's API key: %q", who, output)
	}
	if !strings.Contains(output, "read_env=0") || !strings.Contains(output, "PATH=") {
		t.Errorf("%s could not list its own environment; the check above proves nothing: %q", who, output)
	}
	for _, attack := range []string{"read_config", "list_data", "read_db", "write_data", "write_outside"} {
		m := regexp.MustCompile(attack + `=(\d+)`).FindStringSubmatch(output)
		if m == nil || m[1] == "0" {
			t.Errorf("%s: %s was not refused (output %q)", who, attack, output)
		}
	}
	if !strings.Contains(output, "write_inside=0") {
		t.Errorf("%s could not write inside its workspace: %q", who, output)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made-inside.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("%s's file inside the workspace: %q, %v", who, b, err)
	}
	for _, p := range []string{filepath.Join(a.dataDir, "planted"), filepath.Join(a.outside, "escaped")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s wrote %s", who, p)
		}
	}
}

// orphans lists the processes left with the marker in their command line, as ps shows.
func (a attackSite) orphans(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ps", "-eo", "pid,args").Output()
	if err != nil {
		t.Fatalf("ps: %v", err)
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, a.marker) {
			left = append(left, strings.TrimSpace(line))
		}
	}
	return strings.Join(left, "; ")
}

func (a attackSite) waitNoOrphans(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		left := a.orphans(t)
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, processes it started are still running: %s", when, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A DeepChat run_command, allowed by the user, cannot reach agenticd's config or data,
// nor its secrets in its environment, nor write outside its workspace; it still writes
// inside; and what it leaves running in the background ends with it.
func TestDeepChatCommandIsConfined(t *testing.T) {
	site, cfg := newAttackSite(t)
	llm := newDCLLM(t)
	root := t.TempDir()
	ws := filepath.Join(root, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.WorkspaceRoots = []string{root}
	cfg.Agents = append(cfg.Agents, daemon.AgentConfig{ID: dcAgent, Type: presenters.AgentTypeDeepChat, Provider: "fake",
		BaseURL: llm.srv.URL + "/v1", Models: []string{"fake-model"}})
	s := startServer(t, cfg)
	sid := dcSession(t, s, ws, "strict")
	events := dcSubscribe(t, s, sid)
	args, _ := json.Marshal(map[string]string{"command": site.script()})
	llm.script(dcTools(dcCall{"call_attack", "run_command", string(args)}), dcText("Done."))
	sent := dcSend(t, s, sid, "try everything")
	var toolEnd *agenticv1.ToolCall
	for {
		ev := events.Next(t)
		if p := ev.GetToolPermissionRequired(); p != nil {
			// The user allows everything.
			dcRespond(t, s, sid, p.GetRequest().GetPermissionId(), agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE)
		}
		if e := ev.GetToolEnd(); e != nil {
			toolEnd = e.GetTool()
		}
		if dcIsEnd(sent.GetMessageId())(ev) {
			break
		}
	}
	if toolEnd == nil {
		t.Fatal("the command never ended")
	}
	out, err := protojson.Marshal(toolEnd)
	if err != nil {
		t.Fatal(err)
	}
	site.check(t, "run_command", string(out), ws)
	site.waitNoOrphans(t, "after the command ended")
}

// An ACP agent that runs commands inside its own process (as claude-agent-acp's Bash
// does, never asking the client) is held by the same boundary, and its environment holds
// no AGENTICD_* variable nor another agent's API key; what it leaves running
// ends when its process is stopped: at shutdown (SIGTERM's path) and after its idle time.
func TestACPAgentProcessIsConfined(t *testing.T) {
	site, cfg := newAttackSite(t)
	root, ws := workspaceUnder(t)
	cfg.WorkspaceRoots = []string{root}
	script, _ := json.Marshal(map[string]any{"turns": [][]map[string]any{{{"shell": site.script()}}}})
	cfg.Agents = append(cfg.Agents, scriptedAgent(t, "acp.test.attacker", string(script)))
	s := startServer(t, cfg)
	created, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{
		AgentId: "acp.test.attacker", Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()
	events := s.Subscribe(t, subscribeAfter(created.GetSession().GetLastSequence(), sid))
	sent, err := s.Client.SendMessage(context.Background(), &agenticv1.SendMessageRequest{SessionId: sid, Content: textContent("go")})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range events.Until(t, turnEnd(sent.GetMessageId())) {
		if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == sent.GetMessageId() {
			text.WriteString(d.GetText())
		}
	}
	site.check(t, "the agent's own shell", text.String(), ws)
	if left := site.orphans(t); left == "" {
		t.Fatal("the agent's background process is not running while its agent runs; the checks below prove nothing")
	}
	if info := agentStatus(t, s, "acp.test.attacker"); !strings.HasPrefix(info.GetConfinement(), "on: Landlock") {
		t.Errorf("AgentInfo.confinement = %q", info.GetConfinement())
	}
	s.Stop()
	site.waitNoOrphans(t, "after agenticd stopped")
}

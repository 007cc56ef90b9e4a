package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// The TypeScript ACP SDK (@agentclientprotocol/sdk 1.9.0, pinned in package.json) and its
// example clients, run unmodified with node, as a user would: examples/client.js starts
// its agent as `npx tsx <examples>/agent.ts` and reads permission answers from stdin;
// examples/ws-client.js dials ACP_WS_URL with the bearer token "example-token".

// acpSDKDir is the SDK's installed package; AGENTICD_ACP_SDK_DIR names another
// installation (its node_modules must hold ws too). Without node or the package the test
// skips on a developer's machine and fails under CI, where `npm ci` installs it.
func acpSDKDir(t *testing.T, needs ...string) string {
	t.Helper()
	dir := os.Getenv("AGENTICD_ACP_SDK_DIR")
	if dir == "" {
		dir = "../../node_modules/@agentclientprotocol/sdk"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(dir, "dist", "examples", "client.js"))
	_, nodeErr := exec.LookPath("node")
	err = errors.Join(statErr, nodeErr)
	for _, pkg := range needs {
		if err != nil {
			break
		}
		// Resolved as the examples resolve it, from their own directory.
		probe := exec.Command("node", "--input-type=module", "-e", fmt.Sprintf("await import(%q)", pkg))
		probe.Dir = filepath.Join(dir, "dist", "examples")
		if out, perr := probe.CombinedOutput(); perr != nil {
			err = fmt.Errorf("%s cannot be imported beside the SDK: %v\n%s", pkg, perr, out)
		}
	}
	if err != nil {
		msg := fmt.Sprintf("the TypeScript ACP SDK's examples (@agentclientprotocol/sdk@1.9.0) are not runnable: %v; run `npm ci` at the repo root (make deps does)", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// agentOnPath is a directory to put first on PATH, whose `npx` runs `agenticctl acp` for
// agent: the command the example client starts as its agent.
func (d *agenticd) agentOnPath(t *testing.T, ctl, agent string) string {
	t.Helper()
	dir := t.TempDir()
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	script := fmt.Sprintf("#!/bin/sh\n# The example client's agent (npx tsx .../agent.ts): agenticd.\nexec %s --addr %s --data-dir %s acp --agent %s\n",
		q(ctl), q(d.addr), q(d.cfg.DataDir), q(agent))
	if err := os.WriteFile(filepath.Join(dir, "npx"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runNode runs a node program in dir with extra environment and stdin; it returns the
// combined output. A program that does not end within a minute fails the test.
func runNode(t *testing.T, dir, stdin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The agent it starts has its stdout; waiting for its end must not wait for that.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func wantOutput(t *testing.T, who, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s's output lacks %q:\n%s", who, want, out)
		}
	}
}

// sessionEvents are the events of one session the log holds.
func (l *eventLog) sessionEvents(id string) []*pb.AgenticEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*pb.AgenticEvent
	for _, ev := range l.events {
		if ev.GetSessionId() == id {
			out = append(out, ev)
		}
	}
	return out
}

// text joins the deltas of one role of a session.
func (l *eventLog) text(id string, role pb.MessageRole) string {
	var b strings.Builder
	for _, ev := range l.sessionEvents(id) {
		if d := ev.GetMessageDelta(); d != nil && d.GetRole() == role {
			b.WriteString(d.GetText())
		}
	}
	return b.String()
}

// checkEditTurn checks what a gRPC subscriber saw of an editor's turn of editScript in
// session id: the editor's prompt, the agent's text, the permission the editor granted,
// the tool call's end and the turn's end.
func checkEditTurn(t *testing.T, events *eventLog, id, prompt string) {
	t.Helper()
	events.waitFor(t, "MESSAGE_END end_turn of the editor's session", func(ev *pb.AgenticEvent) bool {
		return ev.GetSessionId() == id && ev.GetMessageEnd().GetStopReason() == pb.StopReason_STOP_REASON_END_TURN
	})
	evs := events.sessionEvents(id)
	if !slices.ContainsFunc(evs, func(ev *pb.AgenticEvent) bool {
		return ev.GetToolPermissionGranted().GetDecidedBy() == pb.PermissionDecider_PERMISSION_DECIDER_USER
	}) {
		t.Error("the gRPC subscriber saw no permission granted by the user")
	}
	if !slices.ContainsFunc(evs, func(ev *pb.AgenticEvent) bool {
		return ev.GetToolEnd().GetTool().GetStatus() == pb.ToolStatus_TOOL_STATUS_COMPLETED
	}) {
		t.Error("the gRPC subscriber saw no tool call completed")
	}
	if got := events.text(id, pb.MessageRole_MESSAGE_ROLE_USER); got != prompt {
		t.Errorf("the gRPC subscriber saw the user say %q; want the editor's prompt %q", got, prompt)
	}
	if got := events.text(id, pb.MessageRole_MESSAGE_ROLE_ASSISTANT); !strings.Contains(got, "Hello! I will write NOTES.md.") || !strings.Contains(got, " Done.") {
		t.Errorf("the gRPC subscriber saw the agent say %q", got)
	}
}

var createdSession = regexp.MustCompile(`Created session: (\S+)`)

// The TypeScript SDK's example client drives a whole turn through `agenticctl acp`,
// started as its agent command: text, thought, plan, a tool call whose permission the
// person at the client grants on stdin, the write done by agenticd. A gRPC subscriber
// sees the same turn in the same session.
func TestACPWithTheTypeScriptSDKExampleClient(t *testing.T) {
	sdk := acpSDKDir(t)
	d := startAgenticd(t, editScript)
	ctl := buildTool(t, t.TempDir(), "agenticctl", ".")
	events := d.subscribe(t)

	path := d.agentOnPath(t, ctl, acpAgentID) + string(os.PathListSeparator) + os.Getenv("PATH")
	out := runNode(t, d.ws, "1\n", []string{"PATH=" + path}, filepath.Join(sdk, "dist", "examples", "client.js"))
	wantOutput(t, "the example client", out,
		"✅ Connected to agent (protocol v1)", "💬 User: Hello, agent!", "[agent_thought_chunk]",
		"Hello! I will write NOTES.md.", "[plan]", "🔧 Write NOTES.md (pending)",
		"🔐 Permission requested: Write NOTES.md", "1. Allow (allow_once)", "Reject (reject_once)",
		"permission: allow", "🔧 Tool call `write-notes` updated: completed", " Done.",
		"✅ Agent completed with: end_turn")
	if strings.Contains(out, "[Client]") {
		t.Errorf("the example client reported an error or was asked for files:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(d.ws, "NOTES.md")); err != nil || string(b) != "notes from the editor\n" {
		t.Errorf("NOTES.md: %q, %v; want agenticd to have written it", b, err)
	}
	m := createdSession.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the example client named no session:\n%s", out)
	}
	checkEditTurn(t, events, m[1], "Hello, agent!")
}

// Errors reach the example client as ACP errors with agenticd's message, and it ends: a
// working directory outside the workspace roots, and an agent agenticd does not have.
func TestACPTypeScriptSDKExampleClientErrors(t *testing.T) {
	sdk := acpSDKDir(t)
	d := startAgenticd(t, editScript)
	ctl := buildTool(t, t.TempDir(), "agenticctl", ".")
	client := filepath.Join(sdk, "dist", "examples", "client.js")

	path := d.agentOnPath(t, ctl, acpAgentID) + string(os.PathListSeparator) + os.Getenv("PATH")
	outside := t.TempDir()
	out := runNode(t, outside, "", []string{"PATH=" + path}, client)
	wantOutput(t, "the example client outside the roots", out, "✅ Connected to agent", "[Client] Error:", outside, "workspace", "code: -32602")
	if strings.Contains(out, "Created session") {
		t.Errorf("a session was created outside the workspace roots:\n%s", out)
	}

	path = d.agentOnPath(t, ctl, "acp.test.nonesuch") + string(os.PathListSeparator) + os.Getenv("PATH")
	out = runNode(t, d.ws, "", []string{"PATH=" + path}, client)
	wantOutput(t, "the example client of an unknown agent", out, "[Client] Error:", "acp.test.nonesuch", "code: -32002")
	if strings.Contains(out, "Connected to agent") {
		t.Errorf("initialize succeeded for an unknown agent:\n%s", out)
	}
}

// The TypeScript SDK's WebSocket example client runs a turn against agenticd's own port,
// with its fixed bearer token, registered as a principal's: its permission request
// answered by the client, the same turn seen by a gRPC subscriber, and the session
// owned by that principal.
func TestACPWithTheTypeScriptSDKWebSocketClient(t *testing.T) {
	sdk := acpSDKDir(t, "ws")
	sum := sha256.Sum256([]byte("example-token"))
	d := startAgenticd(t, editScript, func(c *daemon.Config) {
		c.Principals = append(c.Principals, daemon.PrincipalConfig{Name: "ws-example", TokenSHA256: hex.EncodeToString(sum[:]), Scopes: []string{"read", "write"}})
	})
	events := d.subscribe(t)

	out := runNode(t, d.ws, "", []string{"ACP_WS_URL=ws://" + d.addr + "/acp/v1?agent=" + acpAgentID},
		filepath.Join(sdk, "dist", "examples", "ws-client.js"))
	wantOutput(t, "the WebSocket example client", out,
		"[agent_thought_chunk]", "Hello! I will write NOTES.md.", "[plan]", "[tool_call]", "permission: allow",
		"[tool_call_update]", " Done.", "Done: end_turn", "loadSession=true")
	if b, err := os.ReadFile(filepath.Join(d.ws, "NOTES.md")); err != nil || string(b) != "notes from the editor\n" {
		t.Errorf("NOTES.md: %q, %v; want agenticd to have written it", b, err)
	}
	m := regexp.MustCompile(`Saved session (\S+);`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the WebSocket example client named no session:\n%s", out)
	}
	checkEditTurn(t, events, m[1], "Hello over WebSocket")
	got, err := d.apiClient(t).GetSession(t.Context(), &pb.GetSessionRequest{SessionId: m[1]})
	if err != nil || got.GetSession().GetOwner() != "ws-example" {
		t.Errorf("the session's owner: %q, %v; want the principal of the client's token", got.GetSession().GetOwner(), err)
	}
}

// loadCancelScript uses the SDK's client API (the example clients only ever open a new
// session): it opens a session with session/load, prompts, cancels once the agent
// works, and reports each update and answer as a JSON line.
const loadCancelScript = `
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
const acp = await import(process.env.ACP_SDK);
const [command, ...args] = JSON.parse(process.env.ACP_AGENT_COMMAND);
const sessionId = process.env.ACP_SESSION_ID;
const report = (o) => console.log(JSON.stringify(o));
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
let working;
const agentWorks = new Promise((resolve) => { working = resolve; });
try {
  await acp.client({ name: "agenticd-test" })
    .onNotification(acp.methods.client.session.update, (ctx) => {
      const u = ctx.params.update;
      report({ update: u.sessionUpdate, text: u.content?.text });
      if (u.content?.text === "Working.") working();
    })
    .connectWith(acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout)), async (ctx) => {
      const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      report({ loadSession: init.agentCapabilities?.loadSession === true });
      await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
      report({ loaded: sessionId });
      const prompt = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "from the editor" }] });
      await agentWorks;
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      report({ stopReason: (await prompt).stopReason });
    });
} finally {
  agent.kill();
}
`

// A session created and used through gRPC opens in a client of the TypeScript SDK with
// session/load, its history first; the client's cancel ends its turn, which a gRPC
// subscriber sees end cancelled.
func TestACPLoadAndCancelWithTheTypeScriptSDK(t *testing.T) {
	sdk := acpSDKDir(t)
	d := startAgenticd(t, loadScript)
	ctl := buildTool(t, t.TempDir(), "agenticctl", ".")
	id := d.newSession(t)
	d.mustCtl(t, "send", id, "typed in the terminal")
	events := d.subscribe(t)

	script := filepath.Join(t.TempDir(), "load-cancel.mjs")
	if err := os.WriteFile(script, []byte(loadCancelScript), 0o644); err != nil {
		t.Fatal(err)
	}
	command, err := json.Marshal([]string{ctl, "--addr", d.addr, "--data-dir", d.cfg.DataDir, "acp", "--agent", acpAgentID})
	if err != nil {
		t.Fatal(err)
	}
	out := runNode(t, d.ws, "", []string{"ACP_SDK=" + filepath.Join(sdk, "dist", "acp.js"), "ACP_AGENT_COMMAND=" + string(command), "ACP_SESSION_ID=" + id}, script)

	type line struct {
		Update      string `json:"update"`
		Text        string `json:"text"`
		LoadSession *bool  `json:"loadSession"`
		Loaded      string `json:"loaded"`
		StopReason  string `json:"stopReason"`
	}
	var lines []line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("the script printed %q:\n%s", s, out)
		}
		lines = append(lines, l)
	}
	loadedAt := slices.IndexFunc(lines, func(l line) bool { return l.Loaded == id })
	if loadedAt < 0 || !slices.ContainsFunc(lines, func(l line) bool { return l.LoadSession != nil && *l.LoadSession }) {
		t.Fatalf("session/load did not answer, or initialize offered no loadSession:\n%s", out)
	}
	history := lines[:loadedAt]
	if !slices.Contains(history, line{Update: "user_message_chunk", Text: "typed in the terminal"}) ||
		!slices.Contains(history, line{Update: "agent_message_chunk", Text: "Answer one."}) {
		t.Errorf("the history before session/load answered:\n%s", out)
	}
	if l := lines[len(lines)-1]; l.StopReason != "cancelled" {
		t.Errorf("the prompt ended %q; want cancelled:\n%s", l.StopReason, out)
	}
	if slices.ContainsFunc(lines[loadedAt:], func(l line) bool { return l.Update == "user_message_chunk" }) {
		t.Errorf("the client got its own prompt back:\n%s", out)
	}
	events.waitFor(t, "MESSAGE_END cancelled", func(ev *pb.AgenticEvent) bool {
		return ev.GetSessionId() == id && ev.GetMessageEnd().GetStopReason() == pb.StopReason_STOP_REASON_CANCELLED
	})
	if got := events.text(id, pb.MessageRole_MESSAGE_ROLE_USER); got != "from the editor" {
		t.Errorf("the gRPC subscriber saw the user say %q; want the client's prompt", got)
	}
}

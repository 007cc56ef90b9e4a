package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

// DeepChat against a real third-party MCP server: @modelcontextprotocol/server-everything,
// pinned in package.json and installed into node_modules by `npm ci`. Its echo, tiny
// image and long-running tools run offline (no network), and they are annotated
// read-only, so the balanced mode runs them without asking.

const (
	everythingServer = "everything"
	everythingEcho   = everythingServer + "__echo"
	everythingImage  = everythingServer + "__get-tiny-image"
	everythingLong   = everythingServer + "__trigger-long-running-operation"
)

// everythingCommand is the server's installed command, node_modules/.bin's link to its
// entry script (a "#!/usr/bin/env node" script). Given in agenticd's configuration, the
// server may read its own installation under confinement: the node_modules holding the
// script, where its dependencies are. Without the package the test skips on a
// developer's machine and fails under CI, where `npm ci` installs it.
func everythingCommand(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../node_modules/.bin/mcp-server-everything")
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(bin)
	_, nodeErr := exec.LookPath("node")
	if err := errors.Join(statErr, nodeErr); err != nil {
		msg := fmt.Sprintf("@modelcontextprotocol/server-everything is not runnable: %v; run `npm ci` at the repo root (make deps does)", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// everythingTinyImage is the PNG the server's get-tiny-image tool returns, read from the
// installed package's source.
func everythingTinyImage(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../node_modules/@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("get-tiny-image.js holds no MCP_TINY_IMAGE constant: has the package changed?")
	}
	png, err := base64.StdEncoding.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return png
}

func TestDeepChatWithServerEverything(t *testing.T) {
	command := everythingCommand(t)
	wantImage := everythingTinyImage(t)

	llm := newDCLLM(t)
	root := t.TempDir()
	ws := filepath.Join(root, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{{
		ID: dcAgent, Type: presenters.AgentTypeDeepChat, Provider: "fake", BaseURL: llm.srv.URL + "/v1",
		Models:     []string{"fake-model"},
		MCPServers: []daemon.MCPServerConfig{{Name: everythingServer, Command: command}},
	}}})
	sid := dcSession(t, s, ws, "balanced")
	events := dcSubscribe(t, s, sid)

	// Turn 1: the model calls echo, then the image tool.
	const echoed = "hello from agenticd's e2e test"
	llm.script(
		dcTools(dcCall{"call_echo", everythingEcho, dcJSON(map[string]string{"message": echoed})}),
		dcTools(dcCall{"call_image", everythingImage, `{}`}),
		dcText("Echoed and ", "shown."))
	sent := dcSend(t, s, sid, "echo something, then show the tiny image")
	got := events.Until(t, dcPermissionOrEnd(sent.GetMessageId()))
	if req := got[len(got)-1].GetToolPermissionRequired(); req != nil {
		t.Fatalf("a read-only MCP tool was asked for under balanced: %v", req)
	}
	if end := got[len(got)-1].GetMessageEnd(); end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN {
		t.Fatalf("turn 1 ended with %v; events: %v", end, got)
	}
	if errs := everythingErrors(got); len(errs) > 0 {
		t.Fatalf("ERROR events in turn 1: %v", errs)
	}

	offered := llm.toolNames(0)
	for _, name := range []string{everythingEcho, everythingImage, everythingLong, "read_file"} {
		if !slices.Contains(offered, name) {
			t.Fatalf("tool %s was not offered to the model; offered: %v", name, offered)
		}
	}

	echo := toolEnd(got, "call_echo")
	if echo.GetStatus() != agenticv1.ToolStatus_TOOL_STATUS_COMPLETED || len(echo.GetContent()) != 1 ||
		echo.GetContent()[0].GetText() != "Echo: "+echoed || echo.GetKind() != agenticv1.ToolKind_TOOL_KIND_READ {
		t.Fatalf("echo's TOOL_END = %v", echo)
	}
	if msg := llm.toolMessage(1, "call_echo"); msg != "Echo: "+echoed {
		t.Fatalf("the model read back %q for the echo call, want %q", msg, "Echo: "+echoed)
	}

	image := toolEnd(got, "call_image")
	if image.GetStatus() != agenticv1.ToolStatus_TOOL_STATUS_COMPLETED {
		t.Fatalf("the image tool's TOOL_END = %v", image)
	}
	checkTinyImage(t, "TOOL_END", image.GetContent(), wantImage)
	if msg := llm.toolMessage(2, "call_image"); !strings.Contains(msg, fmt.Sprintf("[image image/png, %d bytes, shown to the user]", len(wantImage))) {
		t.Fatalf("the model read back %q for the image call", msg)
	}
	msgs := dcMessages(t, s, sid)
	if len(msgs) != 2 {
		t.Fatalf("%d stored messages after turn 1, want 2", len(msgs))
	}
	checkTinyImage(t, "the stored message", storedTool(t, msgs[1], "call_image").GetContent(), wantImage)

	// Turn 2: the server is killed while a call runs. The call fails with an ERROR event
	// (MCP_SERVER_FAILED) and a failed tool call the model is told about; the next call
	// of one of its tools starts the server again and works.
	first := everythingPid(t)
	readBefore := readChars(t, first) // the idle server's reads so far
	llm.script(
		dcTools(dcCall{"call_long", everythingLong, `{"duration":30,"steps":1}`}),
		dcTools(dcCall{"call_echo_again", everythingEcho, `{"message":"still there?"}`}),
		dcText("It came back."))
	sent = dcSend(t, s, sid, "run the long operation")
	got = events.Until(t, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetToolRunning().GetTool().GetToolId() == "call_long" || dcIsEnd(sent.GetMessageId())(ev)
	})
	if got[len(got)-1].GetToolRunning() == nil {
		t.Fatalf("the long call never ran; events: %v", got)
	}
	// TOOL_RUNNING comes just before the request is written to the server: wait until the
	// server has read it (its reads grow), then kill it during the 30 s call.
	for deadline := time.Now().Add(eventWait); readChars(t, first) <= readBefore; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server never read the long call's request")
		}
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the server (pid %d): %v", first, err)
	}
	got = append(got, events.Until(t, dcIsEnd(sent.GetMessageId()))...)
	if end := got[len(got)-1].GetMessageEnd(); end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN {
		t.Fatalf("turn 2 ended with %v; events: %v", end, got)
	}

	long := toolEnd(got, "call_long")
	if long.GetStatus() == agenticv1.ToolStatus_TOOL_STATUS_COMPLETED {
		t.Fatalf("the long call completed (%v): the server was killed before the call reached it, and the call went to a new server", long)
	}
	if long.GetStatus() != agenticv1.ToolStatus_TOOL_STATUS_FAILED || !strings.Contains(long.GetError(), "MCP server failed") {
		t.Fatalf("the interrupted call's TOOL_END = %v", long)
	}
	errs := everythingErrors(got)
	if len(errs) != 1 || errs[0].GetReason() != agenticv1.ErrorReason_ERROR_REASON_MCP_SERVER_FAILED || errs[0].GetMessageId() != sent.GetMessageId() ||
		!strings.Contains(errs[0].GetMessage(), everythingServer+" failed during the call") || !errs[0].GetRetryable() {
		t.Fatalf("ERROR events in turn 2 = %v, want one MCP_SERVER_FAILED naming the server", errs)
	}
	if msg := llm.toolMessage(4, "call_long"); !strings.HasPrefix(msg, "Error: MCP server failed: "+everythingServer) {
		t.Fatalf("the model read back %q for the interrupted call", msg)
	}
	again := toolEnd(got, "call_echo_again")
	if again.GetStatus() != agenticv1.ToolStatus_TOOL_STATUS_COMPLETED || len(again.GetContent()) != 1 || again.GetContent()[0].GetText() != "Echo: still there?" {
		t.Fatalf("echo after the crash: TOOL_END = %v", again)
	}
	if msg := llm.toolMessage(5, "call_echo_again"); msg != "Echo: still there?" {
		t.Fatalf("the model read back %q for the echo after the crash", msg)
	}
	if second := everythingPid(t); second == first {
		t.Fatalf("the server after the crash has the killed server's pid %d", first)
	}
	if n := llm.requestCount(); n != 6 {
		t.Fatalf("%d provider requests, want 6", n)
	}

	// Closing the session stops the server. The kernel ends what is left of its PID
	// namespace after its init, so the node process may take a moment to go.
	if _, err := s.Client.CloseSession(context.Background(), &agenticv1.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	for deadline := time.Now().Add(eventWait); len(everythingPids(t)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("server processes left %s after the session closed: %v", eventWait, everythingPids(t))
		}
	}
}

// checkTinyImage checks that content is the image tool's: its text, the PNG, its text.
func checkTinyImage(t *testing.T, where string, content []*agenticv1.ToolContent, want []byte) {
	t.Helper()
	if len(content) != 3 || content[0].GetText() != "Here's the image you requested:" || content[2].GetText() != "The image above is the MCP logo." {
		t.Fatalf("the image tool's content in %s = %v", where, content)
	}
	img := content[1].GetImage()
	if img.GetMimeType() != "image/png" || !bytes.Equal(img.GetData(), want) {
		t.Fatalf("the image block in %s is %q with %d bytes, want image/png with the server's %d", where, img.GetMimeType(), len(img.GetData()), len(want))
	}
}

// toolEnd is the tool call of the TOOL_END event for id.
func toolEnd(evs []*agenticv1.AgenticEvent, id string) *agenticv1.ToolCall {
	for _, ev := range evs {
		if tc := ev.GetToolEnd().GetTool(); tc.GetToolId() == id {
			return tc
		}
	}
	return nil
}

// storedTool is the tool block for id of a stored message.
func storedTool(t *testing.T, msg *agenticv1.SessionMessage, id string) *agenticv1.ToolCall {
	t.Helper()
	for _, b := range msg.GetBlocks() {
		if b.GetTool().GetToolId() == id {
			return b.GetTool()
		}
	}
	t.Fatalf("no tool block %s in the stored message %v", id, msg)
	return nil
}

func everythingErrors(evs []*agenticv1.AgenticEvent) []*agenticv1.ErrorReported {
	var out []*agenticv1.ErrorReported
	for _, ev := range evs {
		if e := ev.GetError(); e != nil {
			out = append(out, e)
		}
	}
	return out
}

// toolNames are the function names offered in the provider's request i.
func (l *dcLLM) toolNames(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	tools, _ := l.requests[i]["tools"].([]any)
	for _, tool := range tools {
		fn, _ := tool.(map[string]any)["function"].(map[string]any)
		name, _ := fn["name"].(string)
		names = append(names, name)
	}
	return names
}

// toolMessage is the content of the tool message answering callID in the provider's
// request i ("" if it has none).
func (l *dcLLM) toolMessage(i int, callID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.requests) {
		return ""
	}
	msgs, _ := l.requests[i]["messages"].([]any)
	for _, m := range msgs {
		msg, _ := m.(map[string]any)
		if msg["role"] == "tool" && msg["tool_call_id"] == callID {
			content, _ := msg["content"].(string)
			return content
		}
	}
	return ""
}

// everythingPid is the pid of the one running server-everything node process this test
// started.
func everythingPid(t *testing.T) int {
	t.Helper()
	pids := everythingPids(t)
	if len(pids) != 1 {
		t.Fatalf("%d server-everything processes of this test run (%v), want 1", len(pids), pids)
	}
	return pids[0]
}

// everythingPids are the node processes running server-everything that descend from
// this test process (under confinement they are the children of an init in their own
// PID namespace; /proc here shows them with their pids in ours).
func everythingPids(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) != "node" || !strings.Contains(string(cmdline), "server-everything") {
			continue
		}
		if state, _ := procStat(pid); state == "Z" || !descendsFromUs(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// descendsFromUs reports whether pid's chain of parents leads to this test process.
func descendsFromUs(pid int) bool {
	for range 64 {
		_, ppid := procStat(pid)
		if ppid == os.Getpid() {
			return true
		}
		if ppid <= 1 {
			return false
		}
		pid = ppid
	}
	return false
}

// procStat is a process's state and parent from /proc/<pid>/stat ("", 0 if it is gone).
func procStat(pid int) (string, int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	// The command name in parentheses may hold spaces: the fields follow its last ")".
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", 0
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return "", 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return fields[0], ppid
}

// readChars is how many bytes a process has read through system calls (/proc/PID/io).
func readChars(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatalf("read the server's I/O counts: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/%d/io", pid)
	return 0
}

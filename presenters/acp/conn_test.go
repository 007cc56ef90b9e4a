package acp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// floodClient checks a flood's chunks at the connection level: each arrives once, in
// order. It hashes every chunk a few times so that it is slower than the agent, as a
// real consumer under load would be: without flow control the SDK's queue would fill.
type floodClient struct {
	c *agentConn

	mu        sync.Mutex
	next      int
	badOrder  string
	permAsked int
}

func (f *floodClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	if n.Update.AgentMessageChunk == nil || n.Update.AgentMessageChunk.Content.Text == nil {
		return nil
	}
	text := n.Update.AgentMessageChunk.Content.Text.Text
	if strings.HasPrefix(text, "permission: ") {
		return nil
	}
	sum := sha256.Sum256([]byte(text))
	for range 4 {
		sum = sha256.Sum256(sum[:])
	}
	idx, err := strconv.Atoi(strings.SplitN(text, "|", 2)[0])
	f.mu.Lock()
	defer f.mu.Unlock()
	if (err != nil || idx != f.next) && f.badOrder == "" {
		f.badOrder = fmt.Sprintf("chunk %d arrived when %d was expected (%q)", idx, f.next, text[:min(len(text), 20)])
	}
	f.next++
	return nil
}

func (f *floodClient) RequestPermission(ctx context.Context, req sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	f.mu.Lock()
	f.permAsked++
	f.mu.Unlock()
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(req.Options[0].OptionId)}, nil
}

func (f *floodClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}
func (f *floodClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}
func (f *floodClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}
func (f *floodClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}
func (f *floodClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}
func (f *floodClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}
func (f *floodClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}

func dialFlood(t *testing.T, h *harness, script string) (*agentConn, *floodClient) {
	t.Helper()
	cfg, err := h.config(script).validate()
	if err != nil {
		t.Fatal(err)
	}
	var fc *floodClient
	c, err := dial(testContext(t), cfg, procScope{workspace: h.ws}, h.roots, testLogger(t), func(c *agentConn) sdk.Client {
		fc = &floodClient{c: c}
		return fc
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop(context.Background()) })
	return c, fc
}

// The SDK alone closes the connection when 1024 notifications wait; through the agent
// reader a fast agent is slowed down instead, every chunk arrives in order, and the
// Prompt response comes only after every chunk of its turn was handled.
func TestConnectionSurvivesAFloodAndStaysUsable(t *testing.T) {
	h := newHarness(t)
	const chunks = 100_000
	c, fc := dialFlood(t, h, fmt.Sprintf(`{"turns":[[{"flood":{"count":%d,"size":64}}],[{"text":"0|second turn"}]]}`, chunks))
	ctx := testContext(t)
	sess, err := c.rpc.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.ws, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.rpc.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("go")}})
	if err != nil {
		t.Fatalf("flood turn: %v", err)
	}
	if resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %s", resp.StopReason)
	}
	fc.mu.Lock()
	got, bad := fc.next, fc.badOrder
	fc.next = 0
	fc.mu.Unlock()
	// Prompt returns only after the turn's notifications were handled.
	if got != chunks || bad != "" {
		t.Fatalf("received %d of %d chunks; order: %s", got, chunks, bad)
	}
	if _, err := c.rpc.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("again")}}); err != nil {
		t.Fatalf("second turn after the flood: %v", err)
	}
	if !c.alive() {
		t.Fatal("connection died")
	}
}

// A permission request sent while the notification stream is held back is served
// (the agent keeps flooding from another goroutine while it waits for the answer).
func TestConnectionServesAPermissionDuringAFlood(t *testing.T) {
	h := newHarness(t)
	const chunks = 20_000
	c, fc := dialFlood(t, h, fmt.Sprintf(`{"turns":[[{"flood":{"count":%d,"size":1024,"permissionAt":5000}}]]}`, chunks))
	ctx := testContext(t)
	sess, err := c.rpc.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.ws, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.rpc.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("go")}}); err != nil {
		t.Fatalf("flood turn: %v", err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.next != chunks || fc.badOrder != "" || fc.permAsked != 1 {
		t.Fatalf("received %d of %d chunks (order: %s), %d permission requests", fc.next, chunks, fc.badOrder, fc.permAsked)
	}
}

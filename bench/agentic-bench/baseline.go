package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// The two baselines read the same test agent as agenticd does, in the same run: a raw
// JSON-RPC reader (the limit of reading the pipe at all) and a bare acp-go-sdk client
// with a SessionUpdate that only checks the chunk (what a user who talks to the agent
// directly gets).

// agentProc is a test agent child process in its own process group.
type agentProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   io.ReadCloser
	stopOnce sync.Once
}

// agentSpec is how to run the test agent: binary, extra environment, arguments.
type agentSpec struct {
	bin  string
	env  map[string]string
	args []string
}

func startAgent(spec agentSpec) (*agentProc, error) {
	bin := spec.bin
	cmd := exec.Command(bin, spec.args...)
	cmd.Env = os.Environ()
	for k, v := range spec.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = io.Discard
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start test agent %s: %w", bin, err)
	}
	return &agentProc{cmd: cmd, stdin: stdin, stdout: stdout}, nil
}

// stop kills the agent's process group and reaps it. It may be called more than once
// and at the same time (a context's AfterFunc and a deferred call): every call returns
// once the process is reaped.
func (a *agentProc) stop() {
	a.stopOnce.Do(func() {
		_ = a.stdin.Close()
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		_ = a.cmd.Wait()
	})
}

// turnResult is what one client saw of one prompt turn.
type turnResult struct {
	elapsed time.Duration // prompt sent -> turn over (all updates handled)
	updates int64         // session/update notifications received
	check   *chunkCheck   // nil for turns that are not stamped floods
	err     error         // the turn or the connection failed
	// handledBeforeBreak counts the chunks handled in order before the connection broke
	// (bare SDK turns with err set; -1 when they were not in order).
	handledBeforeBreak int
}

// intactErr is nil when the turn completed and (for floods) every chunk arrived in order.
func (r turnResult) intactErr() error {
	if r.err != nil {
		return r.err
	}
	if r.check != nil {
		return r.check.intact()
	}
	return nil
}

// rawMessage is the part of a JSON-RPC line the raw reader decodes.
type rawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Update struct {
			SessionUpdate string       `json:"sessionUpdate"`
			Content       chunkContent `json:"content"`
		} `json:"update"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// chunkContent is a content block's text; tool call updates carry an array there,
// which is skipped.
type chunkContent struct{ Text string }

func (c *chunkContent) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	var v struct {
		Text string `json:"text"`
	}
	err := json.Unmarshal(b, &v)
	c.Text = v.Text
	return err
}

// rawConn speaks JSON-RPC to the test agent by hand: requests written as lines, each
// line of its output decoded into rawMessage only. No SDK, no queue, no goroutines; one
// request at a time.
type rawConn struct {
	a      *agentProc
	in     *bufio.Reader
	lastID int
}

func newRawConn(a *agentProc) *rawConn {
	return &rawConn{a: a, in: bufio.NewReaderSize(a.stdout, 1<<20)}
}

// call sends a request and reads lines until its answer, handing session/update
// notifications to onUpdate with the time each line was read (Unix nanoseconds).
func (c *rawConn) call(method string, params any, onUpdate func(*rawMessage, int64)) (json.RawMessage, error) {
	c.lastID++
	id := c.lastID
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if _, err := c.a.stdin.Write(append(line, '\n')); err != nil {
		return nil, err
	}
	want := fmt.Sprint(id)
	for {
		line, err := c.in.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("agent output ended: %w", err)
		}
		recv := time.Now().UnixNano()
		var m rawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("agent sent a line that is not JSON: %w", err)
		}
		switch {
		case m.Method == "session/update":
			onUpdate(&m, recv)
		case m.Method == "" && string(m.ID) == want:
			if len(m.Error) > 0 && string(m.Error) != "null" {
				return nil, fmt.Errorf("agent answered %s (id %d) with an error: %s", method, id, m.Error)
			}
			return m.Result, nil
		}
	}
}

// open runs initialize and session/new and returns the agent's session id.
func (c *rawConn) open(workspace string) (string, error) {
	ignore := func(*rawMessage, int64) {}
	if _, err := c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, ignore); err != nil {
		return "", err
	}
	result, err := c.call("session/new", map[string]any{"cwd": workspace, "mcpServers": []any{}}, ignore)
	if err != nil {
		return "", err
	}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(result, &created); err != nil || created.SessionID == "" {
		return "", fmt.Errorf("session/new answered %s", result)
	}
	return created.SessionID, nil
}

// prompt sends one session/prompt and reads until its answer.
func (c *rawConn) prompt(sessionID, text string, onUpdate func(*rawMessage, int64)) error {
	_, err := c.call("session/prompt", map[string]any{"sessionId": sessionID,
		"prompt": []any{map[string]any{"type": "text", "text": text}}}, onUpdate)
	return err
}

// rawTurn runs initialize, session/new and one session/prompt over a rawConn.
func rawTurn(ctx context.Context, spec agentSpec, workspace string, check *chunkCheck) turnResult {
	a, err := startAgent(spec)
	if err != nil {
		return turnResult{err: err}
	}
	defer a.stop()
	stop := context.AfterFunc(ctx, a.stop)
	defer stop()
	conn := newRawConn(a)
	id, err := conn.open(workspace)
	if err != nil {
		return turnResult{err: err}
	}
	res := turnResult{check: check}
	start := time.Now()
	res.err = conn.prompt(id, "go", func(m *rawMessage, recv int64) {
		res.updates++
		if check != nil && m.Params.Update.SessionUpdate == "agent_message_chunk" {
			check.feed(m.Params.Update.Content.Text, recv)
		}
	})
	res.elapsed = time.Since(start)
	return res
}

// sdkClient is the bare acp-go-sdk client: SessionUpdate only counts and checks chunks.
type sdkClient struct {
	updates atomic.Int64
	// mu guards check: after a connection break the SDK may still be handling queued
	// notifications while the turn's result is read, so it stops feeding it then.
	mu      sync.Mutex
	check   *chunkCheck
	stopped bool
}

// stop ends feeding the check and returns how many chunks it had taken in order (-1
// when one was out of order or malformed, or the turn has no check).
func (c *sdkClient) stop() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.check == nil || c.check.err != nil {
		return -1
	}
	return c.check.next
}

var _ sdk.Client = (*sdkClient)(nil)

var errNotOffered = errors.New("the bare benchmark client offers no fs, terminal or permission support")

func (c *sdkClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	recv := time.Now().UnixNano()
	c.updates.Add(1)
	if c.check != nil && n.Update.AgentMessageChunk != nil && n.Update.AgentMessageChunk.Content.Text != nil {
		c.mu.Lock()
		if !c.stopped {
			c.check.feed(n.Update.AgentMessageChunk.Content.Text.Text, recv)
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *sdkClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, errNotOffered
}

func (c *sdkClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, errNotOffered
}

func (c *sdkClient) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{}, errNotOffered
}

func (c *sdkClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errNotOffered
}

func (c *sdkClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errNotOffered
}

func (c *sdkClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errNotOffered
}

func (c *sdkClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errNotOffered
}

func (c *sdkClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errNotOffered
}

// sdkTurn runs initialize, session/new and one prompt through acp-go-sdk. Prompt returns
// after the SDK handled every update of the turn, so its duration is the whole stream.
func sdkTurn(ctx context.Context, spec agentSpec, workspace string, check *chunkCheck) turnResult {
	a, err := startAgent(spec)
	if err != nil {
		return turnResult{err: err}
	}
	defer a.stop()
	client := &sdkClient{check: check}
	conn := sdk.NewClientSideConnection(client, a.stdin, a.stdout)
	conn.SetLogger(discardLogger)
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		return turnResult{err: fmt.Errorf("initialize: %w", err)}
	}
	sess, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		return turnResult{err: fmt.Errorf("session/new: %w", err)}
	}
	start := time.Now()
	_, err = conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("go")}})
	elapsed := time.Since(start)
	// Stopped on every path, so the check is read below with nothing feeding it.
	handled := client.stop()
	res := turnResult{elapsed: elapsed, updates: client.updates.Load(), check: check}
	if err != nil {
		res.err = fmt.Errorf("prompt (connection lost?): %w", err)
		if ctx.Err() == nil { // a break, not the benchmark being stopped
			res.handledBeforeBreak = handled
		}
	}
	return res
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
)

// editScript thinks, speaks, plans, and asks to write NOTES.md, which it writes (through
// agenticd) once allowed.
const editScript = `{"turns": [[
  {"thought": "Let me look first."},
  {"text": "Hello! I will write NOTES.md."},
  {"update": {"sessionUpdate": "plan", "entries": [{"content": "Write NOTES.md", "status": "in_progress", "priority": "high"}]}},
  {"update": {"sessionUpdate": "tool_call", "toolCallId": "write-notes", "title": "Write NOTES.md", "kind": "edit", "status": "pending",
    "locations": [{"path": "{cwd}/NOTES.md"}], "rawInput": {"file_path": "{cwd}/NOTES.md"}}},
  {"permission": {"toolCall": {"toolCallId": "write-notes"}, "report": true,
    "onAllow": [
      {"write": {"path": "{cwd}/NOTES.md", "content": "notes from the editor\n"}},
      {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "write-notes", "status": "completed",
        "content": [{"type": "diff", "path": "{cwd}/NOTES.md", "newText": "notes from the editor\n"}]}}],
    "onReject": [{"update": {"sessionUpdate": "tool_call_update", "toolCallId": "write-notes", "status": "failed"}}]}},
  {"text": " Done."},
  {"stop": "end_turn", "usage": {"inputTokens": 12, "outputTokens": 34, "totalTokens": 46}}
]]}`

// apiClient is a plain gRPC client of d, as another frontend would be.
func (d *agenticd) apiClient(t *testing.T) pb.AgenticServiceClient {
	t.Helper()
	token, err := localcred.ReadToken(d.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(tokenCreds{token: token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewAgenticServiceClient(conn)
}

// eventLog subscribes to d's events of the test agent and keeps them.
type eventLog struct {
	mu     sync.Mutex
	events []*pb.AgenticEvent
	done   chan struct{}
}

func (d *agenticd) subscribe(t *testing.T) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := d.apiClient(t).Subscribe(ctx, &pb.SubscribeRequest{AgentIds: []string{acpAgentID}})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := sub.Recv(); err != nil || f.GetCaughtUp() == nil {
		t.Fatalf("first frame %v, %v; want caught_up", f, err)
	}
	l := &eventLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			f, err := sub.Recv()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.events = append(l.events, f.GetEvents().GetEvents()...)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

// waitFor waits until some event satisfies ok.
func (l *eventLog) waitFor(t *testing.T, what string, ok func(*pb.AgenticEvent) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		found := slices.ContainsFunc(l.events, ok)
		l.mu.Unlock()
		if found {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no event %s within 30s", what)
}

func (l *eventLog) assistantText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ev := range l.events {
		if d := ev.GetMessageDelta(); d != nil && d.GetRole() == pb.MessageRole_MESSAGE_ROLE_ASSISTANT {
			b.WriteString(d.GetText())
		}
	}
	return b.String()
}

// buildTool builds a Go program of the module graph into dir.
func buildTool(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// The acp-go-sdk's own example client drives a whole turn through `agenticctl acp`:
// text, thought, plan, a tool call whose permission the client grants, the write done
// by agenticd; a gRPC subscriber sees the same turn.
func TestACPWithTheGoSDKExampleClient(t *testing.T) {
	d := startAgenticd(t, editScript)
	bin := t.TempDir()
	client := buildTool(t, bin, "acp-example-client", "github.com/coder/acp-go-sdk/example/client")
	ctl := buildTool(t, bin, "agenticctl", ".")
	events := d.subscribe(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, client, ctl, "--addr", d.addr, "--data-dir", d.cfg.DataDir, "acp", "--agent", acpAgentID)
	cmd.Dir = d.ws
	cmd.Stdin = strings.NewReader("1\n") // the first option: allow
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example client: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Connected to agent", "Hello! I will write NOTES.md.", "[ agent_thought_chunk ]", "[ plan ]",
		"🔧 Write NOTES.md (pending)", "Permission requested: Write NOTES.md", "permission: allow",
		"Tool call `write-notes` updated", " Done.", "Agent completed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the client's output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(d.ws, "NOTES.md")); err != nil || string(b) != "notes from the editor\n" {
		t.Errorf("NOTES.md: %q, %v; want agenticd to have written it", b, err)
	}
	events.waitFor(t, "MESSAGE_END end_turn", func(ev *pb.AgenticEvent) bool {
		return ev.GetMessageEnd().GetStopReason() == pb.StopReason_STOP_REASON_END_TURN
	})
	events.waitFor(t, "permission granted by the user", func(ev *pb.AgenticEvent) bool {
		return ev.GetToolPermissionGranted().GetDecidedBy() == pb.PermissionDecider_PERMISSION_DECIDER_USER
	})
	if got := events.assistantText(); !strings.Contains(got, "Hello! I will write NOTES.md.") || !strings.Contains(got, " Done.") {
		t.Errorf("the gRPC subscriber saw %q", got)
	}
}

// editor is an ACP client written for the tests, talking to `agenticctl acp` run
// in-process; it keeps every update and answers permission requests with answer.
type editor struct {
	conn   *acp.ClientSideConnection
	answer func(acp.RequestPermissionRequest) acp.RequestPermissionResponse

	mu        sync.Mutex
	updates   []acp.SessionUpdate
	asked     []acp.RequestPermissionRequest
	withdrawn int // permission requests agenticd took back
}

func (d *agenticd) editor(t *testing.T, agent string) *editor {
	t.Helper()
	return d.editorAt(t, d.addr, agent)
}

// runACP runs `agenticctl acp` dialling addr, as an editor starts it, with its stdin and
// stdout as pipes; done is closed when it has ended (close stdin to end it).
func (d *agenticd) runACP(addr, agent string) (stdin *io.PipeWriter, stdout *io.PipeReader, done <-chan struct{}) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer outW.Close()
		run([]string{"--addr", addr, "--data-dir", d.cfg.DataDir, "acp", "--agent", agent}, inR, outW, io.Discard)
	}()
	return inW, outR, ended
}

// editorAt is an editor whose agenticctl dials addr.
func (d *agenticd) editorAt(t *testing.T, addr, agent string) *editor {
	t.Helper()
	inW, outR, done := d.runACP(addr, agent)
	e := &editor{}
	e.conn = acp.NewClientSideConnection(e, inW, outR)
	t.Cleanup(func() {
		_ = inW.Close()
		<-done
		<-e.conn.Done()
	})
	return e
}

func (e *editor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.updates = append(e.updates, n.Update)
	return nil
}

func (e *editor) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	e.mu.Lock()
	e.asked = append(e.asked, p)
	answer := e.answer
	e.mu.Unlock()
	if answer == nil {
		<-ctx.Done() // waits to be withdrawn
		e.mu.Lock()
		e.withdrawn++
		e.mu.Unlock()
		return acp.RequestPermissionResponse{}, ctx.Err()
	}
	return answer(p), nil
}

var errNotOffered = errors.New("not offered: agenticd serves files and terminals itself")

func (e *editor) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNotOffered
}
func (e *editor) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNotOffered
}
func (e *editor) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNotOffered
}
func (e *editor) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNotOffered
}
func (e *editor) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNotOffered
}
func (e *editor) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNotOffered
}
func (e *editor) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNotOffered
}

// text joins the chunks of one kind ("user" or "agent") the editor got.
func (e *editor) text(kind string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, u := range e.updates {
		switch {
		case kind == "user" && u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
			b.WriteString(u.UserMessageChunk.Content.Text.Text)
		case kind == "agent" && u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			b.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return b.String()
}

func (e *editor) waitText(t *testing.T, kind, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(e.text(kind), want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the editor got no %s text %q within 30s; it has %q", kind, want, e.text(kind))
}

func (e *editor) initialize(t *testing.T, ctx context.Context) acp.InitializeResponse {
	t.Helper()
	resp, err := e.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return resp
}

// loadScript: the first prompt answers, the second runs until cancelled, the third
// answers again.
const loadScript = `{"turns": [
  [{"text": "Answer one."}],
  [{"text": "Working."}, {"waitCancel": true}, {"stop": "cancelled"}],
  [{"text": "Answer three."}]
]}`

// A session made and used through gRPC opens in the editor with its history; the
// editor's cancel ends its turn; a message sent by another client reaches the editor.
func TestACPLoadCancelAndOtherClients(t *testing.T) {
	d := startAgenticd(t, loadScript)
	id := d.newSession(t)
	d.mustCtl(t, "send", id, "typed in the terminal")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := d.editor(t, acpAgentID)
	init := e.initialize(t, ctx)
	if init.AgentInfo == nil || init.AgentInfo.Name != "agenticd" || !init.AgentCapabilities.LoadSession {
		t.Errorf("initialize: %+v; want agenticd's agentInfo and loadSession", init)
	}

	list, err := e.conn.ListSessions(ctx, acp.ListSessionsRequest{})
	if err != nil || !slices.ContainsFunc(list.Sessions, func(s acp.SessionInfo) bool { return string(s.SessionId) == id && s.Cwd == d.ws }) {
		t.Fatalf("session/list: %+v, %v; want %s in %s", list, err, id, d.ws)
	}
	if _, err := e.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(id), Cwd: d.ws, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	// The history arrived before the answer.
	if u, a := e.text("user"), e.text("agent"); u != "typed in the terminal" || a != "Answer one." {
		t.Errorf("history: user %q, agent %q", u, a)
	}

	// The editor's prompt runs until the editor cancels it.
	type result struct {
		resp acp.PromptResponse
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := e.conn.Prompt(ctx, acp.PromptRequest{SessionId: acp.SessionId(id), Prompt: []acp.ContentBlock{acp.TextBlock("from the editor")}})
		res <- result{resp, err}
	}()
	e.waitText(t, "agent", "Working.")
	if err := e.conn.Cancel(ctx, acp.CancelNotification{SessionId: acp.SessionId(id)}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.resp.StopReason != acp.StopReasonCancelled {
		t.Fatalf("prompt after cancel: %+v, %v; want stopReason cancelled", r.resp, r.err)
	}
	if strings.Contains(e.text("user"), "from the editor") {
		t.Errorf("the editor got its own prompt back: %q", e.text("user"))
	}

	// Another client's message shows in the editor as the user's, with the reply.
	d.mustCtl(t, "send", id, "typed elsewhere")
	e.waitText(t, "user", "typed elsewhere")
	e.waitText(t, "agent", "Answer three.")
}

// Errors an editor shows say what to do; none of them hangs.
func TestACPErrors(t *testing.T) {
	d := startAgenticd(t, loadScript)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := d.editor(t, "acp.test.nonesuch").conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32002 || !strings.Contains(re.Message, "acp.test.nonesuch") {
		t.Errorf("initialize with an unknown agent: %v; want resource_not_found naming it", err)
	}

	e := d.editor(t, acpAgentID)
	e.initialize(t, ctx)
	outside := t.TempDir()
	_, err = e.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: outside, McpServers: []acp.McpServer{}})
	if !errors.As(err, &re) || !strings.Contains(re.Message, "workspace") {
		t.Errorf("session/new outside the roots: %v; want an error about the workspace", err)
	}
	_, err = e.conn.Prompt(ctx, acp.PromptRequest{SessionId: "nonesuch", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if !errors.As(err, &re) || !strings.Contains(re.Message, "session/load") {
		t.Errorf("prompt to an unknown session: %v; want a hint to load it", err)
	}
}

// wsPipe carries an ACP client's newline-delimited messages over WebSocket messages.
type wsPipe struct {
	c   *websocket.Conn
	buf []byte
}

func (p *wsPipe) Read(b []byte) (int, error) {
	for len(p.buf) == 0 {
		_, data, err := p.c.Read(context.Background())
		if err != nil {
			return 0, err
		}
		p.buf = append(data, '\n')
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

func (p *wsPipe) Write(b []byte) (int, error) {
	return len(b), p.c.Write(context.Background(), websocket.MessageText, bytes.TrimRight(b, "\n"))
}

// wsEditor connects a test editor to agenticd's ACP endpoint with a bearer token.
func (d *agenticd) wsEditor(t *testing.T, ctx context.Context, token string) (*editor, *http.Response, error) {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, "ws://"+d.addr+"/acp/v1?agent="+acpAgentID,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(10 << 20)
	p := &wsPipe{c: c}
	e := &editor{}
	e.conn = acp.NewClientSideConnection(e, p, p)
	t.Cleanup(func() {
		_ = c.CloseNow()
		<-e.conn.Done()
	})
	return e, resp, nil
}

// Over WebSocket on agenticd's own port, with the API's credentials: a turn whose
// permission request another client answers, which withdraws the editor's.
func TestACPOverWebSocket(t *testing.T) {
	d := startAgenticd(t, editScript)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, resp, err := d.wsEditor(t, ctx, "wrong"); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %v, %v; want 401", resp, err)
	}
	token, err := localcred.ReadToken(d.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := d.wsEditor(t, ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	e.initialize(t, ctx)
	sess, err := e.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: d.ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	events := d.subscribe(t)
	res := make(chan error, 1)
	var stop acp.StopReason
	go func() {
		resp, err := e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("write notes")}})
		stop = resp.StopReason
		res <- err
	}()
	var permID string
	events.waitFor(t, "TOOL_PERMISSION_REQUIRED", func(ev *pb.AgenticEvent) bool {
		permID = ev.GetToolPermissionRequired().GetRequest().GetPermissionId()
		return permID != ""
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.mu.Lock()
		asked := len(e.asked)
		e.mu.Unlock()
		if asked > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the editor was not asked for permission")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := d.apiClient(t).RespondPermission(ctx, &pb.RespondPermissionRequest{SessionId: string(sess.SessionId), PermissionId: permID,
		Answer: &pb.RespondPermissionRequest_OptionKind{OptionKind: pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE}}); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil || stop != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %v, %v; want end_turn", stop, err)
	}
	e.waitText(t, "agent", "permission: allow")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e.mu.Lock()
		withdrawn := e.withdrawn
		e.mu.Unlock()
		if withdrawn == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the editor's permission request was not withdrawn after another client answered it")
		}
	}
	if e.asked[0].ToolCall.Title == nil || *e.asked[0].ToolCall.Title != "Write NOTES.md" {
		t.Errorf("the editor was asked about %+v", e.asked[0].ToolCall)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var diff bool
	for _, u := range e.updates {
		if tu := u.ToolCallUpdate; tu != nil && len(tu.Content) > 0 && tu.Content[0].Diff != nil && tu.Content[0].Diff.NewText == "notes from the editor\n" {
			diff = true
		}
	}
	if !diff {
		t.Error("the editor got no tool_call_update with the diff")
	}
}

// An editor that ends its agent with SIGTERM, its end of stdin still open, sees it end.
func TestACPEndsOnSIGTERM(t *testing.T) {
	d := startAgenticd(t, loadScript)
	ctl := buildTool(t, t.TempDir(), "agenticctl", ".")
	cmd := exec.Command(ctl, "--addr", d.addr, "--data-dir", d.cfg.DataDir, "acp", "--agent", acpAgentID)
	// A pipe of the test's own, handed over as it is: its open file is the one agenticctl's
	// stdin shares, and the mode agenticctl leaves it in can be read after.
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	defer stdin.Close()
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// An answer shows agenticctl reads stdin before the signal comes.
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"agentInfo"`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("agenticctl acp after SIGTERM: %v; want a clean exit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("agenticctl acp did not end within 30s of SIGTERM while stdin stayed open")
	}
	// It read stdin in non-blocking mode, which belongs to the open file: whatever else
	// reads that file (a shell on a terminal) must get it back blocking.
	raw, err := stdinR.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	if err := raw.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		t.Error("agenticctl acp left its stdin in non-blocking mode")
	}
}

// cutProxy forwards TCP connections to target until cut, which closes them and turns
// new ones away until mend.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
			p.wg.Go(func() {
				_, _ = io.Copy(pair[0], pair[1])
				_ = pair[0].Close()
				_ = pair[1].Close()
			})
		}
	}
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// reconnectScript: a turn says "one ", waits for a permission and then says the rest.
const reconnectScript = `{"turns": [[
  {"text": "one "},
  {"permission": {"toolCall": {"toolCallId": "go-on", "title": "Go on"}, "onAllow": [{"text": "two "}, {"text": "three"}]}},
  {"stop": "end_turn"}
]]}`

// The editor's connection to agenticd breaks in the middle of a turn, which goes on
// meanwhile (another client answers its permission request); when agenticd can be
// reached again, the editor gets the rest of the turn, nothing twice, and its prompt
// ends. After agenticd restarts, the editor's next prompt reopens the session.
func TestACPReconnectsAndReopens(t *testing.T) {
	d := startAgenticd(t, reconnectScript)
	proxy := startCutProxy(t, d.addr)
	events := d.subscribe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := d.editorAt(t, proxy.ln.Addr().String(), acpAgentID)
	e.initialize(t, ctx)
	sess, err := e.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: d.ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	type result struct {
		resp acp.PromptResponse
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
		res <- result{resp, err}
	}()
	var permID string
	events.waitFor(t, "TOOL_PERMISSION_REQUIRED", func(ev *pb.AgenticEvent) bool {
		permID = ev.GetToolPermissionRequired().GetRequest().GetPermissionId()
		return permID != ""
	})
	e.waitText(t, "agent", "one ")

	proxy.setCut(true)
	api := d.apiClient(t)
	if _, err := api.RespondPermission(ctx, &pb.RespondPermissionRequest{SessionId: string(sess.SessionId), PermissionId: permID,
		Answer: &pb.RespondPermissionRequest_OptionKind{OptionKind: pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE}}); err != nil {
		t.Fatal(err)
	}
	events.waitFor(t, "MESSAGE_END of the turn", func(ev *pb.AgenticEvent) bool {
		return ev.GetSessionId() == string(sess.SessionId) && ev.GetMessageEnd().GetRole() == pb.MessageRole_MESSAGE_ROLE_ASSISTANT
	})
	if got := e.text("agent"); got != "one " {
		t.Fatalf("the editor got %q while cut off", got)
	}
	proxy.setCut(false)

	if r := <-res; r.err != nil || r.resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt across the break: %+v, %v; want end_turn", r.resp, r.err)
	}
	if got := e.text("agent"); got != "one two three" {
		t.Errorf("the editor got %q across the break; want every chunk once, in order", got)
	}

	// The restarted agenticd has the session stored, not open: the prompt reopens it, and
	// the agent (a new process, whose script starts again) asks again, the editor this
	// time answering.
	d.stop(t)
	d.cfg.Listen = d.addr
	d.start(t)
	e.mu.Lock()
	e.answer = func(p acp.RequestPermissionRequest) acp.RequestPermissionResponse {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(p.Options[0].OptionId)}
	}
	e.mu.Unlock()
	resp, err := e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("again")}})
	if err != nil || resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after agenticd restarted: %+v, %v", resp, err)
	}
	if got := e.text("agent"); got != "one two threeone two three" {
		t.Errorf("the editor got %q; want the second turn once, and the history the reopening replays left out", got)
	}
}

// stateScript: modes and a command offered at start; a turn that titles the session,
// reports its context window, runs a command in a terminal (served by agenticd) and ends
// with token counts; a turn that fails.
const stateScript = `{
  "session": {
    "modes": {"currentModeId": "code", "availableModes": [{"id": "code", "name": "Code"}, {"id": "plan", "name": "Plan"}]},
    "afterNew": [{"update": {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "review", "description": "Review the change"}]}}]
  },
  "turns": [
    [{"update": {"sessionUpdate": "session_info_update", "title": "Fixing the build"}},
     {"update": {"sessionUpdate": "usage_update", "used": 1000, "size": 200000, "cost": {"amount": 0.5, "currency": "USD"}}},
     {"terminal": {"command": "echo", "args": ["from the terminal"], "toolCallId": "run-echo"}},
     {"text": "ok"},
     {"stop": "end_turn", "usage": {"inputTokens": 12, "outputTokens": 34, "totalTokens": 46}}],
    [{"text": "trying"}, {"fail": {"code": -32603, "message": "the model is overloaded"}}]
  ]
}`

// waitUpdate waits until some update the editor got satisfies ok.
func (e *editor) waitUpdate(t *testing.T, what string, ok func(acp.SessionUpdate) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.mu.Lock()
		found := slices.ContainsFunc(e.updates, ok)
		e.mu.Unlock()
		if found {
			return
		}
	}
	t.Fatalf("the editor got no %s within 30s", what)
}

// The session's state reaches the editor as ACP updates (commands, mode, title, context
// window, a terminal's output), its mode changes both ways, a prompt's answer carries the
// turn's token counts, a failed turn fails the prompt with the agent's words, and
// session/close lets go of the session without closing it for others.
func TestACPSessionState(t *testing.T) {
	d := startAgenticd(t, stateScript)
	api := d.apiClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := d.editor(t, acpAgentID)
	e.initialize(t, ctx)
	sess, err := e.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: d.ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	id := string(sess.SessionId)
	if sess.Modes == nil || sess.Modes.CurrentModeId != "code" || len(sess.Modes.AvailableModes) != 2 {
		t.Errorf("session/new's modes: %+v", sess.Modes)
	}
	e.waitUpdate(t, "available_commands_update with review", func(u acp.SessionUpdate) bool {
		return u.AvailableCommandsUpdate != nil && len(u.AvailableCommandsUpdate.AvailableCommands) == 1 &&
			u.AvailableCommandsUpdate.AvailableCommands[0].Name == "review"
	})

	if _, err := e.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: "plan"}); err != nil {
		t.Fatalf("session/set_mode: %v", err)
	}
	if got, err := api.GetSession(ctx, &pb.GetSessionRequest{SessionId: id}); err != nil || got.GetSession().GetCurrentModeId() != "plan" {
		t.Errorf("mode after session/set_mode: %q, %v", got.GetSession().GetCurrentModeId(), err)
	}
	e.waitUpdate(t, "current_mode_update plan", func(u acp.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && u.CurrentModeUpdate.CurrentModeId == "plan"
	})
	set, err := e.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{SessionId: sess.SessionId, ConfigId: "mode", Value: "code"}})
	if err != nil || len(set.ConfigOptions) == 0 || set.ConfigOptions[0].Select == nil || set.ConfigOptions[0].Select.CurrentValue != "code" {
		t.Errorf("session/set_config_option mode code: %+v, %v", set, err)
	}

	resp, err := e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("fix it")}})
	if err != nil || resp.StopReason != acp.StopReasonEndTurn || resp.Usage == nil || resp.Usage.InputTokens != 12 || resp.Usage.OutputTokens != 34 || resp.Usage.TotalTokens != 46 {
		t.Fatalf("prompt: %+v (usage %+v), %v; want end_turn with 12/34/46 tokens", resp, resp.Usage, err)
	}
	e.waitUpdate(t, "session_info_update with the title", func(u acp.SessionUpdate) bool {
		return u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil && *u.SessionInfoUpdate.Title == "Fixing the build"
	})
	e.waitUpdate(t, "usage_update 1000 of 200000, 0.5 USD", func(u acp.SessionUpdate) bool {
		return u.UsageUpdate != nil && u.UsageUpdate.Used == 1000 && u.UsageUpdate.Size == 200000 && u.UsageUpdate.Cost != nil && u.UsageUpdate.Cost.Amount == 0.5
	})
	e.waitUpdate(t, "the terminal's output in the tool call", func(u acp.SessionUpdate) bool {
		var content []acp.ToolCallContent
		switch {
		case u.ToolCall != nil && u.ToolCall.ToolCallId == "run-echo":
			content = u.ToolCall.Content
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.ToolCallId == "run-echo":
			content = u.ToolCallUpdate.Content
		}
		return slices.ContainsFunc(content, func(c acp.ToolCallContent) bool {
			return c.Content != nil && c.Content.Content.Text != nil && strings.Contains(c.Content.Content.Text.Text, "from the terminal\n")
		})
	})

	_, err = e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("again")}})
	var re *acp.RequestError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "the model is overloaded") {
		t.Errorf("prompt of a turn that fails: %v; want the agent's error", err)
	}

	if _, err := e.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: sess.SessionId}); err != nil {
		t.Fatalf("session/close: %v", err)
	}
	_, err = e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("more")}})
	if !errors.As(err, &re) || re.Code != -32002 || !strings.Contains(re.Message, "session/load") {
		t.Errorf("prompt after session/close: %v; want resource not found, naming session/load", err)
	}
	if got, err := api.GetSession(ctx, &pb.GetSessionRequest{SessionId: id}); err != nil || got.GetSession().GetStatus() == pb.SessionStatus_SESSION_STATUS_CLOSED {
		t.Errorf("after session/close, agenticd's session: %v, %v; want it kept open for others", got.GetSession().GetStatus(), err)
	}
}

// An agent that needs a login it does not have: session/new fails with auth_required
// and says where the login belongs.
func TestACPAgentNeedsLogin(t *testing.T) {
	d := startAgenticd(t, `{"agent": {"requireAuth": true, "authMethods": [{"id": "login", "name": "Log in", "description": "run the agent's login"}]}}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := d.editor(t, acpAgentID)
	init := e.initialize(t, ctx)
	if len(init.AuthMethods) != 0 {
		t.Errorf("initialize offers auth methods %+v; agenticd's credentials travel with the connection", init.AuthMethods)
	}
	_, err := e.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: d.ws, McpServers: []acp.McpServer{}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32000 || !strings.Contains(re.Message, "agenticd's config") {
		t.Errorf("session/new of an agent that needs a login: %v; want auth_required saying to log in through agenticd's config", err)
	}
}

// contentScript: an agent that takes images and embedded context; its first turn says
// what the session was opened with and what the prompt held, its second waits for a
// permission.
const contentScript = `{
  "agent": {"image": true, "embeddedContext": true},
  "turns": [
    [{"echoSetup": true}, {"echoPrompt": true}],
    [{"text": "Working."}, {"permission": {"toolCall": {"toolCallId": "go-on", "title": "Go on"}, "report": true}}, {"stop": "end_turn"}]
  ]
}`

// The editor's MCP servers and prompt content (text, image, embedded resource, resource
// link) reach the agent; a permission request that waits when an editor opens the session
// is put to it, and its answer decides it.
func TestACPPromptContentAndPendingPermission(t *testing.T) {
	d := startAgenticd(t, contentScript)
	events := d.subscribe(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// agenticd knows an agent's capabilities once it has started it.
	d.newSession(t)
	e := d.editor(t, acpAgentID)
	init := e.initialize(t, ctx)
	if !init.AgentCapabilities.PromptCapabilities.Image || !init.AgentCapabilities.PromptCapabilities.EmbeddedContext {
		t.Errorf("initialize's prompt capabilities %+v; want the agent's images and embedded context", init.AgentCapabilities.PromptCapabilities)
	}
	sess, err := e.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: d.ws, McpServers: []acp.McpServer{{Stdio: &acp.McpServerStdio{
		Name: "files", Command: "/usr/bin/env", Args: []string{"true"}, Env: []acp.EnvVariable{{Name: "MODE", Value: "ro"}}}}}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	resp, err := e.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{
		acp.TextBlock("look at these"),
		acp.ImageBlock(png, "image/png"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///notes.txt", Text: "embedded words"}}),
		acp.ResourceLinkBlock("README.md", "file://"+filepath.Join(d.ws, "README.md")),
	}})
	if err != nil || resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", resp, err)
	}
	got := e.text("agent")
	for _, want := range []string{`"name":"files"`, `"command":"/usr/bin/env"`, `"MODE"`,
		`"text":"look at these"`, `"type":"image"`, png, `"embedded words"`, "README.md"} {
		if !strings.Contains(got, want) {
			t.Errorf("what the agent got lacks %s:\n%s", want, got)
		}
	}

	// A turn started elsewhere waits for a permission; an editor opening the session is
	// asked, and answers.
	sent := make(chan string, 1)
	go func() {
		_, out, _ := d.ctl("send", string(sess.SessionId), "go on")
		sent <- out
	}()
	events.waitFor(t, "TOOL_PERMISSION_REQUIRED", func(ev *pb.AgenticEvent) bool { return ev.GetToolPermissionRequired() != nil })
	other := d.editor(t, acpAgentID)
	other.answer = func(p acp.RequestPermissionRequest) acp.RequestPermissionResponse {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(p.Options[0].OptionId)}
	}
	other.initialize(t, ctx)
	if _, err := other.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sess.SessionId, Cwd: d.ws, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	select {
	case out := <-sent:
		if !strings.Contains(out, "permission: allow") {
			t.Errorf("the turn started elsewhere printed %q; want it allowed by the editor", out)
		}
	case <-ctx.Done():
		t.Fatal("the turn started elsewhere did not end")
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if len(other.asked) != 1 || other.asked[0].ToolCall.Title == nil || *other.asked[0].ToolCall.Title != "Go on" {
		t.Errorf("the editor that opened the session was asked %+v", other.asked)
	}
}

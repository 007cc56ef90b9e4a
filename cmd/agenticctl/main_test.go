package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/sandbox/confine"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/store"
)

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	goleak.VerifyTestMain(m)
}

const agentID = "deepchat.scripted"

// scriptedAgent answers every message with "Hello ", asks permission "r1", and after an
// answer says "world" (or "denied") and ends the turn. It emits synchronously: agenticctl
// must find every event through the subscription's resume point.
type scriptedAgent struct {
	pub presenters.Publisher
	mu  sync.Mutex
	ws  string
	id  int
}

func (a *scriptedAgent) em(id string) presenters.Emitter {
	return presenters.NewEmitter(a.pub, agentID, id)
}

func (a *scriptedAgent) AgentID() string { return agentID }
func (a *scriptedAgent) Describe(context.Context) presenters.AgentInfo {
	return presenters.AgentInfo{ID: agentID, Name: "Scripted", Type: presenters.AgentTypeDeepChat, Status: presenters.AgentReady}
}
func (a *scriptedAgent) CreateSession(_ context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
	a.mu.Lock()
	a.id++
	a.ws = cfg.Workspace.Root()
	id := fmt.Sprintf("s%d", a.id)
	a.mu.Unlock()
	info, _ := a.GetSession(context.Background(), id)
	a.em(id).SessionCreated(info)
	return info, nil
}
func (a *scriptedAgent) GetSession(_ context.Context, id string) (presenters.SessionInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return presenters.SessionInfo{SessionID: id, AgentID: agentID, Status: presenters.SessionIdle, Workspace: a.ws,
		AvailableModes: []presenters.Mode{{ID: "strict"}, {ID: "balanced"}}, CurrentModeID: "balanced"}, nil
}
func (a *scriptedAgent) LoadSession(ctx context.Context, id string, _ presenters.LoadContext) (presenters.SessionInfo, error) {
	return a.GetSession(ctx, id)
}
func (a *scriptedAgent) CloseSession(_ context.Context, id string) error {
	a.em(id).SessionClosed("closed")
	return nil
}
func (a *scriptedAgent) SendMessage(_ context.Context, id string, c presenters.MessageContent) (presenters.SendResult, error) {
	em := a.em(id)
	em.MessageDelta("m1", presenters.RoleAssistant, "Hello ")
	em.ToolStart("m1", presenters.ToolCall{ToolID: "t1", Title: "Edit notes.txt", Kind: presenters.ToolEdit, Status: presenters.ToolPending})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r1", ToolID: "t1", ToolName: "edit", MessageID: "m1",
		Options: []presenters.PermissionOption{{ID: "yes", Kind: presenters.AllowOnce}, {ID: "no", Kind: presenters.RejectOnce}}})
	return presenters.SendResult{MessageID: "m1", UserMessageID: "u1"}, nil
}
func (a *scriptedAgent) CancelMessage(_ context.Context, id, _ string) error {
	a.em(id).MessageEnd(presenters.MessageEndPayload{MessageID: "m1", StopReason: presenters.StopCancelled, Role: presenters.RoleAssistant})
	return nil
}
func (a *scriptedAgent) SetModel(ctx context.Context, id, _ string) (presenters.SessionInfo, error) {
	return a.GetSession(ctx, id)
}
func (a *scriptedAgent) SetMode(ctx context.Context, id, mode string) (presenters.SessionInfo, error) {
	info, err := a.GetSession(ctx, id)
	info.CurrentModeID = mode
	return info, err
}
func (a *scriptedAgent) RespondPermission(_ context.Context, id string, r presenters.PermissionResponse) error {
	em := a.em(id)
	d := presenters.PermissionDecision{RequestID: r.RequestID, ToolID: "t1", OptionID: r.OptionID, DecidedBy: presenters.DecidedByUser}
	if r.OptionID == "yes" {
		em.PermissionGranted(d)
		em.ToolEnd("m1", presenters.ToolCall{ToolID: "t1", Title: "Edit notes.txt", Kind: presenters.ToolEdit, Status: presenters.ToolCompleted})
		em.MessageDelta("m1", presenters.RoleAssistant, "world")
	} else {
		em.PermissionDenied(d)
		em.MessageDelta("m1", presenters.RoleAssistant, "denied")
	}
	em.MessageEnd(presenters.MessageEndPayload{MessageID: "m1", StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant})
	return nil
}
func (a *scriptedAgent) GetMessages(context.Context, string, presenters.MessageQuery) ([]presenters.Message, error) {
	return []presenters.Message{{ID: "u1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi there"}}}}, nil
}
func (a *scriptedAgent) Close(context.Context) error { return nil }

type server struct {
	addr string
	root string
	hub  *service.Hub
	stop func()
}

// startServer runs the real service with the scripted agent on a loopback port.
func startServer(t *testing.T) *server {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	hub, err := service.NewHub(context.Background(), service.HubOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(t.TempDir())
	roots, err := sandbox.NewRoots([]string{root}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	registry, err := service.NewRegistry(st, []presenters.Presenter{&scriptedAgent{pub: hub}})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := service.NewGRPCServer(service.New(service.Options{Registry: registry, Hub: hub, Roots: roots, Logger: logger}), service.GRPCOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	var once sync.Once
	s := &server{addr: lis.Addr().String(), root: root, hub: hub}
	s.stop = func() {
		once.Do(func() {
			srv.Stop(context.Background())
			<-served
			_ = st.Close()
		})
	}
	t.Cleanup(s.stop)
	return s
}

// ctl runs agenticctl against the server and returns its exit status and output.
func (s *server) ctl(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"--addr", s.addr}, args...), nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func (s *server) mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := s.ctl(args...)
	if code != 0 {
		t.Fatalf("agenticctl %v: exit %d, stderr %q", args, code, errOut)
	}
	return out
}

func TestNotRunning(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--addr", addr, "agents"}, nil, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := "agenticd is not running at " + addr + " (start it with `make run` or `agenticd`)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

func TestUsageErrors(t *testing.T) {
	s := startServer(t)
	for _, args := range [][]string{{"frobnicate"}, {"get"}, {"send", "s1"}, {"new", "--agent", agentID}, {"send", "--approve-all", "--deny-all", "s", "m"}} {
		if code, _, errOut := s.ctl(args...); code != 2 || !strings.Contains(errOut, "agenticctl") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a usage line", args, code, errOut)
		}
	}
}

func TestSessionCommands(t *testing.T) {
	s := startServer(t)
	if out := s.mustCtl(t, "agents"); !strings.Contains(out, agentID) || !strings.Contains(out, "ready") {
		t.Errorf("agents: %q", out)
	}
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))
	if id != "s1" {
		t.Fatalf("new printed %q, want the session id", id)
	}
	if out := s.mustCtl(t, "sessions"); !strings.Contains(out, "s1") || !strings.Contains(out, s.root) {
		t.Errorf("sessions: %q", out)
	}
	var got pb.SessionInfo
	if err := protojson.Unmarshal([]byte(s.mustCtl(t, "get", id)), &got); err != nil || got.GetSessionId() != "s1" || got.GetLastSequence() == 0 {
		t.Errorf("get printed %v (%v)", &got, err)
	}
	if out := s.mustCtl(t, "mode", id, "strict"); strings.TrimSpace(out) != "strict" {
		t.Errorf("mode: %q", out)
	}
	code, _, errOut := s.ctl("mode", id, "yolo")
	if code != 1 || !strings.HasPrefix(errOut, "agenticctl mode: ") || !strings.Contains(errOut, "strict, balanced") || strings.Contains(errOut, "rpc error") {
		t.Errorf("a bad mode: exit %d, stderr %q", code, errOut)
	}
	if out := s.mustCtl(t, "messages", id); !strings.Contains(out, "hi there") {
		t.Errorf("messages: %q", out)
	}
	// The server's message names ListSessions; agenticctl names its own command.
	code, _, errOut = s.ctl("get", "nope")
	if code != 1 || !strings.Contains(errOut, `unknown session "nope"; `+"`agenticctl sessions`") {
		t.Errorf("unknown session: exit %d, stderr %q", code, errOut)
	}
	s.mustCtl(t, "close", id)
}

func TestSendApproveAll(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))
	code, out, errOut := s.ctl("send", "--approve-all", id, "say", "hello")
	if code != 0 || out != "Hello world\n" {
		t.Fatalf("send: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{"→ Edit notes.txt", "? permission r1", "yes=allow_once", "permission_granted r1 option=yes", "← Edit notes.txt [edit, completed]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	if !strings.Contains(errOut, "allowed once: request r1 of session "+id+" (option yes)") {
		t.Errorf("stderr %q does not confirm the answer", errOut)
	}
	code, out, errOut = s.ctl("send", "--deny-all", id, "again")
	if code != 0 || out != "Hello denied\n" || !strings.Contains(errOut, "rejected once: request r1 of session "+id+" (option no)") {
		t.Errorf("send --deny-all: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Without --approve-all, send waits; another agenticctl answers.
func TestSendThenApproveFromAnotherClient(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))

	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := pb.NewAgenticServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{id}, AfterSequence: s.hub.LastSequence()})
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := s.ctl("send", id, "hi")
		done <- result{code, out, errOut}
	}()
	for {
		ev, err := events.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetToolPermissionRequired() != nil {
			break
		}
	}
	if out := s.mustCtl(t, "approve", id, "r1"); out != "allowed once: request r1 of session "+id+" (option yes)\n" {
		t.Errorf("approve printed %q", out)
	}
	r := <-done
	if r.code != 0 || r.out != "Hello world\n" || !strings.Contains(r.errOut, "agenticctl approve "+id+" r1") {
		t.Errorf("send: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	code, _, errOut := s.ctl("approve", id, "r1")
	if code != 1 || !strings.Contains(errOut, "agenticctl approve: ") || !strings.Contains(errOut, "`agenticctl get "+id+"` lists the pending ones") {
		t.Errorf("a second answer: exit %d, stderr %q", code, errOut)
	}
}

func TestSubscribePrintsUntilServerStops(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))
	out := &watchWriter{want: "streamed", seen: make(chan struct{})}
	done := make(chan int, 1)
	args := []string{"--addr", s.addr, "subscribe", "--json", "--session", id, "--after", fmt.Sprint(s.hub.LastSequence())}
	go func() { done <- run(args, nil, out, io.Discard) }()
	presenters.NewEmitter(s.hub, agentID, "other").MessageDelta("m9", presenters.RoleAssistant, "filtered out")
	presenters.NewEmitter(s.hub, agentID, id).MessageDelta("m9", presenters.RoleAssistant, "streamed")
	<-out.seen
	// The server stopping ends the stream, and agenticctl with it.
	s.stop()
	if code := <-done; code != 1 {
		t.Errorf("subscribe exited %d after the server stopped, want 1", code)
	}
	if got := out.String(); !strings.Contains(got, `"text":"streamed"`) || strings.Contains(got, "filtered out") {
		t.Errorf("subscribe printed %q", got)
	}
}

// watchWriter collects output and closes seen once it contains want.
type watchWriter struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// overflowed is the status agenticd ends a stream with when the client fell behind.
func overflowed(t *testing.T, last uint64) error {
	st, err := status.New(codes.ResourceExhausted, "subscriber too slow").WithDetails(&errdetails.ErrorInfo{
		Reason: "SUBSCRIBER_OVERFLOW", Domain: "agenticd", Metadata: map[string]string{"last_sequence": fmt.Sprint(last)}})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// A stream the server ended for falling behind resumes where the server says, as long as
// it made progress; a RESOURCE_EXHAUSTED of another origin (this client refusing a message
// over its size limit) is not resumed, and says what happened.
func TestResumeOnlyAfterServerOverflowWithProgress(t *testing.T) {
	var stderr bytes.Buffer
	c := &cli{stderr: &stderr}
	drain := func(req *pb.SubscribeRequest, results ...eventOrErr) (bool, error) {
		events := make(chan eventOrErr, len(results))
		for _, r := range results {
			events <- r
		}
		return c.drain(events, nil, req, &loop{event: func(*pb.AgenticEvent) (bool, error) { return false, nil }})
	}
	req := &pb.SubscribeRequest{AfterSequence: 10}
	resume, err := drain(req, eventOrErr{ev: &pb.AgenticEvent{Sequence: 11}}, eventOrErr{ev: &pb.AgenticEvent{Sequence: 12}}, eventOrErr{err: overflowed(t, 12)})
	if !resume || err != nil || req.GetAfterSequence() != 12 || !strings.Contains(stderr.String(), "resuming after 12") {
		t.Errorf("after an overflow with progress: resume %v, %v, after %d, stderr %q", resume, err, req.GetAfterSequence(), stderr.String())
	}
	// Even a client that counted no event (a live-only stream) resumes at the server's point.
	req = &pb.SubscribeRequest{AfterSequence: 12}
	if resume, err := drain(req, eventOrErr{err: overflowed(t, 30)}); !resume || err != nil || req.GetAfterSequence() != 30 {
		t.Errorf("resume at the server's point: %v, %v, after %d", resume, err, req.GetAfterSequence())
	}
	// No progress since the last resume: stop instead of looping.
	req = &pb.SubscribeRequest{AfterSequence: 30}
	if resume, err := drain(req, eventOrErr{err: overflowed(t, 30)}); resume || err == nil || !strings.Contains(err.Error(), "cannot keep up") {
		t.Errorf("an overflow without progress: resume %v, %v", resume, err)
	}
	tooLarge := status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5242880 vs. 4194304)")
	req = &pb.SubscribeRequest{AfterSequence: 30}
	resume, err = drain(req, eventOrErr{ev: &pb.AgenticEvent{Sequence: 31}}, eventOrErr{err: tooLarge})
	if resume || err == nil || !strings.Contains(err.Error(), "larger than this client accepts") || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message over the client's limit: resume %v, %v", resume, err)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, nil, &stdout, &stderr)
		if code != 0 || !strings.HasPrefix(stdout.String(), "agenticctl ") || !strings.HasSuffix(stdout.String(), ")\n") || stderr.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}

// Where the server's message names an RPC as the thing to do, agenticctl names its
// command, with the session the command was about.
func TestExplainNamesCommands(t *testing.T) {
	closed := status.Error(codes.FailedPrecondition, "session s1 is closed; reopen it with LoadSession: failed precondition")
	c := &cli{session: "s1"}
	if got, want := c.explain(fmt.Errorf("reopening: %w", closed)), "reopening: session s1 is closed; reopen it with `agenticctl load s1`: failed precondition"; got != want {
		t.Errorf("explain = %q, want %q", got, want)
	}
	unknown := status.Error(codes.NotFound, `not found: unknown agent "x"; ListAgents shows the agents of this server (a, b)`)
	if got, want := (&cli{}).explain(unknown), "not found: unknown agent \"x\"; `agenticctl agents` shows the agents of this server (a, b)"; got != want {
		t.Errorf("explain = %q, want %q", got, want)
	}
	if got, want := (&cli{}).explain(closed), "session s1 is closed; reopen it with `agenticctl load SESSION`: failed precondition"; got != want {
		t.Errorf("without a session: explain = %q, want %q", got, want)
	}
}

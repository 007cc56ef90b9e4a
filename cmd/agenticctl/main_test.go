package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
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

// scriptedAgent answers every message with "Hello ", asks permission "r<turn>" (r1 in the
// first turn), and after an answer says "world" (or "denied") and ends the turn. It emits synchronously: agenticctl
// must find every event through the subscription's resume point. The reply takes the
// client's message id (else "m1").
type scriptedAgent struct {
	pub   presenters.Publisher
	mu    sync.Mutex
	ws    string
	id    int
	reply string // the message id of the turn
	turns int
	asked bool // the turn's permission waits for an answer
	sent  presenters.MessageContent
	fast  string // the value of the config option "fast"
}

func (a *scriptedAgent) lastContent() presenters.MessageContent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent
}

func (a *scriptedAgent) replyID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reply
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
	fast := a.fast
	if fast == "" {
		fast = "false"
	}
	return presenters.SessionInfo{SessionID: id, AgentID: agentID, Status: presenters.SessionIdle, Workspace: a.ws,
		AvailableModes: []presenters.Mode{{ID: "strict"}, {ID: "balanced"}}, CurrentModeID: "balanced",
		ConfigOptions: []presenters.ConfigOption{
			{ID: "effort", Name: "Effort", Category: "thought_level", Type: presenters.ConfigSelect, CurrentValue: "low",
				Choices: []presenters.ConfigChoice{{Value: "low"}, {Value: "high"}}},
			{ID: "fast", Name: "Fast mode", Type: presenters.ConfigBoolean, CurrentValue: fast},
		}}, nil
}
func (a *scriptedAgent) SetConfigOption(ctx context.Context, id, configID, value string) (presenters.SessionInfo, error) {
	if configID != "fast" || (value != "true" && value != "false") {
		return presenters.SessionInfo{}, fmt.Errorf("not fast=true|false: %w", presenters.ErrInvalidArgument)
	}
	a.mu.Lock()
	a.fast = value
	a.mu.Unlock()
	return a.GetSession(ctx, id)
}
func (a *scriptedAgent) LoadSession(ctx context.Context, id string, _ presenters.LoadContext) (presenters.SessionInfo, error) {
	return a.GetSession(ctx, id)
}
func (a *scriptedAgent) CloseSession(_ context.Context, id string) error {
	a.em(id).SessionClosed("closed")
	return nil
}
func (a *scriptedAgent) SendMessage(_ context.Context, id string, c presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	reply := opts.MessageID
	if reply == "" {
		reply = "m1"
	}
	a.mu.Lock()
	a.reply, a.asked, a.sent = reply, true, c
	a.turns++
	permission := fmt.Sprintf("r%d", a.turns)
	a.mu.Unlock()
	em := a.em(id)
	em.MessageDelta(reply, presenters.RoleAssistant, "Hello ")
	em.ToolStart(reply, presenters.ToolCall{ToolID: "t1", Title: "Edit notes.txt", Kind: presenters.ToolEdit, Status: presenters.ToolPending})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: permission, ToolID: "t1", ToolName: "edit", MessageID: reply,
		Diffs:   []presenters.DiffBlock{{Path: "notes.txt", OldText: "old note\n", NewText: "new note\n"}},
		Options: []presenters.PermissionOption{{ID: "yes", Kind: presenters.AllowOnce}, {ID: "no", Kind: presenters.RejectOnce}}})
	return presenters.SendResult{MessageID: reply, UserMessageID: "u1"}, nil
}
func (a *scriptedAgent) CancelMessage(_ context.Context, id, _ string) (string, error) {
	reply := a.replyID()
	a.em(id).MessageEnd(presenters.MessageEndPayload{MessageID: reply, StopReason: presenters.StopCancelled, Role: presenters.RoleAssistant})
	return reply, nil
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
	a.mu.Lock()
	asked := a.asked
	a.asked = false
	a.mu.Unlock()
	if !asked {
		return fmt.Errorf("permission %s is not pending: %w", r.RequestID, presenters.ErrNotFound)
	}
	em, reply := a.em(id), a.replyID()
	d := presenters.PermissionDecision{RequestID: r.RequestID, ToolID: "t1", OptionID: r.OptionID, DecidedBy: presenters.DecidedByUser}
	if r.OptionID == "yes" {
		em.PermissionGranted(d)
		em.ToolEnd(reply, presenters.ToolCall{ToolID: "t1", Title: "Edit notes.txt", Kind: presenters.ToolEdit, Status: presenters.ToolCompleted})
		em.MessageDelta(reply, presenters.RoleAssistant, "world")
	} else {
		em.PermissionDenied(d)
		em.MessageDelta(reply, presenters.RoleAssistant, "denied")
	}
	em.MessageEnd(presenters.MessageEndPayload{MessageID: reply, StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant})
	return nil
}

// GetMessages holds a history of three messages and answers the queries paging makes.
func (a *scriptedAgent) GetMessages(_ context.Context, _ string, q presenters.MessageQuery) ([]presenters.Message, error) {
	var history []presenters.Message
	for i, text := range []string{"hi there", "hello", "bye"} {
		role := presenters.RoleUser
		if i%2 == 1 {
			role = presenters.RoleAssistant
		}
		history = append(history, presenters.Message{ID: fmt.Sprintf("h%d", i+1), Role: role, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}})
	}
	index := func(id string) int {
		return slices.IndexFunc(history, func(m presenters.Message) bool { return m.ID == id })
	}
	from, to := 0, len(history)
	if q.MessageID != "" {
		from = index(q.MessageID)
		if from < 0 {
			return nil, nil
		}
		to = from + 1
	}
	if q.AfterMessageID != "" {
		if from = index(q.AfterMessageID) + 1; from == 0 {
			return nil, presenters.ErrNotFound
		}
	}
	if q.BeforeMessageID != "" {
		if to = index(q.BeforeMessageID); to < 0 {
			return nil, presenters.ErrNotFound
		}
	}
	page := history[from:max(from, to)]
	if q.Limit > 0 && len(page) > q.Limit {
		if q.FromOldest {
			page = page[:q.Limit]
		} else {
			page = page[len(page)-q.Limit:]
		}
	}
	return page, nil
}
func (a *scriptedAgent) Close(context.Context) error { return nil }

type server struct {
	addr  string
	root  string
	hub   *service.Hub
	agent *scriptedAgent
	stop  func()
}

// serverToken is the bearer token startServer's server accepts.
const serverToken = "agenticctl-tests-token"

// startServer runs the real service with the scripted agent on a loopback port.
func startServer(t *testing.T) *server {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	hub, err := service.NewHub(context.Background(), service.HubOptions{Store: st, Log: st})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(t.TempDir())
	roots, err := sandbox.NewRoots([]string{root}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	agent := &scriptedAgent{pub: hub}
	registry, err := service.NewRegistry(st, []presenters.Presenter{agent})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := service.NewGRPCServer(service.New(service.Options{Registry: registry, Hub: hub, Roots: roots, Logger: logger}), service.GRPCOptions{
		Credentials: service.Credentials{Tokens: []string{serverToken}}, Logger: logger})
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
	s := &server{addr: lis.Addr().String(), root: root, hub: hub, agent: agent}
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
	code := run(append([]string{"--addr", s.addr, "--token", serverToken}, args...), nil, &stdout, &stderr)
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
	if out := s.mustCtl(t, "config", id); out != "effort=low\t(Effort, thought_level)\tlow | high\nfast=false\t(Fast mode)\ttrue | false\n" {
		t.Errorf("config: %q", out)
	}
	if out := s.mustCtl(t, "config", id, "fast", "true"); out != "fast=true\n" {
		t.Errorf("config set: %q", out)
	}
	if code, _, errOut := s.ctl("config", id, "fast"); code != 2 || !strings.Contains(errOut, "SESSION ID VALUE") {
		t.Errorf("config with an id and no value: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := s.ctl("fork", id); code != 1 || !strings.Contains(errOut, "cannot fork") {
		t.Errorf("fork of an agent that cannot: exit %d, stderr %q", code, errOut)
	}
	if out := s.mustCtl(t, "messages", id); !regexp.MustCompile(`(?s)user h1 .*hi there.*assistant h2 .*hello.*user h3 .*bye`).MatchString(out) {
		t.Errorf("messages: %q, want the three in order", out)
	}
	if out := s.mustCtl(t, "messages", "--limit", "2", id); strings.Contains(out, "hi there") || !regexp.MustCompile(`(?s)hello.*bye`).MatchString(out) {
		t.Errorf("messages --limit 2: %q, want the newest two, oldest first", out)
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
	// The change is shown before the answer, plain: stderr is not a terminal here.
	for _, want := range []string{"→ Edit notes.txt", "? permission r1", "yes=allow_once", "no=reject_once\n  --- notes.txt\n  +++ notes.txt\n  @@ -1,1 +1,1 @@\n  -old note\n  +new note\n",
		"permission_granted r1 option=yes", "← Edit notes.txt [edit, completed]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	if !strings.Contains(errOut, "allowed once: request r1 of session "+id+" (option yes)") {
		t.Errorf("stderr %q does not confirm the answer", errOut)
	}
	code, out, errOut = s.ctl("send", "--deny-all", id, "again")
	if code != 0 || out != "Hello denied\n" || !strings.Contains(errOut, "rejected once: request r2 of session "+id+" (option no)") {
		t.Errorf("send --deny-all: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// audit prints what a turn did: the permission asked and who granted it, the file the
// tool wrote; --kind and --json narrow and reshape it.
func TestAudit(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))
	s.mustCtl(t, "send", "--approve-all", id, "say", "hello")
	want := []string{"session_created", "permission_requested r1", "permission_decided r1 granted (yes) by user from 127.0.0.1:", "with owner (token)"}
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out = s.mustCtl(t, "audit", "--session", id)
		missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(out, w) })
		if missing < 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit lacks %q:\n%s", want[missing], out)
		}
		time.Sleep(20 * time.Millisecond) // the log writer appends a few milliseconds after the events
	}
	only := s.mustCtl(t, "audit", "--session", id, "--kind", "permission_decided", "--json")
	if lines := strings.Split(strings.TrimSpace(only), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"kind":"AUDIT_KIND_PERMISSION_DECIDED"`) {
		t.Errorf("--kind permission_decided --json: %q", only)
	}
	for _, args := range [][]string{{"audit", "--kind", "nonsense"}, {"audit", "--since", "yesterday"}, {"audit", "--since", "-5m"}} {
		if code, _, errOut := s.ctl(args...); code != 2 || !strings.Contains(errOut, "usage:") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
}

// Without --approve-all, send waits; another agenticctl answers.
func TestSendThenApproveFromAnotherClient(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))

	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(tokenCreds{token: serverToken}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := pb.NewAgenticServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{id}, Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: s.hub.LastSequence()}})
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
	for asked := false; !asked; {
		frame, err := events.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			asked = asked || ev.GetToolPermissionRequired() != nil
		}
	}
	if out := s.mustCtl(t, "approve", id, "r1"); out != "allowed once: request r1 of session "+id+" (option yes)\n" {
		t.Errorf("approve printed %q", out)
	}
	r := <-done
	if r.code != 0 || r.out != "Hello world\n" || !strings.Contains(r.errOut, "agenticctl approve "+id+" r1") {
		t.Errorf("send: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	// The same answer again is fine; another is refused, with the reason first.
	s.mustCtl(t, "approve", id, "r1")
	code, _, errOut := s.ctl("deny", id, "r1")
	if code != 1 || !strings.HasPrefix(errOut, "agenticctl deny: PERMISSION_ALREADY_DECIDED: ") {
		t.Errorf("another answer after the decision: exit %d, stderr %q; want the reason first", code, errOut)
	}
}

func TestSubscribePrintsUntilServerStops(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))
	out := &watchWriter{want: "streamed", seen: make(chan struct{})}
	done := make(chan int, 1)
	args := []string{"--addr", s.addr, "--token", serverToken, "subscribe", "--json", "--session", id, "--after", fmt.Sprint(s.hub.LastSequence())}
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
		Reason: "SUBSCRIBER_TOO_SLOW", Domain: "agenticd", Metadata: map[string]string{"last_sequence": fmt.Sprint(last)}})
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
	drain := func(req *pb.SubscribeRequest, results ...frameOrErr) (bool, error) {
		frames := make(chan frameOrErr, len(results))
		for _, r := range results {
			frames <- r
		}
		return c.drain(frames, nil, req, &loop{event: func(*pb.AgenticEvent) (bool, error) { return false, nil }})
	}
	req := after(10)
	resume, err := drain(req, events(11), events(12), frameOrErr{err: overflowed(t, 12)})
	if !resume || err != nil || req.GetAfterSequence() != 12 || !strings.Contains(stderr.String(), "resuming after 12") {
		t.Errorf("after an overflow with progress: resume %v, %v, after %d, stderr %q", resume, err, req.GetAfterSequence(), stderr.String())
	}
	// Even a client that counted no event (a live-only stream) resumes at the server's point.
	req = after(12)
	if resume, err := drain(req, frameOrErr{err: overflowed(t, 30)}); !resume || err != nil || req.GetAfterSequence() != 30 {
		t.Errorf("resume at the server's point: %v, %v, after %d", resume, err, req.GetAfterSequence())
	}
	// No progress since the last resume: stop instead of looping.
	req = after(30)
	if resume, err := drain(req, frameOrErr{err: overflowed(t, 30)}); resume || err == nil || !strings.Contains(err.Error(), "cannot keep up") {
		t.Errorf("an overflow without progress: resume %v, %v", resume, err)
	}
	tooLarge := status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5242880 vs. 4194304)")
	req = after(30)
	resume, err = drain(req, events(31), frameOrErr{err: tooLarge})
	if resume || err == nil || !strings.Contains(err.Error(), "larger than this client accepts") || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message over the client's limit: resume %v, %v", resume, err)
	}
}

// Every frame moves the resume point: the events of a batch one by one, bookmarks and the
// caught-up marker to their sequence (never back); heartbeats not at all. A stream that
// started with oldest_held resumes from a sequence.
func TestFramesMoveTheResumePoint(t *testing.T) {
	var seen []uint64
	caughtUp := uint64(0)
	l := &loop{event: func(ev *pb.AgenticEvent) (bool, error) {
		seen = append(seen, ev.GetSequence())
		return false, nil
	}, caughtUp: func(sequence uint64) { caughtUp = sequence }}
	req := &pb.SubscribeRequest{Start: &pb.SubscribeRequest_OldestHeld{OldestHeld: true}}
	for _, f := range []struct {
		frame *pb.SubscribeResponse
		after uint64
	}{
		{&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Heartbeat{Heartbeat: &pb.Heartbeat{}}}, 0},
		{events(3, 4, 5).frame, 5},
		{&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_CaughtUp{CaughtUp: &pb.CaughtUp{Sequence: 7}}}, 7},
		{&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Bookmark{Bookmark: &pb.Bookmark{Sequence: 9}}}, 9},
		{&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Bookmark{Bookmark: &pb.Bookmark{Sequence: 8}}}, 9},
		{&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Heartbeat{Heartbeat: &pb.Heartbeat{}}}, 9},
		{events(10).frame, 10},
	} {
		if stop, err := handleFrame(f.frame, req, l); stop || err != nil {
			t.Fatalf("frame %v: stop %v, %v", f.frame, stop, err)
		}
		if f.after == 0 {
			if !req.GetOldestHeld() {
				t.Errorf("after %v the request is %v, want it unchanged (oldest_held)", f.frame, req)
			}
			continue
		}
		if req.GetAfterSequence() != f.after {
			t.Errorf("after %v: resume after %d, want %d", f.frame, req.GetAfterSequence(), f.after)
		}
	}
	if !slices.Equal(seen, []uint64{3, 4, 5, 10}) || caughtUp != 7 {
		t.Errorf("events %v, caught up at %d; want [3 4 5 10] and 7", seen, caughtUp)
	}
}

// after is a subscription that resumes after sequence.
func after(sequence uint64) *pb.SubscribeRequest {
	return &pb.SubscribeRequest{Start: &pb.SubscribeRequest_AfterSequence{AfterSequence: sequence}}
}

// events is a frame holding one batch of events with these sequences.
func events(sequences ...uint64) frameOrErr {
	batch := &pb.EventBatch{}
	for _, n := range sequences {
		batch.Events = append(batch.Events, &pb.AgenticEvent{Sequence: n})
	}
	return frameOrErr{frame: &pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Events{Events: batch}}}
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

// The reason agenticd gives comes first, also inside a wrapped error, and the fields a
// request got wrong follow, one a line.
func TestExplainShowsReasonAndFields(t *testing.T) {
	busy, err := status.New(codes.FailedPrecondition, "session s1 is still answering message m1").WithDetails(
		&errdetails.ErrorInfo{Domain: "agenticd", Reason: "SESSION_BUSY"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := (&cli{}).explain(fmt.Errorf("reopening: %w", busy.Err())), "reopening: SESSION_BUSY: session s1 is still answering message m1"; got != want {
		t.Errorf("explain = %q, want %q", got, want)
	}
	bad, err := status.New(codes.InvalidArgument, "the message has an empty part").WithDetails(
		&errdetails.ErrorInfo{Domain: "agenticd", Reason: "INVALID_ARGUMENT"},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "content.parts[1]", Description: "empty; give it text, an image, a file or a resource"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "INVALID_ARGUMENT: the message has an empty part\n  content.parts[1]: empty; give it text, an image, a file or a resource"
	if got := (&cli{}).explain(bad.Err()); got != want {
		t.Errorf("explain = %q, want %q", got, want)
	}
	// Another domain's ErrorInfo is not agenticd's reason.
	other, err := status.New(codes.Unavailable, "proxy down").WithDetails(&errdetails.ErrorInfo{Domain: "proxy.example", Reason: "DOWN"})
	if err != nil {
		t.Fatal(err)
	}
	if got := (&cli{addr: "127.0.0.1:1"}).explain(other.Err()); strings.Contains(got, "DOWN:") {
		t.Errorf("explain = %q shows another domain's reason", got)
	}
}

// Replayed events are marked as history (dimmed on a terminal); agent events name the
// agent and its status; errors name their reason.
func TestEventLines(t *testing.T) {
	delta := &pb.AgenticEvent{Sequence: 5, SessionId: "s1", Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA, Replay: true,
		Payload: &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: "m1", Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT, Text: "hi"}}}
	if got := eventLine(delta, false); !strings.HasPrefix(got, "#5 ") || !strings.HasSuffix(got, ` s1 message_delta (replay) m1 assistant "hi"`) {
		t.Errorf("a replayed event: %q", got)
	}
	if got := eventLine(delta, true); !strings.HasPrefix(got, "\x1b[2m#5 ") || !strings.HasSuffix(got, "\x1b[0m") {
		t.Errorf("a replayed event on a terminal: %q", got)
	}
	delta.Replay = false
	if got := eventLine(delta, true); strings.Contains(got, "replay") || strings.Contains(got, "\x1b") {
		t.Errorf("a live event: %q", got)
	}
	agent := &pb.AgenticEvent{Sequence: 6, AgentId: "acp.x.y", Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_AGENT_STATUS_CHANGED,
		Payload: &pb.AgenticEvent_AgentStatusChanged{AgentStatusChanged: &pb.AgentStatusChanged{Agent: &pb.AgentInfo{
			AgentId: "acp.x.y", Status: pb.AgentStatus_AGENT_STATUS_CRASHED, StatusReason: "exited with status 7"}}}}
	if got := eventLine(agent, false); !strings.HasSuffix(got, " agent acp.x.y agent_status_changed acp.x.y is crashed exited with status 7") {
		t.Errorf("an agent event: %q", got)
	}
	failed := &pb.AgenticEvent{Sequence: 7, SessionId: "s1", Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_ERROR,
		Payload: &pb.AgenticEvent_Error{Error: &pb.ErrorReported{Reason: pb.ErrorReason_ERROR_REASON_AGENT_CRASHED, Message: "gone"}}}
	if got := eventLine(failed, false); !strings.HasSuffix(got, " s1 error AGENT_CRASHED: gone") {
		t.Errorf("an error event: %q", got)
	}
	asked := &pb.AgenticEvent{Sequence: 8, SessionId: "s1", Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_ELICITATION_REQUIRED,
		Payload: &pb.AgenticEvent_ElicitationRequired{ElicitationRequired: &pb.ElicitationRequired{Request: &pb.ElicitationRequest{
			ElicitationId: "e1", Mode: pb.ElicitationMode_ELICITATION_MODE_URL, Message: "Log in", Url: "https://example.com"}}}}
	if got := eventLine(asked, false); !strings.HasSuffix(got, ` s1 elicitation_required e1 url "Log in" url=https://example.com`) {
		t.Errorf("an elicitation: %q", got)
	}
	resolved := &pb.AgenticEvent{Sequence: 9, SessionId: "s1", Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_ELICITATION_RESOLVED,
		Payload: &pb.AgenticEvent_ElicitationResolved{ElicitationResolved: &pb.ElicitationResolved{ElicitationId: "e1",
			Action: pb.ElicitationAction_ELICITATION_ACTION_CANCEL, DecidedBy: pb.ElicitationDecider_ELICITATION_DECIDER_CANCELLED, Reason: "the turn was cancelled"}}}
	if got := eventLine(resolved, false); !strings.HasSuffix(got, " s1 elicitation_resolved e1 cancel by=cancelled the turn was cancelled") {
		t.Errorf("an elicitation's resolution: %q", got)
	}
}

// send puts the text first, then the files and images in the order of the command line,
// as absolute paths; the reply is the one under the message id agenticctl chose.
func TestSendAttachmentsInOrder(t *testing.T) {
	s := startServer(t)
	id := strings.TrimSpace(s.mustCtl(t, "new", "--agent", agentID, "--workspace", s.root))
	for _, name := range []string{"a.png", "notes.txt", "b.png"} {
		if err := os.WriteFile(filepath.Join(s.root, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(s.root)
	code, out, errOut := s.ctl("send", "--approve-all", "--image", "a.png", "--file", "notes.txt", "--image", filepath.Join(s.root, "b.png"), id, "look")
	if code != 0 || out != "Hello world\n" {
		t.Fatalf("send: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	parts := s.agent.lastContent().Parts
	var got []string
	for _, p := range parts {
		switch {
		case p.Image != nil:
			got = append(got, "image "+p.Image.Data+" "+p.Image.MimeType)
		case p.File != nil:
			got = append(got, "file "+p.File.Path)
		default:
			got = append(got, "text "+p.Text)
		}
	}
	want := []string{"text look", "image " + filepath.Join(s.root, "a.png") + " image/png", "file " + filepath.Join(s.root, "notes.txt"),
		"image " + filepath.Join(s.root, "b.png") + " image/png"}
	if !slices.Equal(got, want) {
		t.Errorf("parts %q, want %q", got, want)
	}
	if reply := s.agent.replyID(); !strings.HasPrefix(reply, "ctl-") {
		t.Errorf("the reply's id is %q, want one agenticctl chose", reply)
	}
}

// A call that names a session carries it in agenticd-session-id, for a proxy that routes
// each session to its replica; a call that names none carries no such header.
func TestSessionHeader(t *testing.T) {
	var got []string
	invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		got = md.Get(sessionIDHeader)
		return nil
	}
	if err := sessionHeader(context.Background(), "/m", &pb.SendMessageRequest{SessionId: "s1"}, nil, nil, invoker); err != nil || !slices.Equal(got, []string{"s1"}) {
		t.Errorf("SendMessage: header %v (%v); want [s1]", got, err)
	}
	if err := sessionHeader(context.Background(), "/m", &pb.ListAgentsRequest{}, nil, nil, invoker); err != nil || len(got) != 0 {
		t.Errorf("ListAgents: header %v (%v); want none", got, err)
	}
}

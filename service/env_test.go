package service

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/webhooks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// streamWait bounds a stream in a test so that a bug hangs one test, not the run; it is
// not an assertion about speed.
const streamWait = 60 * time.Second

const (
	fakeID  = "deepchat.fake"
	otherID = "acp.fake.other"
)

// testEnv is the real Service on a real gRPC server over loopback TCP, with two fake agents, a
// real SQLite file and real workspace roots.
type testEnv struct {
	client   pb.AgenticServiceClient
	conn     *grpc.ClientConn
	lis      *loopbackListener
	hub      *Hub
	store    *store.Store
	fake     *fakePresenter
	other    *fakePresenter
	batching *batchingFake // the other agent, with envOptions.batching
	root     string        // the canonical workspace root
	token    string        // the bearer token the server accepts and client sends
}

type envOptions struct {
	hub   HubOptions
	token string
	// store, when set, is used instead of a fresh database (to share one between envs).
	store *store.Store
	// noAgents registers no presenter (sessions in the store then have no owner).
	noAgents bool
	// batching registers the other agent as a batchingFake (testEnv.batching).
	batching bool
	// logs, when set, receives the server's log lines as well as the test log.
	logs io.Writer
	// wrapOther, when set, registers what it makes of the other agent's fake in its place
	// (to give it optional methods).
	wrapOther func(*fakePresenter) presenters.Presenter
	// eventLog keeps the events (and the audit log) in the env's store.
	eventLog bool
	// queue gives the hub a queue of messages in the env's store (HubOptions.Queue).
	queue bool
	// page and allowedOrigins configure the HTTP gateway (GRPCOptions).
	page           http.Handler
	allowedOrigins []string
	// webLogins signs browsers in (Options, Credentials).
	webLogins *WebLogins
	// localSocket also serves the local socket at this path (GRPCServer.ServeLocal).
	localSocket string
	// principals and oidc are callers besides the owner (Credentials).
	principals []StaticPrincipal
	oidc       TokenVerifier
	// tlsCert, tlsKey and clientCA serve TLS, asking for client certificates (GRPCOptions).
	tlsCert, tlsKey, clientCA string
	// webhooks takes sessions' own webhooks (Options); the test observes and runs it.
	webhooks *webhooks.Notifier
}

func newEnv(t testing.TB, opts envOptions) *testEnv {
	t.Helper()
	ctx := context.Background()
	e := &testEnv{store: opts.store}
	if e.store == nil {
		e.store = openStore(t)
	}
	opts.hub.Store = e.store
	if opts.eventLog {
		opts.hub.Log = e.store
	}
	if opts.queue {
		opts.hub.Queue = e.store
	}
	var err error
	if e.hub, err = NewHub(ctx, opts.hub); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	roots, err := sandbox.NewRoots([]string{root}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.fake, e.other = newFake(fakeID, e.hub), newFake(otherID, e.hub)
	var ps []presenters.Presenter
	switch {
	case opts.noAgents:
	case opts.batching:
		e.batching = &batchingFake{fakePresenter: e.other}
		ps = []presenters.Presenter{e.fake, e.batching}
	case opts.wrapOther != nil:
		ps = []presenters.Presenter{e.fake, opts.wrapOther(e.other)}
	default:
		ps = []presenters.Presenter{e.fake, e.other}
	}
	registry, err := NewRegistry(e.store, ps)
	if err != nil {
		t.Fatal(err)
	}
	var logTo io.Writer = testWriter{t}
	if opts.logs != nil {
		logTo = io.MultiWriter(logTo, opts.logs)
	}
	logger := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, bench := t.(*testing.B); bench {
		logger = discard
	}
	// Every call needs credentials: the env's client carries the token.
	if opts.token == "" {
		opts.token = testToken
	}
	e.token = opts.token
	srv, err := NewGRPCServer(New(Options{Registry: registry, Hub: e.hub, Roots: roots, WebLogins: opts.webLogins, Webhooks: opts.webhooks, Logger: logger}),
		GRPCOptions{Credentials: Credentials{Tokens: []string{opts.token}, WebLogins: opts.webLogins, Principals: opts.principals, OIDC: opts.oidc}, Logger: logger,
			Page: opts.page, AllowedOrigins: opts.allowedOrigins, TLSCertFile: opts.tlsCert, TLSKeyFile: opts.tlsKey, ClientCAFile: opts.clientCA, Answers: e.store})
	if err != nil {
		t.Fatal(err)
	}
	lis := listenLoopback(t)
	e.lis = lis
	served := make(chan error, 2)
	go func() { served <- srv.Serve(lis) }()
	servers := 1
	if opts.localSocket != "" {
		local, err := localcred.Listen(opts.localSocket, nil)
		if err != nil {
			t.Fatal(err)
		}
		servers++
		go func() { served <- srv.ServeLocal(local) }()
	}
	e.conn = dialListener(t, lis, opts.token)
	e.client = pb.NewAgenticServiceClient(e.conn)
	t.Cleanup(func() {
		_ = e.conn.Close()
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		srv.Stop(stopped)
		for range servers {
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	})
	// One event, so that LastSequence is never 0 and subscribeLive can always resume.
	e.hub.Publish(presenters.Event{SessionID: "warm-up", AgentID: "none", Payload: presenters.StatusChangedPayload{Status: presenters.SessionIdle}})
	return e
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return st
}

// testToken is the bearer token of a test env whose options name none.
const testToken = "the-test-envs-token"

// contextDialer is a listener tests connect to directly: a loopbackListener, or a bufconn
// for a bare gRPC server.
type contextDialer interface {
	DialContext(ctx context.Context) (net.Conn, error)
}

// loopbackListener is a real TCP listener on 127.0.0.1 that tests dial by its address.
// The env serves HTTP on it as well as gRPC, and bufconn does not do for that: its read
// deadline timer can fire after the deadline was cleared, and net/http then takes the
// stale timeout of an aborted background read for a broken connection and cancels the
// request in flight.
type loopbackListener struct{ net.Listener }

func listenLoopback(t testing.TB) *loopbackListener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &loopbackListener{Listener: lis}
}

func (l *loopbackListener) DialContext(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", l.Addr().String())
}

func dialListener(t testing.TB, lis contextDialer, token string, extra ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts := append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, extra...)
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCredentials(token)))
	}
	conn, err := grpc.NewClient("passthrough:///agenticd-test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

type tokenCredentials string

func (b tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (tokenCredentials) RequireTransportSecurity() bool { return false }

// discard is a logger for benchmarks and tests that expect log lines nobody reads.
var discard = slog.New(slog.DiscardHandler)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// createSession creates a session of the fake agent in the workspace root.
func (e *testEnv) createSession(t *testing.T, agentID string) *pb.SessionInfo {
	t.Helper()
	resp, err := e.client.CreateSession(context.Background(), &pb.CreateSessionRequest{
		AgentId: agentID,
		Config:  &pb.SessionConfig{Workspace: e.root},
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession()
}

// storeSessions records sessions in the store as CreateSession does, so that a test can
// subscribe to sessions whose events it publishes itself.
func (e *testEnv) storeSessions(t testing.TB, agentID string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := e.store.AddSessionOwner(context.Background(), store.SessionOwner{SessionID: id, AgentID: agentID, Workspace: e.root, CreatedUnixNano: time.Now().UnixNano()}); err != nil {
			t.Fatal(err)
		}
	}
}

// eventStream is a subscription read event by event: recv unpacks event batches and
// skips the other frames; Recv still returns frames as they come.
type eventStream struct {
	pb.AgenticService_SubscribeClient
	pending []*pb.AgenticEvent
}

// next returns the next event, or the error that ended the stream.
func (s *eventStream) next() (*pb.AgenticEvent, error) {
	for len(s.pending) == 0 {
		frame, err := s.Recv()
		if err != nil {
			return nil, err
		}
		s.pending = frame.GetEvents().GetEvents()
	}
	ev := s.pending[0]
	s.pending = s.pending[1:]
	return ev, nil
}

// subscribe opens a stream that the test's end closes.
func (e *testEnv) subscribe(t testing.TB, req *pb.SubscribeRequest) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	t.Cleanup(cancel)
	stream, err := e.client.Subscribe(ctx, req)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	return &eventStream{AgenticService_SubscribeClient: stream}
}

// subscribeLive subscribes from the newest event on: resuming there is gap-free however
// long the server takes to register the stream.
func (e *testEnv) subscribeLive(t testing.TB, req *pb.SubscribeRequest) *eventStream {
	t.Helper()
	req.Start = &pb.SubscribeRequest_AfterSequence{AfterSequence: e.hub.LastSequence()}
	return e.subscribe(t, req)
}

func recv(t *testing.T, stream *eventStream) *pb.AgenticEvent {
	t.Helper()
	ev, err := stream.next()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return ev
}

func recvN(t *testing.T, stream *eventStream, n int) []*pb.AgenticEvent {
	t.Helper()
	out := make([]*pb.AgenticEvent, n)
	for i := range out {
		out[i] = recv(t, stream)
	}
	return out
}

// recvUntilErr reads events until the stream fails and returns them and the error.
func recvUntilErr(stream *eventStream) ([]*pb.AgenticEvent, error) {
	var got []*pb.AgenticEvent
	for {
		ev, err := stream.next()
		if err != nil {
			return got, err
		}
		got = append(got, ev)
	}
}

func wantCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != want {
		t.Fatalf("got %v (%q), want %v", st.Code(), st.Message(), want)
	}
	return st
}

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// publishDeltas emits n assistant deltas in a session and returns their sequences.
func publishDeltas(pub presenters.Publisher, agentID, sessionID string, n int) []uint64 {
	em := presenters.NewEmitter(pub, agentID, sessionID)
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = em.MessageDelta("m", presenters.RoleAssistant, "x")
	}
	return seqs
}

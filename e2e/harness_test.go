// Package e2e runs a real agenticd in-process (internal/daemon on 127.0.0.1:0, a real
// SQLite file under t.TempDir()) and talks to it with a real gRPC client.
//
// This file owns TestMain (goleak): other e2e files must not define their own.
package e2e

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/sandbox/confine"
)

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	// deepchat.default configures itself from these; a developer's own must not change
	// what the tests see.
	for _, name := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"} {
		_ = os.Unsetenv(name)
	}
	goleak.VerifyTestMain(m)
}

// eventWait bounds how long a helper waits for one event before failing the test. It is a
// safety net against hangs, not an assertion about speed.
const eventWait = 60 * time.Second

// testServer is a running agenticd and a client connected to it.
type testServer struct {
	// Client talks to the server with the configured token, else the local token from
	// the data dir (every call needs credentials). It is replaced by Restart.
	Client agenticv1.AgenticServiceClient
	// Conn is the client's connection, for other services (health, reflection).
	Conn *grpc.ClientConn
	// Addr is host:port the server listens on; Restart may change the port.
	Addr string
	// Cfg is the config the server runs with, defaults filled in.
	Cfg daemon.Config
	// Token is the bearer token Client sends.
	Token string

	t       *testing.T
	srv     *daemon.Server
	stopped bool
	mu      sync.Mutex
}

// startServer starts agenticd in-process. Empty DataDir, Listen and WorkspaceRoots are
// filled from t.TempDir() and 127.0.0.1:0. The server stops at the end of the test.
func startServer(t *testing.T, cfg daemon.Config) *testServer {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if len(cfg.WorkspaceRoots) == 0 {
		cfg.WorkspaceRoots = []string{t.TempDir()}
	}
	s := &testServer{t: t, Cfg: cfg}
	s.start(t)
	t.Cleanup(s.Stop)
	return s
}

func (s *testServer) start(t *testing.T) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := daemon.Start(context.Background(), s.Cfg, logger)
	if err != nil {
		t.Fatalf("start agenticd: %v", err)
	}
	token := cmp.Or(s.Cfg.Token, srv.LocalToken())
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearerToken(token)))
	if err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), eventWait)
		defer cancel()
		_ = srv.Stop(stopCtx)
		t.Fatalf("connect to agenticd at %s: %v", srv.Addr(), err)
	}
	s.mu.Lock()
	s.srv, s.Conn, s.Addr, s.Token, s.stopped = srv, conn, srv.Addr(), token, false
	s.Client = agenticv1.NewAgenticServiceClient(conn)
	s.mu.Unlock()
}

// Stop shuts the server down gracefully and closes the client. It is idempotent.
func (s *testServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := s.srv.Stop(ctx); err != nil {
		s.t.Errorf("stop agenticd: %v", err)
	}
	if err := s.Conn.Close(); err != nil {
		s.t.Errorf("close client connection: %v", err)
	}
}

// Restart stops the server and starts it again on the same data dir (and config). With
// Listen 127.0.0.1:0 the port changes: use s.Client and s.Addr afresh afterwards.
func (s *testServer) Restart(t *testing.T) {
	t.Helper()
	s.Stop()
	s.start(t)
}

// Subscribe opens an event stream that ends with the test.
func (s *testServer) Subscribe(t *testing.T, req *agenticv1.SubscribeRequest) *eventStream {
	t.Helper()
	return subscribe(t, s.Client, req)
}

// subscribe opens an event stream of client that ends with the test.
func subscribe(t *testing.T, client agenticv1.AgenticServiceClient, req *agenticv1.SubscribeRequest) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Subscribe(ctx, req)
	if err != nil {
		cancel()
		t.Fatalf("Subscribe: %v", err)
	}
	// The server sends headers once the subscription is registered.
	if _, err := stream.Header(); err != nil {
		cancel()
		t.Fatalf("Subscribe: waiting for the subscription: %v", err)
	}
	es := &eventStream{cancel: cancel, events: make(chan *agenticv1.AgenticEvent, 1024), done: make(chan struct{}),
		caughtUp: make(chan struct{})}
	go es.read(stream)
	t.Cleanup(es.Close)
	return es
}

// eventStream reads a Subscribe stream in the background as a flat sequence of events;
// the frames stay readable (Frames, CaughtUp). Next and Until wait at most eventWait for
// each event.
type eventStream struct {
	cancel   context.CancelFunc
	events   chan *agenticv1.AgenticEvent
	done     chan struct{}
	err      error         // the stream's final error, readable once done is closed
	caughtUp chan struct{} // closed at the caught_up frame

	mu            sync.Mutex
	frames        []*agenticv1.SubscribeResponse
	caughtUpAfter uint64 // the caught_up frame's sequence
}

func (e *eventStream) read(stream agenticv1.AgenticService_SubscribeClient) {
	defer close(e.done)
	for {
		frame, err := stream.Recv()
		if err != nil {
			e.err = err
			return
		}
		e.mu.Lock()
		e.frames = append(e.frames, frame)
		if c := frame.GetCaughtUp(); c != nil {
			e.caughtUpAfter = c.GetSequence()
			close(e.caughtUp)
		}
		e.mu.Unlock()
		for _, ev := range frame.GetEvents().GetEvents() {
			select {
			case e.events <- ev:
			case <-stream.Context().Done():
				e.err = stream.Context().Err()
				return
			}
		}
	}
}

// Frames returns the frames read so far, in order.
func (e *eventStream) Frames() []*agenticv1.SubscribeResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*agenticv1.SubscribeResponse(nil), e.frames...)
}

// CaughtUp waits for the stream's caught_up frame and returns its sequence.
func (e *eventStream) CaughtUp(t *testing.T) uint64 {
	t.Helper()
	select {
	case <-e.caughtUp:
	case <-e.done:
		select {
		case <-e.caughtUp:
		default:
			t.Fatalf("the stream ended without a caught_up frame: %v", e.err)
		}
	case <-time.After(eventWait):
		t.Fatalf("no caught_up frame within %s", eventWait)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.caughtUpAfter
}

// Next returns the next event; it fails the test if the stream ends or nothing arrives.
func (e *eventStream) Next(t *testing.T) *agenticv1.AgenticEvent {
	t.Helper()
	ev, err := e.next()
	if err != nil {
		t.Fatalf("waiting for an event: %v", err)
	}
	return ev
}

func (e *eventStream) next() (*agenticv1.AgenticEvent, error) {
	timer := time.NewTimer(eventWait)
	defer timer.Stop()
	select {
	case ev := <-e.events:
		return ev, nil
	case <-e.done:
		// Events read before the stream ended come first.
		select {
		case ev := <-e.events:
			return ev, nil
		default:
		}
		if e.err == nil || errors.Is(e.err, io.EOF) {
			return nil, io.EOF
		}
		return nil, e.err
	case <-timer.C:
		return nil, errors.New("no event within " + eventWait.String())
	}
}

// Until returns the events up to and including the first one for which match is true.
func (e *eventStream) Until(t *testing.T, match func(*agenticv1.AgenticEvent) bool) []*agenticv1.AgenticEvent {
	t.Helper()
	var got []*agenticv1.AgenticEvent
	for {
		ev := e.Next(t)
		got = append(got, ev)
		if match(ev) {
			return got
		}
	}
}

// Err waits for the stream to end and returns its error (io.EOF for a clean end).
func (e *eventStream) Err(t *testing.T) error {
	t.Helper()
	for {
		_, err := e.next()
		if err != nil {
			return err
		}
	}
}

// Close ends the stream and waits for the reader. It is idempotent.
func (e *eventStream) Close() {
	e.cancel()
	<-e.done
}

// IsType reports whether an event is of the given type (for Until).
func IsType(typ agenticv1.AgenticEventType) func(*agenticv1.AgenticEvent) bool {
	return func(ev *agenticv1.AgenticEvent) bool { return ev.GetType() == typ }
}

// subscribeAfter asks for the events after sequence (of these sessions; none: all),
// deltas one by one as they were published, so that tests can compare events exactly.
func subscribeAfter(sequence uint64, sessionIDs ...string) *agenticv1.SubscribeRequest {
	return &agenticv1.SubscribeRequest{SessionIds: sessionIDs, Start: &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: sequence},
		UnmergedDeltas: true}
}

// textContent is a message of one text part.
func textContent(text string) *agenticv1.MessageContent {
	return &agenticv1.MessageContent{Parts: []*agenticv1.ContentPart{{Part: &agenticv1.ContentPart_Text{Text: text}}}}
}

// reasonOf is the reason of agenticd's ErrorInfo on err ("" when it carries none).
func reasonOf(err error) string { return agenticdErrorInfo(err).GetReason() }

// agenticdErrorInfo is the ErrorInfo agenticd put on err's status, or nil.
func agenticdErrorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "agenticd" {
			return info
		}
	}
	return nil
}

// bearerToken sends `authorization: Bearer <token>` on every RPC (also over plain TCP,
// which is what a loopback test server uses).
type bearerToken string

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }

// testLogWriter sends the server's log lines to the test log (shown on failure or -v).
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

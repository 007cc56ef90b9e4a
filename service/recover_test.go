package service

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// lockedBuffer collects log lines written from the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var correlationIDPattern = regexp.MustCompile(`correlation id ([0-9a-f]{16})`)

// wantCorrelated checks that a status message names a correlation id and nothing else of
// the panic, and that the log has the panic and its stack under that id.
func wantCorrelated(t *testing.T, msg, logs, panicText string) {
	t.Helper()
	m := correlationIDPattern.FindStringSubmatch(msg)
	if m == nil || strings.Contains(msg, panicText) {
		t.Fatalf("status message %q should name a correlation id and not the panic", msg)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "correlation_id="+m[1]) && strings.Contains(line, panicText) && strings.Contains(line, "goroutine") {
			return
		}
	}
	t.Fatalf("no log line with correlation_id=%s, the panic and its stack in:\n%s", m[1], logs)
}

// A handler that panics costs its caller an INTERNAL naming a correlation id, logged with
// the stack; the server goes on serving.
func TestPanicInHandlerBecomesInternal(t *testing.T) {
	logs := &lockedBuffer{}
	e := newEnv(t, envOptions{logs: logs})
	s := e.createSession(t, fakeID)
	e.fake.getFn = func(context.Context, string) (presenters.SessionInfo, error) { panic("presenter exploded") }
	_, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: s.GetSessionId()})
	st := wantCode(t, err, codes.Internal)
	wantCorrelated(t, st.Message(), logs.String(), "presenter exploded")
	if !strings.Contains(logs.String(), "session_id="+s.GetSessionId()) {
		t.Errorf("the panic's log line should name the session")
	}
	e.fake.getFn = nil
	if _, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: s.GetSessionId()}); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
}

// A panicking stream handler ends its stream with INTERNAL the same way, and the server
// keeps serving streams. (No AgenticService stream calls a presenter, so a test service
// served with agenticd's server options stands in.)
func TestPanicInStreamBecomesInternal(t *testing.T) {
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	srv := grpc.NewServer(serverOptions(Credentials{Tokens: []string{testToken}}, nil, nil, logger)...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Panics",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Stream",
			ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				var req emptypb.Empty
				if err := ss.RecvMsg(&req); err != nil {
					return err
				}
				if err := ss.SendMsg(&emptypb.Empty{}); err != nil {
					return err
				}
				panic("stream exploded")
			},
		}},
	}, struct{}{})
	lis := bufconn.Listen(1 << 16)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	conn := dialListener(t, lis, testToken)
	defer func() { _ = conn.Close() }()
	for range 2 { // the second stream shows that the server still serves
		stream, err := conn.NewStream(bg, &grpc.StreamDesc{ServerStreams: true}, "/test.Panics/Stream")
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
			t.Fatalf("first message: %v", err)
		}
		err = stream.RecvMsg(&emptypb.Empty{})
		st := wantCode(t, err, codes.Internal)
		wantCorrelated(t, st.Message(), logs.String(), "stream exploded")
	}
}

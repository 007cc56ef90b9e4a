package service

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/acpbridge"
)

// ACPPath is where agenticd speaks ACP to editors over WebSocket; the agent is the
// query's `agent`.
const ACPPath = "/acp/v1"

// bridgeAddr is the local address of an in-process API connection made for an editor
// whose credentials the ACP gateway checked; via says how it authenticated. Only the
// gateway makes one, after that check.
type bridgeAddr struct{ caller Principal }

func (bridgeAddr) Network() string  { return "agenticd-acp" }
func (a bridgeAddr) String() string { return "acp websocket, " + a.caller.Via }

// bridgeConn is one end of a socket pair that shows a bridgeAddr as its local address.
type bridgeConn struct {
	net.Conn
	local bridgeAddr
}

func (c bridgeConn) LocalAddr() net.Addr { return c.local }

// inprocListener hands the gRPC server the server ends of in-process connections.
type inprocListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newInprocListener() *inprocListener {
	return &inprocListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *inprocListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *inprocListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *inprocListener) Addr() net.Addr { return bridgeAddr{} }

// dial makes a connection to the gRPC server through l whose server end carries via.
// A socket pair, not net.Pipe: HTTP/2 needs buffered writes on both ends.
func (l *inprocListener) dial(ctx context.Context, caller Principal) (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "agenticd-acp")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			for _, c := range conns[:i] {
				_ = c.Close()
			}
			return nil, err
		}
		conns[i] = c
	}
	select {
	case l.conns <- bridgeConn{Conn: conns[1], local: bridgeAddr{caller: caller}}:
		return conns[0], nil
	case <-l.done:
	case <-ctx.Done():
	}
	_ = conns[0].Close()
	_ = conns[1].Close()
	return nil, errors.Join(net.ErrClosed, ctx.Err())
}

// acpGateway serves ACP over WebSocket: each editor connection gets the bridge that
// agenticctl runs on stdio, calling the API in-process with the editor's identity, so
// that every call passes the same interceptors as any other client's.
type acpGateway struct {
	inproc *inprocListener
	auth   *authenticator
	logger *slog.Logger

	// closing ends every editor connection on Stop, which waits for them: the HTTP
	// server's Shutdown does not wait for hijacked connections.
	closing chan struct{}
	conns   sync.WaitGroup
	mu      sync.Mutex
	closed  bool
}

func newACPGateway(creds Credentials, logger *slog.Logger) *acpGateway {
	return &acpGateway{inproc: newInprocListener(), auth: newAuthenticator(creds), logger: logger, closing: make(chan struct{})}
}

// caller checks the upgrade request's credentials as the API checks a call's (the local
// socket, the page's cookie, a client certificate or a bearer token) and returns the
// principal the editor's calls then run as.
func (a *acpGateway) caller(r *http.Request) (Principal, error) {
	ctx := r.Context()
	if local, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		ctx = peer.NewContext(ctx, &peer.Peer{LocalAddr: local})
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", auth))
	}
	p, err := a.auth.authenticate(ctx)
	if err != nil {
		return Principal{}, err
	}
	p.Via = "acp websocket, " + p.Via
	return p, nil
}

func (a *acpGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	agent := r.URL.Query().Get("agent")
	if agent == "" {
		http.Error(w, "name the agent: "+ACPPath+"?agent=<id> (`agenticctl agents` lists them)", http.StatusBadRequest)
		return
	}
	caller, err := a.caller(r)
	if err != nil {
		st, _ := toStatus(err)
		http.Error(w, st.Message(), http.StatusUnauthorized)
		return
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		http.Error(w, "agenticd is stopping", http.StatusServiceUnavailable)
		return
	}
	a.conns.Add(1)
	a.mu.Unlock()
	defer a.conns.Done()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-a.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := grpc.NewClient("passthrough:///agenticd-acp",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return a.inproc.dial(ctx, caller) }))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() { _ = conn.Close() }()
	logger := a.logger.With("remote", r.RemoteAddr, "principal", caller.Name, "via", caller.Via)
	err = acpbridge.ServeWebSocket(ctx, w, r, acpbridge.Options{
		AgentID: agent,
		Client:  pb.NewAgenticServiceClient(conn),
		Target:  "agenticd (in-process)",
		Logger:  logger,
	})
	if err != nil {
		logger.Info("ACP over WebSocket", "agent_id", agent, "err", err)
	}
}

// close ends every editor connection and waits for them.
func (a *acpGateway) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.closing)
	}
	a.mu.Unlock()
	a.conns.Wait()
}

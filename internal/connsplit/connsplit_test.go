package connsplit

import (
	"bytes"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// connWait bounds a wait in a test so that a bug hangs one test, not the run.
const connWait = 30 * time.Second

func startSplitter(t *testing.T, opts Options) *Splitter {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(lis, opts)
	ran := make(chan error, 1)
	go func() { ran <- s.Run() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

// accepted is the next connection of l, with the first n bytes it reads.
func accepted(t *testing.T, l net.Listener, n int) (net.Conn, []byte) {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		got <- result{c, err}
	}()
	var r result
	select {
	case r = <-got:
	case <-time.After(connWait):
		l.Close()
		r = <-got
	}
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	buf := make([]byte, n)
	r.c.SetReadDeadline(time.Now().Add(connWait))
	if _, err := io.ReadFull(r.c, buf); err != nil {
		t.Fatalf("reading what the client sent: %v", err)
	}
	return r.c, buf
}

func dial(t *testing.T, s *Splitter) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.base.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// h2Start is what an HTTP/2 client sends up to its first request: the preface, its
// settings, then the headers of a request with this method and content type.
func h2Start(t *testing.T, method, contentType string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(clientPreface)
	fr := http2.NewFramer(&b, nil)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/pkg.Service/Method"},
		{Name: ":authority", Value: "127.0.0.1"}, {Name: "content-type", Value: contentType},
	} {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Each connection reaches the server that speaks its protocol, with every byte it sent.
func TestRoutes(t *testing.T) {
	s := startSplitter(t, Options{})
	for _, tc := range []struct {
		name string
		sent func(t *testing.T) []byte
		to   func() net.Listener
	}{
		{"HTTP/1.1", func(*testing.T) []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n") }, s.HTTP},
		{"short HTTP/1.0", func(*testing.T) []byte { return []byte("GET / HTTP/1.0\r\n\r\n") }, s.HTTP},
		{"native gRPC", func(t *testing.T) []byte { return h2Start(t, "POST", "application/grpc") }, s.GRPC},
		{"native gRPC with a codec", func(t *testing.T) []byte { return h2Start(t, "POST", "application/grpc+proto") }, s.GRPC},
		{"gRPC-Web over h2c", func(t *testing.T) []byte { return h2Start(t, "POST", "application/grpc-web+proto") }, s.HTTP},
		{"Connect over h2c", func(t *testing.T) []byte { return h2Start(t, "POST", "application/json") }, s.HTTP},
		{"a page over h2c", func(t *testing.T) []byte { return h2Start(t, "GET", "") }, s.HTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := tc.sent(t)
			c := dial(t, s)
			if _, err := c.Write(sent); err != nil {
				t.Fatal(err)
			}
			_, got := accepted(t, tc.to(), len(sent))
			if !bytes.Equal(got, sent) {
				t.Errorf("the server read %q, the client sent %q", got, sent)
			}
		})
	}
}

// A client that waits for the server's settings before its first request (as grpc-go's
// does) gets an empty SETTINGS frame once its preface is in.
func TestSettingsForWaitingClients(t *testing.T) {
	s := startSplitter(t, Options{})
	c := dial(t, s)
	if _, err := io.WriteString(c, clientPreface); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(connWait))
	f, err := http2.NewFramer(nil, c).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() || sf.NumSettings() != 0 {
		t.Fatalf("first frame %v, want an empty SETTINGS frame", f)
	}
}

// An HTTP/2 client at rest that pings before any request is a gRPC client.
func TestPingBeforeRequestIsGRPC(t *testing.T) {
	s := startSplitter(t, Options{})
	var b bytes.Buffer
	b.WriteString(clientPreface)
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()
	fr.WritePing(false, [8]byte{1})
	c := dial(t, s)
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	accepted(t, s.GRPC(), b.Len())
}

// A connection that shows no protocol in time is closed, and so is one still being read
// when the splitter closes; neither leaves a goroutine behind (TestMain).
func TestUnroutedConnectionsAreClosed(t *testing.T) {
	s := startSplitter(t, Options{FirstBytesTimeout: 50 * time.Millisecond})
	silent := dial(t, s)
	silent.SetReadDeadline(time.Now().Add(connWait))
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a silent connection read %d bytes, %v; want it closed (EOF)", n, err)
	}
	// Past the preface, a client may wait for its first call as long as it likes.
	resting := dial(t, s)
	if _, err := io.WriteString(resting, clientPreface); err != nil {
		t.Fatal(err)
	}
	resting.SetReadDeadline(time.Now().Add(connWait))
	if _, err := io.ReadFull(resting, make([]byte, len(emptySettings))); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n, err := resting.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after Close, a connection being read read %d bytes, %v; want it closed (EOF)", n, err)
	}
	if _, err := s.GRPC().Accept(); err != ErrClosed {
		t.Errorf("Accept after Close: %v, want ErrClosed", err)
	}
}

// The HTTP server gets an HTTP/2 client's stream without the acknowledgement of the
// splitter's settings (its first), and everything else, however the reads fall.
func TestAckDropper(t *testing.T) {
	frames := func(withOurAck bool) []byte {
		var b bytes.Buffer
		b.WriteString(clientPreface)
		fr := http2.NewFramer(&b, nil)
		fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})
		if withOurAck {
			fr.WriteSettingsAck()
		}
		fr.WriteData(1, false, []byte("payload of a frame"))
		fr.WriteSettingsAck() // the HTTP server's own: kept
		fr.WriteData(1, true, bytes.Repeat([]byte("z"), 100))
		return b.Bytes()
	}
	want := frames(false)
	for _, r := range []func(io.Reader) io.Reader{
		func(r io.Reader) io.Reader { return r },
		iotest.OneByteReader,
		iotest.HalfReader,
	} {
		got, err := io.ReadAll(r(&ackDropper{r: bytes.NewReader(frames(true)), passThrough: len(clientPreface)}))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got\n%q\nwant\n%q", got, want)
		}
	}
}

// Running out of file descriptors is no reason to stop serving.
func TestTransientAcceptErrors(t *testing.T) {
	for _, err := range []error{
		&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)},
		&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)},
		&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)},
	} {
		if !transientAcceptError(err) {
			t.Errorf("%v ends the splitter", err)
		}
	}
	if transientAcceptError(net.ErrClosed) {
		t.Error("a closed listener counts as passing")
	}
}

// Package connsplit shares one listener between two servers: native gRPC, which keeps
// its own HTTP/2 transport, and an HTTP server for everything else (Connect, gRPC-Web,
// plain HTTP/1.1, h2c with other content types). It reads the start of each connection
// and hands the connection, with what was read put back, to the server that speaks it.
//
// A connection that opens with anything but the HTTP/2 preface is HTTP/1. An HTTP/2
// connection goes by the content-type of its first request: application/grpc (and
// application/grpc+codec) is native gRPC, anything else the HTTP server's. Clients keep
// to one protocol per connection, so the first request decides for all of them. A client
// whose first frames after its settings are neither a request nor a settings, window
// update or priority frame (a ping, say) is a gRPC client at rest: it goes to gRPC.
//
// Some HTTP/2 clients (grpc-go's among them) send no request before the server's
// SETTINGS frame arrives, so the splitter sends an empty SETTINGS frame (all defaults)
// once it has read the preface; the server that gets the connection then sends its own.
// The client acknowledges both. gRPC ignores acknowledgements; the HTTP server counts
// them against the settings it sent, so on its connections the splitter drops the first
// acknowledgement, which answers its own frame (a client acknowledges settings in the
// order it receives them).
package connsplit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientPreface opens every HTTP/2 connection (RFC 9113, 3.4).
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// emptySettings is a SETTINGS frame with no parameters: every setting at its default.
var emptySettings = []byte{0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0}

const (
	// DefaultFirstBytesTimeout bounds how long a new connection may take to send its
	// first bytes: an HTTP/1 request line or the HTTP/2 preface (and, over TLS, to finish
	// its handshake). After the preface an HTTP/2 client may wait for its first request
	// as long as it likes, as grpc-go's own transport lets it.
	DefaultFirstBytesTimeout = 10 * time.Second
	// maxSniffBytes bounds what an HTTP/2 client may send before its first request: its
	// settings and window updates are a few dozen bytes.
	maxSniffBytes = 64 << 10
)

// ErrClosed is what a closed splitter's listeners' Accept returns.
var ErrClosed = net.ErrClosed

// Splitter reads the start of each connection of a listener and hands it to its gRPC or
// its HTTP listener. Run accepts until Close.
type Splitter struct {
	base              net.Listener
	grpc, http        *listener
	firstBytesTimeout time.Duration
	logger            *slog.Logger

	mu      sync.Mutex
	closed  bool
	sniffed map[net.Conn]struct{} // connections being read, closed by Close
	wg      sync.WaitGroup        // the goroutines reading connections
	done    chan struct{}
}

// Options configures New; the zero value takes the defaults.
type Options struct {
	FirstBytesTimeout time.Duration
	Logger            *slog.Logger
}

// New splits base. Nothing is accepted before Run.
func New(base net.Listener, opts Options) *Splitter {
	if opts.FirstBytesTimeout <= 0 {
		opts.FirstBytesTimeout = DefaultFirstBytesTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Splitter{
		base:              base,
		firstBytesTimeout: opts.FirstBytesTimeout,
		logger:            opts.Logger,
		sniffed:           make(map[net.Conn]struct{}),
		done:              make(chan struct{}),
	}
	s.grpc = newListener(base.Addr(), s.done)
	s.http = newListener(base.Addr(), s.done)
	return s
}

// GRPC is the listener of native gRPC connections.
func (s *Splitter) GRPC() net.Listener { return s.grpc }

// HTTP is the listener of every other connection.
func (s *Splitter) HTTP() net.Listener { return s.http }

// Run accepts connections and routes each in a goroutine of its own, until Close (it
// then returns nil) or until the listener fails.
func (s *Splitter) Run() error {
	var delay time.Duration
	for {
		conn, err := s.base.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if transientAcceptError(err) {
				// Out of file descriptors and the like: wait a little and go on.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logger.Warn("accepting a connection failed; retrying", "err", err, "retry_in", delay)
				select {
				case <-time.After(delay):
				case <-s.done:
					return nil
				}
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		delay = 0
		if !s.track(conn) {
			conn.Close()
			return nil
		}
		go s.route(conn)
	}
}

// transientAcceptError reports whether an Accept error passes: the process or the system
// is out of file descriptors or memory for now, or a client gave up before it was
// accepted.
func transientAcceptError(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED) || errors.As(err, &ne) && ne.Timeout()
}

// Close stops accepting, closes the connections still being read and the two listeners,
// and waits for the goroutines reading connections. Connections already handed over
// belong to their servers. It is idempotent.
func (s *Splitter) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	for c := range s.sniffed {
		c.Close()
	}
	s.mu.Unlock()
	err := s.base.Close()
	s.wg.Wait()
	return err
}

func (s *Splitter) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track registers a connection to be read, unless the splitter is closed.
func (s *Splitter) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.sniffed[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Splitter) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.sniffed, c)
	s.mu.Unlock()
}

// route reads the start of c and hands it over, or closes it.
func (s *Splitter) route(c net.Conn) {
	defer s.wg.Done()
	to, conn, err := s.classify(c)
	s.untrack(c)
	if err != nil {
		if !s.isClosed() && !errors.Is(err, io.EOF) {
			s.logger.Debug("closed a connection before its first request", "remote", c.RemoteAddr(), "err", err)
		}
		c.Close()
		return
	}
	if !to.deliver(conn) {
		c.Close()
	}
}

// classify reads the preface or the HTTP/1 request line, then, on HTTP/2, frames up to
// the first request. It returns the listener the connection belongs to and the
// connection with what was read put back.
func (s *Splitter) classify(c net.Conn) (*listener, net.Conn, error) {
	if err := c.SetReadDeadline(time.Now().Add(s.firstBytesTimeout)); err != nil {
		return nil, nil, err
	}
	var read bytes.Buffer
	head := make([]byte, len(clientPreface))
	n := 0
	for n < len(head) {
		m, err := c.Read(head[n:])
		read.Write(head[n : n+m])
		n += m
		if string(head[:n]) != clientPreface[:n] {
			return s.http, s.replay(c, read.Bytes(), false), s.clearDeadline(c)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if _, err := c.Write(emptySettings); err != nil {
		return nil, nil, err
	}
	// A gRPC client may connect long before its first call: only the preface is timed.
	if err := s.clearDeadline(c); err != nil {
		return nil, nil, err
	}
	// The first request's header block is decoded as its frames come, and the connection
	// routed as soon as its method and content type are known: a large header further on
	// (a big metadata value) is then the server's to answer, not a reason to close.
	framer := http2.NewFramer(io.Discard, &limitedTee{r: c, w: &read, limit: maxSniffBytes})
	var method, contentType string
	headers := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		switch f.Name {
		case ":method":
			method = f.Value
		case "content-type":
			contentType = f.Value
		}
	})
	route := func() (*listener, net.Conn, error) {
		if isGRPC(method, contentType) {
			return s.grpc, s.replay(c, read.Bytes(), false), nil
		}
		return s.http, s.replay(c, read.Bytes(), true), nil
	}
	inHeaders := false
	for {
		f, err := framer.ReadFrame()
		if err != nil {
			return nil, nil, fmt.Errorf("reading an HTTP/2 client's first frames: %w", err)
		}
		var fragment []byte
		var end bool
		switch f := f.(type) {
		case *http2.SettingsFrame, *http2.WindowUpdateFrame, *http2.PriorityFrame:
			if !inHeaders {
				continue
			}
			return s.grpc, s.replay(c, read.Bytes(), false), nil
		case *http2.HeadersFrame:
			fragment, end = f.HeaderBlockFragment(), f.HeadersEnded()
		case *http2.ContinuationFrame:
			if !inHeaders {
				return s.grpc, s.replay(c, read.Bytes(), false), nil
			}
			fragment, end = f.HeaderBlockFragment(), f.HeadersEnded()
		default:
			return s.grpc, s.replay(c, read.Bytes(), false), nil
		}
		inHeaders = true
		if _, err := headers.Write(fragment); err != nil {
			return nil, nil, fmt.Errorf("reading an HTTP/2 client's first request headers: %w", err)
		}
		if end || (method != "" && contentType != "") {
			return route()
		}
	}
}

func (s *Splitter) clearDeadline(c net.Conn) error {
	return c.SetReadDeadline(time.Time{})
}

// isGRPC tells a native gRPC request from the rest: gRPC-Web's content types start
// with application/grpc too.
func isGRPC(method, contentType string) bool {
	if method != "POST" {
		return false
	}
	ct := strings.ToLower(contentType)
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// replay is c reading first what was read from it. An HTTP/2 connection for the HTTP
// server also loses the client's acknowledgement of the splitter's settings.
func (s *Splitter) replay(c net.Conn, read []byte, dropAck bool) net.Conn {
	var r io.Reader = io.MultiReader(bytes.NewReader(bytes.Clone(read)), c)
	if dropAck {
		r = &ackDropper{r: r, passThrough: len(clientPreface)}
	}
	return &replayConn{Conn: c, r: r}
}

// replayConn is a connection whose reads come from r.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// limitedTee reads from r, copying what it reads to w, and fails past limit bytes.
type limitedTee struct {
	r     io.Reader
	w     *bytes.Buffer
	limit int
}

var errSniffLimit = errors.New("the client sent more than 64 KiB before its first request")

func (t *limitedTee) Read(p []byte) (int, error) {
	if t.w.Len() >= t.limit {
		return 0, errSniffLimit
	}
	p = p[:min(len(p), t.limit-t.w.Len())]
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

// ackDropper passes an HTTP/2 client's byte stream through, frame by frame, but for its
// first SETTINGS acknowledgement; after that, everything. passThrough bytes (the preface)
// go through first.
type ackDropper struct {
	r           io.Reader
	passThrough int    // bytes to pass before the next frame header
	header      []byte // a frame header read and not yet passed on
	dropped     bool
}

func (d *ackDropper) Read(p []byte) (int, error) {
	for len(p) > 0 {
		switch {
		case len(d.header) > 0:
			n := copy(p, d.header)
			d.header = d.header[n:]
			return n, nil
		case d.passThrough > 0:
			n, err := d.r.Read(p[:min(len(p), d.passThrough)])
			d.passThrough -= n
			return n, err
		case d.dropped:
			return d.r.Read(p)
		}
		var h [9]byte
		if _, err := io.ReadFull(d.r, h[:]); err != nil {
			return 0, err
		}
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		// An acknowledgement with a payload is malformed: it goes on, for the server to refuse.
		if http2.FrameType(h[3]) == http2.FrameSettings && http2.Flags(h[4]).Has(http2.FlagSettingsAck) && length == 0 {
			d.dropped = true
			continue
		}
		d.header = h[:]
		d.passThrough = length
	}
	return 0, nil
}

// listener is one side of a Splitter: Accept returns the connections routed to it.
type listener struct {
	addr      net.Addr
	conns     chan net.Conn
	splitDone <-chan struct{}
	closeOnce sync.Once
	closed    chan struct{}
}

func newListener(addr net.Addr, splitDone <-chan struct{}) *listener {
	return &listener{addr: addr, conns: make(chan net.Conn), splitDone: splitDone, closed: make(chan struct{})}
}

// deliver hands c to the server accepting on l; false if l or the splitter is closed.
func (l *listener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	case <-l.splitDone:
		return false
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, ErrClosed
	case <-l.splitDone:
		return nil, ErrClosed
	}
}

// Close stops this side accepting; connections routed to it from then on are closed.
func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }

package pgtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server until Partition: from then on it holds
// what either side sends, closing nothing, as a network that drops every packet does
// (the kernel still acknowledges what reaches the proxy, so neither side's TCP timeouts
// fire); Heal delivers what it held and forwards again. Silence instead drops what the
// connections made so far carry, for good, as connections left half-open by a failover
// do.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	healed  *sync.Cond
	conns   []*proxied
	copiers sync.WaitGroup
}

// proxied is one forwarded connection: the client's and the proxy's to the server.
type proxied struct {
	client, server net.Conn
	silent         atomic.Bool
}

// NewProxy listens on a free port of 127.0.0.1 and forwards to target until the test
// ends, which closes it and its connections.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.healed = sync.NewCond(&p.mu)
	p.copiers.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.copiers.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxied{client: client, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.copiers.Add(2)
		go p.pipe(c, server, client)
		go p.pipe(c, client, server)
	}
}

// pipe copies from src to dst, holding each read while the proxy is partitioned and
// dropping it once c is silent.
func (p *Proxy) pipe(c *proxied, dst, src net.Conn) {
	defer p.copiers.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.cut {
			p.healed.Wait()
		}
		p.mu.Unlock()
		if n > 0 && !c.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			_ = dst.Close()
			return
		}
	}
}

// Partition holds every byte from now on, in both directions, on every connection.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal delivers what was held and forwards again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.healed.Broadcast()
	p.mu.Unlock()
}

// Silence drops every byte, both ways, of the connections made so far, which stay
// open; connections made later are forwarded.
func (p *Proxy) Silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.silent.Store(true)
	}
}

// CloseConns closes the connections made so far.
func (p *Proxy) CloseConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
	}
}

// close stops the proxy and its connections and waits for its goroutines.
func (p *Proxy) close() {
	p.Heal()
	_ = p.ln.Close()
	p.CloseConns()
	p.copiers.Wait()
}

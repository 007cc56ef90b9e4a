// Package testlisten serves sockets for tests: a listener that answers every connection
// the same way until the test ends.
package testlisten

import (
	"net"
	"testing"
)

// Serve listens on network and address (a Unix socket's path, or "127.0.0.1:0" for a
// free port) and hands each connection to answer, if set, then closes it, until the
// test ends. It returns the address it listens on.
func Serve(t testing.TB, network, address string, answer func(net.Conn)) net.Addr {
	t.Helper()
	l, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if answer != nil {
				answer(c)
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return l.Addr()
}

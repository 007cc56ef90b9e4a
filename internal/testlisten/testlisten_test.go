package testlisten_test

import (
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/agenticd/agenticd/internal/testlisten"
)

// Each connection gets the answer and is closed, on a Unix socket and a TCP port alike;
// once the test that served them ends, nothing answers any more.
func TestServeAnswersUntilTheTestEnds(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	var tcp net.Addr
	t.Run("serving", func(t *testing.T) {
		hello := func(c net.Conn) { _, _ = io.WriteString(c, "hello") }
		for _, addr := range []net.Addr{testlisten.Serve(t, "unix", sock, hello), testlisten.Serve(t, "tcp4", "127.0.0.1:0", hello)} {
			for range 2 {
				c, err := net.Dial(addr.Network(), addr.String())
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(c)
				c.Close()
				if err != nil || string(got) != "hello" {
					t.Errorf("%s answered %q, %v; want hello and EOF", addr, got, err)
				}
			}
		}
		tcp = testlisten.Serve(t, "tcp4", "127.0.0.1:0", nil)
	})
	for _, addr := range []net.Addr{&net.UnixAddr{Name: sock, Net: "unix"}, tcp} {
		if c, err := net.Dial(addr.Network(), addr.String()); err == nil {
			c.Close()
			t.Errorf("%s still answers after its test ended", addr)
		}
	}
}

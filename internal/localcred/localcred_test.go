package localcred_test

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/internal/unprivileged"
)

func TestTokenIsCreatedOnceAndPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := localcred.LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 64 {
		t.Fatalf("token %q: want 64 hex characters", first)
	}
	info, err := os.Stat(localcred.TokenFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", info.Mode().Perm())
	}
	if dirInfo, _ := os.Stat(dir); dirInfo.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v, want 0700", dirInfo.Mode().Perm())
	}
	again, err := localcred.LoadOrCreateToken(dir)
	if err != nil || again != first {
		t.Fatalf("second start read %q, %v; want the first token", again, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("data dir holds %d entries, want only the token (no temporary file left)", len(entries))
	}
	if err := os.Chmod(localcred.TokenFile(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := localcred.ReadToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a token others may read: err %v, want a refusal saying chmod 600", err)
	}
}

// The webhook secret is a file of its own beside the token, made once, private.
func TestWebhookSecretIsItsOwnAndPrivate(t *testing.T) {
	dir := t.TempDir()
	token, err := localcred.LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := localcred.LoadOrCreateWebhookSecret(dir)
	if err != nil || len(secret) != 64 || secret == token {
		t.Fatalf("webhook secret %q, %v: want 64 hex characters, not the token", secret, err)
	}
	if again, err := localcred.LoadOrCreateWebhookSecret(dir); err != nil || again != secret {
		t.Fatalf("second start read %q, %v; want the first secret", again, err)
	}
	if err := os.Chmod(localcred.WebhookSecretFile(dir), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := localcred.LoadOrCreateWebhookSecret(dir); err == nil || !strings.Contains(err.Error(), "webhook secret") {
		t.Fatalf("a secret others may read: err %v, want a refusal naming the webhook secret", err)
	}
}

func TestSocketAdmitsOnlyItsOwnUser(t *testing.T) {
	// Not t.TempDir(): another user must be able to walk to it.
	dir, err := os.MkdirTemp("", "localcred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, localcred.SocketName)
	refused := make(chan int, 1)
	lis, err := localcred.Listen(path, func(uid int) { refused <- uid })
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	served := make(chan error, 1)
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				served <- err
				return
			}
			if !localcred.IsLocal(conn.LocalAddr()) {
				t.Errorf("admitted connection's local address %v is not marked local", conn.LocalAddr())
			}
			_, _ = conn.Write([]byte("hello"))
			conn.Close()
		}
	}()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(conn)
	conn.Close()
	if string(got) != "hello" {
		t.Fatalf("own user read %q, want hello", got)
	}

	if os.Geteuid() == 0 {
		// Another user, given a way through the file's mode, is still turned away.
		acct := unprivileged.User(t)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		out, err := unprivileged.Command(t, "/", "/usr/bin/python3", "-c",
			"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(repr(s.recv(10)))", path).CombinedOutput()
		if err != nil {
			t.Fatalf("connect as %s: %v: %s", acct.Name, err, out)
		}
		if strings.Contains(string(out), "hello") {
			t.Fatalf("user %s was served: %s", acct.Name, out)
		}
		if uid := <-refused; uid != acct.UID {
			t.Errorf("refused uid %d, want %d", uid, acct.UID)
		}
	}
	lis.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept ended with %v", err)
	}
}

func TestSocketReplacesAStaleOneAndRefusesALiveOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), localcred.SocketName)
	first, err := localcred.Listen(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := localcred.Listen(path, nil); err == nil || !strings.Contains(err.Error(), "another agenticd") {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	// A listener that died without removing its socket leaves the file behind.
	first.(interface{ Close() error }).Close()
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	second, err := localcred.Listen(path, nil)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	second.Close()
}

func TestSocketPathTooLong(t *testing.T) {
	_, err := localcred.Listen("/tmp/"+strings.Repeat("d", 120)+"/agenticd.sock", nil)
	if !errors.Is(err, localcred.ErrSocketPathTooLong) {
		t.Fatalf("err %v, want ErrSocketPathTooLong", err)
	}
}

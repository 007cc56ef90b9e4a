// Package localcred is how agenticd and the clients on its machine find each other with
// no configuration, without letting anything else in: a random token in a file only
// agenticd's user can read, and a Unix socket that admits only agenticd's own user
// (checked with SO_PEERCRED). Both live in agenticd's data dir, which processes confined
// to a workspace never reach.
package localcred

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// File names in the data dir.
const (
	TokenFileName = "token"
	SocketName    = "agenticd.sock"
	// WebhookSecretFileName signs sessions' own webhooks (docs/webhooks.md).
	WebhookSecretFileName = "webhook_secret"
)

// tokenBytes is the entropy of a generated token (hex-encoded, twice as many characters).
const tokenBytes = 32

// ErrSocketPathTooLong: the data dir's path leaves no room for the socket's name within
// the kernel's limit on a Unix socket's path (108 bytes on Linux).
var ErrSocketPathTooLong = errors.New("the Unix socket's path is too long")

// DefaultDataDir is agenticd's data dir when none is configured: $XDG_DATA_HOME/agenticd,
// else ~/.local/share/agenticd.
func DefaultDataDir() (string, error) {
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
		return filepath.Join(xdg, "agenticd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data_dir configured and no home directory to default to: %w", err)
	}
	return filepath.Join(home, ".local", "share", "agenticd"), nil
}

// TokenFile is the path of the local token in dataDir.
func TokenFile(dataDir string) string { return filepath.Join(dataDir, TokenFileName) }

// SocketPath is the path of the local socket in dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// LoadOrCreateToken returns the local token of dataDir, creating the directory (0700) and
// a new random token (a 0600 file) when there is none. A token file that others may read
// is refused: it would let them in.
func LoadOrCreateToken(dataDir string) (string, error) {
	return loadOrCreate(dataDir, TokenFileName, "local token")
}

// WebhookSecretFile is the path of the secret that signs sessions' own webhooks in dataDir.
func WebhookSecretFile(dataDir string) string { return filepath.Join(dataDir, WebhookSecretFileName) }

// LoadOrCreateWebhookSecret is LoadOrCreateToken for the secret that signs sessions' own
// webhooks: a receiver that has it could forge notices.
func LoadOrCreateWebhookSecret(dataDir string) (string, error) {
	return loadOrCreate(dataDir, WebhookSecretFileName, "webhook secret")
}

// loadOrCreate returns the secret in dataDir's file name, creating a random one when
// there is none; what names it in errors.
func loadOrCreate(dataDir, name, what string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data_dir: %w", err)
	}
	path := filepath.Join(dataDir, name)
	secret, err := readSecret(path, what)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	secret = hex.EncodeToString(raw[:])
	// Written whole under a temporary name, then linked into place: a reader never sees
	// half a secret, and of two agenticd starting at once the second reads the first's.
	tmp, err := os.CreateTemp(dataDir, "."+name+"-*")
	if err != nil {
		return "", fmt.Errorf("write the %s: %w", what, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(secret + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the %s: %w", what, err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readSecret(path, what)
	} else if err != nil {
		return "", fmt.Errorf("write the %s: %w", what, err)
	}
	return secret, nil
}

// ReadToken reads the local token of dataDir (fs.ErrNotExist when there is none).
func ReadToken(dataDir string) (string, error) { return readSecret(TokenFile(dataDir), "local token") }

// readSecret reads a secret file of the data dir, refusing one others may read.
func readSecret(path, what string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the %s %s may be read by other users (mode %v): run `chmod 600 %s`, or delete it and restart agenticd for a new one", what, path, info.Mode().Perm(), path)
	}
	buf := make([]byte, 4*tokenBytes)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", fmt.Errorf("read the %s %s: %w", what, path, err)
	}
	secret := strings.TrimSpace(string(buf[:n]))
	if secret == "" {
		return "", fmt.Errorf("the %s %s is empty: delete it and restart agenticd for a new one", what, path)
	}
	return secret, nil
}

// Addr is the local address of a connection accepted on the local socket: only
// connections from agenticd's own user have it.
type Addr struct{ Path string }

// Network names what admitted the connection.
func (Addr) Network() string { return "unix+peercred" }

func (a Addr) String() string { return a.Path }

// IsLocal reports whether addr is the local address of a connection the local socket
// admitted (its peer runs as agenticd's own user).
func IsLocal(addr net.Addr) bool {
	_, ok := addr.(Addr)
	return ok
}

// Listen serves the local socket at path (mode 0600, in a directory only agenticd's user
// may enter). Its connections are admitted only when the peer's uid is this process's;
// refused is told of the others, which are closed. A socket left by an agenticd that
// died is replaced; one that answers is another agenticd's, and an error.
func Listen(path string, refused func(uid int)) (net.Listener, error) {
	if len(path) >= len(syscall.RawSockaddrUnix{}.Path) {
		return nil, fmt.Errorf("%w: %s (%d bytes)", ErrSocketPathTooLong, path, len(path))
	}
	if _, err := os.Lstat(path); err == nil {
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil, fmt.Errorf("%s answers: another agenticd serves this data dir; stop it or choose another data_dir", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	return &listener{Listener: lis, addr: Addr{Path: path}, refused: refused}, nil
}

type listener struct {
	net.Listener
	addr    Addr
	refused func(uid int)
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(conn)
		if err == nil && uid == os.Getuid() {
			return admitted{Conn: conn, local: l.addr}, nil
		}
		conn.Close()
		if l.refused != nil {
			l.refused(uid)
		}
	}
}

func (l *listener) Addr() net.Addr { return l.addr }

// admitted is a connection the socket let in: its LocalAddr says so.
type admitted struct {
	net.Conn
	local Addr
}

func (c admitted) LocalAddr() net.Addr { return c.local }

// Package pgtest runs a throw-away Postgres server for tests: Debian's postgresql
// binaries, a cluster in a temporary directory owned by an unprivileged user (Postgres
// refuses to run as root), listening on a free port of 127.0.0.1 with its socket in that
// directory. Tests get a schema (NewSchema) or a database (NewDatabase) of their own on
// it; nothing is mocked.
//
// A test skips when the binaries are missing, unless the environment variable CI is set:
// there a missing Postgres fails the test, so that CI never passes without it.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Superuser is the cluster's superuser, made by initdb; it logs in without a password
// (trust) from this machine only.
const Superuser = "agenticd"

// ErrNotInstalled is the error of Start where no Postgres binaries are installed.
var ErrNotInstalled = errors.New("postgres is not installed: run `make deps` (Debian's postgresql package) or apt-get install postgresql")

// Cluster is one running Postgres server.
type Cluster struct {
	dir  string // holds data/, the socket directory and the server's log
	bin  string // the directory of initdb, pg_ctl, postgres
	port int
	cred *syscall.Credential // nil: run as ourselves
	next atomic.Int64        // numbers the databases NewDatabase makes
}

// BinDir returns the directory of the newest installed Postgres's binaries
// (/usr/lib/postgresql/<version>/bin), or ErrNotInstalled.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", ErrNotInstalled
	}
	// Newest first by major version (15 sorts before 9 as a string).
	sort.Slice(found, func(i, j int) bool { return majorOf(found[i]) > majorOf(found[j]) })
	return found[0], nil
}

func majorOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start initializes a cluster in a new temporary directory and starts it. The caller
// must Stop it. ErrNotInstalled when there are no binaries.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	if c.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := c.init(ctx); err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	// The port is free when chosen, but another process may take it before the server
	// binds it: then try another.
	for try := 1; ; try++ {
		if c.port, err = freePort(); err == nil {
			err = c.start(ctx)
		}
		if err == nil || try == 3 {
			break
		}
	}
	if err == nil {
		_, err = c.CreateDatabase(ctx, Superuser)
	}
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// unprivileged is the user a root test process runs Postgres as: the postgres user
// Debian's package creates, else nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
		}
	}
	return nil, errors.New("pgtest: Postgres refuses to run as root, and there is neither a postgres nor a nobody user to run it as")
}

func (c *Cluster) dataDir() string   { return filepath.Join(c.dir, "data") }
func (c *Cluster) socketDir() string { return filepath.Join(c.dir, "socket") }
func (c *Cluster) logFile() string   { return filepath.Join(c.dir, "server.log") }

// init makes the directory the server's user's and runs initdb.
func (c *Cluster) init(ctx context.Context) error {
	if err := os.Mkdir(c.socketDir(), 0o700); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if c.cred != nil {
		for _, p := range []string{c.dir, c.socketDir()} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("pgtest: give %s to the server's user: %w", p, err)
			}
		}
	}
	// Locale C and UTF-8 whatever the machine's locale; no fsync: the cluster is thrown
	// away.
	return c.run(ctx, "initdb", "-D", c.dataDir(), "--auth=trust", "-U", Superuser,
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
}

// start starts the server and waits until it accepts connections (pg_ctl -w).
func (c *Cluster) start(ctx context.Context) error {
	opts := strings.Join([]string{
		"-p", strconv.Itoa(c.port), "-k", c.socketDir(), "-c", "listen_addresses=127.0.0.1",
		// A test cluster needs no durability across a power loss.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
	}, " ")
	return c.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", c.dataDir(), "-l", c.logFile(), "-o", opts)
}

// Stop stops the server (fast shutdown: it disconnects its clients) and removes its
// directory.
func (c *Cluster) Stop() error {
	var err error
	if _, statErr := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); statErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = c.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", c.dataDir())
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

// run runs one of the binaries as the server's user; its output goes into the error.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("pgtest: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		if log, readErr := os.ReadFile(c.logFile()); readErr == nil && len(log) > 0 {
			msg += "\nserver log:\n" + string(log)
		}
		return errors.New(msg)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// DSN is the URL of the database named db on the cluster, as the superuser.
func (c *Cluster) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates an empty database named name and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	db, err := sql.Open("pgx", c.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// NewSchema creates an empty schema of its own for t in the database "agenticd" and
// returns a URL whose connections work in it (search_path): tables a test makes there
// are its own. A schema takes milliseconds to make, a database a fifth of a second.
func (c *Cluster) NewSchema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d", c.next.Add(1))
	db, err := sql.Open("pgx", c.DSN(Superuser))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(context.Background(), `CREATE SCHEMA "`+name+`"`); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	return c.DSN(Superuser) + "&search_path=" + name
}

// NewDatabase creates an empty database of its own for t and returns its URL. The
// database is left for Stop to throw away with the cluster, as NewSchema's schemas are.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	dsn, err := c.CreateDatabase(context.Background(), fmt.Sprintf("test_%d", c.next.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// StartForTest starts a cluster of t's own, stopped when t ends, and returns the URL of
// its database "agenticd". It skips t when Postgres is not installed and CI is unset.
func StartForTest(t testing.TB) (*Cluster, string) {
	t.Helper()
	c, err := Start(context.Background())
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop postgres: %v", err)
		}
	})
	return c, c.DSN(Superuser)
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// shared is the cluster of a test package's tests (Shared), started on first use.
var shared struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// Shared returns the test package's cluster, starting it on first use; the package's
// TestMain must call StopShared after its tests ran. It skips t when Postgres is not
// installed and CI is unset.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() { shared.cluster, shared.err = Start(context.Background()) })
	if shared.err != nil {
		skipOrFail(t, shared.err)
	}
	return shared.cluster
}

// StopShared stops the package's cluster, if Shared started one.
func StopShared() error {
	if shared.cluster == nil {
		return nil
	}
	return shared.cluster.Stop()
}

// Port is the TCP port the server listens on, on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Halt stops the server (fast shutdown: it disconnects its clients) and keeps its data;
// Resume starts it again.
func (c *Cluster) Halt(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", c.dataDir())
}

// Crash kills the server's postmaster with SIGKILL, as a crash would, and waits until it
// is gone; Resume starts it again (with crash recovery).
func (c *Cluster) Crash(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("pgtest: read the postmaster's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("pgtest: read the postmaster's pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgtest: kill the postmaster: %w", err)
	}
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// Resume starts a server Halt stopped or Crash killed. After a crash the server's
// backends may hold its shared memory for a moment: it tries again until they are gone
// or ctx ends.
func (c *Cluster) Resume(ctx context.Context) error {
	for {
		err := c.start(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Exec runs statements as the superuser in the database named db.
func (c *Cluster) Exec(ctx context.Context, db string, statements ...string) error {
	conn, err := sql.Open("pgx", c.DSN(db))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer func() { _ = conn.Close() }()
	for _, s := range statements {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("pgtest: %s: %w", s, err)
		}
	}
	return nil
}

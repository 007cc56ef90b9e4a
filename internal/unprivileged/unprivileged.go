// Package unprivileged runs tests, or the programs they start, as an ordinary user.
// Root's capabilities hide failures an ordinary user meets (a working directory outside
// the mount namespace still works for root, RLIMIT_NPROC is never enforced for it), so
// the tests of the boundary run agenticd as one. When the tests run as root it is the
// system user testUser, created on first use; otherwise it is the user running them.
package unprivileged

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// testUser is the system user tests run as when they run as root.
const testUser = "agenticd-test"

// childEnv marks a test binary Reexec started as the ordinary user.
const childEnv = "AGENTICD_UNPRIVILEGED_CHILD"

// Account is the ordinary user: its ids and name.
type Account struct {
	UID, GID int
	Name     string
}

var (
	createOnce sync.Once
	created    Account
	createErr  error
)

// User is the account tests run agenticd as: the current user unless that is root, else
// testUser (created, without a home directory, if it does not exist yet).
func User(t testing.TB) Account {
	t.Helper()
	if os.Geteuid() != 0 {
		u, _ := user.Current()
		name := strconv.Itoa(os.Getuid())
		if u != nil {
			name = u.Username
		}
		return Account{UID: os.Getuid(), GID: os.Getgid(), Name: name}
	}
	createOnce.Do(func() { created, createErr = ensureUser() })
	if createErr != nil {
		t.Fatalf("create the ordinary user the test runs as: %v", createErr)
	}
	return created
}

// ensureUser creates testUser if it does not exist. Test binaries of several packages may
// race to create it: useradd's "already exists" is fine.
func ensureUser() (Account, error) {
	if _, err := user.Lookup(testUser); err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", testUser).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 9) {
			return Account{}, fmt.Errorf("useradd %s: %v: %s", testUser, err, strings.TrimSpace(string(out)))
		}
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		return Account{}, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return Account{UID: uid, GID: gid, Name: testUser}, nil
}

// IsChild reports whether this test binary was started by Reexec, as the ordinary user.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// Dir is a new directory owned by the ordinary user (mode 0700) in a parent it can reach,
// removed at the end of the test. Use it for whatever agenticd started as that user must
// own: its data dir, a workspace root, a HOME.
func Dir(t testing.TB) string {
	t.Helper()
	acct := User(t)
	dir, err := os.MkdirTemp("", "agenticd-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, acct.UID, acct.GID); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Executable copies the program at path into a directory the ordinary user may read and
// execute from (go build and go test put theirs in root's private temp dirs), and returns
// the copy's path; the copy is removed at the end of the test.
func Executable(t testing.TB, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agenticd-unprivileged-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := copyFile(dst, path); err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Command is exec.Command(path, args...) run as the ordinary user, with HOME set to home
// (the user has none of its own). path must be executable by that user (Executable).
func Command(t testing.TB, home, path string, args ...string) *exec.Cmd {
	t.Helper()
	acct := User(t)
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "USER="+acct.Name, "LOGNAME="+acct.Name)
	cmd.Dir = home
	// Killed with the test binary, should it end without its cleanups (a test timeout
	// panics): an agenticd left running would hold its port and its agents.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(acct.UID), Gid: uint32(acct.GID)}
	}
	return cmd
}

// Reexec runs the calling test as the ordinary user. As root it starts a copy of the test
// binary as that user, running only this test (-test.run), passes its output to the log,
// fails the test if the copy failed, and returns true: the caller then returns. In that
// copy, and whenever the tests already run as an ordinary user, it returns false and the
// test goes on. The test body must not build anything (the user has no Go cache) and
// must not rely on the package directory being writable.
//
//	if unprivileged.Reexec(t) {
//		return
//	}
func Reexec(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 || IsChild() {
		return false
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := Dir(t)
	bin := Executable(t, self)
	cmd := Command(t, home, bin, "-test.run=^"+regexpQuote(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, childEnv+"=1", "TMPDIR="+home)
	// The package directory, as go test runs the test, so that testdata stays reachable.
	if wd, err := os.Getwd(); err == nil {
		cmd.Dir = wd
	}
	out, err := cmd.CombinedOutput()
	t.Logf("as user %s:\n%s", User(t).Name, out)
	if err != nil {
		t.Fatalf("the test, run as the ordinary user %s, failed: %v", User(t).Name, err)
	}
	// The copy passes when it skips or runs nothing: say so here rather than pass.
	switch {
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skipf("skipped as the ordinary user %s (its log is above)", User(t).Name)
	case !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")):
		t.Fatalf("the test, run as the ordinary user %s, did not run", User(t).Name)
	}
	return true
}

// regexpQuote quotes each part of a subtest name for -test.run, which splits it at "/".
func regexpQuote(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		var b strings.Builder
		for _, r := range p {
			if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, "$/^")
}

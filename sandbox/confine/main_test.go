package confine_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/sandbox/confine"
	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as a small "agenticd": it runs a
// shell script, confined or not, with an environment that holds a secret
// the script must not see (see runHelper).
const helperEnv = "CONFINE_TEST_HELPER"

// secretEnv is the secret the helper holds in its own environment and
// strips from the script's, as agenticd strips its token.
const secretEnv = "CONFINE_TEST_SECRET"

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	if mode, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// runHelper: mode "confined" or "plain", args [script, read-write dir]:
// runs sh -c script (confined: read-only /usr and /etc, the dir
// read-write) without secretEnv in its environment, passing stdio through,
// and exits with the script's code. Mode "connect", args [socket path]:
// connects to a Unix socket and copies what it answers to stdout (exit 1,
// with the error on stderr, when connecting fails).
func runHelper(mode string, args []string) int {
	if mode == "connect" {
		conn, err := net.Dial("unix", args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer conn.Close()
		if _, err := io.Copy(os.Stdout, conn); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	cmd := exec.Command("/bin/sh", "-c", args[0])
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, secretEnv+"=") || strings.HasPrefix(kv, helperEnv+"=")
	})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if mode == "confined" {
		policy := confine.Policy{ReadOnly: []string{"/usr", "/etc"}, ReadWrite: []string{args[1]}}
		if _, err := policy.Wrap(cmd); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 99
		}
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 99
	}
	return 0
}

// tree is a throw-away layout: a workspace and a private tmp the confined
// command may write, and outside them a config dir holding a token and a
// data dir it must not touch.
type tree struct {
	base, ws, tmp, config, data, token string
}

func newTree(t *testing.T) tree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := tree{
		base:   base,
		ws:     filepath.Join(base, "ws"),
		tmp:    filepath.Join(base, "tmp"),
		config: filepath.Join(base, "config"),
		data:   filepath.Join(base, "data"),
	}
	for _, dir := range []string{tr.ws, tr.tmp, tr.config, tr.data} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tr.token = filepath.Join(tr.config, "token")
	if err := os.WriteFile(tr.token, []byte("tok-7f3a9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tr
}

// policy lets a shell run: system directories read-only, the workspace
// and the private tmp read-write.
func (tr tree) policy() confine.Policy {
	return confine.Policy{ReadOnly: []string{"/usr", "/etc"}, ReadWrite: []string{tr.ws, tr.tmp}}
}

// result is how a command ended and what it wrote.
type result struct {
	code           int
	stdout, stderr string
}

// run runs sh -c script in dir, confined by policy unless policy is nil.
func run(t *testing.T, policy *confine.Policy, dir, script string) result {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if policy != nil {
		if _, err := policy.Wrap(cmd); err != nil {
			t.Fatalf("wrap: %v", err)
		}
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %q: %v", script, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

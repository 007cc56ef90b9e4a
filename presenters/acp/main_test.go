package acp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// testAgentPath is the scripted ACP agent (internal/testagent), built once for the package.
var testAgentPath string

// testAgentEnv passes a copy of the test agent to tests run as the ordinary user.
const testAgentEnv = "ACP_TEST_AGENT"

// asOrdinaryUser runs the calling test as the ordinary user (unprivileged.Reexec), with
// the test agent; it returns true in the parent, which then returns.
func asOrdinaryUser(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() == 0 && !unprivileged.IsChild() {
		t.Setenv(testAgentEnv, unprivileged.Executable(t, testAgentPath))
	}
	return unprivileged.Reexec(t)
}

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	if unprivileged.IsChild() {
		// Started by unprivileged.Reexec as a user with no Go cache: the parent built
		// the test agent and passed a copy it may run.
		testAgentPath = os.Getenv(testAgentEnv)
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "acp-testagent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testAgentPath = filepath.Join(dir, "testagent")
	build := exec.Command("go", "build", "-o", testAgentPath, "../../internal/testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test agent:", err)
		os.Exit(1)
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		// goleak.VerifyTestMain would exit before the cleanup; check by hand.
		code = m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goroutine leak:", err)
				code = 1
			}
		}
	}()
	os.Exit(code)
}

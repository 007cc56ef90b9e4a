package acp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/sandbox/confine"
)

// testAgentPath is the scripted ACP agent (internal/testagent), built once for the package.
var testAgentPath string

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
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

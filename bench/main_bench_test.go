package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/sandbox/confine"
)

// testAgent is internal/testagent, built once for the package.
var testAgent string

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	// This package holds benchmarks only: a plain `go test ./...` (make test) runs
	// nothing here, so it must not pay for building the test agent.
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "bench-testagent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testAgent = filepath.Join(dir, "testagent")
	build := exec.Command("go", "build", "-o", testAgent, "../internal/testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test agent:", err)
	} else {
		code = m.Run()
		// goleak.VerifyTestMain would exit before the cleanup; check by hand.
		if err := goleak.Find(); code == 0 && err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

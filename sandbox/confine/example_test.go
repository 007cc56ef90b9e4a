package confine_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"

	"github.com/agenticd/agenticd/sandbox/confine"
	"github.com/creack/pty"
)

// An agent process on pipes: prepare the command as usual, then Wrap it
// last. Killing the started process's group kills everything the agent
// started.
func ExamplePolicy_Wrap() {
	// In main, before anything else: confine.MaybeRunInit()
	policy := confine.Policy{
		ReadOnly:  []string{"/usr", "/etc/ssl", "/opt/agent"},
		ReadWrite: []string{"/srv/ws/project", "/var/lib/agenticd/s1/tmp", "/var/lib/agenticd/s1/home"},
	}
	cmd := exec.CommandContext(context.Background(), "/opt/agent/bin/agent", "--acp")
	cmd.Dir = "/srv/ws/project"
	cmd.Env = []string{"HOME=/var/lib/agenticd/s1/home", "TMPDIR=/var/lib/agenticd/s1/tmp"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, err := policy.Wrap(cmd); err != nil {
		slog.Error("cannot confine the agent", "err", err)
		return
	}
	_ = cmd.Start()
}

// A terminal: Wrap first, then pty.Start (which adds Setsid and Setctty).
func ExamplePolicy_Wrap_pty() {
	policy := confine.Policy{
		ReadOnly:   []string{"/usr", "/etc"},
		ReadWrite:  []string{"/srv/ws/project"},
		BestEffort: true,
	}
	cmd := exec.Command("/bin/sh", "-c", "go test ./...")
	missing, err := policy.Wrap(cmd)
	if err != nil {
		slog.Error("cannot confine the terminal", "err", err)
		return
	}
	for _, m := range missing {
		slog.Warn("terminal runs with less confinement", "missing", m)
	}
	ptmx, err := pty.Start(cmd)
	if err != nil {
		return
	}
	defer ptmx.Close()
	_, _ = ptmx.WriteTo(os.Stdout)
}

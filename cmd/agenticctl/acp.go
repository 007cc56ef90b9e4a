package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agenticd/agenticd/internal/acpbridge"
)

// cmdACP makes agenticctl an ACP agent on stdio for an editor: agenticd, with one of
// its agents behind it. stdout carries the protocol alone; diagnostics go to stderr,
// which editors keep in their logs.
func cmdACP(c *cli, args []string) error {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	agent := fs.String("agent", "", "the agenticd agent the editor talks to (`agenticctl agents` lists them)")
	verbose := fs.Bool("verbose", false, "log the connection's diagnostics to stderr")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *agent == "" {
		return usagef("--agent is required")
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var stdin io.ReadCloser
	switch in := c.stdin.(type) {
	case *os.File:
		stdin = closableStdin(in)
	case io.ReadCloser:
		stdin = in
	default:
		stdin = io.NopCloser(c.stdin)
	}
	defer stdin.Close()
	return acpbridge.Serve(ctx, acpbridge.Options{
		AgentID:     *agent,
		Client:      c.client,
		Target:      c.target,
		CallTimeout: c.timeout,
		Logger:      slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level})),
	}, c.stdout, stdin)
}

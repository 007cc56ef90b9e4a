// Command agenticd serves agentic.v1.AgenticService: one gRPC API to ACP agents and the
// built-in DeepChat agent.
//
//	agenticd [--config FILE] [--listen ADDR] [--data-dir DIR] [--token TOKEN] [--log-level LEVEL]
//
// Flags override the config file; AGENTICD_TOKEN overrides the file's token and --token
// overrides both. SIGINT or SIGTERM stops it gracefully; a second signal stops it at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agenticd/agenticd/internal/daemon"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("agenticd", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "YAML config file (see README.md); without it, built-in defaults")
	listen := flags.String("listen", "", "host:port to listen on (default "+daemon.DefaultListen+"; beyond loopback a token is required)")
	dataDir := flags.String("data-dir", "", "directory of the SQLite database (default ~/.local/share/agenticd)")
	token := flags.String("token", "", "bearer token every RPC but health must carry (prefer AGENTICD_TOKEN: flags show in ps)")
	logLevel := flags.String("log-level", "", "debug, info, warn or error (default info)")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: agenticd [flags]\n\nServes agentic.v1.AgenticService (gRPC, with reflection and grpc.health.v1).\n\nflags:")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "agenticd: unexpected argument %q; agenticd takes only flags (see agenticd -h)\n", flags.Arg(0))
		return 2
	}

	var cfg daemon.Config
	if *configPath != "" {
		loaded, err := daemon.Load(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "agenticd: %v\n", err)
			return 1
		}
		cfg = loaded
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if env := os.Getenv("AGENTICD_TOKEN"); env != "" {
		cfg.Token = env
	}
	// Read once, then gone: agent processes and their commands inherit this environment.
	if err := os.Unsetenv("AGENTICD_TOKEN"); err != nil {
		fmt.Fprintf(stderr, "agenticd: %v\n", err)
		return 1
	}
	if *token != "" {
		cfg.Token = *token
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
	}
	cfg, err := cfg.WithDefaults()
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "agenticd: %v\n", err)
		return 1
	}
	logger, err := daemon.NewLogger(stderr, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agenticd: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal starts the graceful stop, a second one kills at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := daemon.Run(ctx, cfg, logger); err != nil {
		logger.Error("agenticd failed", "err", err)
		fmt.Fprintf(stderr, "agenticd: %v\n", err)
		return 1
	}
	return 0
}

// Command agenticd serves agentic.v1.AgenticService: one gRPC API to ACP agents and the
// built-in DeepChat agent.
//
//	agenticd [--config FILE] [--listen ADDR] [--data-dir DIR] [--token TOKEN] [--log-level LEVEL]
//	agenticd --version
//
// Without --config it reads $XDG_CONFIG_HOME/agenticd/agenticd.yaml (else
// ~/.config/agenticd/agenticd.yaml) when that file exists. Flags override the config
// file; AGENTICD_TOKEN overrides the file's token and --token overrides both. SIGINT or
// SIGTERM stops it gracefully; a second signal stops it at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/internal/secretenv"
	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/sandbox/confine"
)

func main() {
	// A re-executed copy of agenticd is the init of a confined process: it never returns.
	confine.MaybeRunInit()
	// The token and the database's password must not stay readable in
	// /proc/<pid>/environ for the rest of agenticd's life.
	if err := secretenv.Reexec(secretVariables...); err != nil {
		fmt.Fprintf(os.Stderr, "agenticd: %v\n", err)
		os.Exit(1)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// secretVariables are the environment variables that carry secrets.
var secretVariables = []string{"AGENTICD_TOKEN", "AGENTICD_DATABASE"}

// lookupEnv reads a variable once, then it is gone: agent processes and their commands
// inherit this environment. Secrets come through secretenv.
func lookupEnv(name string) string {
	if slices.Contains(secretVariables, name) {
		v, _ := secretenv.Lookup(name)
		return v
	}
	v := os.Getenv(name)
	_ = os.Unsetenv(name)
	return v
}

// usage is what -h prints before the flags: where the config file goes, what it holds,
// and what configures itself without one.
const usage = `usage: agenticd [flags]

Serves agentic.v1.AgenticService (gRPC, with reflection and grpc.health.v1).

The config file (YAML) is --config FILE. Without --config, agenticd reads
$XDG_CONFIG_HOME/agenticd/agenticd.yaml (default ~/.config/agenticd/agenticd.yaml)
if it exists, and otherwise runs on its defaults; --config '' reads no file.
It may hold:
  listen            host:port to serve on (default ` + daemon.DefaultListen + `; beyond loopback a token is required)
  data_dir          the SQLite database's directory (default ~/.local/share/agenticd)
  token             bearer token every RPC but health must carry: 16 or more random
                    characters, e.g. from ` + "`openssl rand -hex 24`" + ` (AGENTICD_TOKEN overrides it)
  tls               cert_file and key_file (PEM): serve over TLS
  workspace_roots   directories below which sessions may work (default: your home directory)
  shutdown_timeout, event_buffer, event_buffer_bytes, subscriber_queue, log_level, log_format
  agents            ACP agents (id, type: acp, command, args, env, ...) and DeepChat agents
                    (id, type: deepchat, provider, base_url, api_key_env, models, ...)
Every key is described in docs/configuration.md in agenticd's source.

No file is needed for a first turn. Unless an agents: entry has id deepchat.default,
the built-in agent deepchat.default configures itself at start-up from:
  ` + daemon.EnvOpenAIAPIKey + `, ` + daemon.EnvOpenAIBaseURL + `, ` + daemon.EnvOpenAIModel + `
                    any OpenAI-compatible API (base URL default https://api.openai.com/v1;
                    without ` + daemon.EnvOpenAIModel + `, the models the server lists)
  a local Ollama    answering at ` + daemon.DefaultOllamaAddr + ` (or ` + daemon.EnvOllamaHost + `), with the models it has
Known ACP agents found on PATH (claude-code-acp, claude-agent-acp, codex-acp, gemini)
are registered too. ` + "`agenticctl agents`" + ` shows each agent's status and where its
configuration came from.

flags:
`

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("agenticd", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "YAML config file (default $XDG_CONFIG_HOME/agenticd/agenticd.yaml when it exists; '' for none)")
	listen := flags.String("listen", "", "host:port to listen on (default "+daemon.DefaultListen+"; beyond loopback a token is required)")
	dataDir := flags.String("data-dir", "", "directory of the SQLite database (default ~/.local/share/agenticd)")
	token := flags.String("token", "", "bearer token every RPC but health must carry, 16+ random characters (prefer AGENTICD_TOKEN: flags show in ps)")
	logLevel := flags.String("log-level", "", "debug, info, warn or error (default info)")
	showVersion := flags.Bool("version", false, "print the version and exit")
	flags.Usage = func() {
		fmt.Fprint(stderr, usage)
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
	if *showVersion {
		fmt.Fprintln(stdout, version.String("agenticd"))
		return 0
	}

	cfg, err := loadConfig(flags, *configPath)
	if err != nil {
		fmt.Fprintf(stderr, "agenticd: %v\n", err)
		return 1
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	// A token from the environment or a flag was often read from a file, newline and all.
	if env := lookupEnv("AGENTICD_TOKEN"); env != "" {
		cfg.Token = daemon.TrimToken(env)
	}
	if *token != "" {
		cfg.Token = daemon.TrimToken(*token)
	}
	// For containers, where a Secret and the pod's address arrive as variables. The
	// database URL holds a password: read once, then gone, like the token.
	for _, v := range []struct {
		name string
		to   *string
	}{{"AGENTICD_DATABASE", &cfg.Database}, {"AGENTICD_REPLICA_ID", &cfg.Replica.ID}, {"AGENTICD_REPLICA_ADVERTISE", &cfg.Replica.Advertise}} {
		if env := strings.TrimSpace(lookupEnv(v.name)); env != "" {
			*v.to = env
		}
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
	}
	cfg, err = cfg.WithDefaults()
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
		fmt.Fprintf(stderr, "agenticd: %v\n", err)
		return 1
	}
	return 0
}

// loadConfig reads the file --config names; without the flag, the default file when it
// exists. An explicit empty --config reads none.
func loadConfig(flags *flag.FlagSet, path string) (daemon.Config, error) {
	explicit := false
	flags.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	if explicit {
		if path == "" {
			return daemon.Config{}, nil
		}
		return daemon.Load(path)
	}
	path, err := daemon.DefaultConfigFile()
	if err != nil {
		return daemon.Config{}, nil // no home directory: no default file to read
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return daemon.Config{}, nil
	}
	cfg, err := daemon.Load(path)
	if err != nil {
		return cfg, fmt.Errorf("%w\n(that is the default config file; fix it, or pass --config FILE, or --config '' for none)", err)
	}
	return cfg, nil
}

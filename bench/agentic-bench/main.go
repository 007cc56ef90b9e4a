// Command agentic-bench is agenticd's load program: it measures what putting agenticd
// between a client and an ACP agent (or using its DeepChat agent) costs, against
// baselines run in the same invocation, and renders docs/BENCHMARKS.md. `make bench`
// (bench/run.sh) runs every subcommand; each can also run alone:
//
//	agentic-bench flood   [-count 100000 -size 64 -subs 1]   ACP chunk floods vs. raw reader and bare SDK
//	agentic-bench latency [-rate 1000 -subs 16]              paced chunks: added latency vs. bare SDK
//	agentic-bench tools   [-calls 2000]                      tool-call bursts
//	agentic-bench deepchat-reply [-chunks 10000]             SQLite write transactions per reply
//	agentic-bench sessions [-sessions 10000]                 heap per idle session; create+close rate
//	agentic-bench startup [-sessions 10000]                  start → health SERVING with a full database
//	agentic-bench confinement [-starts 10 -turns 300 -workspaces 8]  agent start, turn latency and memory, confinement on vs. off
//	agentic-bench protocols [-count 100000 -size 64]         one subscriber, live and replayed: native gRPC vs. Connect JSON and gRPC-Web on HTTP/1.1
//	agentic-bench eventlog [-count 100000 -big-count 100000 -idle 1m]  event log: write transactions, size, resume from it; RSS through and after a 1 KiB flood
//	agentic-bench postgres [-sessions 3000 -pairs 1000 -chunks 10000]  session and DeepChat figures on SQLite and on Postgres (one replica), side by side
//	agentic-bench replicas [-only latency,failover -ttls 3s,15s]  replicas on one Postgres: cross-replica Subscribe latency; failover time after a kill -9
//	agentic-bench acp-bridge [-transport stdio|websocket -rate 1000]  an ACP editor through agenticctl acp or /acp/v1: added latency per update over Subscribe
//	agentic-bench report  -results FILE ...                  write docs/BENCHMARKS.md
//	agentic-bench relay   -listen ADDR -agent BIN [-wait]    a plain gRPC fan-out to compare with (run by latency and flood)
//
// Every subcommand takes -agenticd BIN (default bin/agenticd) or -inprocess, -agent BIN
// (default bin/testagent), -runs N, -results FILE, -cpuprofile/-memprofile FILE.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agenticd/agenticd/sandbox/confine"
)

func main() {
	// -inprocess runs agenticd here, which re-executes this binary to confine agents.
	confine.MaybeRunInit()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agentic-bench flood|latency|tools|deepchat-reply|sessions|startup|confinement|eventlog|protocols|postgres|replicas|acp-bridge|report [flags]; see -h of each")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmds := map[string]func(context.Context, []string) error{
		"flood":          floodCmd,
		"latency":        latencyCmd,
		"tools":          toolsCmd,
		"deepchat-reply": deepchatReplyCmd,
		"sessions":       sessionsCmd,
		"startup":        startupCmd,
		"confinement":    confinementCmd,
		"eventlog":       eventLogCmd,
		"protocols":      protocolsCmd,
		"postgres":       postgresCmd,
		"replicas":       replicasCmd,
		"acp-bridge":     acpBridgeCmd,
		"relay":          relayCmd,
		"report":         func(_ context.Context, args []string) error { return reportCmd(args) },
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "agentic-bench: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "agentic-bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

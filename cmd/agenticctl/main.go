// Command agenticctl is the command-line client of agenticd.
//
//	agenticctl [--addr ADDR] [--token TOKEN] COMMAND [flags] [args]
//
// Run `agenticctl help` for the commands.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/internal/version"
)

const defaultAddr = "127.0.0.1:50051"

// cli is one invocation: its connection settings, client and output streams.
type cli struct {
	addr    string // --addr; "" for the default (resolve)
	token   string
	dataDir string // --data-dir: where the local socket and token file are
	tls     bool
	caFile  string
	timeout time.Duration

	// target is where dial connected: "unix://<socket>" or host:port.
	target string
	// unavailableSince is when streams began ending UNAVAILABLE without progress since,
	// and unavailablePause the pause before the next try (follow).
	unavailableSince time.Time
	unavailablePause time.Duration

	stdin          io.Reader
	stdout, stderr io.Writer
	conn           *grpc.ClientConn
	client         pb.AgenticServiceClient
	// session is the session the command is about, when it names one: errors that
	// tell to load it then name it.
	session string
}

type command struct {
	usage string
	help  string
	run   func(c *cli, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"acp":       {"acp --agent ID [--verbose]", "be an ACP agent on stdio for an editor (Zed, Neovim...): agenticd with the agent ID behind it", cmdACP},
		"agents":    {"agents", "list the agents and their status", cmdAgents},
		"sessions":  {"sessions [--agent ID] [--limit N]", "list sessions, newest first", cmdSessions},
		"new":       {"new --agent ID --workspace DIR [--model ID] [--mode ID] [--title T]", "create a session; prints its id", cmdNew},
		"get":       {"get SESSION", "show a session as JSON (status, modes, models, pending permissions...)", cmdGet},
		"messages":  {"messages [--limit N] SESSION", "show a session's stored history (all, or the newest N messages)", cmdMessages},
		"send":      {"send [--approve-all | --deny-all] [--queue | --steer | --interrupt] [--file PATH]... [--image PATH]... SESSION MESSAGE...", "send a message (- reads it from stdin), with files and images in the order given, and stream the reply; while a turn runs it waits in the queue (--queue, the default), goes into that turn (--steer) or replaces it (--interrupt); on a terminal it asks about permission requests; Ctrl-C cancels the turn", cmdSend},
		"subscribe": {"subscribe [--session ID]... [--agent ID]... [--after N | --oldest] [--json]", "print events as they happen", cmdSubscribe},
		"approve":   {"approve SESSION PERMISSION_ID", "allow a pending permission request (allow once, else always)", cmdApprove},
		"deny":      {"deny SESSION PERMISSION_ID", "reject a pending permission request (reject once, else always)", cmdDeny},
		"elicit":    {"elicit (--accept JSON | --decline | --cancel) SESSION ELICITATION_ID", "answer an agent's request for input (a form's values as a JSON object, or '{}' for a URL it asked to open)", cmdElicit},
		"cancel":    {"cancel SESSION", "cancel the running turn", cmdCancel},
		"mode":      {"mode SESSION MODE_ID", "choose one of the session's modes", cmdMode},
		"model":     {"model SESSION MODEL_ID", "choose one of the session's models", cmdModel},
		"config":    {"config SESSION [ID VALUE]", "list the session's config options (reasoning effort, fast mode...) with their values, or set one", cmdConfig},
		"fork":      {"fork SESSION", "start a new session with a session's history, where its agent can fork; prints its id", cmdFork},
		"load":      {"load [--max-history N] SESSION", "reopen a stored session (send does so by itself)", cmdLoad},
		"close":     {"close SESSION", "close a session (its history stays)", cmdClose},
		"audit":     {"audit [--session ID]... [--agent ID]... [--kind K]... [--since T] [--until T] [--follow] [--json]", "print the audit log: files written, commands run, permissions asked and decided, policy denials, sessions", cmdAudit},
		"version":   {"version", "print agenticctl's version (also: --version)", cmdVersion},
		"web":       {"web", "print a link that signs a browser in to agenticd's web page (it works once, for 15 minutes)", cmdWeb},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	global := flag.NewFlagSet("agenticctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	c.register(global)
	showVersion := global.Bool("version", false, "print agenticctl's version and exit")
	global.Usage = func() { c.usage(global) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String("agenticctl"))
		return 0
	}
	if global.NArg() == 0 || global.Arg(0) == "help" {
		c.usage(global)
		if global.NArg() == 0 {
			return 2
		}
		return 0
	}
	name := global.Arg(0)
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "agenticctl: unknown command %q; `agenticctl help` lists them\n", name)
		return 2
	}
	defer func() {
		if c.conn != nil {
			_ = c.conn.Close()
		}
	}()
	if err := cmd.run(c, global.Args()[1:]); err != nil {
		var usage usageError
		if errors.As(err, &usage) {
			fmt.Fprintf(stderr, "agenticctl %s: %v\nusage: agenticctl %s\n", name, err, cmd.usage)
			return 2
		}
		var exit exitError
		if errors.As(err, &exit) {
			return int(exit)
		}
		fmt.Fprintf(stderr, "agenticctl %s: %s\n", name, c.explain(err))
		return 1
	}
	return 0
}

// register adds the connection flags; every command's flag set has them too, so they may
// come before or after the command name.
func (c *cli) register(fs *flag.FlagSet) {
	timeout := c.timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	fs.StringVar(&c.addr, "addr", c.addr, "agenticd's host:port (env AGENTICD_ADDR; default: the local socket in --data-dir, else "+defaultAddr+")")
	// The token's default stays out of the flag, so that -h never prints it.
	fs.StringVar(&c.token, "token", c.token, "bearer token (default $AGENTICD_TOKEN, else the token file in --data-dir)")
	fs.StringVar(&c.dataDir, "data-dir", c.dataDir, "agenticd's data dir, where its local socket and token file are (env AGENTICD_DATA_DIR; default ~/.local/share/agenticd)")
	fs.BoolVar(&c.tls, "tls", c.tls, "connect with TLS (system roots, or --ca)")
	fs.StringVar(&c.caFile, "ca", c.caFile, "PEM file of the CA that signed agenticd's certificate (implies --tls)")
	fs.DurationVar(&c.timeout, "timeout", timeout, "time limit of each call (streams have none)")
}

func (c *cli) usage(fs *flag.FlagSet) {
	fmt.Fprintln(c.stderr, "usage: agenticctl [flags] COMMAND [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(c.stderr, "  %-70s %s\n", commands[name].usage, commands[name].help)
	}
	fmt.Fprintln(c.stderr, "\nflags (before or after the command):")
	fs.PrintDefaults()
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError ends the program with a status, its message already printed.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// parse parses a command's flags (plus the connection flags), checks the number of
// positional arguments and connects (lazily: the first call reaches the server).
func (c *cli) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	c.register(fs)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, usagef("%v", err)
	}
	if n := len(positional); n > 0 && positional[n-1] == "..." {
		if fs.NArg() < n-1 {
			return nil, usagef("expected %s", strings.Join(positional, " "))
		}
	} else if fs.NArg() != n {
		return nil, usagef("expected %d argument(s) (%s), got %d", n, strings.Join(positional, " "), fs.NArg())
	}
	if len(positional) > 0 && positional[0] == "SESSION" {
		c.session = fs.Arg(0)
	}
	if err := c.dial(); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

type tokenCreds struct {
	token  string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (t tokenCreds) RequireTransportSecurity() bool { return t.secure }

// dial connects the way a local user expects with nothing configured: to agenticd's
// local socket, which needs no token, when no address is given and the socket is
// there; otherwise to the address over TCP with the given token, else the data dir's.
func (c *cli) dial() error {
	if c.token == "" {
		c.token = strings.TrimSpace(os.Getenv("AGENTICD_TOKEN"))
	}
	if c.dataDir == "" {
		c.dataDir = os.Getenv("AGENTICD_DATA_DIR")
	}
	if c.dataDir == "" {
		c.dataDir, _ = localcred.DefaultDataDir()
	}
	addr := cmp.Or(c.addr, os.Getenv("AGENTICD_ADDR"))
	if addr == "" && c.dataDir != "" && !c.tls && c.caFile == "" {
		if info, err := os.Stat(localcred.SocketPath(c.dataDir)); err == nil && info.Mode()&os.ModeSocket != 0 {
			return c.connect("unix://"+localcred.SocketPath(c.dataDir), grpc.WithTransportCredentials(insecure.NewCredentials()))
		}
	}
	addr = cmp.Or(addr, defaultAddr)
	if c.token == "" && c.dataDir != "" {
		token, err := localcred.ReadToken(c.dataDir)
		switch {
		case err == nil:
			c.token = token
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	opts := []grpc.DialOption{}
	secure := c.tls || c.caFile != ""
	if secure {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.caFile != "" {
			pem, err := os.ReadFile(c.caFile)
			if err != nil {
				return fmt.Errorf("read --ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--ca %s holds no PEM certificate", c.caFile)
			}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds{token: c.token, secure: secure}))
	}
	return c.connect(addr, opts...)
}

func (c *cli) connect(target string, opts ...grpc.DialOption) error {
	opts = append(opts, grpc.WithChainUnaryInterceptor(sessionHeader))
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return fmt.Errorf("address %q: %w", target, err)
	}
	c.target = target
	c.conn = conn
	c.client = pb.NewAgenticServiceClient(conn)
	return nil
}

// sessionIDHeader names a call's session for a proxy in front of several agenticd
// replicas that routes by it, so the call reaches the session's owner directly.
const sessionIDHeader = "agenticd-session-id"

// sessionHeader sets sessionIDHeader on a call that names one session.
func sessionHeader(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(interface{ GetSessionId() string }); ok && r.GetSessionId() != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, sessionIDHeader, r.GetSessionId())
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// call bounds one unary call.
func (c *cli) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

// explain turns an error into a line a person can act on: the server's message without
// the transport's wording, and agenticctl commands where it names API calls.
func (c *cli) explain(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	switch {
	case st.Code() == codes.Unavailable && !reachable(c.target):
		return fmt.Sprintf("agenticd is not running at %s (start it with `make run` or `agenticd`)", c.target)
	case st.Code() == codes.DeadlineExceeded && st.Message() == context.DeadlineExceeded.Error():
		return fmt.Sprintf("agenticd did not answer within %s (--timeout)", c.timeout)
	}
	msg := rpcNoise.ReplaceAllString(err.Error(), "")
	// The reason is what a script or a person searches for; the message may change.
	var fields []string
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == "agenticd" && d.GetReason() != "" && !strings.Contains(msg, d.GetReason()+": ") {
				msg = addReason(msg, serverMessage(err), d.GetReason())
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				fields = append(fields, fmt.Sprintf("\n  %s: %s", v.GetField(), v.GetDescription()))
			}
		}
	}
	msg += strings.Join(fields, "")
	return rpcName.ReplaceAllStringFunc(msg, func(name string) string {
		cmd := rpcCommands[name]
		if c.session != "" && strings.HasSuffix(cmd, " SESSION") {
			cmd = strings.TrimSuffix(cmd, "SESSION") + c.session
		}
		return "`agenticctl " + cmd + "`"
	})
}

// errorInfo is agenticd's ErrorInfo in err's status (nil when it has none).
func errorInfo(err error) *errdetails.ErrorInfo {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "agenticd" {
			return info
		}
	}
	return nil
}

// reasonOf is the reason agenticd gave for err ("" when it gave none).
func reasonOf(err error) string { return errorInfo(err).GetReason() }

// reasonName is an event's or block's reason as statuses name it: AGENT_CRASHED.
func reasonName(r pb.ErrorReason) string {
	return strings.TrimPrefix(r.String(), "ERROR_REASON_")
}

// serverMessage is the message of the status inside err, without what wraps it (the
// status of a wrapped error has the whole text as its message).
func serverMessage(err error) string {
	var rpc interface{ GRPCStatus() *status.Status }
	if errors.As(err, &rpc) {
		return rpc.GRPCStatus().Message()
	}
	return ""
}

// addReason puts reason before the server's message within msg (which may wrap it:
// "reopening: <message>"), so the line reads "reopening: SESSION_BUSY: <message>".
func addReason(msg, serverMessage, reason string) string {
	if i := strings.LastIndex(msg, serverMessage); serverMessage != "" && i >= 0 {
		return msg[:i] + reason + ": " + msg[i:]
	}
	return reason + ": " + msg
}

// rpcNoise is what grpc-go puts around a server's message.
var rpcNoise = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// rpcCommands are the agenticctl commands that do what an RPC named in a server's message
// does.
var rpcCommands = map[string]string{
	"ListAgents":         "agents",
	"ListSessions":       "sessions",
	"CreateSession":      "new",
	"GetSession":         "get SESSION",
	"ListMessages":       "messages SESSION",
	"GetMessage":         "messages SESSION",
	"GetAgent":           "agents",
	"LoadSession":        "load SESSION",
	"CloseSession":       "close SESSION",
	"SendMessage":        "send SESSION",
	"CancelMessage":      "cancel SESSION",
	"SetMode":            "mode SESSION",
	"SetModel":           "model SESSION",
	"SetConfigOption":    "config SESSION",
	"ForkSession":        "fork SESSION",
	"RespondPermission":  "approve SESSION",
	"RespondElicitation": "elicit SESSION",
	"CreateWebLogin":     "web",
}

var rpcName = func() *regexp.Regexp {
	names := make([]string, 0, len(rpcCommands))
	for name := range rpcCommands {
		names = append(names, name)
	}
	return regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
}()

func reachable(target string) bool {
	network, addr := "tcp", target
	if path, ok := strings.CutPrefix(target, "unix://"); ok {
		network, addr = "unix", path
	}
	conn, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

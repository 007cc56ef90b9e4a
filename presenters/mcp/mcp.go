// Package mcp is the client side of the Model Context Protocol for agents built into
// agenticd: it connects a session to its MCP servers (run over stdio, confined to the
// session's workspace, or reached over streamable HTTP), lists their tools and calls
// them, turning results into the domain's tool content.
//
// Decisions this package makes:
//   - A server is connected on first use (its tools listed, or one called) and its tool
//     list kept until the server sends notifications/tools/list_changed.
//   - A tool is offered as `<server>__<tool>`; characters a chat API does not accept in
//     a function name become "_" and names over 64 bytes are cut and given a hash suffix.
//   - A server whose connection fails (its process exited, its endpoint went away) is
//     disconnected, its process stopped; the next use starts it again.
//   - A stdio server's stderr goes to the log line by line, with the server's name.
package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

const (
	// connectTimeout bounds starting a server and its handshake: some servers (npx ones
	// fetching packages) take seconds to answer initialize.
	connectTimeout = 30 * time.Second
	// stopGrace is how long a stopping server gets after end of input, and then after
	// SIGTERM, before it is killed.
	stopGrace = 2 * time.Second
	// maxToolName is the longest function name chat APIs accept.
	maxToolName = 64
	// NameSeparator joins a server's name and a tool's name.
	NameSeparator = "__"
)

// ProcessStarter starts a stdio server's process in the session's workspace, under its
// boundary (*sandbox.Workspace does).
type ProcessStarter interface {
	StartProcess(spec sandbox.ProcessSpec) (*sandbox.Process, error)
}

// Server is one MCP server of a session. Configured says it comes from agenticd's
// configuration rather than from a request: only then may its command's own
// installation be read under confinement.
type Server struct {
	presenters.MCPServer
	Configured bool
}

// Merge is presenters.MergeMCPServers, each server marked configured unless the session
// named it.
func Merge(configured, session []presenters.MCPServer) []Server {
	own := make(map[string]bool, len(session))
	for _, m := range session {
		own[m.Name] = true
	}
	merged := presenters.MergeMCPServers(configured, session)
	out := make([]Server, len(merged))
	for i, m := range merged {
		out[i] = Server{MCPServer: m, Configured: !own[m.Name]}
	}
	return out
}

// Hints are a tool's annotations as its server declares them, defaults applied. They
// are the server's word, not a guarantee.
type Hints struct {
	// Annotated: the server declared any annotations at all.
	Annotated bool
	// ReadOnly: the tool does not modify its environment.
	ReadOnly bool
	// Destructive: the tool may delete or overwrite (the MCP default for a tool that
	// is not read-only).
	Destructive bool
	// OpenWorld: the tool reaches entities outside a closed domain (the web, say).
	OpenWorld bool
}

func hintsOf(a *sdk.ToolAnnotations) Hints {
	if a == nil {
		return Hints{}
	}
	h := Hints{Annotated: true, ReadOnly: a.ReadOnlyHint, Destructive: true, OpenWorld: true}
	if a.DestructiveHint != nil {
		h.Destructive = *a.DestructiveHint
	}
	if h.ReadOnly {
		h.Destructive = false
	}
	if a.OpenWorldHint != nil {
		h.OpenWorld = *a.OpenWorldHint
	}
	return h
}

// Tool is a tool of a server, as offered to a model.
type Tool struct {
	Server string
	// Name is the tool's name on its server; QualifiedName the name the model calls.
	Name          string
	QualifiedName string
	Title         string
	Description   string
	// InputSchema is the tool's JSON schema for its arguments (an object schema).
	InputSchema json.RawMessage
	Hints       Hints
}

// Result is what a tool call produced.
type Result struct {
	// Text is what the model reads back: the text content, and a line for each other
	// piece.
	Text string
	// Content is the call's content for clients: texts, images and resources.
	Content []presenters.ToolContent
	// UIResources are the embedded ui:// resources, shown by clients as interactive UI.
	UIResources []presenters.McpUIResourceBlock
	// IsError: the tool reported that it failed (its content says why).
	IsError bool
}

// ErrServerFailed: a server could not be started or reached, or its connection broke.
// The server is started again on its next use.
var ErrServerFailed = errors.New("MCP server failed")

// ErrUnknownTool: no server of the set offers a tool of that name.
var ErrUnknownTool = errors.New("no such MCP tool")

// Set is the MCP servers of one session. Its methods may be called from several
// goroutines; Close ends every server.
type Set struct {
	servers   []*server
	transport *http.Transport // for HTTP servers; its idle connections close with the set
}

// NewSet prepares a session's servers; none is started before it is used. log should
// carry the session's and agent's ids.
func NewSet(servers []Server, starter ProcessStarter, log *slog.Logger) *Set {
	s := &Set{transport: http.DefaultTransport.(*http.Transport).Clone()}
	for _, cfg := range servers {
		s.servers = append(s.servers, &server{cfg: cfg, starter: starter, transport: s.transport,
			log: log.With("mcp_server", cfg.Name)})
	}
	return s
}

// Changed reports whether a server announced a new tool list since the last Tools.
func (s *Set) Changed() bool {
	for _, srv := range s.servers {
		if srv.stale.Load() {
			return true
		}
	}
	return false
}

// Tools lists the tools of every server, connecting the ones not connected and
// listing again the ones whose list changed. A server that fails is left out of the
// list and its error (ErrServerFailed) returned beside the others' tools.
func (s *Set) Tools(ctx context.Context) ([]Tool, []error) {
	var all []Tool
	var errs []error
	taken := make(map[string]bool)
	for _, srv := range s.servers {
		tools, err := srv.listTools(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range tools {
			t.QualifiedName = qualifiedName(srv.cfg.Name, t.Name, taken)
			taken[t.QualifiedName] = true
			all = append(all, t)
		}
	}
	return all, errs
}

// Call calls a tool as a listing gave it (the model chose it by its qualified name
// then; a later listing may give that name to another tool), connecting its server first
// if it is not connected (after a crash, say). A tool that reports failure is a Result
// with IsError, not an error; a server that cannot be reached or breaks is
// ErrServerFailed.
func (s *Set) Call(ctx context.Context, t Tool, args json.RawMessage) (Result, error) {
	for _, srv := range s.servers {
		if srv.cfg.Name == t.Server {
			return srv.call(ctx, t.Name, args)
		}
	}
	return Result{}, fmt.Errorf("%w: %q", ErrUnknownTool, t.QualifiedName)
}

// Close stops every server and waits until their processes are gone; a nil set has
// none. The set may not be used afterwards.
func (s *Set) Close() {
	if s == nil {
		return
	}
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Go(srv.close)
	}
	wg.Wait()
	s.transport.CloseIdleConnections()
}

// qualifiedName is `<server>__<tool>` in the characters and length chat APIs accept,
// unique among taken.
func qualifiedName(serverName, tool string, taken map[string]bool) string {
	name := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, serverName+NameSeparator+tool)
	if len(name) <= maxToolName && !taken[name] {
		return name
	}
	sum := sha256.Sum256([]byte(serverName + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return name[:min(len(name), maxToolName-len(suffix))] + suffix
}

// server is one server of a set and its connection, if any.
type server struct {
	cfg       Server
	starter   ProcessStarter
	transport *http.Transport
	log       *slog.Logger
	stale     atomic.Bool // a list_changed arrived since the last listing

	mu     sync.Mutex // held while connecting, listing or closing; not during calls
	conn   *conn
	tools  []Tool
	listed bool
	closed bool
}

// conn is a live connection to a server.
type conn struct {
	session *sdk.ClientSession
	proc    *sandbox.Process // nil for an HTTP server
	log     *slog.Logger
}

// connected returns the live connection, connecting first if there is none; s.mu is held.
func (s *server) connected(ctx context.Context) (*conn, error) {
	if s.closed {
		return nil, fmt.Errorf("%w: %s: the session's MCP servers were stopped", ErrServerFailed, s.cfg.Name)
	}
	if s.conn != nil && s.conn.alive() {
		return s.conn, nil
	}
	if s.conn != nil {
		s.log.Warn("MCP server exited; starting it again", "reason", s.conn.proc.ExitReason())
		s.drop(s.conn)
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.conn, s.listed = c, false
	return c, nil
}

func (s *server) connect(ctx context.Context) (*conn, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "agenticd", Version: version.Number()}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			s.stale.Store(true)
			s.log.Info("MCP server's tool list changed")
		},
	})
	c := &conn{log: s.log}
	var transport sdk.Transport
	if s.cfg.IsHTTP() {
		transport = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headerTransport{base: s.transport, headers: s.cfg.Headers}}}
	} else {
		proc, err := s.starter.StartProcess(sandbox.ProcessSpec{Command: s.cfg.Command, Args: s.cfg.Args, Env: s.cfg.Env, Installed: s.cfg.Configured,
			StderrLine: func(line string) { s.log.Info("MCP server stderr", "line", line) }})
		if err != nil {
			s.log.Warn("MCP server could not be started", "err", err)
			return nil, fmt.Errorf("%w: %s could not be started (%v); check its command in the MCP server settings", ErrServerFailed, s.cfg.Name, err)
		}
		c.proc = proc
		transport = &sdk.IOTransport{Reader: proc.Stdout, Writer: proc.Stdin}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		reason := err.Error()
		if c.proc != nil {
			reason = s.exitReason(c.proc, err)
			c.stop()
		}
		s.log.Warn("MCP server did not complete its handshake", "err", err, "reason", reason)
		return nil, fmt.Errorf("%w: %s did not answer initialize: %s", ErrServerFailed, s.cfg.Name, reason)
	}
	c.session = session
	s.log.Info("MCP server connected")
	return c, nil
}

// exitReason says why a stdio server's connection failed: how its process ended, when
// it ended within a moment of the failure, else the error.
func (s *server) exitReason(p *sandbox.Process, err error) string {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.Exited():
		return "its process " + p.ExitReason()
	case <-t.C:
		return err.Error()
	}
}

// alive reports whether a stdio server's process still runs; an HTTP server's
// connection counts as alive until a request fails.
func (c *conn) alive() bool {
	if c.proc == nil {
		return true
	}
	select {
	case <-c.proc.Exited():
		return false
	default:
		return true
	}
}

// stop ends the connection and the process; it returns once the process is gone and
// its pipes are closed.
func (c *conn) stop() {
	if c.proc != nil {
		c.proc.Stop(context.Background(), stopGrace)
	}
	if c.session != nil {
		_ = c.session.Close()
	}
	if c.proc != nil {
		if err := c.proc.Close(); err != nil {
			c.log.Warn("reading the MCP server's stderr failed", "err", err)
		}
	}
}

// drop ends a broken connection; s.mu is held.
func (s *server) drop(c *conn) {
	if s.conn == c {
		s.conn = nil
	}
	c.stop()
}

func (s *server) listTools(ctx context.Context) ([]Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	if s.listed && !s.stale.Load() {
		return s.tools, nil
	}
	s.stale.Store(false)
	var tools []Tool
	if init := c.session.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Tools == nil {
		s.tools, s.listed = nil, true // a server of prompts or resources only
		return nil, nil
	}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			reason := err.Error()
			if c.proc != nil {
				reason = s.exitReason(c.proc, err)
			}
			s.log.Warn("listing the MCP server's tools failed", "err", err)
			s.drop(c)
			return nil, fmt.Errorf("%w: %s could not list its tools: %s", ErrServerFailed, s.cfg.Name, reason)
		}
		tools = append(tools, toolOf(s.cfg.Name, t))
	}
	s.tools, s.listed = tools, true
	return tools, nil
}

func toolOf(serverName string, t *sdk.Tool) Tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || len(schema) == 0 || schema[0] != '{' {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	return Tool{Server: serverName, Name: t.Name, Title: title, Description: t.Description, InputSchema: schema, Hints: hintsOf(t.Annotations)}
}

func (s *server) call(ctx context.Context, tool string, args json.RawMessage) (Result, error) {
	s.mu.Lock()
	c, err := s.connected(ctx)
	s.mu.Unlock()
	if err != nil {
		return Result{}, err
	}
	var arguments any = map[string]any{}
	if len(args) > 0 {
		arguments = args
	}
	res, err := c.session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: arguments})
	if err == nil {
		return resultOf(res), nil
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		// The server answered: the call was wrong (an unknown tool, bad arguments),
		// the connection is fine.
		return Result{Text: "Error: " + rpcErr.Message, IsError: true}, nil
	}
	reason := err.Error()
	if c.proc != nil {
		reason = s.exitReason(c.proc, err)
	}
	s.log.Warn("MCP tool call failed; the server is stopped and will be started again for the next call", "tool", tool, "err", err, "reason", reason)
	s.mu.Lock()
	s.drop(c)
	s.mu.Unlock()
	return Result{}, fmt.Errorf("%w: %s failed during the call (%s); it is started again for the next call", ErrServerFailed, s.cfg.Name, reason)
}

func (s *server) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn != nil {
		s.conn.stop()
		s.conn = nil
	}
}

// headerTransport adds a server's configured headers (an API key, say) to each request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// Package acpbridge makes agenticd an ACP agent for editors: it speaks ACP v1 (the
// acp-go-sdk's agent side) on one connection and maps each call to agenticd's API
// through its generated client. agenticctl runs it on stdio; agenticd serves it over
// WebSocket, calling its own API in-process. The agent's files and terminals stay in
// agenticd: the editor's fs and terminal capabilities are never used.
package acpbridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// Options configures Serve.
type Options struct {
	// AgentID is the agenticd agent the editor talks to.
	AgentID string
	// Client reaches agenticd's API.
	Client pb.AgenticServiceClient
	// Target names where agenticd is, for messages ("127.0.0.1:50051").
	Target string
	// CallTimeout bounds each unary call (default 2 minutes): an editor never waits on
	// a call that cannot end.
	CallTimeout time.Duration
	// LostTurnAfter is how long a running prompt waits for agenticd to come back once
	// its event stream broke, before it fails (default 30 s). The stream itself keeps
	// reconnecting and resumes after the last sequence it saw.
	LostTurnAfter time.Duration
	Logger        *slog.Logger
}

// bridge is one editor connection: the acp.Agent the SDK calls.
type bridge struct {
	opts Options
	conn *acp.AgentSideConnection
	log  *slog.Logger

	// follow hands sessions to Serve, whose context their followers run under.
	follow chan followStart

	mu       sync.Mutex
	agent    *pb.AgentInfo
	sessions map[string]*session
}

var _ acp.Agent = (*bridge)(nil)

// followStart asks Serve to follow a session's events after a sequence.
type followStart struct {
	s     *session
	after uint64
}

// Serve speaks ACP on r and w until the peer closes r or ctx ends; on ctx's end it
// closes r. It returns once every goroutine it started has ended.
func Serve(ctx context.Context, opts Options, w io.Writer, r io.ReadCloser) error {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Minute
	}
	if opts.LostTurnAfter <= 0 {
		opts.LostTurnAfter = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	b := &bridge{opts: opts, log: opts.Logger.With("agent_id", opts.AgentID),
		follow: make(chan followStart), sessions: map[string]*session{}}
	// The SDK reads at once; nothing may reach b before b.conn is set.
	ready := make(chan struct{})
	b.conn = acp.NewAgentSideConnection(b, editorWriter{w: w}, newEditorReader(r, ready))
	b.conn.SetLogger(b.log)
	close(ready)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for {
		select {
		case f := <-b.follow:
			wg.Go(func() { f.s.run(ctx, f.after) })
		case <-b.conn.Done():
			return nil
		case <-ctx.Done():
			_ = r.Close()
			<-b.conn.Done()
			return nil
		}
	}
}

// call bounds one unary call.
func (b *bridge) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.opts.CallTimeout)
}

func (b *bridge) Initialize(ctx context.Context, _ acp.InitializeRequest) (acp.InitializeResponse, error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	got, err := b.opts.Client.GetAgent(cctx, &pb.GetAgentRequest{AgentId: b.opts.AgentID})
	if err != nil {
		return acp.InitializeResponse{}, b.requestError(err)
	}
	info, err := b.opts.Client.GetServerInfo(cctx, &pb.GetServerInfoRequest{})
	if err != nil {
		return acp.InitializeResponse{}, b.requestError(err)
	}
	agent := got.GetAgent()
	b.mu.Lock()
	b.agent = agent
	b.mu.Unlock()
	caps := agent.GetCapabilities()
	title := "agenticd: " + cmpOr(agent.GetName(), agent.GetAgentId())
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "agenticd", Version: info.GetVersion(), Title: &title},
		AgentCapabilities: acp.AgentCapabilities{
			// agenticd keeps every session's history, whatever the agent can do.
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{Image: caps.GetSupportsVision(), EmbeddedContext: caps.GetSupportsResources()},
			McpCapabilities:    acp.McpCapabilities{Http: caps.GetSupportsMcpHttp()},
			SessionCapabilities: acp.SessionCapabilities{
				List:  &acp.SessionListCapabilities{},
				Close: &acp.SessionCloseCapabilities{},
			},
		},
		// agenticd's own credentials travel with the connection, not in ACP.
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (b *bridge) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, &acp.RequestError{Code: codeInvalidParams,
		Message: "agenticd offers no ACP login: the connection carries agenticd's credentials, and agents log in through agenticd's config"}
}

func (b *bridge) Logout(context.Context, acp.LogoutRequest) (acp.LogoutResponse, error) {
	return acp.LogoutResponse{}, acp.NewMethodNotFound(acp.AgentMethodLogout)
}

func (b *bridge) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

// mcpServers are the editor's MCP servers as agenticd's, when the agent uses MCP at all
// (editors pass theirs to every agent; an agent without MCP would refuse the session).
func (b *bridge) mcpServers(servers []acp.McpServer) []*pb.McpServer {
	b.mu.Lock()
	caps := b.agent.GetCapabilities()
	b.mu.Unlock()
	if !caps.GetSupportsMcp() {
		if len(servers) > 0 {
			b.log.Info("left out the editor's MCP servers: the agent uses none", "count", len(servers))
		}
		return nil
	}
	var out []*pb.McpServer
	for _, s := range servers {
		switch {
		case s.Stdio != nil:
			env := map[string]string{}
			for _, e := range s.Stdio.Env {
				env[e.Name] = e.Value
			}
			out = append(out, &pb.McpServer{Name: s.Stdio.Name, Transport: &pb.McpServer_Stdio{Stdio: &pb.McpStdioServer{Command: s.Stdio.Command, Args: s.Stdio.Args, Env: env}}})
		case s.Http != nil:
			headers := map[string]string{}
			for _, h := range s.Http.Headers {
				headers[h.Name] = h.Value
			}
			out = append(out, &pb.McpServer{Name: s.Http.Name, Transport: &pb.McpServer_Http{Http: &pb.McpHttpServer{Url: s.Http.Url, Headers: headers}}})
		}
	}
	return out
}

func (b *bridge) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	resp, err := b.opts.Client.CreateSession(cctx, &pb.CreateSessionRequest{
		AgentId:   b.opts.AgentID,
		RequestId: uuid.NewString(),
		Config: &pb.SessionConfig{
			Workspace:             p.Cwd,
			McpServers:            b.mcpServers(p.McpServers),
			AdditionalDirectories: p.AdditionalDirectories,
		},
	})
	if err != nil {
		return acp.NewSessionResponse{}, b.requestError(err)
	}
	info := resp.GetSession()
	s := b.attach(ctx, info, nil)
	if s == nil {
		return acp.NewSessionResponse{}, ctx.Err()
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(info.GetSessionId()), Modes: modeState(info), ConfigOptions: configOptions(info),
		Meta: modelsMeta(info)}, nil
}

// attach follows a session's events from its snapshot on; replayed names the messages
// the editor already got as history, whose events are not sent again.
func (b *bridge) attach(ctx context.Context, info *pb.SessionInfo, replayed map[string]bool) *session {
	s := newSession(b, info, replayed)
	b.mu.Lock()
	if old := b.sessions[s.id]; old != nil {
		old.stop()
	}
	b.sessions[s.id] = s
	b.mu.Unlock()
	after := info.GetLastSequence()
	if first := info.GetMessageInFlightFirstSequence(); first > 0 && !replayed[info.GetMessageInFlight()] {
		after = first - 1
	}
	select {
	case b.follow <- followStart{s: s, after: after}:
		return s
	case <-ctx.Done():
		return nil
	}
}

func (b *bridge) session(id acp.SessionId) (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[string(id)]
	if s == nil {
		return nil, &acp.RequestError{Code: codeResourceNotFound,
			Message: fmt.Sprintf("%v %s on this connection: create it with session/new or open it with session/load", errUnknownSession, id)}
	}
	return s, nil
}

func (b *bridge) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	id := string(p.SessionId)
	cctx, cancel := b.call(ctx)
	defer cancel()
	got, err := b.opts.Client.GetSession(cctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return acp.LoadSessionResponse{}, b.requestError(err)
	}
	if got.GetSession().GetAgentId() != b.opts.AgentID {
		return acp.LoadSessionResponse{}, &acp.RequestError{Code: codeInvalidParams,
			Message: fmt.Sprintf("session %s belongs to agent %s, not %s: configure an agent with --agent %s to open it", id, got.GetSession().GetAgentId(), b.opts.AgentID, got.GetSession().GetAgentId())}
	}
	switch got.GetSession().GetStatus() {
	case pb.SessionStatus_SESSION_STATUS_CLOSED, pb.SessionStatus_SESSION_STATUS_ERROR:
		if _, err := b.opts.Client.LoadSession(cctx, &pb.LoadSessionRequest{SessionId: id}); err != nil {
			return acp.LoadSessionResponse{}, b.requestError(err)
		}
		if got, err = b.opts.Client.GetSession(cctx, &pb.GetSessionRequest{SessionId: id}); err != nil {
			return acp.LoadSessionResponse{}, b.requestError(err)
		}
	}
	info := got.GetSession()
	// The history from the store, without the message in flight: its events follow.
	replayed := map[string]bool{}
	var token string
	for {
		page, err := b.opts.Client.ListMessages(cctx, &pb.ListMessagesRequest{SessionId: id, PageToken: token})
		if err != nil {
			return acp.LoadSessionResponse{}, b.requestError(err)
		}
		for _, m := range page.GetMessages() {
			if m.GetMessageId() == info.GetMessageInFlight() {
				continue
			}
			replayed[m.GetMessageId()] = true
			terms := terminals{}
			for _, blk := range m.GetBlocks() {
				for _, u := range blockUpdates(m.GetRole(), m.GetMessageId(), blk, terms) {
					if err := b.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
						return acp.LoadSessionResponse{}, err
					}
				}
			}
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(info.GetAvailableCommands()) > 0 {
		if err := b.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: commands(info.GetAvailableCommands())}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	if b.attach(ctx, info, replayed) == nil {
		return acp.LoadSessionResponse{}, ctx.Err()
	}
	return acp.LoadSessionResponse{Modes: modeState(info), ConfigOptions: configOptions(info), Meta: modelsMeta(info)}, nil
}

func (b *bridge) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	resp, err := b.opts.Client.ListSessions(cctx, &pb.ListSessionsRequest{AgentId: b.opts.AgentID, Workspace: deref(p.Cwd), PageToken: deref(p.Cursor)})
	if err != nil {
		return acp.ListSessionsResponse{}, b.requestError(err)
	}
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, s := range resp.GetSessions() {
		info := acp.SessionInfo{SessionId: acp.SessionId(s.GetSessionId()), Cwd: s.GetWorkspace(), AdditionalDirectories: s.GetAdditionalDirectories()}
		if s.GetTitle() != "" {
			info.Title = new(s.GetTitle())
		}
		if s.GetUpdateTime() != nil {
			info.UpdatedAt = rfc3339(s.GetUpdateTime())
		}
		out.Sessions = append(out.Sessions, info)
	}
	if next := resp.GetNextPageToken(); next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (b *bridge) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	s, err := b.session(p.SessionId)
	if err != nil {
		return acp.CloseSessionResponse{}, err
	}
	b.mu.Lock()
	delete(b.sessions, s.id)
	b.mu.Unlock()
	s.stop()
	// Other clients may still use the session: the editor lets go of it, agenticd keeps it.
	return acp.CloseSessionResponse{}, nil
}

func (b *bridge) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	cctx, cancel := b.call(ctx)
	defer cancel()
	if _, err := b.opts.Client.SetMode(cctx, &pb.SetModeRequest{SessionId: string(p.SessionId), ModeId: string(p.ModeId)}); err != nil {
		return acp.SetSessionModeResponse{}, b.requestError(err)
	}
	return acp.SetSessionModeResponse{}, nil
}

func (b *bridge) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	var sessionID, configID, value string
	switch {
	case p.ValueId != nil:
		sessionID, configID, value = string(p.ValueId.SessionId), string(p.ValueId.ConfigId), string(p.ValueId.Value)
	case p.Boolean != nil:
		sessionID, configID, value = string(p.Boolean.SessionId), string(p.Boolean.ConfigId), strconv.FormatBool(p.Boolean.Value)
	default:
		return acp.SetSessionConfigOptionResponse{}, &acp.RequestError{Code: codeInvalidParams, Message: "a config option's value is a select's value id or a boolean"}
	}
	cctx, cancel := b.call(ctx)
	defer cancel()
	var info *pb.SessionInfo
	switch configID {
	case configMode:
		resp, err := b.opts.Client.SetMode(cctx, &pb.SetModeRequest{SessionId: sessionID, ModeId: value})
		if err != nil {
			return acp.SetSessionConfigOptionResponse{}, b.requestError(err)
		}
		info = resp.GetSession()
	case configModel:
		resp, err := b.opts.Client.SetModel(cctx, &pb.SetModelRequest{SessionId: sessionID, ModelId: value})
		if err != nil {
			return acp.SetSessionConfigOptionResponse{}, b.requestError(err)
		}
		info = resp.GetSession()
	default:
		resp, err := b.opts.Client.SetConfigOption(cctx, &pb.SetConfigOptionRequest{SessionId: sessionID, ConfigId: configID, Value: value})
		if err != nil {
			return acp.SetSessionConfigOptionResponse{}, b.requestError(err)
		}
		info = resp.GetSession()
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: configOptions(info)}, nil
}

func (b *bridge) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := b.session(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	msgID, userID := uuid.NewString(), uuid.NewString()
	if p.MessageId != nil && *p.MessageId != "" {
		userID = *p.MessageId
	}
	end := s.expect(msgID, userID)
	defer s.forget(msgID)
	cctx, cancel := b.call(ctx)
	req := &pb.SendMessageRequest{
		SessionId: s.id, Content: promptContent(p.Prompt), RequestId: uuid.NewString(), MessageId: msgID, UserMessageId: userID,
	}
	err = b.send(cctx, req)
	if st, _ := status.FromError(err); reasonIs(st, pb.ErrorReason_ERROR_REASON_SESSION_CLOSED) {
		// agenticd restarted, or the agent stopped, since the editor opened the session:
		// reopen it, as agenticctl send does. Its replay is not sent again (handle).
		if _, lerr := b.opts.Client.LoadSession(cctx, &pb.LoadSessionRequest{SessionId: s.id}); lerr != nil {
			b.log.Warn("reopening the session for a prompt", "session_id", s.id, "err", lerr)
		} else {
			req.RequestId = uuid.NewString()
			err = b.send(cctx, req)
		}
	}
	cancel()
	if err != nil {
		return acp.PromptResponse{}, b.requestError(err)
	}
	select {
	case e := <-end:
		return e.response(userID)
	case <-ctx.Done():
	}
	select {
	case <-b.conn.Done():
		// The editor left; the turn goes on in agenticd, where others may follow it.
		return acp.PromptResponse{}, ctx.Err()
	default:
	}
	// The editor withdrew the request: cancel the turn, and give it a moment to end.
	cctx, cancel = b.call(context.WithoutCancel(ctx))
	defer cancel()
	switch _, err := b.opts.Client.CancelMessage(cctx, &pb.CancelMessageRequest{SessionId: s.id, MessageId: msgID, RequestId: uuid.NewString()}); {
	case turnEnded(err):
		// session/cancel cancels it too (Cancel): the two race, and one finds it ended.
		b.log.Debug("cancelling a withdrawn prompt: the turn ended already", "session_id", s.id, "message_id", msgID)
	case err != nil:
		b.log.Warn("cancelling a withdrawn prompt", "session_id", s.id, "message_id", msgID, "err", err)
	}
	select {
	case e := <-end:
		return e.response(userID)
	case <-cctx.Done():
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
}

// send calls SendMessage. While agenticd cannot be reached or is stopping (a restart, a
// broken connection), it waits for agenticd and sends again, for up to LostTurnAfter: the
// request id makes a repeat safe.
func (b *bridge) send(ctx context.Context, req *pb.SendMessageRequest) error {
	give := time.Now().Add(b.opts.LostTurnAfter)
	for {
		wctx, cancel := context.WithDeadline(ctx, give)
		_, err := b.opts.Client.SendMessage(wctx, req, grpc.WaitForReady(true))
		cancel()
		st, _ := status.FromError(err)
		retry := st.Code() == codes.Unavailable && (reasonOf(st) == "" || reasonIs(st, pb.ErrorReason_ERROR_REASON_SHUTTING_DOWN))
		if !retry || !time.Now().Before(give) {
			return err
		}
		b.log.Debug("agenticd unreachable; sending the prompt again", "err", err)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

func (b *bridge) Cancel(ctx context.Context, p acp.CancelNotification) error {
	s, err := b.session(p.SessionId)
	if err != nil {
		return err
	}
	cctx, cancel := b.call(ctx)
	defer cancel()
	for _, id := range s.running() {
		_, err := b.opts.Client.CancelMessage(cctx, &pb.CancelMessageRequest{SessionId: s.id, MessageId: id, RequestId: uuid.NewString()})
		switch {
		case turnEnded(err):
			// The SDK cancels the prompt's context on session/cancel too, and Prompt
			// cancels the turn then: the two race, and one finds it ended.
			b.log.Debug("session/cancel: the turn ended already", "session_id", s.id, "message_id", id)
		case err != nil:
			b.log.Warn("session/cancel", "session_id", s.id, "message_id", id, "err", err)
		}
	}
	return nil
}

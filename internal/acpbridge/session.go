package acpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// session is one agenticd session an editor follows: its events go to the editor as
// ACP updates, and the prompts the editor sends wait here for their turn's end.
type session struct {
	id    string
	b     *bridge
	acpID acp.SessionId

	// stopped ends the follower when the editor lets go of the session.
	stopped  chan struct{}
	stopOnce sync.Once

	mu       sync.Mutex
	turns    map[string]chan turnEnd // the editor's running prompts, by assistant message id
	ownUsers map[string]bool         // the user messages of those prompts: the editor shows them already
	replayed map[string]bool         // messages the editor got as history
	errs     map[string]string       // the last error of a running turn, by message id
	asks     map[string]context.CancelFunc
	info     *pb.SessionInfo // modes and models as they are now, for config option updates
	// attachedAt is the snapshot's last sequence: events up to it are the turn in flight
	// replayed, whose waiting permission requests the snapshot lists.
	attachedAt uint64
	lost       error // set while the event stream is broken for too long

	tools map[string]*pb.ToolCall // running tool calls' last state, for permission requests

	terms terminals // only the follower touches it
}

// turnEnd is how a turn ended.
type turnEnd struct {
	stop  acp.StopReason
	usage *acp.Usage
	err   error
}

func (e turnEnd) response(userID string) (acp.PromptResponse, error) {
	if e.err != nil {
		return acp.PromptResponse{}, e.err
	}
	return acp.PromptResponse{StopReason: e.stop, Usage: e.usage, UserMessageId: &userID}, nil
}

func newSession(b *bridge, info *pb.SessionInfo, replayed map[string]bool) *session {
	if replayed == nil {
		replayed = map[string]bool{}
	}
	return &session{id: info.GetSessionId(), acpID: acp.SessionId(info.GetSessionId()), b: b, stopped: make(chan struct{}),
		turns: map[string]chan turnEnd{}, ownUsers: map[string]bool{}, replayed: replayed, errs: map[string]string{},
		asks: map[string]context.CancelFunc{}, info: info, attachedAt: info.GetLastSequence(), terms: terminals{}, tools: map[string]*pb.ToolCall{}}
}

func (s *session) stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// expect registers a prompt before it is sent, so that its end cannot be missed.
func (s *session) expect(msgID, userID string) <-chan turnEnd {
	ch := make(chan turnEnd, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns[msgID] = ch
	s.ownUsers[userID] = true
	if s.lost != nil {
		ch <- turnEnd{err: s.b.requestError(s.lost)}
	}
	return ch
}

func (s *session) forget(msgID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.turns, msgID)
	delete(s.errs, msgID)
}

// running lists the editor's prompts that run.
func (s *session) running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.turns))
	for id := range s.turns {
		ids = append(ids, id)
	}
	return ids
}

func (s *session) end(msgID string, e turnEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.turns[msgID]; ch != nil {
		select {
		case ch <- e:
		default:
		}
	}
}

// setLost fails the running prompts while agenticd cannot be reached; nil clears it.
func (s *session) setLost(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost = err
	if err == nil {
		return
	}
	for _, ch := range s.turns {
		select {
		case ch <- turnEnd{err: s.b.requestError(err)}:
		default:
		}
	}
}

// run follows the session's events after sequence after until the editor lets go of
// it or ctx ends. A broken stream is opened again after the last sequence it gave.
func (s *session) run(ctx context.Context, after uint64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	var asks sync.WaitGroup
	defer asks.Wait()
	if cmds := s.info.GetAvailableCommands(); len(cmds) > 0 && len(s.replayed) == 0 {
		s.send(ctx, commands(cmds))
	}
	// Permission requests waiting already (a turn runs elsewhere, or before a reconnect).
	for _, req := range s.info.GetPendingPermissions() {
		asks.Go(func() { s.ask(ctx, req) })
	}
	backoff := 50 * time.Millisecond
	var brokenSince time.Time
	for ctx.Err() == nil {
		progressed, err := s.stream(ctx, &after, &asks)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			backoff, brokenSince = 50*time.Millisecond, time.Time{}
			s.setLost(nil)
		}
		if brokenSince.IsZero() {
			brokenSince = time.Now()
		}
		switch st, _ := status.FromError(err); {
		case st.Code() == codes.OutOfRange:
			// What happened after `after` is no longer held: go on from now.
			s.b.log.Warn("events of the session were lost for the editor; it goes on from now", "session_id", s.id, "after", after)
			if got, gerr := s.getSession(ctx); gerr == nil {
				after = got.GetLastSequence()
				continue
			}
		case st.Code() == codes.NotFound:
			s.setLost(err)
			return
		}
		if time.Since(brokenSince) >= s.b.opts.LostTurnAfter {
			s.setLost(fmt.Errorf("%w (no event stream since %s): %v", ErrLostConnection, brokenSince.Format(time.TimeOnly), err))
		}
		s.b.log.Debug("event stream broke; reconnecting", "session_id", s.id, "after", after, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *session) getSession(ctx context.Context) (*pb.SessionInfo, error) {
	cctx, cancel := s.b.call(ctx)
	defer cancel()
	got, err := s.b.opts.Client.GetSession(cctx, &pb.GetSessionRequest{SessionId: s.id})
	return got.GetSession(), err
}

// stream reads one subscription until it breaks; progressed says whether it got any
// frame (the connection works).
func (s *session) stream(ctx context.Context, after *uint64, asks *sync.WaitGroup) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := s.b.opts.Client.Subscribe(ctx, &pb.SubscribeRequest{
		SessionIds: []string{s.id},
		Start:      &pb.SubscribeRequest_AfterSequence{AfterSequence: *after},
	})
	if err != nil {
		return false, err
	}
	for {
		frame, err := sub.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "agenticd ended the event stream")
			}
			return progressed, err
		}
		progressed = true
		switch f := frame.GetFrame().(type) {
		case *pb.SubscribeResponse_Events:
			for _, ev := range f.Events.GetEvents() {
				s.handle(ctx, ev, asks)
				*after = max(*after, ev.GetSequence())
			}
		case *pb.SubscribeResponse_Bookmark:
			*after = max(*after, f.Bookmark.GetSequence())
		case *pb.SubscribeResponse_CaughtUp:
			*after = max(*after, f.CaughtUp.GetSequence())
		}
	}
}

// send gives the editor one update; a failure means the editor is gone, which ends
// the connection and with it everything else.
func (s *session) send(ctx context.Context, u acp.SessionUpdate) {
	if err := s.b.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.acpID, Update: u}); err != nil {
		s.b.log.Debug("sending an update", "session_id", s.id, "err", err)
	}
}

// handle turns one event into the ACP updates it came from.
func (s *session) handle(ctx context.Context, ev *pb.AgenticEvent, asks *sync.WaitGroup) {
	if ev.GetReplay() {
		// A LoadSession elsewhere shows the history again: the editor has it.
		return
	}
	switch p := ev.GetPayload().(type) {
	case *pb.AgenticEvent_MessageDelta:
		d := p.MessageDelta
		if s.skip(d.GetMessageId()) || d.GetText() == "" {
			return
		}
		s.send(ctx, messageChunk(d.GetRole(), d.GetMessageId(), textBlock(d.GetText())))
	case *pb.AgenticEvent_MessageBlock:
		m := p.MessageBlock
		if s.skip(m.GetMessageId()) {
			return
		}
		for _, u := range blockUpdates(m.GetRole(), m.GetMessageId(), m.GetBlock(), s.terms) {
			s.send(ctx, u)
		}
	case *pb.AgenticEvent_ToolStart:
		if s.skip(p.ToolStart.GetMessageId()) {
			return
		}
		s.setTool(p.ToolStart.GetTool())
		s.send(ctx, toolStart(p.ToolStart.GetTool(), s.terms))
	case *pb.AgenticEvent_ToolRunning:
		if s.skip(p.ToolRunning.GetMessageId()) {
			return
		}
		s.setTool(p.ToolRunning.GetTool())
		s.send(ctx, toolUpdate(p.ToolRunning.GetTool(), s.terms))
	case *pb.AgenticEvent_ToolEnd:
		if s.skip(p.ToolEnd.GetMessageId()) {
			return
		}
		t := p.ToolEnd.GetTool()
		s.send(ctx, toolUpdate(t, s.terms))
		s.terms.forget(t.GetToolId())
		s.mu.Lock()
		delete(s.tools, t.GetToolId())
		s.mu.Unlock()
	case *pb.AgenticEvent_ToolPermissionRequired:
		if ev.GetSequence() <= s.attachedAt {
			// Replayed with the turn in flight: run asked it already if it still waits.
			return
		}
		req := p.ToolPermissionRequired.GetRequest()
		asks.Go(func() { s.ask(ctx, req) })
	case *pb.AgenticEvent_ToolPermissionGranted:
		s.withdraw(p.ToolPermissionGranted.GetPermissionId())
	case *pb.AgenticEvent_ToolPermissionDenied:
		s.withdraw(p.ToolPermissionDenied.GetPermissionId())
	case *pb.AgenticEvent_SessionUpdated:
		s.updated(ctx, p.SessionUpdated)
	case *pb.AgenticEvent_Error:
		if id := p.Error.GetMessageId(); id != "" {
			s.mu.Lock()
			s.errs[id] = p.Error.GetMessage()
			s.mu.Unlock()
		}
	case *pb.AgenticEvent_MessageEnd:
		e := p.MessageEnd
		if e.GetRole() == pb.MessageRole_MESSAGE_ROLE_USER {
			return
		}
		end := turnEnd{stop: stopReason(e.GetStopReason()), usage: turnUsage(e.GetUsage())}
		if e.GetStopReason() == pb.StopReason_STOP_REASON_ERROR {
			s.mu.Lock()
			msg := s.errs[e.GetMessageId()]
			s.mu.Unlock()
			end.err = &acp.RequestError{Code: codeInternal, Message: cmpOr(msg, "the turn ended in an error"),
				Data: map[string]any{"messageId": e.GetMessageId()}}
		}
		s.end(e.GetMessageId(), end)
	case *pb.AgenticEvent_SessionClosed:
		s.b.log.Info("the session was closed in agenticd", "session_id", s.id, "reason", p.SessionClosed.GetReason())
	}
}

// skip reports whether a message's events are not for the editor: the user message of
// its own prompt (the editor shows it already) or a message it got as history.
func (s *session) skip(msgID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownUsers[msgID] || s.replayed[msgID]
}

// updated passes on the changes of the session the editor shows.
func (s *session) updated(ctx context.Context, u *pb.SessionUpdated) {
	info := u.GetSession()
	configChanged := false
	for _, path := range u.GetUpdateMask().GetPaths() {
		switch path {
		case "available_commands":
			s.send(ctx, commands(info.GetAvailableCommands()))
		case "current_mode_id":
			s.info.CurrentModeId = info.GetCurrentModeId()
			s.send(ctx, acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: acp.SessionModeId(info.GetCurrentModeId())}})
			configChanged = true
		case "available_modes":
			s.info.AvailableModes = info.GetAvailableModes()
			configChanged = true
		case "current_model_id":
			s.info.CurrentModelId = info.GetCurrentModelId()
			configChanged = true
		case "available_models":
			s.info.AvailableModels = info.GetAvailableModels()
			configChanged = true
		case "config_options":
			s.info.ConfigOptions = info.GetConfigOptions()
			configChanged = true
		case "title":
			s.send(ctx, acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{Title: new(info.GetTitle())}})
		case "usage":
			if up := usageUpdate(info.GetUsage()); up != nil {
				s.send(ctx, *up)
			}
		}
	}
	if configChanged {
		if opts := configOptions(s.info); len(opts) > 0 {
			s.send(ctx, acp.SessionUpdate{ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{ConfigOptions: opts}})
		}
	}
}

// ask puts a permission request to the editor and answers agenticd with its choice.
// An answer from elsewhere withdraws it (withdraw cancels the request's context, and
// the SDK sends $/cancel_request).
func (s *session) ask(ctx context.Context, req *pb.PermissionRequest) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.asks[req.GetPermissionId()] != nil {
		s.mu.Unlock()
		return
	}
	s.asks[req.GetPermissionId()] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.asks, req.GetPermissionId())
		s.mu.Unlock()
	}()
	tool := s.toolFor(req)
	opts := make([]acp.PermissionOption, 0, len(req.GetOptions()))
	for _, o := range req.GetOptions() {
		opts = append(opts, acp.PermissionOption{OptionId: acp.PermissionOptionId(o.GetOptionId()), Name: cmpOr(o.GetName(), o.GetOptionId()), Kind: optionKind(o.GetKind())})
	}
	resp, err := s.b.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: s.acpID, ToolCall: tool, Options: opts})
	if err != nil {
		if ctx.Err() == nil {
			s.b.log.Debug("permission request to the editor", "session_id", s.id, "permission_id", req.GetPermissionId(), "err", err)
		}
		return
	}
	if resp.Outcome.Selected == nil {
		// The editor dismissed it (it cancels the turn next, or someone else answers).
		return
	}
	cctx, ccancel := s.b.call(ctx)
	defer ccancel()
	_, err = s.b.opts.Client.RespondPermission(cctx, &pb.RespondPermissionRequest{
		SessionId: s.id, PermissionId: req.GetPermissionId(),
		Answer: &pb.RespondPermissionRequest_OptionId{OptionId: string(resp.Outcome.Selected.OptionId)},
	})
	if err != nil {
		// Decided elsewhere first, most likely: the events say how.
		s.b.log.Info("answering a permission request", "session_id", s.id, "permission_id", req.GetPermissionId(), "err", err)
	}
}

// toolFor is the tool call a permission request is about: its state as last seen, or
// what the request tells of it (a request may come before its tool call).
func (s *session) toolFor(req *pb.PermissionRequest) acp.ToolCallUpdate {
	s.mu.Lock()
	t := s.tools[req.GetToolId()]
	s.mu.Unlock()
	if t != nil {
		return toolCallUpdate(t, nil)
	}
	u := acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(req.GetToolId()), RawInput: rawValue(req.GetArguments())}
	if title := cmpOr(req.GetDescription(), req.GetToolName()); title != "" {
		u.Title = &title
	}
	for _, p := range req.GetPaths() {
		u.Locations = append(u.Locations, acp.ToolCallLocation{Path: p})
	}
	return u
}

func (s *session) setTool(t *pb.ToolCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools[t.GetToolId()] = t
}

func (s *session) withdraw(permissionID string) {
	s.mu.Lock()
	cancel := s.asks[permissionID]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

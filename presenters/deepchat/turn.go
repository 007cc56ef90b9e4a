package deepchat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// Checkpoints of a partial reply: at most one per interval, or sooner once this much
// output is unsaved. A crash loses at most that much of a reply, and a long reply costs
// a handful of write transactions instead of one per chunk.
const (
	checkpointInterval = time.Second
	checkpointBytes    = 512 << 10
	// finalCommitTimeout bounds the write of the session's row at a turn's end, which
	// runs even when the turn was cancelled.
	finalCommitTimeout = 30 * time.Second
)

// turn is one running SendMessage. Its fields other than pending are set once.
type turn struct {
	messageID string
	cancel    context.CancelCauseFunc
	done      chan struct{} // closed when the turn has ended and MESSAGE_END was sent
	// pending permission requests by id, in order; guarded by session.mu.
	pending      map[string]*pendingPermission
	pendingOrder []string
	// steered are the user messages Steer delivered that the model has not seen yet;
	// steerClosed, that the turn takes no more. Guarded by session.mu.
	steered     []presenters.Message
	steerClosed bool
}

func (t *turn) removePending(id string) {
	delete(t.pending, id)
	for i, p := range t.pendingOrder {
		if p == id {
			t.pendingOrder = append(t.pendingOrder[:i], t.pendingOrder[i+1:]...)
			break
		}
	}
}

// userBlocksOf is content as the blocks of a user message of session s, its attachments
// read in the session's workspace, which it returns too. That is opened again for every
// message, from the stored directory: it may have gone or been swapped since the last
// turn, or since before a restart.
func (p *Presenter) userBlocksOf(s *session, sessionID string, content presenters.MessageContent) (*sandbox.Workspace, []presenters.Block, error) {
	s.mu.Lock()
	workspace := s.conv.Workspace
	s.mu.Unlock()
	ws, err := presenters.ReopenWorkspace(p.deps.Roots, sessionID, workspace)
	if err != nil {
		return nil, nil, err
	}
	blocks, err := userBlocks(ws, content)
	return ws, blocks, err
}

// SendMessage stores the user's message and an in-progress assistant message, under
// the ids opts chose (minted where empty), starts the turn and returns at once.
func (p *Presenter) SendMessage(ctx context.Context, sessionID string, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	if err := presenters.CheckSend(content, opts); err != nil {
		return presenters.SendResult{}, err
	}
	if reason := p.readiness(); reason != "" {
		return presenters.SendResult{}, fmt.Errorf("%s: %w", reason, presenters.ErrFailedPrecondition)
	}
	s, err := p.open(ctx, sessionID)
	if err != nil {
		return presenters.SendResult{}, err
	}
	ws, blocks, err := p.userBlocksOf(s, sessionID, content)
	if err != nil {
		return presenters.SendResult{}, err
	}
	now := time.Now()
	user := presenters.Message{ID: cmp.Or(opts.UserMessageID, newID()), SessionID: sessionID, Role: presenters.RoleUser,
		Status: presenters.MessageComplete, Blocks: blocks, CreatedAt: now}
	reply := presenters.Message{ID: cmp.Or(opts.MessageID, newID()), SessionID: sessionID, Role: presenters.RoleAssistant,
		Status: store.StatusInProgress, CreatedAt: now}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return presenters.SendResult{}, errClosed(sessionID)
	}
	if s.turn != nil {
		return presenters.SendResult{}, fmt.Errorf("session %s is still answering message %s; wait for its MESSAGE_END or cancel it: %w",
			sessionID, s.turn.messageID, presenters.ErrSessionBusy)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return presenters.SendResult{}, errShuttingDown
	}
	p.turns.Add(1)
	p.mu.Unlock()
	// Checked under s.mu: the session's messages are written by its turns alone, one at
	// a time, so the ids stay free until SaveTurn below stores them.
	if err := p.deps.Store.CheckMessageIDsFree(ctx, sessionID, opts.UserMessageID, opts.MessageID); err != nil {
		p.turns.Done()
		return presenters.SendResult{}, err
	}

	conv := s.conv
	var patch presenters.SessionPatch
	if conv.Title == "" {
		if title := presenters.TitleFrom(content); title != "" {
			conv.Title = title
			patch.Title = &conv.Title
		}
	}
	conv.UpdatedAt = now
	if err := p.deps.Store.SaveTurn(ctx, conv, user, reply); err != nil {
		p.turns.Done()
		return presenters.SendResult{}, err
	}
	s.conv = conv

	turnCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	t := &turn{messageID: reply.ID, cancel: cancel, done: make(chan struct{}),
		pending: make(map[string]*pendingPermission)}
	s.turn = t
	s.lastError = ""
	em := p.emitter(sessionID)
	// The user's message is echoed as ACP agents echo it, so every subscriber, not only
	// the client that sent it, sees the conversation whole and in order.
	replayMessage(em, user)
	em.StatusChanged(presenters.SessionGenerating, "")
	if patch.Title != nil {
		patch.UpdatedAt = &now
		em.SessionUpdated(patch)
	}
	run := &turnRun{p: p, s: s, t: t, ws: ws, em: em, lastSave: p.now(),
		reply: reply, log: p.log.With("session_id", sessionID, "message_id", reply.ID)}
	go run.run(turnCtx)
	return presenters.SendResult{MessageID: reply.ID, UserMessageID: user.ID}, nil
}

// CancelMessage cancels the running turn, waits until it has ended with
// MESSAGE_END(cancelled) and returns its message id. An empty messageID cancels whatever
// runs (with nothing running it does nothing: the turn may just have ended); any other
// id that is not the running turn is ErrMessageNotRunning.
func (p *Presenter) CancelMessage(ctx context.Context, sessionID, messageID string) (string, error) {
	p.mu.Lock()
	s := p.sessions[sessionID]
	p.mu.Unlock()
	var t *turn
	if s == nil {
		if _, err := p.conversation(ctx, sessionID); err != nil {
			return "", err
		}
	} else {
		s.mu.Lock()
		t = s.turn
		s.mu.Unlock()
	}
	switch {
	case t == nil && messageID == "":
		return "", nil
	case t == nil:
		return "", fmt.Errorf("message %s is not running in session %s: no turn runs: %w", messageID, sessionID, presenters.ErrMessageNotRunning)
	case messageID != "" && messageID != t.messageID:
		return "", fmt.Errorf("message %s is not running in session %s; the running one is %s: %w", messageID, sessionID, t.messageID, presenters.ErrMessageNotRunning)
	}
	t.cancel(errCancelledByUser)
	select {
	case <-t.done:
		return t.messageID, nil
	case <-ctx.Done():
		return "", fmt.Errorf("cancel message %s: %w", t.messageID, presenters.ErrCancelled)
	}
}

// turnRun is the state of the goroutine that runs one turn.
type turnRun struct {
	p   *Presenter
	s   *session
	t   *turn
	ws  *sandbox.Workspace
	em  presenters.Emitter
	log *slog.Logger

	reply    presenters.Message // the assistant message; Blocks excludes the open text block
	open     *strings.Builder   // text of the trailing text or reasoning block
	openType presenters.BlockType
	usage    *presenters.TokenUsage
	lastSave time.Time
	unsaved  int
}

func (r *turnRun) run(ctx context.Context) {
	defer r.p.turns.Done()
	stop, status, failure := r.loop(ctx)
	// A message steered in after the last model call stays in the history, for the next
	// turn; none lands here from now on.
	r.takeSteered(true)
	r.finish(ctx, stop, status, failure)
}

// loop talks to the model until it stops calling tools, fails, is cancelled or reaches
// the tool round limit.
func (r *turnRun) loop(ctx context.Context) (presenters.StopReason, presenters.MessageStatus, *presenters.ErrorPayload) {
	history, err := r.p.deps.Store.Messages(ctx, r.reply.SessionID, presenters.MessageQuery{})
	if err != nil {
		if ctx.Err() != nil {
			return presenters.StopCancelled, presenters.MessageCancelled, nil
		}
		r.log.Error("could not read the conversation history", "err", err)
		return presenters.StopError, presenters.MessageError, &presenters.ErrorPayload{Code: "storage_failed", MessageID: r.reply.ID,
			Message: "the conversation history could not be read from the history database; check the server log and the data directory, then send the message again"}
	}
	msgs := []chatMessage{{Role: "system", Content: systemPrompt(r.ws.Root())}}
	msgs = append(msgs, chatHistory(history, r.reply.ID)...)
	for round := 1; ; round++ {
		var roundText strings.Builder
		req := chatRequest{Model: r.currentModel(), Messages: msgs, Tools: r.toolDefs(ctx), Stream: true,
			StreamOptions: &streamOptions{IncludeUsage: true}}
		res, err := r.p.client.stream(ctx, req, streamHandler{
			text: func(s string) {
				roundText.WriteString(s)
				r.appendText(presenters.BlockText, s)
				r.em.MessageDelta(r.reply.ID, presenters.RoleAssistant, s)
			},
			reasoning: func(s string) {
				r.appendText(presenters.BlockReasoning, s)
				r.em.MessageBlock(r.reply.ID, presenters.RoleAssistant, presenters.Block{Type: presenters.BlockReasoning, Text: s})
			},
		})
		if res.usage != nil {
			r.addUsage(*res.usage)
		}
		if ctx.Err() != nil {
			return presenters.StopCancelled, presenters.MessageCancelled, nil
		}
		if err != nil {
			var pe *providerError
			if !errors.As(err, &pe) {
				pe = &providerError{code: "agent_error", detail: err,
					message: "the request to the provider failed; check the server log"}
			}
			r.log.Warn("provider call failed", "code", pe.code, "err", pe.logDetail())
			return presenters.StopError, presenters.MessageError,
				&presenters.ErrorPayload{Code: pe.code, Message: pe.message, MessageID: r.reply.ID, Retryable: pe.retryable}
		}
		if len(res.toolCalls) == 0 {
			steered := r.takeSteered(true)
			if len(steered) == 0 {
				return stopReason(res.finishReason), presenters.MessageComplete, nil
			}
			// Messages steered in while the model answered: it answers them too.
			if roundText.Len() > 0 {
				msgs = append(msgs, chatMessage{Role: "assistant", Content: roundText.String()})
			}
			msgs = append(msgs, chatHistory(steered, "")...)
			continue
		}
		for i := range res.toolCalls {
			if res.toolCalls[i].ID == "" {
				res.toolCalls[i].ID = "call_" + newID()
			}
			if res.toolCalls[i].Function.Arguments == "" {
				res.toolCalls[i].Function.Arguments = "{}"
			}
		}
		assistant := chatMessage{Role: "assistant", ToolCalls: res.toolCalls}
		if roundText.Len() > 0 {
			assistant.Content = roundText.String()
		}
		msgs = append(msgs, assistant)
		for _, call := range res.toolCalls {
			out := r.runTool(ctx, call)
			if ctx.Err() != nil {
				return presenters.StopCancelled, presenters.MessageCancelled, nil
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: call.ID, Content: out})
		}
		msgs = append(msgs, chatHistory(r.takeSteered(false), "")...)
		if round >= r.p.cfg.MaxToolRounds {
			b := presenters.Block{Type: presenters.BlockAction, Action: &presenters.ActionBlock{ActionType: "max_tool_rounds",
				Description: fmt.Sprintf("Stopped after %d rounds of tool calls (max_tool_rounds); send a message to let the agent continue.", round)}}
			r.addBlock(b)
			r.em.MessageBlock(r.reply.ID, presenters.RoleAssistant, b)
			return presenters.StopMaxTurnRequests, presenters.MessageComplete, nil
		}
	}
}

// currentModel is the session's model now: SetModel applies from the next provider call.
func (r *turnRun) currentModel() string {
	r.s.mu.Lock()
	model := r.s.conv.ModelID
	r.s.mu.Unlock()
	if !r.p.modelOffered(model) {
		return r.p.defaultModel // the config changed since the session chose it
	}
	return model
}

func stopReason(finish string) presenters.StopReason {
	switch finish {
	case "length":
		return presenters.StopMaxTokens
	case "content_filter":
		return presenters.StopRefusal
	}
	return presenters.StopEndTurn
}

func (r *turnRun) addUsage(u presenters.TokenUsage) {
	if r.usage == nil {
		r.usage = &presenters.TokenUsage{}
	}
	*r.usage = r.usage.Add(u)
}

// appendText adds streamed text to the trailing block of its type, opening one if the
// trailing block is of another type.
func (r *turnRun) appendText(typ presenters.BlockType, s string) {
	if r.open == nil || r.openType != typ {
		r.closeOpen()
		r.open, r.openType = &strings.Builder{}, typ
	}
	r.open.WriteString(s)
	r.unsaved += len(s)
	if r.unsaved >= checkpointBytes || r.p.now().Sub(r.lastSave) >= checkpointInterval {
		r.checkpoint()
	}
}

func (r *turnRun) closeOpen() {
	if r.open != nil {
		r.reply.Blocks = append(r.reply.Blocks, presenters.Block{Type: r.openType, Text: r.open.String()})
		r.open, r.openType = nil, ""
	}
}

// addBlock appends a block after any open text and returns its index.
func (r *turnRun) addBlock(b presenters.Block) int {
	r.closeOpen()
	r.reply.Blocks = append(r.reply.Blocks, b)
	return len(r.reply.Blocks) - 1
}

// snapshot is the reply as it stands, the open text block included.
func (r *turnRun) snapshot() presenters.Message {
	m := r.reply
	m.Blocks = make([]presenters.Block, len(r.reply.Blocks), len(r.reply.Blocks)+1)
	copy(m.Blocks, r.reply.Blocks)
	if r.open != nil {
		m.Blocks = append(m.Blocks, presenters.Block{Type: r.openType, Text: r.open.String()})
	}
	return m
}

// checkpoint queues the partial reply, still marked in progress, for the transcript
// writer; the turn goes on without waiting for it. A newer checkpoint, or the final
// reply, replaces one not written yet.
func (r *turnRun) checkpoint() {
	m := r.snapshot()
	m.Status = store.StatusInProgress
	r.lastSave, r.unsaved = r.p.now(), 0
	r.p.transcript.SaveMessages(m)
}

// finish stores the reply, then ends the turn: MESSAGE_END, the usage update and the
// status change are published after the reply is stored and before the session takes a
// new turn. Through a database outage the reply's write is tried again until it lands,
// so that what is stored is what the stream showed, and the turn's end waits for it;
// the session stays busy meanwhile. The session's row (its usage, its time, and a close
// CloseSession asked for meanwhile) is written after it. When that stored a close, or
// another replica took the session over (the close is then this replica's alone), the
// session is unregistered and SESSION_CLOSED sent.
func (r *turnRun) finish(ctx context.Context, stop presenters.StopReason, status presenters.MessageStatus, failure *presenters.ErrorPayload) {
	if failure != nil {
		r.em.Error(*failure)
		b := presenters.Block{Type: presenters.BlockError, Error: &presenters.ErrorBlock{Message: failure.Message, Code: failure.Code}}
		r.addBlock(b)
		r.em.MessageBlock(r.reply.ID, presenters.RoleAssistant, b)
	}
	if stop == presenters.StopCancelled {
		r.log.Info("turn cancelled", "cause", context.Cause(ctx))
	}
	m := r.snapshot()
	m.Status, m.StopReason, m.Usage = status, stop, r.usage
	for i, b := range m.Blocks {
		if b.Type == presenters.BlockTool && !b.Tool.Status.Finished() {
			tc := *b.Tool
			tc.Status = presenters.ToolCancelled
			m.Blocks[i].Tool = &tc
		}
	}
	saved := <-r.p.transcript.SaveUpdateWait(store.MessageUpdate{Message: m})

	s := r.s
	s.mu.Lock()
	conv := s.conv
	conv.UpdatedAt = time.Now()
	conv.Closed = s.closed
	if r.usage != nil {
		conv.Usage = conv.Usage.Add(*r.usage)
	}
	switch {
	case errors.Is(saved, store.ErrFenced):
		// Another replica took the session over: it ends and stores the reply itself,
		// and a close asked for meanwhile (this replica letting go) closes the session
		// here only, as storeClose does.
	case saved != nil:
		r.log.Error("could not save the reply", "err", saved)
		r.em.Error(presenters.ErrorPayload{Code: "storage_failed", MessageID: m.ID,
			Message: "the reply could not be saved to the history database; check the data directory's disk space and permissions"})
		conv.Closed = false
	default:
		commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCommitTimeout)
		if err := r.p.deps.Store.UpdateConversation(commitCtx, conv); err != nil && !errors.Is(err, store.ErrFenced) {
			r.log.Warn("the reply is saved, but not the session's usage and time, nor a close asked for during the turn", "err", err)
			conv.Closed = false
		}
		cancel()
	}
	s.closed = conv.Closed // a close that was not stored did not happen
	s.conv = conv
	closed := conv.Closed
	s.turn = nil
	newStatus, reason := presenters.SessionIdle, ""
	if failure != nil {
		s.lastError = failure.Message
		newStatus, reason = presenters.SessionError, failure.Message
	}
	r.em.MessageEnd(presenters.MessageEndPayload{MessageID: m.ID, StopReason: stop, Usage: r.usage, Role: presenters.RoleAssistant})
	updated := s.conv.UpdatedAt
	patch := presenters.SessionPatch{UpdatedAt: &updated}
	if r.usage != nil {
		usage := s.conv.Usage
		patch.Usage = &usage
	}
	r.em.SessionUpdated(patch)
	r.em.StatusChanged(newStatus, reason)
	if closed {
		r.p.unregister(conv.ID)
		r.em.SessionClosed("closed by client")
	}
	s.mu.Unlock()
	close(r.t.done)
}

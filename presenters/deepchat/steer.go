package deepchat

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

var _ presenters.Steerer = (*Presenter)(nil)

// Steer delivers a message into the running turn: it is stored and echoed at once, and
// the turn hands it to the model before its next call (turnRun.takeSteered), also when
// the model had meant to stop. A turn past its last model call takes none
// (ErrMessageNotRunning): the service then queues the message.
func (p *Presenter) Steer(ctx context.Context, sessionID string, content presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	if err := presenters.CheckSend(content, opts); err != nil {
		return presenters.SendResult{}, err
	}
	s := p.registered(sessionID)
	if s == nil {
		return presenters.SendResult{}, fmt.Errorf("no turn runs in session %s: %w", sessionID, presenters.ErrMessageNotRunning)
	}
	_, blocks, err := p.userBlocksOf(s, sessionID, content)
	if err != nil {
		return presenters.SendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.turn
	if s.closed || t == nil || t.steerClosed {
		return presenters.SendResult{}, fmt.Errorf("no turn runs in session %s that could take the message: %w", sessionID, presenters.ErrMessageNotRunning)
	}
	if err := p.deps.Store.CheckMessageIDsFree(ctx, sessionID, opts.UserMessageID); err != nil {
		return presenters.SendResult{}, err
	}
	user := presenters.Message{ID: cmp.Or(opts.UserMessageID, newID()), SessionID: sessionID, Role: presenters.RoleUser,
		Status: presenters.MessageComplete, Blocks: blocks, CreatedAt: time.Now()}
	if err := p.deps.Store.SaveMessage(ctx, user); err != nil {
		return presenters.SendResult{}, err
	}
	t.steered = append(t.steered, user)
	em := p.emitter(sessionID)
	replayMessage(em, user)
	em.MessageSteered(t.messageID, user.ID)
	return presenters.SendResult{MessageID: t.messageID, UserMessageID: user.ID}, nil
}

// takeSteered returns the messages steered in since the last call. With last (the model
// is done), a turn that got none takes no more: a later Steer is queued instead of
// landing in a turn that will not read it.
func (r *turnRun) takeSteered(last bool) []presenters.Message {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	steered := r.t.steered
	r.t.steered = nil
	if last && len(steered) == 0 {
		r.t.steerClosed = true
	}
	return steered
}

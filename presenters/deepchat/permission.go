package deepchat

import (
	"context"
	"fmt"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Permission option ids.
const (
	OptionAllowOnce   = "allow_once"
	OptionAllowAlways = "allow_always"
	OptionRejectOnce  = "reject_once"
)

// pendingPermission is a request waiting for its first answer.
type pendingPermission struct {
	req presenters.PermissionRequest
	// answer receives the chosen option once; RespondPermission sends it while holding
	// session.mu and removing the request, so it never blocks and only the first wins.
	answer chan presenters.PermissionOption
}

// rememberKey is what an allow-always answer holds for: the tool and, for commands,
// the command's signature.
func rememberKey(tool string, cmd *presenters.CommandInfo) string {
	if cmd == nil {
		return tool
	}
	return tool + "\x00" + cmd.Signature
}

func permissionOptions(rememberable bool) []presenters.PermissionOption {
	opts := []presenters.PermissionOption{{ID: OptionAllowOnce, Name: "Allow once", Kind: presenters.AllowOnce}}
	if rememberable {
		opts = append(opts, presenters.PermissionOption{ID: OptionAllowAlways, Name: "Always allow in this session", Kind: presenters.AllowAlways})
	}
	return append(opts, presenters.PermissionOption{ID: OptionRejectOnce, Name: "Reject", Kind: presenters.RejectOnce})
}

// authorize applies the session's mode (presenters.PermissionMode.Decide, the policy
// ACP agents' policy_mode uses too; a tool marked alwaysAsk asks in every mode) and
// remembered answers, and asks when they require it: TOOL_PERMISSION_REQUIRED, status
// paused, then the first answer, the turn's cancellation or the permission timeout
// decides. It returns whether the call may run and, if not, why.
func (r *turnRun) authorize(ctx context.Context, tc presenters.ToolCall, spec *toolSpec, plan toolPlan) (bool, string) {
	level := presenters.RiskMedium
	if spec.risk != "" {
		level = spec.risk
	}
	if plan.command != nil {
		level = plan.command.RiskLevel
	}
	key := rememberKey(tc.ToolName, plan.command)
	s := r.s
	s.mu.Lock()
	if verdict, _ := presenters.PermissionMode(s.conv.ModeID).Decide(spec.permission, plan.command); verdict == presenters.VerdictAllow && !spec.alwaysAsk {
		s.mu.Unlock()
		return true, ""
	}
	if allowed, ok := s.remembered[key]; ok && level.Rank() <= allowed.Rank() {
		s.mu.Unlock()
		return true, ""
	}
	rememberable := level != presenters.RiskCritical
	req := presenters.PermissionRequest{
		RequestID: newID(), ToolID: tc.ToolID, ToolName: tc.ToolName, PermissionType: spec.permission,
		Description: plan.description, CommandInfo: plan.command, Paths: plan.paths,
		Options: permissionOptions(rememberable), Rememberable: rememberable, Arguments: tc.Arguments, ServerName: spec.server,
		MessageID: r.reply.ID, RequestedAt: time.Now(), Diffs: plan.diffs,
	}
	pending := &pendingPermission{req: req, answer: make(chan presenters.PermissionOption, 1)}
	r.t.pending[req.RequestID] = pending
	r.t.pendingOrder = append(r.t.pendingOrder, req.RequestID)
	r.em.StatusChanged(presenters.SessionPaused, "waiting for permission to "+plan.description)
	r.em.PermissionRequired(req)
	s.mu.Unlock()

	timeout := r.p.cfg.PermissionTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var choice presenters.PermissionOption
	answered := false
	select {
	case choice = <-pending.answer:
		answered = true
	case <-ctx.Done():
	case <-timer.C:
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if !answered {
		if _, open := r.t.pending[req.RequestID]; !open {
			choice, answered = <-pending.answer, true // answered while we gave up
		}
	}
	r.t.removePending(req.RequestID)
	decision := presenters.PermissionDecision{RequestID: req.RequestID, ToolID: tc.ToolID}
	allowed, why := false, ""
	switch {
	case answered:
		decision.OptionID, decision.DecidedBy = choice.ID, presenters.DecidedByUser
		allowed = choice.Kind.Allows()
		why = "rejected by the user"
		if choice.Kind == presenters.AllowAlways {
			if s.remembered == nil {
				s.remembered = make(map[string]presenters.RiskLevel)
			}
			s.remembered[key] = level
		}
	case ctx.Err() != nil:
		decision.DecidedBy, why = presenters.DecidedByCancelled, "the turn was cancelled"
	default:
		decision.DecidedBy, why = presenters.DecidedByCancelled, fmt.Sprintf("no answer within %s", timeout)
	}
	outcome := "Allowed"
	if allowed {
		r.em.PermissionGranted(decision)
	} else {
		decision.Reason = why
		r.em.PermissionDenied(decision)
		outcome = "Denied (" + why + ")"
	}
	b := presenters.Block{Type: presenters.BlockAction, Action: &presenters.ActionBlock{
		ActionType: "permission_request", Description: outcome + ": " + plan.description, Permission: &req}}
	r.addBlock(b)
	r.em.MessageBlock(r.reply.ID, presenters.RoleAssistant, b)
	if len(r.t.pending) == 0 && ctx.Err() == nil {
		r.em.StatusChanged(presenters.SessionGenerating, "")
	}
	return allowed, why
}

// RespondPermission answers a pending request with one of its options. The first
// answer wins; later ones, and unknown requests, are ErrNotFound.
func (p *Presenter) RespondPermission(ctx context.Context, sessionID string, resp presenters.PermissionResponse) error {
	p.mu.Lock()
	s := p.sessions[sessionID]
	p.mu.Unlock()
	notPending := fmt.Errorf("permission request %q is not pending in session %s (already answered, timed out, or unknown): %w",
		resp.RequestID, sessionID, presenters.ErrNotFound)
	if s == nil {
		if _, err := p.conversation(ctx, sessionID); err != nil {
			return err
		}
		return notPending
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == nil {
		return notPending
	}
	pending := s.turn.pending[resp.RequestID]
	if pending == nil {
		return notPending
	}
	choice, ok := pending.req.Option(resp.OptionID)
	if !ok {
		ids := ""
		for i, o := range pending.req.Options {
			if i > 0 {
				ids += ", "
			}
			ids += o.ID
		}
		return fmt.Errorf("option %q is not an option of permission request %s; choose one of: %s: %w", resp.OptionID, resp.RequestID, ids, presenters.ErrInvalidArgument)
	}
	s.turn.removePending(resp.RequestID)
	pending.answer <- choice
	return nil
}

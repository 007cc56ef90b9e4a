package acp

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// pendingPermission is a request waiting for an answer; answer gets exactly one
// option id ("" for cancelled) from whichever decision came first.
type pendingPermission = question[presenters.PermissionRequest, string]

// decision is a server-side answer to a permission request.
type decision struct {
	optionID string // "" answers cancelled
	by       presenters.PermissionDecider
	reason   string
}

// requestPermission serves session/request_permission: the tool call is merged into
// the turn (it may arrive before its tool_call), the server's policy may answer, else
// subscribers are asked and the first RespondPermission, the timeout or a cancel
// answers.
func (s *session) requestPermission(ctx context.Context, req sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
	s.mu.Lock()
	call, inTurn := s.norm.tool(req.ToolCall, s.emitPayload)
	if !inTurn {
		scratch := normalizer{log: s.log, sessionID: s.id, workspace: s.norm.workspace, classifier: s.norm.classifier}
		scratch.merge(&call, req.ToolCall)
		call.ToolID = string(req.ToolCall.ToolCallId)
	}
	pr := presenters.PermissionRequest{
		RequestID:      s.p.newID(),
		ToolID:         call.ToolID,
		ToolName:       call.ToolName,
		PermissionType: permissionType(call.Kind),
		Description:    call.Title,
		CommandInfo:    requestCommand(call),
		Arguments:      call.Arguments,
		RequestedAt:    time.Now(),
		Diffs:          requestDiffs(call),
	}
	paths, pathsErr := targetPaths(call)
	pr.Paths = paths
	pr.Options = offeredOptions(req.Options)
	if s.phase.turnInFlight() {
		pr.MessageID = s.turn.assistantID
	}
	// Without a running turn nobody can be asked and nothing may be allowed, whatever
	// the policy would say.
	if !s.turnRunningLocked() {
		s.emitDecisionLocked(pr, "", presenters.DecidedByCancelled, "no turn is running to ask for")
		s.mu.Unlock()
		return permissionResponse("")
	}
	ws := s.workspaceLocked()
	s.mu.Unlock()

	// The policy reads the file system (symlinks): not under s.mu.
	d, decided := s.policy(pr, call, ws, pathsErr)

	s.mu.Lock()
	if !s.turnRunningLocked() {
		// The turn ended while the policy looked: an allow would outlive it.
		d, decided = decision{by: presenters.DecidedByCancelled, reason: "no turn is running to ask for"}, true
	}
	if decided {
		s.emitDecisionLocked(pr, d.optionID, d.by, d.reason)
		s.mu.Unlock()
		return permissionResponse(d.optionID)
	}
	pp := s.permissions.ask(pr)
	s.emit.PermissionRequired(pr)
	if s.info.Status == presenters.SessionGenerating {
		s.setStatus(presenters.SessionPaused, "waiting for a permission answer")
	}
	s.mu.Unlock()

	option := awaitAnswer(ctx, pp.answer, s.p.cfg.PermissionTimeout, func(reason string) {
		s.resolve(pp, "", presenters.DecidedByCancelled, reason)
	})
	return permissionResponse(option)
}

// awaitAnswer waits for the answer to a question a person was asked (a permission, an
// elicitation): the first one sent on answer. When the agent withdraws the question
// (ctx ends) or nobody answers within timeout, cancel resolves it with the reason, and
// the answer that sends is returned.
func awaitAnswer[T any](ctx context.Context, answer <-chan T, timeout time.Duration, cancel func(reason string)) T {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-answer:
		return a
	case <-ctx.Done():
		cancel("the agent withdrew the request")
	case <-timer.C:
		cancel(fmt.Sprintf("nobody answered within %s", timeout))
	}
	return <-answer
}

// turnRunningLocked reports whether a prompt runs that a permission request can
// belong to: one not cancelled (s.mu held).
func (s *session) turnRunningLocked() bool {
	return s.phase == phasePrompting
}

// workspaceLocked is the workspace (with the additional directories) the policy checks
// paths against; nil (not a typed
// nil) while the session has none open (s.mu held).
func (s *session) workspaceLocked() workspaceResolver {
	if s.ws == nil {
		return nil
	}
	if len(s.extra) > 0 {
		return sessionDirs{ws: s.ws, extra: s.extra}
	}
	return s.ws
}

// offeredOptions are the agent's options minus allow_always. An agent remembers
// allow_always for the whole tool class and stops asking, and its request is the only
// moment this server sees an agent-run tool's target: the workspace check would never
// run again. Clients are therefore offered allow_once and the reject options only.
func offeredOptions(agentOptions []sdk.PermissionOption) []presenters.PermissionOption {
	out := make([]presenters.PermissionOption, 0, len(agentOptions))
	for _, o := range agentOptions {
		if o.Kind == sdk.PermissionOptionKindAllowAlways {
			continue
		}
		out = append(out, presenters.PermissionOption{ID: string(o.OptionId), Name: o.Name, Kind: presenters.PermissionOptionKind(o.Kind)})
	}
	return out
}

func permissionResponse(optionID string) sdk.RequestPermissionResponse {
	if optionID == "" {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(optionID))}
}

// respondPermission answers a pending request with one of its options; the first
// answer wins.
func (s *session) respondPermission(resp presenters.PermissionResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pp := s.permissions.lookup(resp.RequestID)
	if pp == nil {
		return fmt.Errorf("permission request %s is not pending in session %s: it was already answered, timed out or never existed: %w",
			resp.RequestID, s.id, presenters.ErrNotFound)
	}
	if _, ok := pp.req.Option(resp.OptionID); !ok {
		return fmt.Errorf("option %q is not one of the request's options (%s): %w", resp.OptionID,
			idList(idsOf(pp.req.Options, func(o presenters.PermissionOption) string { return o.ID })), presenters.ErrInvalidArgument)
	}
	s.resolveLocked(pp, resp.OptionID, presenters.DecidedByUser, "")
	return nil
}

func (s *session) resolve(pp *pendingPermission, optionID string, by presenters.PermissionDecider, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolveLocked(pp, optionID, by, reason)
}

// resolveLocked answers pp unless it was answered already (s.mu held).
func (s *session) resolveLocked(pp *pendingPermission, optionID string, by presenters.PermissionDecider, reason string) {
	if !s.permissions.take(pp) {
		return
	}
	s.emitDecisionLocked(pp.req, optionID, by, reason)
	pp.answer <- optionID
	s.resumeIfAnsweredLocked()
}

// cancelPendingLocked answers every pending request, permissions and elicitations,
// cancelled (s.mu held).
func (s *session) cancelPendingLocked(reason string) {
	for _, pp := range s.permissions.waiting() {
		s.resolveLocked(pp, "", presenters.DecidedByCancelled, reason)
	}
	s.cancelElicitationsLocked(reason)
}

// emitDecisionLocked tells every subscriber how a request was decided (s.mu held). A
// granted tool call is remembered with the workspace, so that paths a later update
// names are checked too.
func (s *session) emitDecisionLocked(req presenters.PermissionRequest, optionID string, by presenters.PermissionDecider, reason string) {
	d := presenters.PermissionDecision{RequestID: req.RequestID, ToolID: req.ToolID, OptionID: optionID, DecidedBy: by, Reason: reason}
	if o, ok := req.Option(optionID); ok && o.Kind.Allows() {
		s.emit.PermissionGranted(d)
		if ws := s.workspaceLocked(); ws != nil {
			s.norm.granted(req.ToolID, req.Paths, ws, s.emitPayload)
		}
		return
	}
	if by != presenters.DecidedByCancelled {
		s.norm.denied(req.ToolID, reason)
	}
	s.emit.PermissionDenied(d)
}

// policy is the server's own answer, before anyone is asked. Agents that run their
// own Write/Edit/Bash tools never call fs/* or terminal/*: this is the only moment the
// server sees such an operation, so a target outside the workspace is refused here,
// whatever the policy mode. Without a workspace (a session still loading) or with a
// raw input too large to read, nothing can be checked: refused as well. Then the
// agent's policy_mode (presenters.PermissionMode.Decide) may allow the call by
// answering the agent's allow-once option; whatever it does not allow is asked.
func (s *session) policy(pr presenters.PermissionRequest, call presenters.ToolCall, ws workspaceResolver, pathsErr error) (decision, bool) {
	reject := func(reason string) (decision, bool) {
		return decision{optionID: optionOfKinds(pr, presenters.RejectOnce, presenters.RejectAlways), by: presenters.DecidedByPolicy, reason: reason}, true
	}
	if ws == nil {
		return reject("the session has no open workspace to check the tool call's paths against; load the session, then retry")
	}
	if pathsErr != nil {
		return reject(pathsErr.Error())
	}
	if reason := outsideReason(ws, pr.Paths); reason != "" {
		return reject(reason)
	}
	mode := presenters.PermissionMode(s.p.cfg.PolicyMode)
	verdict, rule := mode.Decide(pr.PermissionType, call.CommandInfo)
	if verdict != presenters.VerdictAllow {
		return decision{}, false
	}
	// An agent that offers no allow-once option leaves the choice among its own
	// options to a person.
	id := optionOfKinds(pr, presenters.AllowOnce)
	if id == "" {
		return decision{}, false
	}
	return decision{optionID: id, by: presenters.DecidedByPolicy, reason: "allowed by policy_mode " + string(mode) + ": " + rule}, true
}

// workspaceResolver is the part of sandbox.Workspace the policy needs.
type workspaceResolver interface {
	Resolve(path string) (string, error)
	Root() string
}

// optionOfKinds returns the id of the first offered option of the first kind that is
// offered ("" when none: the answer is then cancelled, which also refuses).
func optionOfKinds(pr presenters.PermissionRequest, kinds ...presenters.PermissionOptionKind) string {
	for _, k := range kinds {
		if o, ok := pr.OptionOfKind(k); ok {
			return o.ID
		}
	}
	return ""
}

func permissionType(k presenters.ToolKind) presenters.PermissionType {
	switch k {
	case presenters.ToolRead, presenters.ToolSearch:
		return presenters.PermissionRead
	case presenters.ToolEdit, presenters.ToolDelete, presenters.ToolMove:
		return presenters.PermissionWrite
	case presenters.ToolExecute:
		return presenters.PermissionCommand
	}
	return presenters.PermissionAll
}

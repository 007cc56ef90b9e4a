package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// Elicitations (ACP's unstable elicitation/create and elicitation/complete): the agent
// asks the user for input, a form or a URL to open. They flow like permission requests:
// ELICITATION_REQUIRED to every subscriber, the first RespondElicitation, the agent's
// completion of a URL elicitation, the timeout or a cancel resolves it, and
// ELICITATION_RESOLVED tells everyone how.
//
// The request names its session at the top level of its params (sessionId, toolCallId),
// but the SDK's request types (v0.13.5) have no field for them and drop them. The
// agentReader therefore copies them into the request's _meta under scopeMetaKey before
// the SDK decodes it (withElicitationScope).

// scopeMetaKey is where withElicitationScope puts an elicitation's scope.
const scopeMetaKey = "agenticd/elicitationScope"

// elicitationScope is the session (and tool call) an elicitation belongs to.
type elicitationScope struct {
	SessionID  string `json:"sessionId,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
}

// withElicitationScope returns an elicitation/create request line with its sessionId and
// toolCallId copied into params._meta[scopeMetaKey] (replacing whatever the agent put
// there), and any other line as it is.
func withElicitationScope(line []byte) []byte {
	if !bytes.Contains(line, []byte(sdk.ClientMethodElicitationCreate)) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method != sdk.ClientMethodElicitationCreate {
		return line
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return line
	}
	var scope elicitationScope
	_ = json.Unmarshal(params["sessionId"], &scope.SessionID)
	_ = json.Unmarshal(params["toolCallId"], &scope.ToolCallID)
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(params["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[scopeMetaKey], _ = json.Marshal(scope)
	params["_meta"], _ = json.Marshal(meta)
	msg["params"], _ = json.Marshal(params)
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return append(out, '\n')
}

// scopeOf reads the scope withElicitationScope left in a request's _meta.
func scopeOf(meta map[string]any) elicitationScope {
	m, _ := meta[scopeMetaKey].(map[string]any)
	var s elicitationScope
	s.SessionID, _ = m["sessionId"].(string)
	s.ToolCallID, _ = m["toolCallId"].(string)
	return s
}

// pendingElicitation waits for its one resolution.
type pendingElicitation = question[presenters.ElicitationRequest, presenters.ElicitationResolvedPayload]

func (h *client) UnstableCreateElicitation(ctx context.Context, req sdk.UnstableCreateElicitationRequest) (_ sdk.UnstableCreateElicitationResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodElicitationCreate, &err)
	var (
		er      presenters.ElicitationRequest
		meta    map[string]any
		agentID string
	)
	switch {
	case req.Form != nil:
		er = presenters.ElicitationRequest{Mode: presenters.ElicitationForm, Message: req.Form.Message, RequestedSchema: schemaMap(req.Form.RequestedSchema)}
		meta = req.Form.Meta
	case req.Url != nil:
		er = presenters.ElicitationRequest{Mode: presenters.ElicitationURL, Message: req.Url.Message, URL: req.Url.Url}
		meta, agentID = req.Url.Meta, string(req.Url.ElicitationId)
	}
	scope := scopeOf(meta)
	s := h.c.session(sdk.SessionId(scope.SessionID))
	if s == nil {
		// A request-scoped elicitation (before any session) or an unknown session: no
		// client can be asked.
		h.c.log.Warn("elicitation for no known session answered cancel", "acp_session_id", scope.SessionID)
		return elicitationResponse(presenters.ElicitationCancel, nil), nil
	}
	er.ToolID = scope.ToolCallID
	return s.elicit(ctx, er, agentID), nil
}

func (h *client) UnstableCompleteElicitation(_ context.Context, n sdk.UnstableCompleteElicitationNotification) (err error) {
	defer h.recoverPanic(sdk.ClientMethodElicitationComplete, &err)
	for _, s := range h.c.liveSessions() {
		if s.completeElicitation(string(n.ElicitationId)) {
			return nil
		}
	}
	h.c.log.Info("elicitation/complete for no pending elicitation (answered already, or unknown)", "elicitation_id", n.ElicitationId)
	return nil
}

// schemaMap is the requested schema as decoded JSON.
func schemaMap(schema sdk.UnstableElicitationSchema) map[string]any {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func elicitationResponse(action presenters.ElicitationAction, content map[string]any) sdk.UnstableCreateElicitationResponse {
	switch action {
	case presenters.ElicitationAccept:
		return sdk.UnstableCreateElicitationResponse{Accept: &sdk.UnstableCreateElicitationAccept{Action: "accept", Content: content}}
	case presenters.ElicitationDecline:
		return sdk.UnstableCreateElicitationResponse{Decline: &sdk.UnstableCreateElicitationDecline{Action: "decline"}}
	}
	return sdk.UnstableCreateElicitationResponse{Cancel: &sdk.UnstableCreateElicitationCancel{Action: "cancel"}}
}

// elicit publishes the request and waits for its resolution: a RespondElicitation, the
// agent's completion (url mode), the timeout, the agent withdrawing it, or a cancel of
// the turn or session.
func (s *session) elicit(ctx context.Context, req presenters.ElicitationRequest, agentID string) sdk.UnstableCreateElicitationResponse {
	s.mu.Lock()
	req.ElicitationID = s.p.newID()
	req.RequestedAt = time.Now()
	if s.phase.turnRuns() {
		req.MessageID = s.turn.assistantID
	}
	if !s.phase.bound() || s.phase == phaseCancelling {
		s.mu.Unlock()
		return elicitationResponse(presenters.ElicitationCancel, nil)
	}
	pe := s.elicitations.ask(req)
	if agentID != "" {
		if s.urlElicitations == nil {
			s.urlElicitations = map[string]string{}
		}
		s.urlElicitations[req.ElicitationID] = agentID
	}
	s.emit.ElicitationRequired(req)
	if s.info.Status == presenters.SessionGenerating {
		s.setStatus(presenters.SessionPaused, "waiting for an elicitation answer")
	}
	s.mu.Unlock()

	res := awaitAnswer(ctx, pe.answer, s.p.cfg.PermissionTimeout, func(reason string) {
		s.resolveElicitation(pe, presenters.ElicitationCancel, nil, presenters.ElicitationByCancelled, reason)
	})
	return elicitationResponse(res.Action, res.Content)
}

// respondElicitation answers a pending elicitation; the first answer wins. The content
// was checked against the request's schema by the caller.
func (s *session) respondElicitation(resp presenters.ElicitationResponse) error {
	switch resp.Action {
	case presenters.ElicitationAccept, presenters.ElicitationDecline, presenters.ElicitationCancel:
	default:
		return fmt.Errorf("action %q is not accept, decline or cancel: %w", resp.Action, presenters.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pe := s.elicitations.lookup(resp.ElicitationID)
	if pe == nil {
		return fmt.Errorf("elicitation %s is not pending in session %s: it was already answered, timed out or never existed: %w",
			resp.ElicitationID, s.id, presenters.ErrNotFound)
	}
	content := resp.Content
	if resp.Action != presenters.ElicitationAccept {
		content = nil
	}
	s.resolveElicitationLocked(pe, resp.Action, content, presenters.ElicitationByUser, "")
	return nil
}

// completeElicitation resolves the url elicitation the agent reported complete, and
// reports whether it was pending here.
func (s *session) completeElicitation(agentID string) bool {
	if agentID == "" {
		return false // a form elicitation has no id of the agent's
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pe := range s.elicitations.waiting() {
		if s.urlElicitations[pe.req.ElicitationID] == agentID {
			s.resolveElicitationLocked(pe, presenters.ElicitationAccept, nil, presenters.ElicitationByAgent, "the agent reported the URL step complete")
			return true
		}
	}
	return false
}

func (s *session) resolveElicitation(pe *pendingElicitation, action presenters.ElicitationAction, content map[string]any, by presenters.ElicitationDecider, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolveElicitationLocked(pe, action, content, by, reason)
}

// resolveElicitationLocked resolves pe unless it was resolved already (s.mu held).
func (s *session) resolveElicitationLocked(pe *pendingElicitation, action presenters.ElicitationAction, content map[string]any, by presenters.ElicitationDecider, reason string) {
	if !s.elicitations.take(pe) {
		return
	}
	id := pe.req.ElicitationID
	delete(s.urlElicitations, id)
	res := presenters.ElicitationResolvedPayload{ElicitationID: id, ToolID: pe.req.ToolID, Action: action, Content: content, DecidedBy: by, Reason: reason}
	s.emit.ElicitationResolved(res)
	pe.answer <- res
	s.resumeIfAnsweredLocked()
}

// cancelElicitationsLocked resolves every pending elicitation cancelled (s.mu held).
func (s *session) cancelElicitationsLocked(reason string) {
	for _, pe := range s.elicitations.waiting() {
		s.resolveElicitationLocked(pe, presenters.ElicitationCancel, nil, presenters.ElicitationByCancelled, reason)
	}
}

// resumeIfAnsweredLocked returns a paused session to generating once nothing waits for
// an answer any more (s.mu held).
func (s *session) resumeIfAnsweredLocked() {
	if s.permissions.len() == 0 && s.elicitations.len() == 0 && s.info.Status == presenters.SessionPaused {
		s.setStatus(presenters.SessionGenerating, "")
	}
}

// RespondElicitation answers a pending elicitation of a session. ErrNotFound when it is
// not pending (resolved already, or unknown).
func (p *Presenter) RespondElicitation(ctx context.Context, sessionID string, resp presenters.ElicitationResponse) error {
	s, err := p.session(ctx, sessionID)
	if err != nil {
		return err
	}
	return s.respondElicitation(resp)
}

package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

// Elicitations: an agent asks the user for input (a form, or a URL to open). They flow as
// permission requests do: ELICITATION_REQUIRED, the first RespondElicitation (or the
// agent, a timeout, a cancel) resolves it, ELICITATION_RESOLVED. The projection keeps
// the pending ones for GetSession and remembers resolutions for a while, so that a
// repeated answer gets the resolution again.

// elicitationResponder is what RespondElicitation needs of a presenter; presenters whose
// agents never ask (DeepChat) do not implement it, and have nothing pending.
type elicitationResponder interface {
	RespondElicitation(ctx context.Context, sessionID string, resp presenters.ElicitationResponse) error
}

// removeElicitation drops a pending elicitation.
func (st *sessionState) removeElicitation(id string) {
	st.elicitations = slices.DeleteFunc(st.elicitations, func(r presenters.ElicitationRequest) bool { return r.ElicitationID == id })
	if len(st.elicitations) == 0 {
		st.elicitations = nil
	}
}

// resolved remembers a resolution, for as long and as many as decisions.
func (p *projection) resolved(sessionID string, r presenters.ElicitationResolvedPayload) {
	p.resolutions.remember(decisionKey{sessionID, r.ElicitationID}, r, p.now())
}

// elicitationResolution returns how an elicitation was resolved, if that is remembered.
func (h *Hub) elicitationResolution(sessionID, elicitationID string) (r presenters.ElicitationResolvedPayload, ok bool) {
	h.events.View(func(uint64) { r, ok = h.proj.resolutions.recall(decisionKey{sessionID, elicitationID}, h.proj.now()) })
	return r, ok
}

// pendingElicitation returns a pending elicitation of a session.
func (h *Hub) pendingElicitation(sessionID, elicitationID string) (req presenters.ElicitationRequest, ok bool) {
	h.events.View(func(uint64) {
		if st := h.proj.sessions[sessionID]; st != nil {
			for _, r := range st.elicitations {
				if r.ElicitationID == elicitationID {
					req, ok = r, true
					return
				}
			}
		}
	})
	return req, ok
}

func (s *Service) RespondElicitation(ctx context.Context, req *pb.RespondElicitationRequest) (*pb.RespondElicitationResponse, error) {
	const method = "RespondElicitation"
	id, elicitationID := req.GetSessionId(), req.GetElicitationId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("elicitation_id", elicitationID, "the elicitation_id of an ELICITATION_REQUIRED event or of the session's pending_elicitations"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	action, ok := wire.ElicitationActionFromPB(req.GetAction())
	if !ok {
		return nil, s.fail(ctx, method, invalidField("action", "action must be set: ACCEPT (with the form's content), DECLINE or CANCEL"), "session_id", id)
	}
	var content map[string]any
	if req.GetContent() != nil {
		content = req.GetContent().AsMap()
	}
	if action != presenters.ElicitationAccept && len(content) > 0 {
		return nil, s.fail(ctx, method, invalidField("content", "content goes with ACCEPT only; leave it empty to %s", action), "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	attrs := []any{"session_id", id, "agent_id", p.AgentID()}
	answer := presenters.ElicitationResponse{ElicitationID: elicitationID, Action: action, Content: content}
	// Resolved already: the same answer gets the resolution again, another one is refused.
	if r, ok := s.hub.elicitationResolution(id, elicitationID); ok {
		return s.answeredAgainst(ctx, method, attrs, answer, r)
	}
	pending, err := s.pendingElicitation(ctx, p, id, elicitationID)
	if err != nil {
		return nil, s.fail(ctx, method, elicitationNotPending(elicitationID, err), attrs...)
	}
	if action == presenters.ElicitationAccept {
		if err := checkElicitationContent(pending, content); err != nil {
			return nil, s.fail(ctx, method, err, attrs...)
		}
	}
	responder, ok := p.(elicitationResponder)
	if !ok {
		return nil, s.fail(ctx, method, elicitationNotPending(elicitationID, fmt.Errorf("%w: agent %s never asks for input", presenters.ErrNotFound, p.AgentID())), attrs...)
	}
	noted := s.hub.audit != nil && s.hub.audit.note(ctx, elicitationKey(id, elicitationID))
	if err := responder.RespondElicitation(ctx, id, answer); err != nil {
		if noted {
			s.hub.audit.forget(elicitationKey(id, elicitationID))
		}
		// Another client, the agent or a timeout may have resolved it in between.
		if r, ok := s.hub.elicitationResolution(id, elicitationID); ok && errors.Is(err, presenters.ErrNotFound) {
			return s.answeredAgainst(ctx, method, attrs, answer, r)
		}
		return nil, s.fail(ctx, method, elicitationNotPending(elicitationID, inField("action", err)), attrs...)
	}
	if r, ok := s.hub.elicitationResolution(id, elicitationID); ok {
		return &pb.RespondElicitationResponse{Resolution: wire.ElicitationResolvedToPB(r)}, nil
	}
	if action != presenters.ElicitationAccept {
		content = nil
	}
	return &pb.RespondElicitationResponse{Resolution: wire.ElicitationResolvedToPB(presenters.ElicitationResolvedPayload{
		ElicitationID: elicitationID, ToolID: pending.ToolID, Action: action, Content: content, DecidedBy: presenters.ElicitationByUser,
	})}, nil
}

// answeredAgainst answers a resolved elicitation: OK with the resolution when the answer
// is the one that resolved it (same action, same content), ELICITATION_ALREADY_RESOLVED
// otherwise.
func (s *Service) answeredAgainst(ctx context.Context, method string, attrs []any, a presenters.ElicitationResponse, r presenters.ElicitationResolvedPayload) (*pb.RespondElicitationResponse, error) {
	same := a.Action == r.Action && (a.Action != presenters.ElicitationAccept || len(a.Content) == 0 && len(r.Content) == 0 || reflect.DeepEqual(a.Content, r.Content))
	if same {
		return &pb.RespondElicitationResponse{Resolution: wire.ElicitationResolvedToPB(r)}, nil
	}
	by := wire.ElicitationDeciderToPB(r.DecidedBy)
	err := withReason(pb.ErrorReason_ERROR_REASON_ELICITATION_ALREADY_RESOLVED,
		fmt.Errorf("elicitation %q was already resolved (%s, by %s); answer %s comes too late: %w",
			r.ElicitationID, r.Action, r.DecidedBy, a.Action, presenters.ErrFailedPrecondition),
		"action", wire.ElicitationActionToPB(r.Action).String(), "decided_by", by.String())
	return nil, s.fail(ctx, method, err, attrs...)
}

// pendingElicitation finds a pending elicitation: in the hub's projection, or else in
// what the presenter reports.
func (s *Service) pendingElicitation(ctx context.Context, p presenters.Presenter, sessionID, elicitationID string) (presenters.ElicitationRequest, error) {
	if r, ok := s.hub.pendingElicitation(sessionID, elicitationID); ok {
		return r, nil
	}
	info, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return presenters.ElicitationRequest{}, sessionNotFound(sessionID, err)
	}
	for _, r := range info.PendingElicitations {
		if r.ElicitationID == elicitationID {
			return r, nil
		}
	}
	return presenters.ElicitationRequest{}, fmt.Errorf("%w: elicitation %q is not pending in session %q (never asked, or resolved long enough ago to be forgotten); GetSession lists the pending ones",
		presenters.ErrNotFound, elicitationID, sessionID)
}

// checkElicitationContent checks an ACCEPT's content against what the request asked: none
// for a URL; for a form, the MCP elicitation schema's flat object of primitive
// properties: every required one present, no unknown one, each of its type (string,
// number, integer, boolean, or an array of strings), within its enum, length and range.
func checkElicitationContent(r presenters.ElicitationRequest, content map[string]any) error {
	if r.Mode == presenters.ElicitationURL {
		if len(content) > 0 {
			return invalidField("content", "elicitation %q asks to open a URL, not for content: accept with no content", r.ElicitationID)
		}
		return nil
	}
	props, _ := r.RequestedSchema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	fields := "none"
	if len(names) > 0 {
		fields = strings.Join(names, ", ")
	}
	required, _ := r.RequestedSchema["required"].([]any)
	for _, n := range required {
		name, _ := n.(string)
		if _, ok := content[name]; name != "" && !ok {
			return invalidField("content."+name, "content.%s is required by the form of elicitation %q (its fields: %s)", name, r.ElicitationID, fields)
		}
	}
	keys := make([]string, 0, len(content))
	for k := range content {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		prop, ok := props[k].(map[string]any)
		if !ok {
			return invalidField("content."+k, "the form of elicitation %q has no field %q; its fields: %s", r.ElicitationID, k, fields)
		}
		if msg := checkProperty(prop, content[k]); msg != "" {
			return invalidField("content."+k, "content.%s %s", k, msg)
		}
	}
	return nil
}

// checkProperty says what is wrong with a value for one property schema ("" when
// nothing is).
func checkProperty(prop map[string]any, v any) string {
	typ, _ := prop["type"].(string)
	switch typ {
	case "string":
		s, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		if allowed := enumValues(prop); allowed != nil && !slices.Contains(allowed, s) {
			return fmt.Sprintf("must be one of %s", strings.Join(allowed, ", "))
		}
		n := float64(len([]rune(s)))
		if min, ok := prop["minLength"].(float64); ok && n < min {
			return fmt.Sprintf("must be at least %v characters long", min)
		}
		if max, ok := prop["maxLength"].(float64); ok && n > max {
			return fmt.Sprintf("must be at most %v characters long", max)
		}
	case "number", "integer":
		f, ok := v.(float64)
		if !ok {
			return "must be a " + typ
		}
		if typ == "integer" && f != math.Trunc(f) {
			return "must be an integer"
		}
		if min, ok := prop["minimum"].(float64); ok && f < min {
			return fmt.Sprintf("must be at least %v", min)
		}
		if max, ok := prop["maximum"].(float64); ok && f > max {
			return fmt.Sprintf("must be at most %v", max)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case "array":
		items, ok := v.([]any)
		if !ok {
			return "must be a list of strings"
		}
		itemSchema, _ := prop["items"].(map[string]any)
		allowed := enumValues(itemSchema)
		for _, it := range items {
			s, ok := it.(string)
			if !ok {
				return "must be a list of strings"
			}
			if allowed != nil && !slices.Contains(allowed, s) {
				return fmt.Sprintf("may hold only %s", strings.Join(allowed, ", "))
			}
		}
	}
	return ""
}

// enumValues are the values a string (or an array item) may take: `enum`, or the
// `const` of each `oneOf`/`anyOf` entry (titled enums); nil when any string goes.
func enumValues(schema map[string]any) []string {
	var out []string
	if e, ok := schema["enum"].([]any); ok {
		for _, v := range e {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		entries, ok := schema[key].([]any)
		if !ok {
			continue
		}
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok {
				if s, ok := m["const"].(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}
	return nil
}

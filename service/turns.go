package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

func (s *Service) SendMessage(ctx context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	const method = "SendMessage"
	id := req.GetSessionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	opts := presenters.SendOptions{MessageID: req.GetMessageId(), UserMessageID: req.GetUserMessageId()}
	if err := presenters.CheckSendOptions(opts); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	content, err := contentFromPB(req.GetContent())
	if err != nil {
		return nil, s.fail(ctx, method, inField("content", err), "session_id", id)
	}
	mode, ok := deliveryModes[req.GetDelivery()]
	if !ok {
		return nil, s.fail(ctx, method, invalidField("delivery", "delivery %d is not a DeliveryMode: use QUEUE, STEER or INTERRUPT", req.GetDelivery()), "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	// The user message's id is chosen here, so that its sender is recorded before its
	// turn starts, and its MESSAGE_END, whenever its turn starts, names the sender
	// (auditor.stamp); the note lasts until then.
	if opts.UserMessageID == "" {
		opts.UserMessageID = uuid.Must(uuid.NewV7()).String()
	}
	var sent bool
	if s.hub.audit != nil {
		if key := senderKey(id, opts.UserMessageID); s.hub.audit.note(ctx, key) {
			defer func() {
				if !sent {
					s.hub.audit.forget(key)
				}
			}()
		}
	}
	var d delivery
	if q := s.hub.queue; q != nil {
		d, err = q.deliver(ctx, p, id, content, opts, mode)
	} else {
		var release func()
		if release, err = claimSender(ctx, s.registry.store, s.logger, id, opts.UserMessageID, callerOf(ctx).Name); err == nil {
			d.outcome = outcomeStarted
			if d.res, err = p.SendMessage(ctx, id, content, opts); err != nil {
				release()
			}
		}
	}
	if errors.Is(err, presenters.ErrSessionBusy) {
		err = s.sessionBusy(id, err)
	}
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(id, inField("content", err)), "session_id", id, "agent_id", p.AgentID())
	}
	sent = true
	return &pb.SendMessageResponse{MessageId: d.res.MessageID, UserMessageId: d.res.UserMessageID,
		Outcome: deliveryOutcomes[d.outcome], OutcomeReason: d.reason}, nil
}

var (
	deliveryModes = map[pb.DeliveryMode]deliveryMode{
		pb.DeliveryMode_DELIVERY_MODE_UNSPECIFIED: deliverQueue,
		pb.DeliveryMode_DELIVERY_MODE_QUEUE:       deliverQueue,
		pb.DeliveryMode_DELIVERY_MODE_STEER:       deliverSteer,
		pb.DeliveryMode_DELIVERY_MODE_INTERRUPT:   deliverInterrupt,
	}
	deliveryOutcomes = map[deliveryOutcome]pb.DeliveryOutcome{
		outcomeStarted: pb.DeliveryOutcome_DELIVERY_OUTCOME_STARTED,
		outcomeQueued:  pb.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED,
		outcomeSteered: pb.DeliveryOutcome_DELIVERY_OUTCOME_STEERED,
	}
)

// sessionBusy names the running turn in a SESSION_BUSY, when the event stream shows it.
func (s *Service) sessionBusy(sessionID string, err error) error {
	if running := s.hub.snapshot(sessionID).InFlight; running != "" {
		return withReason(pb.ErrorReason_ERROR_REASON_SESSION_BUSY, err, "message_id", running)
	}
	return err
}

func (s *Service) CancelMessage(ctx context.Context, req *pb.CancelMessageRequest) (*pb.CancelMessageResponse, error) {
	const method = "CancelMessage"
	id, messageID := req.GetSessionId(), req.GetMessageId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	if q := s.hub.queue; q != nil && messageID != "" {
		m, removed, err := q.remove(ctx, p, id, messageID)
		if err != nil {
			return nil, s.fail(ctx, method, err, "session_id", id, "agent_id", p.AgentID())
		}
		if removed {
			return &pb.CancelMessageResponse{MessageId: m.MessageID}, nil
		}
	}
	cancelled, err := p.CancelMessage(ctx, id, messageID)
	if errors.Is(err, presenters.ErrMessageNotRunning) && messageID != "" && s.endedCancelled(ctx, id, messageID) {
		// A repeat of a cancel whose first call's client left before the answer: the
		// turn it named did end cancelled, which is what the caller asked for.
		return &pb.CancelMessageResponse{MessageId: messageID}, nil
	}
	if errors.Is(err, presenters.ErrMessageNotRunning) {
		err = withReason(pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_RUNNING, err, "message_id", s.hub.snapshot(id).InFlight)
	}
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(id, inField("message_id", err)), "session_id", id, "agent_id", p.AgentID())
	}
	return &pb.CancelMessageResponse{MessageId: cancelled}, nil
}

// endedCancelled reports whether a session's stored message ended cancelled.
func (s *Service) endedCancelled(ctx context.Context, sessionID, messageID string) bool {
	m, _, err := s.readMessage(ctx, sessionID, messageID)
	return err == nil && m.Status == presenters.MessageCancelled
}

func (s *Service) SetModel(ctx context.Context, req *pb.SetModelRequest) (*pb.SetModelResponse, error) {
	const method = "SetModel"
	info, err := s.choose(ctx, method, req.GetSessionId(), choice{
		field: "model_id", id: req.GetModelId(), what: "models",
		offered: func(info presenters.SessionInfo) []string {
			return idsOf(info.AvailableModels, func(m presenters.Model) string { return m.ID })
		},
		apply: func(ctx context.Context, p presenters.Presenter, sessionID, modelID string) (presenters.SessionInfo, error) {
			return p.SetModel(ctx, sessionID, modelID)
		},
	})
	if err != nil {
		return nil, err
	}
	return &pb.SetModelResponse{Session: info}, nil
}

func (s *Service) SetMode(ctx context.Context, req *pb.SetModeRequest) (*pb.SetModeResponse, error) {
	const method = "SetMode"
	info, err := s.choose(ctx, method, req.GetSessionId(), choice{
		field: "mode_id", id: req.GetModeId(), what: "modes",
		offered: func(info presenters.SessionInfo) []string {
			return idsOf(info.AvailableModes, func(m presenters.Mode) string { return m.ID })
		},
		apply: func(ctx context.Context, p presenters.Presenter, sessionID, modeID string) (presenters.SessionInfo, error) {
			return p.SetMode(ctx, sessionID, modeID)
		},
	})
	if err != nil {
		return nil, err
	}
	return &pb.SetModeResponse{Session: info}, nil
}

func (s *Service) SetConfigOption(ctx context.Context, req *pb.SetConfigOptionRequest) (*pb.SetConfigOptionResponse, error) {
	const method = "SetConfigOption"
	sessionID, configID := req.GetSessionId(), req.GetConfigId()
	if err := requireSession(sessionID); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("config_id", configID, "one of the session's config_options (GetSession)"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	if err := required("value", req.GetValue(), "one of the option's choices, or true or false"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	p, err := s.owner(ctx, sessionID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	current, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(sessionID, err), "session_id", sessionID, "agent_id", p.AgentID())
	}
	setter, ok := p.(presenters.ConfigOptionSetter)
	if !ok || len(current.ConfigOptions) == 0 {
		err := presenters.WithDetail(fmt.Errorf("session %s has no config options to set: %w", sessionID, presenters.ErrUnsupported),
			"unsupported", "session/set_config_option")
		return nil, s.fail(ctx, method, err, "session_id", sessionID, "agent_id", p.AgentID())
	}
	info, err := setter.SetConfigOption(ctx, sessionID, configID, req.GetValue())
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(sessionID, err), "session_id", sessionID, "agent_id", p.AgentID())
	}
	return &pb.SetConfigOptionResponse{Session: s.afterChange(info)}, nil
}

// choice is a SetModel or SetMode request: an id from one of the session's lists.
type choice struct {
	field, id, what string // "model_id", the id chosen, "models"
	offered         func(presenters.SessionInfo) []string
	apply           func(ctx context.Context, p presenters.Presenter, sessionID, id string) (presenters.SessionInfo, error)
}

// choose validates a choice against the session's list, applies it and converts the
// session; its errors are already converted for the client.
func (s *Service) choose(ctx context.Context, method, sessionID string, c choice) (*pb.SessionInfo, error) {
	if err := requireSession(sessionID); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required(c.field, c.id, "one of the session's available_"+c.what+" (GetSession)"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	p, err := s.owner(ctx, sessionID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID)
	}
	current, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(sessionID, err), "session_id", sessionID, "agent_id", p.AgentID())
	}
	if err := offered(c.field, c.id, c.what, c.offered(current)); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", sessionID, "agent_id", p.AgentID())
	}
	info, err := c.apply(ctx, p, sessionID, c.id)
	if err != nil {
		return nil, s.fail(ctx, method, sessionNotFound(sessionID, inField(c.field, err)), "session_id", sessionID, "agent_id", p.AgentID())
	}
	return s.afterChange(info), nil
}

// idsOf lists the ids of a session's modes or models.
func idsOf[T any](items []T, id func(T) string) []string {
	ids := make([]string, len(items))
	for i, item := range items {
		ids[i] = id(item)
	}
	return ids
}

// offered checks an id against the session's list, so every agent refuses an unknown
// model or mode the same way: INVALID_ARGUMENT.
func offered(field, id, what string, ids []string) error {
	if len(ids) == 0 {
		return invalidField(field, "%s %q: this session offers no %s to choose from", field, id, what)
	}
	for _, have := range ids {
		if have == id {
			return nil
		}
	}
	return invalidField(field, "%s %q is not one of the session's %s: %s", field, id, what, strings.Join(ids, ", "))
}

func (s *Service) RespondPermission(ctx context.Context, req *pb.RespondPermissionRequest) (*pb.RespondPermissionResponse, error) {
	const method = "RespondPermission"
	id, permissionID := req.GetSessionId(), req.GetPermissionId()
	if err := requireSession(id); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := required("permission_id", permissionID, "the permission_id of a TOOL_PERMISSION_REQUIRED event or of the session's pending_permissions"); err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	var ans permissionAnswer
	switch answer := req.GetAnswer().(type) {
	case *pb.RespondPermissionRequest_OptionId:
		if answer.OptionId == "" {
			return nil, s.fail(ctx, method, invalidField("option_id", "option_id is empty: use one of the request's option ids, or set option_kind"), "session_id", id)
		}
		ans.optionID = answer.OptionId
	case *pb.RespondPermissionRequest_OptionKind:
		k, ok := wire.OptionKindFromPB(answer.OptionKind)
		if !ok {
			return nil, s.fail(ctx, method, invalidField("option_kind", "option_kind must be set (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE or REJECT_ALWAYS)"), "session_id", id)
		}
		ans.kind = k
	default:
		return nil, s.fail(ctx, method, invalidField("option_id", "an answer is required: set option_id or option_kind"), "session_id", id)
	}
	p, err := s.owner(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, method, err, "session_id", id)
	}
	attrs := []any{"session_id", id, "agent_id", p.AgentID()}
	// Decided already: the same answer gets the decision again, another one is refused.
	if d, ok := s.hub.permissionDecision(id, permissionID); ok {
		resp, err := ans.against(d)
		if err != nil {
			return nil, s.fail(ctx, method, err, attrs...)
		}
		return resp, nil
	}
	pending, err := s.pendingRequest(ctx, p, id, permissionID)
	if err != nil {
		return nil, s.fail(ctx, method, permissionNotPending(permissionID, err), attrs...)
	}
	opt, err := ans.option(pending)
	if err != nil {
		return nil, s.fail(ctx, method, err, attrs...)
	}
	noted := s.hub.audit != nil && s.hub.audit.note(ctx, permissionKey(id, permissionID))
	if err := p.RespondPermission(ctx, id, presenters.PermissionResponse{RequestID: permissionID, OptionID: opt.ID}); err != nil {
		if noted {
			s.hub.audit.forget(permissionKey(id, permissionID))
		}
		// Another client may have answered in between.
		if d, ok := s.hub.permissionDecision(id, permissionID); ok && errors.Is(err, presenters.ErrNotFound) {
			resp, err := ans.against(d)
			if err != nil {
				return nil, s.fail(ctx, method, err, attrs...)
			}
			return resp, nil
		}
		return nil, s.fail(ctx, method, permissionNotPending(permissionID, inField("option_id", err)), attrs...)
	}
	// The decision as the event stream has it (the agent's own word on granted), if the
	// presenter published it already; otherwise as the answer chose it.
	if d, ok := s.hub.permissionDecision(id, permissionID); ok {
		return &pb.RespondPermissionResponse{Decision: d.toPB()}, nil
	}
	return &pb.RespondPermissionResponse{Decision: &pb.PermissionDecision{
		PermissionId: permissionID,
		OptionId:     opt.ID,
		OptionKind:   wire.OptionKindToPB(opt.Kind),
		Granted:      opt.Kind.Allows(),
		DecidedBy:    pb.PermissionDecider_PERMISSION_DECIDER_USER,
	}}, nil
}

// permissionAnswer is a RespondPermission's answer: an option id, or a kind of option.
type permissionAnswer struct {
	optionID string
	kind     presenters.PermissionOptionKind
}

// option is the request's option the answer picks.
func (a permissionAnswer) option(r presenters.PermissionRequest) (presenters.PermissionOption, error) {
	if a.kind != "" {
		if opt, ok := r.OptionOfKind(a.kind); ok {
			return opt, nil
		}
		return presenters.PermissionOption{}, invalidField("option_kind", "permission request %q has no %s option; its options are: %s",
			r.RequestID, a.kind, describeOptions(r.Options))
	}
	if opt, ok := r.Option(a.optionID); ok {
		return opt, nil
	}
	return presenters.PermissionOption{}, invalidField("option_id", "option_id %q is not one of permission request %q's options: %s",
		a.optionID, r.RequestID, describeOptions(r.Options))
}

// against answers a request decided already: OK with the decision when the answer is
// the one that decided it, PERMISSION_ALREADY_DECIDED otherwise.
func (a permissionAnswer) against(d permissionDecision) (*pb.RespondPermissionResponse, error) {
	decision := d.toPB()
	same := d.optionID != "" && ((a.optionID != "" && a.optionID == d.optionID) || (a.kind != "" && a.kind == d.kind))
	if same {
		return &pb.RespondPermissionResponse{Decision: decision}, nil
	}
	answer := a.optionID
	if answer == "" {
		answer = string(a.kind)
	}
	return nil, withReason(pb.ErrorReason_ERROR_REASON_PERMISSION_ALREADY_DECIDED,
		fmt.Errorf("permission request %q was already decided (%s, option %q, by %s); answer %q comes too late: %w",
			d.permissionID, grantedWord(d.granted), d.optionID, d.decidedBy, answer, presenters.ErrFailedPrecondition),
		"option_id", d.optionID, "decided_by", decision.GetDecidedBy().String())
}

func (d permissionDecision) toPB() *pb.PermissionDecision {
	return &pb.PermissionDecision{
		PermissionId: d.permissionID,
		OptionId:     d.optionID,
		OptionKind:   wire.OptionKindToPB(d.kind),
		Granted:      d.granted,
		DecidedBy:    wire.DeciderToPB(d.decidedBy),
	}
}

func grantedWord(granted bool) string {
	if granted {
		return "granted"
	}
	return "denied"
}

// pendingRequest finds a pending permission request: in the hub's projection, or else in
// what the presenter reports.
func (s *Service) pendingRequest(ctx context.Context, p presenters.Presenter, sessionID, permissionID string) (presenters.PermissionRequest, error) {
	if r, ok := s.hub.pendingRequest(sessionID, permissionID); ok {
		return r, nil
	}
	info, err := p.GetSession(ctx, sessionID)
	if err != nil {
		return presenters.PermissionRequest{}, sessionNotFound(sessionID, err)
	}
	for _, r := range info.PendingPermissions {
		if r.RequestID == permissionID {
			return r, nil
		}
	}
	return presenters.PermissionRequest{}, fmt.Errorf("%w: permission request %q is not pending in session %q (never asked, or decided long enough ago to be forgotten); GetSession lists the pending ones",
		presenters.ErrNotFound, permissionID, sessionID)
}

func describeOptions(opts []presenters.PermissionOption) string {
	if len(opts) == 0 {
		return "none"
	}
	parts := make([]string, len(opts))
	for i, o := range opts {
		parts[i] = fmt.Sprintf("%s (%s)", o.ID, o.Kind)
	}
	return strings.Join(parts, ", ")
}

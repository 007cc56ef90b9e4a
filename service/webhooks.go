package service

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/webhooks"
)

// AuditAppender appends audit entries made of no event; *store.Store is one.
type AuditAppender interface {
	AppendAudit(ctx context.Context, entries []store.AuditEntry) error
}

// WebhookAudit records webhook deliveries in the audit log (AUDIT_KIND_WEBHOOK_DELIVERY),
// where ListAuditEvents shows them with the session's other entries.
func WebhookAudit(st AuditAppender) webhooks.Recorder { return webhookAudit{st: st} }

type webhookAudit struct{ st AuditAppender }

var webhookKinds = map[webhooks.Kind]pb.WebhookEvent{
	webhooks.PermissionRequired:  pb.WebhookEvent_WEBHOOK_EVENT_PERMISSION_REQUIRED,
	webhooks.ElicitationRequired: pb.WebhookEvent_WEBHOOK_EVENT_ELICITATION_REQUIRED,
	webhooks.TurnEnded:           pb.WebhookEvent_WEBHOOK_EVENT_TURN_ENDED,
	webhooks.Error:               pb.WebhookEvent_WEBHOOK_EVENT_ERROR,
	webhooks.SessionClosed:       pb.WebhookEvent_WEBHOOK_EVENT_SESSION_CLOSED,
}

var webhookOutcomes = map[webhooks.Outcome]pb.WebhookOutcome{
	webhooks.Delivered: pb.WebhookOutcome_WEBHOOK_OUTCOME_DELIVERED,
	webhooks.Failed:    pb.WebhookOutcome_WEBHOOK_OUTCOME_FAILED,
	webhooks.GaveUp:    pb.WebhookOutcome_WEBHOOK_OUTCOME_GAVE_UP,
	webhooks.Dropped:   pb.WebhookOutcome_WEBHOOK_OUTCOME_DROPPED,
}

func (a webhookAudit) RecordDeliveries(ctx context.Context, records []webhooks.Record) error {
	entries := make([]store.AuditEntry, 0, len(records))
	for _, r := range records {
		e := &pb.AuditEvent{EventTime: timestamppb.New(r.Time), Kind: pb.AuditKind_AUDIT_KIND_WEBHOOK_DELIVERY,
			Source: pb.AuditSource_AUDIT_SOURCE_OBSERVED, SessionId: r.SessionID, AgentId: r.AgentID, EventSequence: r.Sequence,
			Detail: &pb.AuditEvent_Webhook{Webhook: &pb.AuditWebhook{DeliveryId: r.DeliveryID, Hook: r.Hook, Host: r.Host,
				Event: webhookKinds[r.Kind], Outcome: webhookOutcomes[r.Outcome], Attempt: int32(r.Attempt),
				HttpStatus: int32(r.HTTPStatus), Error: r.Err, Dropped: r.Dropped}}}
		//lint:ignore SA1019 both names of the time are kept, for clients that still read the old one
		e.Time = e.EventTime
		data, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode a webhook audit entry: %w", err)
		}
		entries = append(entries, store.AuditEntry{Time: r.Time, Kind: int(e.GetKind()), SessionID: r.SessionID, AgentID: r.AgentID, Data: data})
	}
	return a.st.AppendAudit(ctx, entries)
}

// sessionWebhook is a CreateSession's webhook as the notifier takes it, checked; ok is
// false when the request has none.
func (s *Service) sessionWebhook(in *pb.SessionWebhook) (hook webhooks.SessionHook, ok bool, err error) {
	if in == nil {
		return hook, false, nil
	}
	hook.URL = in.GetUrl()
	for i, k := range in.GetEvents() {
		kind, known := webhookKindOf(k)
		if !known {
			return hook, false, invalidField(fmt.Sprintf("config.webhook.events[%d]", i), "config.webhook.events[%d]: %s is not a webhook event", i, k)
		}
		hook.Kinds = append(hook.Kinds, kind)
	}
	if s.webhooks == nil {
		return hook, false, invalidField("config.webhook", "config.webhook: %v: an operator lists where they may go in session_webhooks.allowed_urls", webhooks.ErrSessionHooksOff)
	}
	if err := s.webhooks.CheckSessionHook(hook); err != nil {
		return hook, false, invalidField("config.webhook.url", "config.webhook: %v", err)
	}
	return hook, true, nil
}

// webhookKindOf is the notifier's kind of an API webhook event.
func webhookKindOf(e pb.WebhookEvent) (webhooks.Kind, bool) {
	for k, v := range webhookKinds {
		if v == e {
			return k, true
		}
	}
	return "", false
}

// SessionWebhookStore reads sessions' own webhooks, kept so that they outlive a restart
// and reach the replica that takes a session over; *store.Store is one.
type SessionWebhookStore interface {
	SessionWebhooks(ctx context.Context, sessionIDs ...string) ([]store.SessionWebhook, error)
}

var _ SessionWebhookStore = (*store.Store)(nil)

// storedWebhook is a session's webhook as the store keeps it.
func storedWebhook(sessionID string, h webhooks.SessionHook) store.SessionWebhook {
	out := store.SessionWebhook{SessionID: sessionID, URL: h.URL}
	for _, k := range h.Kinds {
		out.Events = append(out.Events, string(k))
	}
	return out
}

// RestoreSessionWebhooks gives the notifier the stored webhooks of the sessions named
// (of every session when none is named): after a restart, or once this replica took a
// session over, the session's notices go where its own webhook says. A hook the
// server's session_webhooks no longer allow is left out, with a warning.
func RestoreSessionWebhooks(ctx context.Context, st SessionWebhookStore, n *webhooks.Notifier, logger *slog.Logger, sessionIDs ...string) error {
	hooks, err := st.SessionWebhooks(ctx, sessionIDs...)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		hook := webhooks.SessionHook{URL: h.URL}
		for _, e := range h.Events {
			hook.Kinds = append(hook.Kinds, webhooks.Kind(e))
		}
		if err := n.WatchSession(h.SessionID, hook); err != nil {
			logger.WarnContext(ctx, "a session's stored webhook is not taken up again", "session_id", h.SessionID, "err", err)
		}
	}
	return nil
}

package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// A webhook delivery's line says what was told to whom, and what became of it.
func TestAuditLineOfWebhookDeliveries(t *testing.T) {
	entry := func(w *pb.AuditWebhook) *pb.AuditEvent {
		return &pb.AuditEvent{Id: 9, EventTime: timestamppb.Now(), Kind: pb.AuditKind_AUDIT_KIND_WEBHOOK_DELIVERY, SessionId: "s1",
			Detail: &pb.AuditEvent_Webhook{Webhook: w}}
	}
	for _, c := range []struct {
		w    *pb.AuditWebhook
		want string
	}{
		{&pb.AuditWebhook{Hook: "ops", Host: "hooks.example.com", Event: pb.WebhookEvent_WEBHOOK_EVENT_TURN_ENDED,
			Outcome: pb.WebhookOutcome_WEBHOOK_OUTCOME_DELIVERED, Attempt: 1, HttpStatus: 204},
			"s1 webhook_delivery turn_ended to ops (hooks.example.com) delivered, attempt 1, HTTP 204"},
		{&pb.AuditWebhook{Hook: "session", Host: "h", Event: pb.WebhookEvent_WEBHOOK_EVENT_SESSION_CLOSED,
			Outcome: pb.WebhookOutcome_WEBHOOK_OUTCOME_GAVE_UP, Attempt: 8, Error: "connection refused"},
			"session_closed to session (h) gave_up, attempt 8: connection refused"},
		{&pb.AuditWebhook{Outcome: pb.WebhookOutcome_WEBHOOK_OUTCOME_DROPPED, Dropped: 3}, "3 deliveries dropped: the queue was full"},
	} {
		if got := auditLine(entry(c.w)); !strings.HasSuffix(got, c.want) {
			t.Errorf("line %q, want it to end %q", got, c.want)
		}
	}
}

func TestAuditLineShowsADeniedCommandAsDenied(t *testing.T) {
	e := &pb.AuditEvent{Id: 7, SessionId: "s", Kind: pb.AuditKind_AUDIT_KIND_COMMAND, EventTime: timestamppb.New(time.Unix(0, 0)),
		Detail: &pb.AuditEvent_Command{Command: &pb.AuditCommand{CommandLine: "rm -rf build", Cwd: "/ws", Denied: true, Status: pb.ToolStatus_TOOL_STATUS_FAILED}}}
	if got := auditLine(e); !strings.HasSuffix(got, ` s command "rm -rf build" in /ws denied: it never ran`) {
		t.Fatalf("audit line %q", got)
	}
	e.GetCommand().Denied = false
	if got := auditLine(e); strings.Contains(got, "denied") {
		t.Fatalf("a command that ran reads %q", got)
	}
}

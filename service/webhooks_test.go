package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/webhooks"
)

// A session's own webhook, given to CreateSession, hears of its turn's end, signed with
// the server's session secret, and the delivery is in the session's audit trail.
func TestSessionWebhookThroughCreateSession(t *testing.T) {
	secret := []byte("a-session-webhook-secret-0123456789")
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, sig, _ := strings.Cut(strings.TrimPrefix(r.Header.Get(webhooks.SignatureHeader), "t="), ",v1=")
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(ts + "." + string(body)))
		if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) {
			t.Errorf("bad signature %q on %s", r.Header.Get(webhooks.SignatureHeader), body)
		}
		got <- string(body)
	}))
	defer srv.Close()
	st := openStore(t)
	n, err := webhooks.New(webhooks.Options{SessionURLs: []string{srv.URL + "/hooks/"}, SessionSecret: secret, Recorder: WebhookAudit(st), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	e := newEnv(t, envOptions{store: st, eventLog: true, webhooks: n, hub: HubOptions{Observers: []EventObserver{n}}})

	for name, hook := range map[string]*pb.SessionWebhook{
		"not allowed":   {Url: srv.URL + "/elsewhere"},
		"not a URL":     {Url: "hooks"},
		"unknown event": {Url: srv.URL + "/hooks/x", Events: []pb.WebhookEvent{pb.WebhookEvent_WEBHOOK_EVENT_UNSPECIFIED}},
	} {
		_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root, Webhook: hook}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "config.webhook") {
			t.Errorf("%s: err %v, want INVALID_ARGUMENT about config.webhook", name, err)
		}
	}
	resp, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root,
		Webhook: &pb.SessionWebhook{Url: srv.URL + "/hooks/me", Events: []pb.WebhookEvent{pb.WebhookEvent_WEBHOOK_EVENT_TURN_ENDED}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetSession().GetSessionId()
	em := presenters.NewEmitter(e.hub, fakeID, id)
	em.Error(presenters.ErrorPayload{Code: "X", Message: "not asked for"})
	seq := em.MessageEnd(presenters.MessageEndPayload{MessageID: "m1", Role: presenters.RoleAssistant, StopReason: presenters.StopEndTurn})
	select {
	case body := <-got:
		if !strings.Contains(body, `"type":"turn_ended"`) || !strings.Contains(body, `"session_id":"`+id+`"`) {
			t.Errorf("notice %s: want the session's turn_ended", body)
		}
	case <-time.After(streamWait):
		t.Fatal("the session's webhook got nothing")
	}
	entries := auditEntries(t, e, &pb.ListAuditEventsRequest{SessionIds: []string{id}, Kinds: []pb.AuditKind{pb.AuditKind_AUDIT_KIND_WEBHOOK_DELIVERY}}, 1)
	if len(entries) != 1 {
		t.Fatalf("webhook audit entries %v, want the one delivery", entries)
	}
	w := entries[0].GetWebhook()
	if w.GetOutcome() != pb.WebhookOutcome_WEBHOOK_OUTCOME_DELIVERED || w.GetEvent() != pb.WebhookEvent_WEBHOOK_EVENT_TURN_ENDED ||
		w.GetHook() != webhooks.SessionHookName || w.GetHttpStatus() != http.StatusOK || w.GetAttempt() != 1 || w.GetDeliveryId() == "" ||
		entries[0].GetEventSequence() != seq || entries[0].GetAgentId() != fakeID {
		t.Errorf("audit entry %v: want the turn's delivery", entries[0])
	}
	select {
	case body := <-got:
		t.Errorf("a notice the hook did not ask for: %s", body)
	default:
	}
}

// A server that takes no session webhooks says so.
func TestSessionWebhookRefusedWithoutNotifier(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, err := e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID,
		Config: &pb.SessionConfig{Workspace: e.root, Webhook: &pb.SessionWebhook{Url: "https://example.com/hook"}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "session_webhooks.allowed_urls") {
		t.Fatalf("err %v, want INVALID_ARGUMENT naming session_webhooks.allowed_urls", err)
	}
}

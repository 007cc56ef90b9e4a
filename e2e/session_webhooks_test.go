package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

// sessionHookSecret signs sessions' own webhooks in these tests; the servers read it from
// sessionHookSecretEnv.
const (
	sessionHookSecret    = "e2e-session-webhook-secret-0123456789"
	sessionHookSecretEnv = "AGENTICD_E2E_SESSION_HOOK_SECRET"
)

// hookNotice is what a receiver reads of a webhook's notice.
type hookNotice struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
}

// hookReceiver is a real HTTP receiver of webhooks that checks every notice's signature
// against sessionHookSecret.
type hookReceiver struct {
	URL     string
	notices chan hookNotice
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{notices: make(chan hookNotice, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ts, sig, _ := strings.Cut(strings.TrimPrefix(req.Header.Get("Agenticd-Signature"), "t="), ",v1=")
		mac := hmac.New(sha256.New, []byte(sessionHookSecret))
		mac.Write([]byte(ts + "." + string(body)))
		if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) {
			t.Errorf("bad signature %q on %s", req.Header.Get("Agenticd-Signature"), body)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var n hookNotice
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("notice %s: %v", body, err)
		}
		// Never block: a handler stuck on a full buffer would hold srv.Close at cleanup.
		select {
		case r.notices <- n:
		default:
			t.Errorf("notice dropped, %d unread before it: %s", cap(r.notices), body)
		}
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// waitFor returns once a notice of type kind about message id arrives, and the notices
// before it; it fails the test if none does within eventWait.
func (r *hookReceiver) waitFor(t *testing.T, kind, messageID string) (hookNotice, []hookNotice) {
	t.Helper()
	timeout := time.After(eventWait)
	var before []hookNotice
	for {
		select {
		case n := <-r.notices:
			if n.Type == kind && n.MessageID == messageID {
				return n, before
			}
			before = append(before, n)
		case <-timeout:
			t.Fatalf("no %s notice of message %s within %s", kind, messageID, eventWait)
		}
	}
}

// A session's own webhook outlives a restart: the session's turns after it are told to
// it, signed with the session secret. A closed session's webhook is not taken up again.
func TestSessionWebhookSurvivesARestart(t *testing.T) {
	hooks := newHookReceiver(t)
	t.Setenv(sessionHookSecretEnv, sessionHookSecret)
	llm := newDCLLM(t)
	root := t.TempDir()
	ws := filepath.Join(root, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{{
		ID: dcAgent, Type: presenters.AgentTypeDeepChat, Provider: "fake", BaseURL: llm.srv.URL + "/v1", Models: []string{"fake-model"}}},
		SessionWebhooks: daemon.SessionWebhooksConfig{AllowedURLs: []string{hooks.URL + "/sessions/"}, SecretEnv: sessionHookSecretEnv}})
	create := func(name string) string {
		resp, err := s.Client.CreateSession(context.Background(), &agenticv1.CreateSessionRequest{AgentId: dcAgent, Config: &agenticv1.SessionConfig{
			Workspace: ws, Webhook: &agenticv1.SessionWebhook{Url: hooks.URL + "/sessions/" + name, Events: []agenticv1.WebhookEvent{agenticv1.WebhookEvent_WEBHOOK_EVENT_TURN_ENDED}}}})
		if err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		return resp.GetSession().GetSessionId()
	}
	kept, closed := create("kept"), create("closed")
	llm.script(dcText("one"))
	hooks.waitFor(t, "turn_ended", dcSend(t, s, kept, "one").GetMessageId())
	if _, err := s.Client.CloseSession(context.Background(), &agenticv1.CloseSessionRequest{SessionId: closed}); err != nil {
		t.Fatal(err)
	}

	s.Restart(t)
	// The closed session, opened again, has no webhook: its turn comes first, so a
	// notice of it would come before the kept session's.
	if _, err := s.Client.LoadSession(context.Background(), &agenticv1.LoadSessionRequest{SessionId: closed}); err != nil {
		t.Fatal(err)
	}
	events := dcSubscribe(t, s, closed)
	llm.script(dcText("unheard"), dcText("two"))
	unheard := dcSend(t, s, closed, "unheard")
	events.Until(t, dcIsEnd(unheard.GetMessageId()))
	n, before := hooks.waitFor(t, "turn_ended", dcSend(t, s, kept, "two").GetMessageId())
	if n.SessionID != kept {
		t.Errorf("notice %+v, want session %s's", n, kept)
	}
	// Deliveries go out in order, one at a time.
	for _, b := range before {
		if b.SessionID == closed {
			t.Errorf("the closed session's webhook was taken up again: %+v", b)
		}
	}
	select {
	case n := <-hooks.notices:
		t.Errorf("a notice after the kept session's: %+v", n)
	default:
	}
}

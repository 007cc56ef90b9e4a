package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
)

func TestWebhooksConfigValidation(t *testing.T) {
	hook := func(mod func(*WebhookConfig)) func(*Config) {
		return func(c *Config) {
			h := WebhookConfig{URL: "https://hooks.example.com/a", SecretEnv: "HOOK_SECRET"}
			mod(&h)
			c.Webhooks = append(c.Webhooks, h)
		}
	}
	for name, c := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"fine":             {hook(func(*WebhookConfig) {}), ""},
		"fine with events": {hook(func(h *WebhookConfig) { h.Events = []string{"turn_ended", "session_closed"} }), ""},
		"no url":           {hook(func(h *WebhookConfig) { h.URL = "" }), "webhooks[0]: url is required"},
		"relative url":     {hook(func(h *WebhookConfig) { h.URL = "hooks.example.com/a" }), "webhooks[0]: url: bad webhook URL"},
		"no secret":        {hook(func(h *WebhookConfig) { h.SecretEnv = "" }), "set exactly one of secret_file"},
		"two secrets":      {hook(func(h *WebhookConfig) { h.SecretFile = "/s" }), "set exactly one of secret_file"},
		"unknown event":    {hook(func(h *WebhookConfig) { h.Events = []string{"turn_end"} }), "webhooks[0]: events[0]: unknown webhook event \"turn_end\": use one of permission_required,"},
		"same name twice": {func(c *Config) {
			hook(func(h *WebhookConfig) { h.Name = "a" })(c)
			hook(func(h *WebhookConfig) { h.Name = "a" })(c)
		}, "webhooks[1] (a): name \"a\" is used twice"},
		"session urls":         {func(c *Config) { c.SessionWebhooks.AllowedURLs = []string{"https://hooks.example.com/"} }, ""},
		"session bad url":      {func(c *Config) { c.SessionWebhooks.AllowedURLs = []string{"ftp://x/"} }, "session_webhooks.allowed_urls[0]: bad webhook URL"},
		"session secret alone": {func(c *Config) { c.SessionWebhooks.SecretEnv = "X" }, "allowed_urls is empty"},
		"session two secrets": {func(c *Config) {
			c.SessionWebhooks = SessionWebhooksConfig{AllowedURLs: []string{"https://h/"}, SecretEnv: "X", SecretFile: "/s"}
		}, "at most one of secret_file and secret_env"},
		"replicas, session secret of each": {func(c *Config) {
			c.Database, c.Token = "postgres://db/agenticd", "a-token-0123456789abcdef"
			c.SessionWebhooks.AllowedURLs = []string{"https://h/"}
		}, "session_webhooks: replicas (database set) sign sessions' webhooks with one secret"},
		"replicas, one session secret": {func(c *Config) {
			c.Database, c.Token = "postgres://db/agenticd", "a-token-0123456789abcdef"
			c.SessionWebhooks = SessionWebhooksConfig{AllowedURLs: []string{"https://h/"}, SecretEnv: "X"}
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := testConfig(t).WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			c.mod(&cfg)
			err = cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// The YAML keys are the documented ones, and a typo among them is named.
func TestWebhooksConfigFile(t *testing.T) {
	cfg, err := Load(writeFile(t, "webhooks:\n  - name: ops\n    url: https://hooks.example.com/a\n    secret_file: ~/hook.secret\n    events: [turn_ended]\nsession_webhooks:\n  allowed_urls: [https://hooks.example.com/s/]\n"))
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if len(cfg.Webhooks) != 1 || cfg.Webhooks[0].SecretFile != filepath.Join(home, "hook.secret") || cfg.Webhooks[0].Events[0] != "turn_ended" ||
		cfg.SessionWebhooks.AllowedURLs[0] != "https://hooks.example.com/s/" {
		t.Errorf("config %+v %+v", cfg.Webhooks, cfg.SessionWebhooks)
	}
	_, err = Load(writeFile(t, "webhooks:\n  - url: https://h/\n    secret: x\n"))
	if err == nil || !strings.Contains(err.Error(), "unknown key `secret` at line 3 in webhooks[0]") {
		t.Errorf("a typo: %v", err)
	}
}

// Secrets are read at start: a missing variable, a short secret or a file others may
// read stops agenticd with a message saying which.
func TestWebhookSecretsAreChecked(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short")
	open := filepath.Join(t.TempDir(), "open")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, []byte("a-long-enough-secret-0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTICD_TEST_UNSET_SECRET", "")
	for _, c := range []struct {
		hook WebhookConfig
		want string
	}{
		{WebhookConfig{URL: "https://h/", SecretEnv: "AGENTICD_TEST_UNSET_SECRET"}, "secret_env AGENTICD_TEST_UNSET_SECRET is not set"},
		{WebhookConfig{URL: "https://h/", SecretFile: short}, "the secret has 5 characters; use at least 16"},
		{WebhookConfig{URL: "https://h/", SecretFile: open}, "may be read by other users"},
	} {
		cfg := testConfig(t)
		cfg.Webhooks = []WebhookConfig{c.hook}
		if srv, err := Start(context.Background(), cfg, quiet); err == nil {
			_ = srv.Stop(context.Background())
			t.Errorf("%+v: started", c.hook)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want it to say %q", c.hook, err, c.want)
		}
	}
}

// A configured webhook hears of a real turn's end, signed with its secret, and the
// delivery is in the audit log; session webhooks get a secret made in the data dir.
func TestWebhookOfARealTurn(t *testing.T) {
	const secret = "the-ops-hook-secret-0123456789"
	notices := make(chan string, 8)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, sig, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Agenticd-Signature"), "t="), ",v1=")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) {
			t.Errorf("bad signature on %s", body)
		}
		notices <- string(body)
	}))
	defer receiver.Close()
	llm := newFakeLLM(t, "done")
	setEnv(t, map[string]string{EnvOpenAIBaseURL: llm.URL + "/v1", EnvOpenAIModel: "m", EnvOllamaHost: closedAddr(t)})
	t.Setenv("AGENTICD_TEST_HOOK_SECRET", secret)
	cfg := testConfig(t)
	cfg.Webhooks = []WebhookConfig{{Name: "ops", URL: receiver.URL + "/ops", SecretEnv: "AGENTICD_TEST_HOOK_SECRET", Events: []string{"turn_ended"}}}
	cfg.SessionWebhooks.AllowedURLs = []string{receiver.URL + "/sessions/"}
	d := startDaemon(t, cfg)
	if info, err := os.Stat(localcred.WebhookSecretFile(cfg.DataDir)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("session webhook secret: %v, %v; want a 0600 file in the data dir", info, err)
	}
	session, _ := d.turn(t, DefaultDeepChatID, "hi")
	select {
	case body := <-notices:
		if !strings.Contains(body, `"type":"turn_ended"`) || !strings.Contains(body, session.GetSessionId()) || strings.Contains(body, "done") {
			t.Errorf("notice %s: want the turn's end, with ids only", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook heard nothing")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := d.client.ListAuditEvents(context.Background(), &pb.ListAuditEventsRequest{Kinds: []pb.AuditKind{pb.AuditKind_AUDIT_KIND_WEBHOOK_DELIVERY}})
		if err != nil {
			t.Fatal(err)
		}
		if es := resp.GetEvents(); len(es) > 0 {
			if w := es[0].GetWebhook(); w.GetHook() != "ops" || w.GetOutcome() != pb.WebhookOutcome_WEBHOOK_OUTCOME_DELIVERED || es[0].GetSessionId() != session.GetSessionId() {
				t.Errorf("audit entry %v", es[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no webhook delivery in the audit log")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

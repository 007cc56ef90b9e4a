package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/webhooks"
)

// WebhookConfig is one entry under webhooks: (docs/webhooks.md).
type WebhookConfig struct {
	// Name tells the hook's deliveries apart in the audit log; default webhooks[i].
	Name string `yaml:"name"`
	// URL is where the notices are POSTed (http or https).
	URL string `yaml:"url"`
	// SecretFile or SecretEnv, exactly one, holds the secret the notices are signed with
	// (surrounding whitespace is dropped; at least webhooks.MinSecretBytes).
	SecretFile string `yaml:"secret_file"`
	SecretEnv  string `yaml:"secret_env"`
	// Events are the notices it gets (permission_required, elicitation_required,
	// turn_ended, error, session_closed); empty for all.
	Events []string `yaml:"events"`
}

// SessionWebhooksConfig lets CreateSession give a session a webhook of its own: a request
// agenticd makes for whoever may create a session, so it goes only where the operator
// allows.
type SessionWebhooksConfig struct {
	// AllowedURLs are the prefixes a session's webhook URL must start with; empty: no
	// session may have one.
	AllowedURLs []string `yaml:"allowed_urls"`
	// SecretFile or SecretEnv, at most one, holds the secret sessions' webhooks are
	// signed with; neither: <data_dir>/webhook_secret, made at first start.
	SecretFile string `yaml:"secret_file"`
	SecretEnv  string `yaml:"secret_env"`
}

// validateWebhooks says what is wrong with webhooks: and session_webhooks:, without
// reading the secrets (webhookOptions does, at start).
func (c Config) validateWebhooks() error {
	names := make(map[string]bool, len(c.Webhooks))
	for i, h := range c.Webhooks {
		where := fmt.Sprintf("webhooks[%d]", i)
		if h.Name != "" {
			where = fmt.Sprintf("webhooks[%d] (%s)", i, h.Name)
			if names[h.Name] {
				return fmt.Errorf("%s: name %q is used twice; give each webhook its own name", where, h.Name)
			}
			names[h.Name] = true
		}
		if h.URL == "" {
			return fmt.Errorf("%s: url is required: where to POST the notices, e.g. https://hooks.example.com/agenticd", where)
		}
		if err := webhooks.CheckURL(h.URL); err != nil {
			return fmt.Errorf("%s: url: %w", where, err)
		}
		if (h.SecretFile == "") == (h.SecretEnv == "") {
			return fmt.Errorf("%s: set exactly one of secret_file (a file holding the signing secret) and secret_env (an environment variable holding it); make one with `%s`", where, tokenCommand)
		}
		for j, e := range h.Events {
			if _, err := webhooks.ParseKind(e); err != nil {
				return fmt.Errorf("%s: events[%d]: %w", where, j, err)
			}
		}
	}
	sw := c.SessionWebhooks
	if sw.SecretFile != "" && sw.SecretEnv != "" {
		return errors.New("session_webhooks: set at most one of secret_file and secret_env (neither: agenticd keeps one in data_dir/webhook_secret)")
	}
	if len(sw.AllowedURLs) > 0 && c.Database != "" && sw.SecretFile == "" && sw.SecretEnv == "" {
		// Each replica's data dir would hold a secret of its own, and a session's notices
		// would change signature when another replica took the session over.
		return errors.New("session_webhooks: replicas (database set) sign sessions' webhooks with one secret: set secret_file or secret_env, the same on every replica")
	}
	if len(sw.AllowedURLs) == 0 && (sw.SecretFile != "" || sw.SecretEnv != "") {
		return errors.New("session_webhooks: a secret is set but allowed_urls is empty, so no session may have a webhook; list the URL prefixes sessions' webhooks may POST to, or drop the secret")
	}
	for i, u := range sw.AllowedURLs {
		if err := webhooks.CheckURL(u); err != nil {
			return fmt.Errorf("session_webhooks.allowed_urls[%d]: %w", i, err)
		}
	}
	return nil
}

// webhookSecret reads a secret from a file (which others may not read) or the
// environment.
func webhookSecret(where, file, env string) ([]byte, error) {
	var secret string
	if file != "" {
		info, err := os.Stat(file)
		if err != nil {
			return nil, fmt.Errorf("%s: secret_file: %w", where, err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%s: secret_file %s may be read by other users (mode %v): run `chmod 600 %s`", where, file, info.Mode().Perm(), file)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: secret_file: %w", where, err)
		}
		secret = strings.TrimSpace(string(raw))
	} else {
		secret = strings.TrimSpace(os.Getenv(env))
		if secret == "" {
			return nil, fmt.Errorf("%s: secret_env %s is not set or empty", where, env)
		}
	}
	if len(secret) < webhooks.MinSecretBytes {
		return nil, fmt.Errorf("%s: the secret has %d characters; use at least %d random ones, e.g. `%s`", where, len(secret), webhooks.MinSecretBytes, tokenCommand)
	}
	return []byte(secret), nil
}

// webhookNotifier builds the notifier of the config's webhooks, reading their secrets;
// nil when there are none and sessions may have none.
func (c Config) webhookNotifier(st *store.Store, logger *slog.Logger) (*webhooks.Notifier, error) {
	if len(c.Webhooks) == 0 && len(c.SessionWebhooks.AllowedURLs) == 0 {
		return nil, nil
	}
	opts := webhooks.Options{SessionURLs: c.SessionWebhooks.AllowedURLs, Recorder: service.WebhookAudit(st), Logger: logger}
	for i, h := range c.Webhooks {
		secret, err := webhookSecret(fmt.Sprintf("webhooks[%d]", i), h.SecretFile, h.SecretEnv)
		if err != nil {
			return nil, err
		}
		hook := webhooks.Hook{Name: h.Name, URL: h.URL, Secret: secret}
		for _, e := range h.Events {
			hook.Kinds = append(hook.Kinds, webhooks.Kind(e))
		}
		opts.Hooks = append(opts.Hooks, hook)
	}
	if sw := c.SessionWebhooks; len(sw.AllowedURLs) > 0 {
		var err error
		if sw.SecretFile != "" || sw.SecretEnv != "" {
			opts.SessionSecret, err = webhookSecret("session_webhooks", sw.SecretFile, sw.SecretEnv)
		} else {
			var secret string
			secret, err = localcred.LoadOrCreateWebhookSecret(c.DataDir)
			opts.SessionSecret = []byte(secret)
		}
		if err != nil {
			return nil, err
		}
	}
	return webhooks.New(opts)
}

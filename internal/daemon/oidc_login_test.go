package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discoveryOnly is an issuer that answers discovery (its endpoints are never called).
func discoveryOnly(t *testing.T) string {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/keys"})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// oidc.client_id turns the page's sign-in through the issuer on; client_secret_env must
// name a variable that is set.
func TestOIDCClientSignsThePageIn(t *testing.T) {
	issuer := discoveryOnly(t)
	cfg := testConfig(t)
	cfg.OIDC = &OIDCConfig{Issuer: issuer, Audience: "agenticd", ClientID: "agenticd-web", ClientSecretEnv: "AGENTICD_TEST_OIDC_SECRET"}
	t.Setenv("AGENTICD_TEST_OIDC_SECRET", "")
	if srv, err := Start(context.Background(), cfg, quiet); err == nil || !strings.Contains(err.Error(), "AGENTICD_TEST_OIDC_SECRET") {
		if srv != nil {
			_ = srv.Stop(context.Background())
		}
		t.Fatalf("Start with the secret's variable unset: %v; want an error naming it", err)
	}
	t.Setenv("AGENTICD_TEST_OIDC_SECRET", "s3cret")
	for _, c := range []struct {
		clientID string
		want     int
	}{{"agenticd-web", http.StatusNoContent}, {"", 0}} {
		cfg.OIDC.ClientID = c.clientID
		if c.clientID == "" {
			cfg.OIDC.ClientSecretEnv = ""
		}
		srv, err := Start(context.Background(), cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Head("http://" + srv.Addr() + "/login/oidc")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.StatusCode == http.StatusNoContent; got != (c.want == http.StatusNoContent) {
			t.Errorf("client_id %q: HEAD /login/oidc %s", c.clientID, resp.Status)
		}
		if err := srv.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

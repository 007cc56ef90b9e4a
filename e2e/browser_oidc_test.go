package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-jose/go-jose/v4"

	"github.com/agenticd/agenticd/internal/daemon"
)

// pkceIssuer is an OpenID Connect issuer at http://localhost:<port>, another site than
// agenticd's 127.0.0.1: its authorize endpoint signs "dana" in at once and sends the
// browser back with a code; its token endpoint checks the PKCE verifier.
func pkceIssuer(t *testing.T, clientID string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		codes = map[string][2]string{} // code -> challenge, nonce
	)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	issuer := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/authorize",
			"token_endpoint": issuer + "/token", "jwks_uri": issuer + "/keys", "id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != clientID {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		codes["c1"] = [2]string{q.Get("code_challenge"), q.Get("nonce")}
		mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=c1&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		req, ok := codes[r.FormValue("code")]
		delete(codes, r.FormValue("code"))
		mu.Unlock()
		sum := sha256.Sum256([]byte(r.FormValue("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != req[0] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		now := time.Now()
		payload, _ := json.Marshal(map[string]any{"iss": issuer, "aud": clientID, "sub": "dana", "exp": now.Add(time.Hour).Unix(),
			"iat": now.Unix(), "nonce": req[1], "scope": "read write"})
		sig, err := signer.Sign(payload)
		if err != nil {
			t.Error(err)
			return
		}
		raw, _ := sig.CompactSerialize()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": raw})
	})
	return issuer
}

// The page offers the issuer's sign-in, and a browser that goes through it (to another
// site and back) is signed in as the principal of the ID token.
func TestBrowserSignsInThroughTheIssuer(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	const clientID = "agenticd-web"
	issuer := pkceIssuer(t, clientID)
	s := startServer(t, daemon.Config{OIDC: &daemon.OIDCConfig{Issuer: issuer, Audience: "agenticd", ClientID: clientID}})
	page := &pageDriver{t: t, ctx: startBrowser(t, browserPath)}
	page.run("open the page", chromedp.Navigate("http://"+s.Addr+"/"), chromedp.WaitVisible(`[data-testid=sign-in-hint]`))
	page.waitVisible("the issuer's sign-in", `[data-testid=oidc-sign-in]`)
	page.run("sign in through the issuer", chromedp.Click(`[data-testid=oidc-sign-in]`))
	page.waitText("who is signed in", `document.querySelector('[data-testid=signed-in]')?.textContent ?? ''`, "signed in as dana")
	if n := page.count(`#token-form:not([hidden])`); n != 0 {
		t.Error("the page still asks to sign in after the issuer signed the browser in")
	}
	if c := page.eval(`document.cookie`); c != "" {
		t.Errorf("the page's script reads cookies %q; want the session cookie HttpOnly", c)
	}
}

package service

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

const loginClientID, loginClientSecret = "agenticd-web", "client-secret-0123456789"

// codeIssuer is an OpenID Connect issuer for the authorization-code flow: discovery, a
// key set, an authorize endpoint that sends the browser straight back with a code, and
// a token endpoint that checks the client and the PKCE verifier.
type codeIssuer struct {
	*testIssuer
	srv *httptest.Server
	// idClaims edits the ID token's claims (nil: valid ones).
	idClaims func(map[string]any)

	mu        sync.Mutex
	codes     map[string]authRequest // by code
	exchanged int
}

type authRequest struct{ challenge, nonce, redirect string }

func newCodeIssuer(t *testing.T) *codeIssuer {
	ci := &codeIssuer{testIssuer: newTestIssuer(t), codes: map[string]authRequest{}}
	ci.addKey(t, "k1", true)
	mux := http.NewServeMux()
	ci.srv = httptest.NewServer(mux)
	t.Cleanup(ci.srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": ci.srv.URL, "authorization_endpoint": ci.srv.URL + "/authorize",
			"token_endpoint": ci.srv.URL + "/token", "jwks_uri": ci.testIssuer.srv.URL, "id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("response_type") != "code" || q.Get("client_id") != loginClientID || q.Get("code_challenge_method") != "S256" ||
			q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" || !strings.Contains(q.Get("scope"), "openid") {
			http.Error(w, "bad authorization request: "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		code := "code-" + q.Get("state")[:8]
		ci.mu.Lock()
		ci.codes[code] = authRequest{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
		ci.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if r.FormValue("client_id") != "" {
			id, secret = r.FormValue("client_id"), r.FormValue("client_secret")
		}
		ci.mu.Lock()
		req, ok := ci.codes[r.FormValue("code")]
		delete(ci.codes, r.FormValue("code"))
		ci.mu.Unlock()
		sum := sha256.Sum256([]byte(r.FormValue("code_verifier")))
		switch {
		case id != loginClientID || secret != loginClientSecret:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		case !ok || r.FormValue("grant_type") != "authorization_code" || r.FormValue("redirect_uri") != req.redirect ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != req.challenge:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		ci.mu.Lock()
		ci.exchanged++
		ci.mu.Unlock()
		c := claims("dana", func(c map[string]any) {
			c["iss"], c["aud"], c["nonce"] = ci.srv.URL, loginClientID, req.nonce
			if ci.idClaims != nil {
				ci.idClaims(c)
			}
		})
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 300, "id_token": ci.sign(t, "k1", c)})
	})
	return ci
}

// oidcLoginEnv is an env whose page signs in through ci, and a browser-like client: a
// cookie jar, redirects followed, the env's server at 127.0.0.1:50051 and ci at its
// address.
func oidcLoginEnv(t *testing.T, ci *codeIssuer) (*testEnv, *http.Client) {
	t.Helper()
	ctx := context.Background()
	claims := OIDCOptions{Issuer: ci.srv.URL, Audience: testAudience, ClockSkew: 30 * time.Second}
	verifier, err := NewOIDCVerifier(ctx, claims)
	if err != nil {
		t.Fatal(err)
	}
	logins := NewWebLogins("a-test-token-of-some-length")
	login, err := NewOIDCLogin(ctx, logins, OIDCLoginOptions{ClientID: loginClientID, ClientSecret: loginClientSecret, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	logins.EnableOIDC(login)
	e := newEnv(t, envOptions{token: "a-test-token-of-some-length", webLogins: logins, oidc: verifier})
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "127.0.0.1:50051" {
			return e.lis.DialContext(ctx)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, &http.Client{Transport: tr, Jar: jar}
}

const pageOrigin = "http://127.0.0.1:50051"

// whoIsSignedIn is the caller GetServerInfo names for c's cookies, or the error.
func whoIsSignedIn(t *testing.T, c *http.Client) (*pb.Caller, error) {
	t.Helper()
	cl := connect.NewClient[pb.GetServerInfoRequest, pb.GetServerInfoResponse](c, rpcURL("GetServerInfo"))
	resp, err := cl.CallUnary(context.Background(), connect.NewRequest(&pb.GetServerInfoRequest{}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetCaller(), nil
}

// The page signs in through the issuer: the authorization-code flow with PKCE, the
// code exchanged at the token endpoint, the ID token verified, and the browser holds
// the HttpOnly, SameSite session cookie of the principal the token names.
func TestOIDCLoginSignsTheBrowserIn(t *testing.T) {
	ci := newCodeIssuer(t)
	idExpiry := time.Now().Add(time.Hour).Truncate(time.Second)
	ci.idClaims = func(c map[string]any) { c["exp"] = idExpiry.Unix() }
	_, browser := oidcLoginEnv(t, ci)
	if _, err := whoIsSignedIn(t, browser); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("before signing in: %v; want UNAUTHENTICATED", err)
	}
	// The page asks whether to offer the sign-in.
	head, err := browser.Head(pageOrigin + oidcLoginPath)
	if err != nil {
		t.Fatal(err)
	}
	head.Body.Close()
	if head.StatusCode != http.StatusNoContent || len(head.Cookies()) != 0 {
		t.Fatalf("HEAD %s: %s, cookies %v; want 204 and no flow started", oidcLoginPath, head.Status, head.Cookies())
	}
	resp, err := browser.Get(pageOrigin + oidcLoginPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `url=/`) {
		t.Fatalf("the callback answered %s: %s", resp.Status, body)
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == webSessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %v; want an HttpOnly, SameSite=Strict one", session)
	}
	// It holds the scopes the ID token gave, so it ends when the token does (an hour).
	if d := session.Expires.Sub(idExpiry); d < -time.Second || d > time.Second {
		t.Errorf("the session cookie expires %s; want it to end with the ID token, %s", session.Expires, idExpiry)
	}
	caller, err := whoIsSignedIn(t, browser)
	if err != nil {
		t.Fatal(err)
	}
	if caller.GetPrincipal() != "dana" || caller.GetVia() != viaWebSession+" ("+viaOIDC+")" || strings.Join(caller.GetScopes(), ",") != "read,write" {
		t.Fatalf("signed in as %v; want dana through the issuer, with the token's scopes", caller)
	}
	// The code was used up: the same callback again is refused (the flow cookie is gone).
	again, err := browser.Get(pageOrigin + oidcCallbackPath + "?code=x&state=y")
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusBadRequest {
		t.Errorf("a callback without its flow: %s; want 400", again.Status)
	}
}

// A callback whose state is not the flow's, an ID token for another nonce or audience,
// or a token endpoint that refuses the exchange sign nobody in.
func TestOIDCLoginRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		idClaims func(map[string]any)
		// redirect edits the issuer's redirect back to agenticd.
		redirect func(*url.URL)
		want     int
	}{
		{"state changed", nil, func(u *url.URL) {
			q := u.Query()
			q.Set("state", "forged")
			u.RawQuery = q.Encode()
		}, http.StatusBadRequest},
		{"another code", nil, func(u *url.URL) {
			q := u.Query()
			q.Set("code", "code-unknown")
			u.RawQuery = q.Encode()
		}, http.StatusBadGateway},
		{"another nonce", func(c map[string]any) { c["nonce"] = "replayed" }, nil, http.StatusForbidden},
		{"another audience", func(c map[string]any) { c["aud"] = "someone-else" }, nil, http.StatusForbidden},
		{"expired", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }, nil, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ci := newCodeIssuer(t)
			ci.idClaims = tc.idClaims
			_, browser := oidcLoginEnv(t, ci)
			browser.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
				if tc.redirect != nil && r.URL.Path == oidcCallbackPath {
					tc.redirect(r.URL)
				}
				return nil
			}
			resp, err := browser.Get(pageOrigin + oidcLoginPath)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("callback: %s; want %d", resp.Status, tc.want)
			}
			if _, err := whoIsSignedIn(t, browser); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("after a refused sign-in: %v; want UNAUTHENTICATED", err)
			}
		})
	}
}

// The PKCE verifier is what the token endpoint checks: an exchange with another flow's
// verifier is refused.
func TestOIDCLoginNeedsTheFlowsVerifier(t *testing.T) {
	ci := newCodeIssuer(t)
	_, browser := oidcLoginEnv(t, ci)
	// Start a flow and keep its redirect to the issuer, then start another: the browser
	// holds the second flow's cookie when the first's code comes back.
	browser.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	first, err := browser.Get(pageOrigin + oidcLoginPath)
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	second, err := browser.Get(pageOrigin + oidcLoginPath)
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	secondURL, _ := url.Parse(second.Header.Get("Location"))
	// The first authorization, with the second's state so that the state check passes.
	authURL, _ := url.Parse(first.Header.Get("Location"))
	q := authURL.Query()
	q.Set("state", secondURL.Query().Get("state"))
	authURL.RawQuery = q.Encode()
	browser.CheckRedirect = nil
	resp, err := browser.Get(authURL.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ci.mu.Lock()
	exchanged := ci.exchanged
	ci.mu.Unlock()
	if resp.StatusCode != http.StatusBadGateway || exchanged != 0 {
		t.Errorf("a code exchanged with another flow's verifier: %s, %d exchanged; want 502 and none", resp.Status, exchanged)
	}
}

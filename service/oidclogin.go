package service

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// The web page's sign-in through an OpenID Connect issuer: the authorization-code flow
// with PKCE (S256), state and nonce.
const (
	// oidcLoginPath starts the flow; the issuer sends the browser back to
	// oidcCallbackPath, which must be among the client's registered redirect URIs.
	oidcLoginPath    = "/login/oidc"
	oidcCallbackPath = "/login/oidc/callback"
	// oidcFlowCookie holds the flow's state, nonce and PKCE verifier, signed, until the
	// browser comes back: no state is kept here, so any replica may finish the flow.
	// SameSite=Lax: it must come along on the issuer's redirect back, a cross-site
	// navigation that a Strict cookie would miss.
	oidcFlowCookie = "agenticd_oidc_flow"
	oidcFlowTTL    = 10 * time.Minute
)

// OIDCLoginOptions configures the web page's sign-in through an issuer.
type OIDCLoginOptions struct {
	// ClientID (and ClientSecret, for a confidential client) are agenticd's client at the
	// issuer. The ID tokens it receives are for ClientID.
	ClientID, ClientSecret string
	// Claims map the ID token to a principal as bearer JWTs are (Issuer, JWKSURL and the
	// claims; Audience is ClientID here). Discovery at Issuer finds the endpoints.
	Claims OIDCOptions
	Logger *slog.Logger
}

// OIDCLogin signs browsers in through an OpenID Connect issuer into the same session
// cookie as the one-time links.
type OIDCLogin struct {
	oauth    oauth2.Config
	verifier *OIDCVerifier
	logins   *WebLogins
	logger   *slog.Logger
}

// NewOIDCLogin asks the issuer's discovery document for its endpoints (ctx bounds it)
// and signs browsers in through them with logins' cookies.
func NewOIDCLogin(ctx context.Context, logins *WebLogins, opts OIDCLoginOptions) (*OIDCLogin, error) {
	if opts.ClientID == "" {
		return nil, errors.New("oidc login: a client id is required")
	}
	provider, err := oidc.NewProvider(ctx, opts.Claims.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discovery at %s for the web page's sign-in: %w", opts.Claims.Issuer, err)
	}
	claims := opts.Claims
	claims.Audience = opts.ClientID
	v, err := NewOIDCVerifier(ctx, claims)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &OIDCLogin{
		oauth: oauth2.Config{ClientID: opts.ClientID, ClientSecret: opts.ClientSecret, Endpoint: provider.Endpoint(),
			Scopes: []string{oidc.ScopeOpenID, "profile", "email"}},
		verifier: v, logins: logins, logger: logger,
	}, nil
}

// oidcFlow is what the flow cookie holds.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Expires  int64  `json:"e"`
}

// serve answers the flow's two paths; false for any other path.
func (o *OIDCLogin) serve(w http.ResponseWriter, r *http.Request, secure bool) bool {
	switch r.URL.Path {
	case oidcLoginPath:
		o.start(w, r, secure)
	case oidcCallbackPath:
		o.callback(w, r, secure)
	default:
		return false
	}
	return true
}

// redirectURL is where the issuer sends the browser back: this server, as the browser
// reached it.
func redirectURL(r *http.Request, secure bool) string {
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return scheme + "://" + r.Host + oidcCallbackPath
}

func randomString() string {
	var raw [24]byte
	_, _ = rand.Read(raw[:]) // crypto/rand never fails on Linux (Go 1.24+ panics instead)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// start sends the browser to the issuer with a fresh state, nonce and PKCE challenge,
// and keeps them in the flow cookie.
func (o *OIDCLogin) start(w http.ResponseWriter, r *http.Request, secure bool) {
	if r.Method == http.MethodHead {
		// The page asks whether to offer this sign-in; nothing starts.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "sign in with GET "+oidcLoginPath, http.StatusMethodNotAllowed)
		return
	}
	flow := oidcFlow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		Expires: o.logins.now().Add(oidcFlowTTL).Unix()}
	b, _ := json.Marshal(flow) // strings and an int: cannot fail
	http.SetCookie(w, &http.Cookie{Name: oidcFlowCookie, Value: o.logins.sign(b), Path: oidcCallbackPath,
		MaxAge: int(oidcFlowTTL / time.Second), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	cfg := o.oauth
	cfg.RedirectURL = redirectURL(r, secure)
	http.Redirect(w, r, cfg.AuthCodeURL(flow.State, oidc.Nonce(flow.Nonce), oauth2.S256ChallengeOption(flow.Verifier)), http.StatusFound)
}

// callback checks the state against the flow cookie, exchanges the code at the issuer's
// token endpoint with the PKCE verifier, verifies the ID token (signature, iss, aud =
// the client id, exp, and the nonce), and signs the browser in as its principal.
func (o *OIDCLogin) callback(w http.ResponseWriter, r *http.Request, secure bool) {
	if r.Method != http.MethodGet {
		http.Error(w, "the issuer sends the browser back with GET", http.StatusMethodNotAllowed)
		return
	}
	// The flow cookie is used once, whatever the outcome.
	http.SetCookie(w, &http.Cookie{Name: oidcFlowCookie, Path: oidcCallbackPath, MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		o.refuse(w, http.StatusForbidden, "the identity provider refused the sign-in: "+e+" "+q.Get("error_description"))
		return
	}
	var flow oidcFlow
	c, err := r.Cookie(oidcFlowCookie)
	if err == nil {
		var b []byte
		if b, err = o.logins.verify(c.Value); err == nil {
			err = json.Unmarshal(b, &flow)
		}
	}
	if err != nil || flow.State == "" || !o.logins.now().Before(time.Unix(flow.Expires, 0)) {
		o.refuse(w, http.StatusBadRequest, "this sign-in did not start here or took longer than 10 minutes: start again")
		return
	}
	if !hmac.Equal([]byte(q.Get("state")), []byte(flow.State)) {
		o.refuse(w, http.StatusBadRequest, "the sign-in's state does not match: start again")
		return
	}
	cfg := o.oauth
	cfg.RedirectURL = redirectURL(r, secure)
	tok, err := cfg.Exchange(r.Context(), q.Get("code"), oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		o.logger.WarnContext(r.Context(), "the identity provider did not exchange a sign-in code", "err", err)
		o.refuse(w, http.StatusBadGateway, "the identity provider did not accept the sign-in code: start again")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		o.refuse(w, http.StatusBadGateway, "the identity provider sent no ID token")
		return
	}
	who, idToken, err := o.verifier.verify(r.Context(), raw)
	if err != nil {
		o.logger.WarnContext(r.Context(), "an ID token from the identity provider did not verify", "err", err)
		o.refuse(w, http.StatusForbidden, "the identity provider's ID token did not verify: start again")
		return
	}
	if !hmac.Equal([]byte(idToken.Nonce), []byte(flow.Nonce)) {
		o.refuse(w, http.StatusForbidden, "the ID token's nonce does not match this sign-in: start again")
		return
	}
	// The session holds the scopes the ID token gave, so it lasts no longer than the
	// token: the browser then signs in again (a redirect while its sign-in at the
	// issuer lasts) and gets what the issuer says now.
	expires := o.logins.now().Add(webSessionTTL)
	if idToken.Expiry.Before(expires) {
		expires = idToken.Expiry
	}
	o.logins.setSession(w, who, expires, secure)
	o.logger.InfoContext(r.Context(), "a browser signed in through the identity provider", "principal", who.Name)
	// The session cookie is SameSite=Strict, and this request came from the issuer's
	// site: a browser that counts a redirect chain's sites (RFC 6265bis) would not send
	// the cookie after a redirect. The page navigates itself instead, a navigation of
	// agenticd's own site.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, `<!doctype html><meta http-equiv="refresh" content="0;url=/"><title>agenticd: signed in</title><p><a href="/">Signed in: continue</a></p>`)
}

func (o *OIDCLogin) refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><title>agenticd: sign-in failed</title><p>%s</p><p><a href="%s">Sign in again</a></p>`,
		html.EscapeString(strings.TrimSpace(msg)), oidcLoginPath)
}

package service

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// Credentials are what callers authenticate with. Every RPC but health needs one of
// them, on loopback too: a command an agent runs must not drive agenticd's own API.
type Credentials struct {
	// Tokens are the bearer tokens of the owner principal: the configured token and the
	// local token (a file in the data dir). Empty ones are ignored.
	Tokens []string
	// Principals are the config's static principals (tokens by SHA-256, certificates).
	Principals []StaticPrincipal
	// OIDC verifies bearer tokens that are JWTs; nil: none are accepted.
	OIDC TokenVerifier
	// ReplicaToken is the token replicas forward calls with: a call carrying it, marked
	// forwarded, may name the principal the forwarding replica authenticated.
	ReplicaToken string
	// WebLogins signs browsers in to the web page with one-time links; nil: the page
	// works only with a token typed into it.
	WebLogins *WebLogins
}

// tokens are the non-empty accepted tokens.
func (c Credentials) tokens() [][]byte {
	var out [][]byte
	for _, t := range c.Tokens {
		if t != "" {
			out = append(out, []byte(t))
		}
	}
	return out
}

type webSessionKey struct{}

// withWebSession marks a request that carried a valid web session cookie with the
// principal the cookie stands for. Only the HTTP gateway sets it: nothing a client sends
// can.
func withWebSession(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, webSessionKey{}, p)
}

// tokenInvalid is UNAUTHENTICATED: the API's own credentials, never an agent's login.
func tokenInvalid(msg string) error {
	st, _ := toStatus(withReason(pb.ErrorReason_ERROR_REASON_TOKEN_INVALID, errors.New(msg)))
	return st.Err()
}

// clientIdentity names the caller for the audit log: its principal and how it
// authenticated.
func clientIdentity(ctx context.Context) string {
	p := callerOf(ctx)
	if p.Name == "" {
		return "no credentials"
	}
	return p.Name + " (" + p.Via + ")"
}

// Web sign-in: a one-time code, minted for a caller that has credentials, is exchanged
// at /login for a cookie that stands for them on that browser.
const (
	// webLoginPath is where a browser redeems a code.
	webLoginPath = "/login"
	// webLoginCodeTTL is how long a code may wait to be used.
	webLoginCodeTTL = 15 * time.Minute
	// maxWebLoginCodes bounds the codes waiting to be used; the oldest make room.
	maxWebLoginCodes = 64
	// webSessionCookie holds a signed expiry: agenticd keeps no state for it, so it
	// survives restarts and holds on every replica that shares the signing secret.
	webSessionCookie = "agenticd_session"
	webSessionTTL    = 30 * 24 * time.Hour
)

// WebLogins mints and redeems the web page's one-time sign-in codes and checks the
// cookies they are exchanged for. A cookie stands for the principal that minted its
// code (or signed in through OIDC).
type WebLogins struct {
	key []byte
	now func() time.Time

	mu    sync.Mutex
	codes map[string]pendingLogin

	// oidc signs browsers in through an issuer; nil: one-time links only.
	oidc *OIDCLogin
}

// EnableOIDC signs browsers in through an issuer too (at /login/oidc). Call it before
// serving.
func (w *WebLogins) EnableOIDC(o *OIDCLogin) { w.oidc = o }

// flowLabel keeps the values sign makes apart from session cookies: their MACs cover
// different inputs.
const flowLabel = "oidc-flow:"

// sign is b with a MAC, for a cookie that must come back unchanged.
func (w *WebLogins) sign(b []byte) string {
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(w.mac(append([]byte(flowLabel), b...)))
}

// verify is what sign signed; an error when value was not signed by sign with our key.
func (w *WebLogins) verify(value string) ([]byte, error) {
	p, s, ok := strings.Cut(value, ".")
	b, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(s)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(sig, w.mac(append([]byte(flowLabel), b...))) {
		return nil, errors.New("not a value this server signed")
	}
	return b, nil
}

// pendingLogin is a code waiting to be redeemed.
type pendingLogin struct {
	expires time.Time
	who     Principal
}

// NewWebLogins signs web sessions with a key derived from secret (agenticd's token):
// another secret makes every cookie invalid.
func NewWebLogins(secret string) *WebLogins {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("agenticd web session key"))
	return &WebLogins{key: mac.Sum(nil), now: time.Now, codes: map[string]pendingLogin{}}
}

// NewCode returns a fresh one-time code for the owner (the start-up log's link) and when
// it stops working.
func (w *WebLogins) NewCode() (code string, expires time.Time) {
	return w.newCode(ownerPrincipal(viaToken))
}

// newCode returns a fresh one-time code that signs a browser in as who.
func (w *WebLogins) newCode(who Principal) (code string, expires time.Time) {
	var raw [20]byte
	_, _ = rand.Read(raw[:]) // crypto/rand never fails on Linux (Go 1.24+ panics instead)
	code = base64.RawURLEncoding.EncodeToString(raw[:])
	now := w.now()
	expires = now.Add(webLoginCodeTTL)
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, l := range w.codes {
		if !now.Before(l.expires) {
			delete(w.codes, c)
		}
	}
	for len(w.codes) >= maxWebLoginCodes {
		oldest, oldestExp := "", time.Time{}
		for c, l := range w.codes {
			if oldest == "" || l.expires.Before(oldestExp) {
				oldest, oldestExp = c, l.expires
			}
		}
		delete(w.codes, oldest)
	}
	w.codes[code] = pendingLogin{expires: expires, who: who}
	return code, expires
}

// LoginPath is the path and query that redeem code.
func LoginPath(code string) string { return webLoginPath + "?code=" + code }

// redeem uses up code and returns whom it signs in; false when it is unknown, used or
// expired.
func (w *WebLogins) redeem(code string) (Principal, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.codes[code]
	delete(w.codes, code)
	return l.who, ok && w.now().Before(l.expires)
}

// cookieHeader is the fixed part of a cookie's payload: the expiry and a nonce; the
// principal's JSON follows.
const cookieHeader = 24

// sessionValue is a cookie value: the expiry, a nonce and the principal, and their MAC.
func (w *WebLogins) sessionValue(expires time.Time, who Principal) string {
	payload := make([]byte, 8, cookieHeader+64)
	binary.BigEndian.PutUint64(payload, uint64(expires.Unix()))
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	payload = append(payload, nonce[:]...)
	whoJSON, _ := json.Marshal(who) // strings and an int: cannot fail
	payload = append(payload, whoJSON...)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(w.mac(payload))
}

func (w *WebLogins) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, w.key)
	m.Write(payload)
	return m.Sum(nil)
}

// validSession returns the principal of r's unexpired session cookie signed with our
// key; false when r has none.
func (w *WebLogins) validSession(r *http.Request) (Principal, bool) {
	c, err := r.Cookie(webSessionCookie)
	if err != nil {
		return Principal{}, false
	}
	p, s, ok := strings.Cut(c.Value, ".")
	if !ok {
		return Principal{}, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil || len(payload) <= cookieHeader || !hmac.Equal(sig, w.mac(payload)) {
		return Principal{}, false
	}
	if !w.now().Before(time.Unix(int64(binary.BigEndian.Uint64(payload)), 0)) {
		return Principal{}, false
	}
	var who Principal
	if json.Unmarshal(payload[cookieHeader:], &who) != nil || who.Name == "" {
		return Principal{}, false
	}
	return who, true
}

// setSession signs the browser in as who until expires.
func (w *WebLogins) setSession(rw http.ResponseWriter, who Principal, expires time.Time, secure bool) {
	http.SetCookie(rw, &http.Cookie{
		Name: webSessionCookie, Value: w.sessionValue(expires, who), Path: "/",
		Expires: expires, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
}

// serveLogin redeems ?code= for a session cookie and sends the browser to the page.
func (w *WebLogins) serveLogin(rw http.ResponseWriter, r *http.Request, secure bool) {
	if r.Method != http.MethodGet {
		http.Error(rw, "sign in with GET "+webLoginPath+"?code=...", http.StatusMethodNotAllowed)
		return
	}
	who, ok := w.redeem(r.URL.Query().Get("code"))
	if !ok {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(rw, "<!doctype html><title>agenticd: sign-in link not valid</title><p>%s</p>",
			html.EscapeString("This sign-in link was used already or has expired (links work once, for 15 minutes). Run `agenticctl web` for a new one."))
		return
	}
	w.setSession(rw, who, w.now().Add(webSessionTTL), secure)
	// The code must not stay in the address bar or the history.
	http.Redirect(rw, r, "/", http.StatusSeeOther)
}

// CreateWebLogin makes a one-time sign-in link for the web page.
func (s *Service) CreateWebLogin(ctx context.Context, _ *pb.CreateWebLoginRequest) (*pb.CreateWebLoginResponse, error) {
	if s.webLogins == nil {
		return nil, s.fail(ctx, "CreateWebLogin", presenters.WithDetail(fmt.Errorf("%w: this server signs browsers in with a token only", presenters.ErrUnsupported), "unsupported", "web_login"))
	}
	// The link signs the browser in as the caller, not as anyone more.
	code, expires := s.webLogins.newCode(callerOf(ctx))
	resp := &pb.CreateWebLoginResponse{Path: LoginPath(code), ExpireTime: timestamppb.New(expires)}
	if s.pageURL != nil {
		if base := s.pageURL(); base != "" {
			resp.Url = base + resp.Path
		}
	}
	return resp, nil
}

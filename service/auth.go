package service

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/presenters"
)

// Credentials are what callers authenticate with. Every RPC but health needs one of
// them, on loopback too: a command an agent runs must not drive agenticd's own API.
type Credentials struct {
	// Tokens are the bearer tokens accepted: the configured token and the local token
	// (a file in the data dir). Empty ones are ignored.
	Tokens []string
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

// How a caller proved who it is, for the audit log and the access checks.
const (
	viaLocalSocket = "local socket"
	viaWebSession  = "web session"
)

type webSessionKey struct{}

// withWebSession marks a request that carried a valid web session cookie. Only the HTTP
// gateway sets it: nothing a client sends can.
func withWebSession(ctx context.Context) context.Context {
	return context.WithValue(ctx, webSessionKey{}, true)
}

// authenticatedBy says how the caller of ctx authenticated without a bearer token: the
// local socket (its peer runs as agenticd's own user) or the page's cookie; "" when it
// did neither.
func authenticatedBy(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && localcred.IsLocal(p.LocalAddr) {
		return viaLocalSocket
	}
	if v, _ := ctx.Value(webSessionKey{}).(bool); v {
		return viaWebSession
	}
	return ""
}

// checkCredentials admits a caller that came through the local socket, carries a web
// session, or sends `authorization: Bearer <token>` with an accepted token (compared in
// constant time; the scheme is case-insensitive, RFC 6750 via RFC 9110 section 11.1).
func checkCredentials(ctx context.Context, tokens [][]byte) error {
	if authenticatedBy(ctx) != "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) == 0 {
		return tokenInvalid("missing credentials (every call needs them, on this machine too): agenticctl finds them itself; " +
			"other clients send `authorization: Bearer <token>` with the token in the file `token` in agenticd's data dir, or the configured one; " +
			"a browser opens the sign-in link in agenticd's start-up log, or one from `agenticctl web`")
	}
	scheme, given, _ := strings.Cut(values[0], " ")
	given = strings.TrimLeft(given, " ")
	if strings.EqualFold(scheme, "Bearer") {
		for _, t := range tokens {
			if subtle.ConstantTimeCompare([]byte(given), t) == 1 {
				return nil
			}
		}
	}
	return tokenInvalid("invalid bearer token: use the token configured in agenticd (token, AGENTICD_TOKEN) or the one in the file `token` in its data dir")
}

// tokenInvalid is UNAUTHENTICATED: the API's own credentials, never an agent's login.
func tokenInvalid(msg string) error {
	st, _ := toStatus(withReason(pb.ErrorReason_ERROR_REASON_TOKEN_INVALID, errors.New(msg)))
	return st.Err()
}

// clientIdentity names the credential the caller presented: the local socket, a web
// session, a fingerprint of its bearer token (never the token), or "no token".
func clientIdentity(ctx context.Context) string {
	if via := authenticatedBy(ctx); via != "" {
		return via
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
			return "token sha256:" + hex.EncodeToString(sum[:])[:12]
		}
	}
	return "no token"
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
// cookies they are exchanged for.
type WebLogins struct {
	key []byte
	now func() time.Time

	mu    sync.Mutex
	codes map[string]time.Time // code -> expiry
}

// NewWebLogins signs web sessions with a key derived from secret (agenticd's token):
// another secret makes every cookie invalid.
func NewWebLogins(secret string) *WebLogins {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("agenticd web session key"))
	return &WebLogins{key: mac.Sum(nil), now: time.Now, codes: map[string]time.Time{}}
}

// NewCode returns a fresh one-time code and when it stops working.
func (w *WebLogins) NewCode() (code string, expires time.Time) {
	var raw [20]byte
	_, _ = rand.Read(raw[:]) // crypto/rand never fails on Linux (Go 1.24+ panics instead)
	code = base64.RawURLEncoding.EncodeToString(raw[:])
	now := w.now()
	expires = now.Add(webLoginCodeTTL)
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, exp := range w.codes {
		if !now.Before(exp) {
			delete(w.codes, c)
		}
	}
	for len(w.codes) >= maxWebLoginCodes {
		oldest, oldestExp := "", time.Time{}
		for c, exp := range w.codes {
			if oldest == "" || exp.Before(oldestExp) {
				oldest, oldestExp = c, exp
			}
		}
		delete(w.codes, oldest)
	}
	w.codes[code] = expires
	return code, expires
}

// LoginPath is the path and query that redeem code.
func LoginPath(code string) string { return webLoginPath + "?code=" + code }

// redeem uses up code; false when it is unknown, used or expired.
func (w *WebLogins) redeem(code string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	exp, ok := w.codes[code]
	delete(w.codes, code)
	return ok && w.now().Before(exp)
}

// sessionValue is a cookie value: the expiry and a nonce, and their MAC.
func (w *WebLogins) sessionValue(expires time.Time) string {
	payload := make([]byte, 8, 24)
	binary.BigEndian.PutUint64(payload, uint64(expires.Unix()))
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	payload = append(payload, nonce[:]...)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(w.mac(payload))
}

func (w *WebLogins) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, w.key)
	m.Write(payload)
	return m.Sum(nil)
}

// validSession reports whether r carries an unexpired session cookie signed with our key.
func (w *WebLogins) validSession(r *http.Request) bool {
	c, err := r.Cookie(webSessionCookie)
	if err != nil {
		return false
	}
	p, s, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil || len(payload) != 24 || !hmac.Equal(sig, w.mac(payload)) {
		return false
	}
	return w.now().Before(time.Unix(int64(binary.BigEndian.Uint64(payload)), 0))
}

// serveLogin redeems ?code= for a session cookie and sends the browser to the page.
func (w *WebLogins) serveLogin(rw http.ResponseWriter, r *http.Request, secure bool) {
	if r.Method != http.MethodGet {
		http.Error(rw, "sign in with GET "+webLoginPath+"?code=...", http.StatusMethodNotAllowed)
		return
	}
	if !w.redeem(r.URL.Query().Get("code")) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(rw, "<!doctype html><title>agenticd: sign-in link not valid</title><p>%s</p>",
			html.EscapeString("This sign-in link was used already or has expired (links work once, for 15 minutes). Run `agenticctl web` for a new one."))
		return
	}
	expires := w.now().Add(webSessionTTL)
	http.SetCookie(rw, &http.Cookie{
		Name: webSessionCookie, Value: w.sessionValue(expires), Path: "/",
		Expires: expires, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
	// The code must not stay in the address bar or the history.
	http.Redirect(rw, r, "/", http.StatusSeeOther)
}

// CreateWebLogin makes a one-time sign-in link for the web page.
func (s *Service) CreateWebLogin(ctx context.Context, _ *pb.CreateWebLoginRequest) (*pb.CreateWebLoginResponse, error) {
	if s.webLogins == nil {
		return nil, s.fail(ctx, "CreateWebLogin", presenters.WithDetail(fmt.Errorf("%w: this server signs browsers in with a token only", presenters.ErrUnsupported), "unsupported", "web_login"))
	}
	code, expires := s.webLogins.NewCode()
	resp := &pb.CreateWebLoginResponse{Path: LoginPath(code), ExpireTime: timestamppb.New(expires)}
	if s.pageURL != nil {
		if base := s.pageURL(); base != "" {
			resp.Url = base + resp.Path
		}
	}
	return resp, nil
}

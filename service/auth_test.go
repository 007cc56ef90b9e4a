package service

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/localcred"
)

// Every RPC needs credentials, also with no token configured: a caller without any is
// refused on native gRPC and on the HTTP protocols.
func TestEveryRPCNeedsCredentials(t *testing.T) {
	e := newEnv(t, envOptions{})
	conn := dialListener(t, e.lis, "")
	defer conn.Close()
	_, err := pb.NewAgenticServiceClient(conn).CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID,
		Config: &pb.SessionConfig{Workspace: e.root}})
	wantReason(t, err, codes.Unauthenticated, pb.ErrorReason_ERROR_REASON_TOKEN_INVALID, "")
	resp := post(t, e.anonymousHTTPClient(t, false), rpcURL("CreateSession"), "application/json",
		[]byte(`{"agentId":"`+fakeID+`","config":{"workspace":"`+e.root+`"}}`), nil)
	if body := readAll(t, resp.Body); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Connect CreateSession without credentials: %s %s", resp.Status, body)
	}
	e.fake.mu.Lock()
	defer e.fake.mu.Unlock()
	if n := len(e.fake.sessions); n != 0 {
		t.Fatalf("%d sessions were created without credentials", n)
	}
}

// A caller on the local socket is agenticd's own user (the kernel says so): it needs no
// token, in either protocol.
func TestLocalSocketNeedsNoToken(t *testing.T) {
	dir, err := os.MkdirTemp("", "agenticd-sock-") // short: a socket's path is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, localcred.SocketName)
	e := newEnv(t, envOptions{localSocket: path})
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewAgenticServiceClient(conn).ListAgents(bg, &pb.ListAgentsRequest{}); err != nil {
		t.Fatalf("native gRPC on the local socket: %v", err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	defer tr.CloseIdleConnections()
	resp := post(t, &http.Client{Transport: tr}, rpcURL("ListAgents"), "application/json", []byte(`{}`), nil)
	if body := readAll(t, resp.Body); resp.StatusCode != http.StatusOK {
		t.Fatalf("Connect on the local socket: %s %s", resp.Status, body)
	}
	// The same server over TCP (loopback) still wants a token.
	anon := dialListener(t, e.lis, "")
	defer anon.Close()
	_, err = pb.NewAgenticServiceClient(anon).ListAgents(bg, &pb.ListAgentsRequest{})
	wantCode(t, err, codes.Unauthenticated)
}

// A one-time link signs a browser in: the code becomes an HttpOnly, SameSite=Strict
// cookie that authenticates the page's calls, once; a forged or expired one does not.
func TestWebLogin(t *testing.T) {
	logins := NewWebLogins("the-secret")
	e := newEnv(t, envOptions{webLogins: logins})
	link, err := e.client.CreateWebLogin(bg, &pb.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link.GetPath(), "/login?code=") || !link.GetExpireTime().AsTime().After(time.Now()) {
		t.Fatalf("link %v", link)
	}
	anon := e.anonymousHTTPClient(t, false)
	anon.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := anon.Get("http://127.0.0.1:50051" + path)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := get(link.GetPath())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == webSessionCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure without TLS", cookie)
	}
	call := func(c *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, rpcURL("ListAgents"), strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(c)
		resp, err := anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(cookie); got != http.StatusOK {
		t.Fatalf("call with the session cookie: %d", got)
	}
	if resp := get(link.GetPath()); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("the same code again: %s, cookies %v", resp.Status, resp.Cookies())
	}
	if resp := get("/login?code=made-up"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a made-up code: %s", resp.Status)
	}
	forged := *cookie
	payload, sig, _ := strings.Cut(cookie.Value, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1 // another nonce, the same signature
	forged.Value = base64.RawURLEncoding.EncodeToString(raw) + "." + sig
	if got := call(&forged); got != http.StatusUnauthorized {
		t.Fatalf("call with a forged cookie: %d", got)
	}
	other := *cookie
	other.Value = NewWebLogins("another-secret").sessionValue(time.Now().Add(time.Hour), ownerPrincipal(viaToken))
	if got := call(&other); got != http.StatusUnauthorized {
		t.Fatalf("call with a cookie signed by another secret: %d", got)
	}
	stale := *cookie
	stale.Value = logins.sessionValue(time.Now().Add(-time.Minute), ownerPrincipal(viaToken))
	if got := call(&stale); got != http.StatusUnauthorized {
		t.Fatalf("call with an expired session: %d", got)
	}
	// A code not used in time stops working.
	code, _ := logins.NewCode()
	logins.now = func() time.Time { return time.Now().Add(webLoginCodeTTL + time.Second) }
	if resp := get(LoginPath(code)); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an expired code: %s", resp.Status)
	}
}

func TestWebLoginCodesAreBounded(t *testing.T) {
	logins := NewWebLogins("s")
	first, _ := logins.NewCode()
	for range maxWebLoginCodes {
		logins.NewCode()
	}
	if len(logins.codes) != maxWebLoginCodes {
		t.Fatalf("%d codes held, want %d", len(logins.codes), maxWebLoginCodes)
	}
	if _, ok := logins.redeem(first); ok {
		t.Fatal("the oldest code still works after more than the bound were made")
	}
}

func TestCreateWebLoginWithoutWebLogins(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, err := e.client.CreateWebLogin(bg, &pb.CreateWebLoginRequest{})
	wantReason(t, err, codes.FailedPrecondition, pb.ErrorReason_ERROR_REASON_UNSUPPORTED, "", "unsupported")
}

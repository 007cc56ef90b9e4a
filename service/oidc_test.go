package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// testIssuer serves a JWKS and signs tokens with its keys.
type testIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey // by key id
	served  []string                     // the key ids the JWKS lists
	fetches atomic.Int32
}

func newTestIssuer(t testing.TB) *testIssuer {
	is := &testIssuer{keys: map[string]*ecdsa.PrivateKey{}}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		var set jose.JSONWebKeySet
		for _, kid := range is.served {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &is.keys[kid].PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// addKey makes a key; serve lists it in the JWKS.
func (is *testIssuer) addKey(t testing.TB, kid string, serve bool) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	if serve {
		is.served = append(is.served, kid)
	}
}

const testIssuerURL, testAudience = "https://issuer.test", "agenticd"

func (is *testIssuer) sign(t testing.TB, kid string, claims map[string]any) string {
	is.mu.Lock()
	k := is.keys[kid]
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	sig, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sig.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// claims are valid ones for sub, changed by edit.
func claims(sub string, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": testIssuerURL, "aud": testAudience, "sub": sub, "exp": now.Add(time.Hour).Unix(),
		"nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(), "scope": "openid read write", "groups": []string{"devs"}}
	if edit != nil {
		edit(c)
	}
	return c
}

func (is *testIssuer) verifier(t testing.TB) *OIDCVerifier {
	v, err := NewOIDCVerifier(context.Background(), OIDCOptions{Issuer: testIssuerURL, Audience: testAudience, JWKSURL: is.srv.URL,
		GroupsClaim: "groups", GroupScopes: map[string]Scopes{"ops": ScopeAdmin}, ClockSkew: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// JWTs signed by the test's issuer authenticate; expired ones, others' audiences or
// issuers, unknown keys do not; a key the issuer rotated in is fetched when a token
// names it.
func TestOIDCTokens(t *testing.T) {
	is := newTestIssuer(t)
	is.addKey(t, "k1", true)
	is.addKey(t, "stranger", false)
	e := newEnv(t, envOptions{oidc: is.verifier(t)})
	callAs := func(token string) (*pb.GetServerInfoResponse, error) {
		conn := dialListener(t, e.lis, token)
		defer conn.Close()
		return pb.NewAgenticServiceClient(conn).GetServerInfo(bg, &pb.GetServerInfoRequest{})
	}
	info, err := callAs(is.sign(t, "k1", claims("dana", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c := info.GetCaller(); c.GetPrincipal() != "dana" || c.GetVia() != viaOIDC || strings.Join(c.GetScopes(), ",") != "read,write" || strings.Join(c.GetGroups(), ",") != "devs" {
		t.Fatalf("caller %v", c)
	}
	// Skew: a token that expired a moment ago, or starts in a moment, still counts.
	if _, err := callAs(is.sign(t, "k1", claims("dana", func(c map[string]any) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() }))); err != nil {
		t.Fatalf("a token expired within the skew: %v", err)
	}
	for _, c := range []struct {
		name, kid string
		edit      func(map[string]any)
	}{
		{"expired", "k1", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }},
		{"not yet valid", "k1", func(c map[string]any) { c["nbf"] = time.Now().Add(2 * time.Minute).Unix() }},
		{"wrong audience", "k1", func(c map[string]any) { c["aud"] = "someone-else" }},
		{"wrong issuer", "k1", func(c map[string]any) { c["iss"] = "https://evil.test" }},
		{"unknown key", "stranger", nil},
		{"no exp", "k1", func(c map[string]any) { delete(c, "exp") }},
	} {
		_, err := callAs(is.sign(t, c.kid, claims("dana", c.edit)))
		if st := wantCode(t, err, codes.Unauthenticated); errorInfo(st).GetReason() != reasonName(pb.ErrorReason_ERROR_REASON_TOKEN_INVALID) {
			t.Errorf("%s: %v", c.name, st)
		}
	}
	// A group's scopes: admin through ops.
	info, err = callAs(is.sign(t, "k1", claims("erin", func(c map[string]any) { c["scope"] = ""; c["groups"] = []string{"ops"} })))
	if err != nil || !strings.Contains(strings.Join(info.GetCaller().GetScopes(), ","), "admin") {
		t.Fatalf("ops member: %v, %v", info, err)
	}
	// No scope at all: the call is refused naming the one it needs.
	_, err = callAs(is.sign(t, "k1", claims("frank", func(c map[string]any) { c["scope"] = "openid"; delete(c, "groups") })))
	if st := wantCode(t, err, codes.PermissionDenied); errorInfo(st).GetMetadata()["scope"] != "read" {
		t.Fatalf("scopeless token: %v", st)
	}
	// Rotation: the issuer starts signing with a new key; its first token fetches it.
	is.addKey(t, "k2", true)
	before := is.fetches.Load()
	if _, err := callAs(is.sign(t, "k2", claims("dana", nil))); err != nil {
		t.Fatalf("a token of the rotated key: %v", err)
	}
	if is.fetches.Load() == before {
		t.Fatal("the rotated key was not fetched")
	}
	// Cached: more tokens of known keys fetch nothing.
	before = is.fetches.Load()
	for range 3 {
		if _, err := callAs(is.sign(t, "k1", claims("dana", nil))); err != nil {
			t.Fatal(err)
		}
	}
	if n := is.fetches.Load() - before; n != 0 {
		t.Fatalf("%d fetches of the key set for tokens of cached keys", n)
	}
}

// BenchmarkVerifyJWT is the cost of authenticating one call's JWT, keys cached.
func BenchmarkVerifyJWT(b *testing.B) {
	is := newTestIssuer(b)
	is.addKey(b, "k1", true)
	v := is.verifier(b)
	raw := is.sign(b, "k1", claims("dana", nil))
	if _, err := v.VerifyToken(bg, raw); err != nil { // fetches the keys once
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.VerifyToken(bg, raw); err != nil {
			b.Fatal(err)
		}
	}
}

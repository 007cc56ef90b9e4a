package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCOptions configures NewOIDCVerifier.
type OIDCOptions struct {
	Issuer, Audience string
	// JWKSURL is the issuer's key set; empty: discovery at Issuer finds it.
	JWKSURL string
	// PrincipalClaim (default sub) names the principal; ScopesClaim (default scope)
	// holds scopes, space-separated or as a list; GroupsClaim the groups, which
	// GroupScopes gives scopes.
	PrincipalClaim, ScopesClaim, GroupsClaim string
	GroupScopes                              map[string]Scopes
	// ClockSkew is how far exp and nbf may be off.
	ClockSkew time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// OIDCVerifier verifies JWTs from one issuer with coreos/go-oidc: the signature against
// the issuer's key set (cached, fetched again when a token names a key it does not
// hold, so the issuer's key rotation needs nothing here), iss, aud, exp and nbf within
// the clock skew. It is a TokenVerifier.
type OIDCVerifier struct {
	verifier *oidc.IDTokenVerifier
	opts     OIDCOptions
}

var _ TokenVerifier = (*OIDCVerifier)(nil)

// NewOIDCVerifier returns the verifier; without a JWKS URL it asks the issuer's
// discovery document for it, so the issuer must answer then. ctx bounds discovery and
// carries the HTTP client the key set uses (oidc.ClientContext), if any.
func NewOIDCVerifier(ctx context.Context, opts OIDCOptions) (*OIDCVerifier, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PrincipalClaim == "" {
		opts.PrincipalClaim = "sub"
	}
	if opts.ScopesClaim == "" {
		opts.ScopesClaim = "scope"
	}
	skew, now := opts.ClockSkew, opts.Now
	cfg := &oidc.Config{ClientID: opts.Audience,
		// Asymmetric algorithms only: a key set never holds a shared secret.
		SupportedSigningAlgs: []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
			oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA},
		// go-oidc has no leeway for exp: its clock runs skew behind ours. nbf is checked
		// against the skew in VerifyToken.
		Now: func() time.Time { return now().Add(-skew) }}
	v := &OIDCVerifier{opts: opts}
	if opts.JWKSURL != "" {
		// The key set lives as long as the verifier: its fetches must not end with ctx.
		v.verifier = oidc.NewVerifier(opts.Issuer, oidc.NewRemoteKeySet(context.WithoutCancel(ctx), opts.JWKSURL), cfg)
		return v, nil
	}
	provider, err := oidc.NewProvider(ctx, opts.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discovery at %s: %w (or set oidc.jwks_url)", opts.Issuer, err)
	}
	v.verifier = provider.Verifier(cfg)
	return v, nil
}

// VerifyToken checks raw and returns the principal its claims name.
func (v *OIDCVerifier) VerifyToken(ctx context.Context, raw string) (Principal, error) {
	p, _, err := v.verify(ctx, raw)
	return p, err
}

// verify checks raw and returns the principal its claims name, and the token.
func (v *OIDCVerifier) verify(ctx context.Context, raw string) (Principal, *oidc.IDToken, error) {
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return Principal{}, nil, err
	}
	p, err := v.principal(tok)
	return p, tok, err
}

// principal is the principal a verified token's claims name.
func (v *OIDCVerifier) principal(tok *oidc.IDToken) (Principal, error) {
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, err
	}
	var nbf float64
	if b, ok := claims["nbf"]; ok && json.Unmarshal(b, &nbf) == nil && time.Unix(int64(nbf), 0).After(v.opts.Now().Add(v.opts.ClockSkew)) {
		return Principal{}, fmt.Errorf("the token is not valid before %s", time.Unix(int64(nbf), 0).UTC().Format(time.RFC3339))
	}
	var name string
	if b, ok := claims[v.opts.PrincipalClaim]; !ok || json.Unmarshal(b, &name) != nil || name == "" {
		return Principal{}, fmt.Errorf("the token has no string claim %q to name its principal", v.opts.PrincipalClaim)
	}
	p := Principal{Name: name, Via: viaOIDC}
	for _, s := range stringsClaim(claims[v.opts.ScopesClaim]) {
		if sc, ok := ParseScope(s); ok {
			p.Scopes |= sc
		}
	}
	if v.opts.GroupsClaim != "" {
		p.Groups = stringsClaim(claims[v.opts.GroupsClaim])
		for _, g := range p.Groups {
			p.Scopes |= v.opts.GroupScopes[g]
		}
	}
	return p, nil
}

// stringsClaim reads a claim that is a space-separated string or a list of strings.
func stringsClaim(b json.RawMessage) []string {
	if len(b) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		return strings.Fields(s)
	}
	var list []string
	if json.Unmarshal(b, &list) == nil {
		return list
	}
	return nil
}

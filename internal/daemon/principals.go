package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/store"
)

// PrincipalConfig is one entry under principals:: a caller with a name and scopes, known
// by a token (only its SHA-256 is in the config, or a file holds the token) and/or a
// client certificate.
type PrincipalConfig struct {
	Name string `yaml:"name"`
	// TokenSHA256 is the hex SHA-256 of the principal's bearer token.
	TokenSHA256 string `yaml:"token_sha256"`
	// TokenFile is a file holding the token (read at start; surrounding whitespace is
	// dropped).
	TokenFile string `yaml:"token_file"`
	// Scopes are read, write and admin.
	Scopes []string `yaml:"scopes"`
	// CertSubject is a client certificate's subject DN (as Go spells it, e.g.
	// "CN=ci-bot,O=example"), its common name, or a URI SAN (spiffe://...); it needs
	// tls.client_ca_file.
	CertSubject string `yaml:"cert_subject"`
}

// OIDCConfig makes bearer tokens that are JWTs from an OpenID Connect issuer principals.
type OIDCConfig struct {
	// Issuer is the tokens' iss, and where discovery finds the keys unless JWKSURL is set.
	Issuer string `yaml:"issuer"`
	// Audience must be among the tokens' aud.
	Audience string `yaml:"audience"`
	// JWKSURL is the issuer's key set; empty: from discovery.
	JWKSURL string `yaml:"jwks_url"`
	// PrincipalClaim names the principal (default sub).
	PrincipalClaim string `yaml:"principal_claim"`
	// ScopesClaim holds scopes (a space-separated string or a list; default scope).
	ScopesClaim string `yaml:"scopes_claim"`
	// GroupsClaim holds the principal's groups; GroupScopes gives each group scopes.
	GroupsClaim string              `yaml:"groups_claim"`
	GroupScopes map[string][]string `yaml:"group_scopes"`
	// ClockSkew is how far exp and nbf may be off (default 1m).
	ClockSkew time.Duration `yaml:"clock_skew"`
	// ClientID, with ClientSecretEnv (an environment variable holding the client's
	// secret, if it has one), signs the web page in through the issuer.
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
}

// principalName is what a principal's name may be: it appears in ACLs, audit entries
// and logs.
var principalName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$`)

// validatePrincipals checks principals: and oidc:.
func (c Config) validatePrincipals() error {
	names := map[string]bool{}
	hashes := map[string]string{}
	subjects := map[string]string{}
	for i, p := range c.Principals {
		at := fmt.Sprintf("principals[%d]", i)
		if p.Name != "" {
			at += " (" + p.Name + ")"
		}
		switch {
		case p.Name == "":
			return fmt.Errorf("%s: name is required", at)
		case !principalName.MatchString(p.Name):
			return fmt.Errorf("%s: name %q: use letters, digits and . _ @ : + - (up to 128, starting with a letter or digit)", at, p.Name)
		case p.Name == store.OwnerPrincipal:
			return fmt.Errorf("%s: the name %q is the principal of token and the local credentials; choose another", at, p.Name)
		case names[p.Name]:
			return fmt.Errorf("%s: name %q is used twice; give each principal its own name", at, p.Name)
		}
		names[p.Name] = true
		if p.TokenSHA256 != "" && p.TokenFile != "" {
			return fmt.Errorf("%s: set token_sha256 or token_file, not both", at)
		}
		if p.TokenSHA256 == "" && p.TokenFile == "" && p.CertSubject == "" {
			return fmt.Errorf("%s: the principal has no credential: set token_sha256 (the hex SHA-256 of its token, e.g. `printf %%s \"$TOKEN\" | sha256sum`), token_file, or cert_subject", at)
		}
		if p.TokenSHA256 != "" {
			if b, err := hex.DecodeString(p.TokenSHA256); err != nil || len(b) != sha256.Size {
				return fmt.Errorf("%s: token_sha256 must be 64 hex digits (the SHA-256 of the token, never the token itself)", at)
			}
			h := strings.ToLower(p.TokenSHA256)
			if other, dup := hashes[h]; dup {
				return fmt.Errorf("%s: token_sha256 is also %s's: give each principal its own token", at, other)
			}
			hashes[h] = p.Name
		}
		if len(p.Scopes) == 0 {
			return fmt.Errorf("%s: scopes is required: list read, write and/or admin", at)
		}
		for _, s := range p.Scopes {
			if _, ok := service.ParseScope(s); !ok {
				return fmt.Errorf("%s: scope %q: use read, write or admin", at, s)
			}
		}
		if p.CertSubject != "" {
			if c.TLS.ClientCAFile == "" {
				return fmt.Errorf("%s: cert_subject needs tls.client_ca_file, the CA that signs client certificates", at)
			}
			if other, dup := subjects[p.CertSubject]; dup {
				return fmt.Errorf("%s: cert_subject %q is also %s's", at, p.CertSubject, other)
			}
			subjects[p.CertSubject] = p.Name
		}
	}
	if c.TLS.ClientCAFile != "" && c.TLS.CertFile == "" {
		return errors.New("tls.client_ca_file needs tls.cert_file and tls.key_file: client certificates are checked on a TLS listener")
	}
	if c.OIDC != nil {
		return c.OIDC.validate()
	}
	return nil
}

func (o OIDCConfig) validate() error {
	if o.Issuer == "" || !strings.HasPrefix(o.Issuer, "https://") && !strings.HasPrefix(o.Issuer, "http://") {
		return fmt.Errorf("oidc.issuer %q: set the issuer's URL (https://...), the tokens' iss", o.Issuer)
	}
	if o.Audience == "" {
		return errors.New("oidc.audience is required: the aud that tokens meant for agenticd carry (often its client id)")
	}
	if o.ClockSkew < 0 || o.ClockSkew > 10*time.Minute {
		return fmt.Errorf("oidc.clock_skew %s: use 0 to 10m (default 1m)", o.ClockSkew)
	}
	for g, scopes := range o.GroupScopes {
		for _, s := range scopes {
			if _, ok := service.ParseScope(s); !ok {
				return fmt.Errorf("oidc.group_scopes[%s]: scope %q: use read, write or admin", g, s)
			}
		}
	}
	if len(o.GroupScopes) > 0 && o.GroupsClaim == "" {
		return errors.New("oidc.group_scopes needs groups_claim, the claim that lists a token's groups")
	}
	if o.ClientSecretEnv != "" && o.ClientID == "" {
		return errors.New("oidc.client_secret_env needs client_id")
	}
	return nil
}

// scopesOf reads scope names validated before.
func scopesOf(names []string) service.Scopes {
	var s service.Scopes
	for _, n := range names {
		v, _ := service.ParseScope(n)
		s |= v
	}
	return s
}

// staticPrincipals reads the principals' token files and returns the principals as the
// service checks them.
func (c Config) staticPrincipals() ([]service.StaticPrincipal, error) {
	out := make([]service.StaticPrincipal, 0, len(c.Principals))
	for _, p := range c.Principals {
		sp := service.StaticPrincipal{Name: p.Name, Scopes: scopesOf(p.Scopes), CertSubject: p.CertSubject}
		switch {
		case p.TokenSHA256 != "":
			sp.TokenSHA256, _ = hex.DecodeString(p.TokenSHA256)
		case p.TokenFile != "":
			raw, err := os.ReadFile(p.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("principal %s: token_file: %w", p.Name, err)
			}
			token := strings.TrimSpace(string(raw))
			if err := checkToken(token); err != nil {
				return nil, fmt.Errorf("principal %s: token_file %s: %w; use at least %d random characters, e.g. `%s`", p.Name, p.TokenFile, err, MinTokenLength, tokenCommand)
			}
			sum := sha256.Sum256([]byte(token))
			sp.TokenSHA256 = sum[:]
		}
		out = append(out, sp)
	}
	return out, nil
}

// oidcDiscoveryTimeout bounds asking the issuer for its keys' address at start.
const oidcDiscoveryTimeout = 30 * time.Second

// oidcOptions are the verifier's options of oidc: (which is set).
func (o OIDCConfig) options() service.OIDCOptions {
	groups := make(map[string]service.Scopes, len(o.GroupScopes))
	for g, names := range o.GroupScopes {
		groups[g] = scopesOf(names)
	}
	skew := o.ClockSkew
	if skew == 0 {
		skew = time.Minute
	}
	return service.OIDCOptions{Issuer: o.Issuer, Audience: o.Audience, JWKSURL: o.JWKSURL,
		PrincipalClaim: o.PrincipalClaim, ScopesClaim: o.ScopesClaim, GroupsClaim: o.GroupsClaim, GroupScopes: groups, ClockSkew: skew}
}

// oidcVerifier is the verifier of oidc:, nil without it. With a client_id, the web
// page signs in through the issuer too.
func (s *Server) oidcVerifier(cfg Config) (service.TokenVerifier, error) {
	o := cfg.OIDC
	if o == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), oidcDiscoveryTimeout)
	defer cancel()
	v, err := service.NewOIDCVerifier(ctx, o.options())
	if err != nil || o.ClientID == "" {
		return v, err
	}
	var secret string
	if o.ClientSecretEnv != "" {
		if secret = os.Getenv(o.ClientSecretEnv); secret == "" {
			return nil, fmt.Errorf("oidc.client_secret_env: the environment variable %s is empty or unset: set it to the client's secret", o.ClientSecretEnv)
		}
	}
	login, err := service.NewOIDCLogin(ctx, s.webLogins, service.OIDCLoginOptions{ClientID: o.ClientID, ClientSecret: secret, Claims: o.options(), Logger: s.logger})
	if err != nil {
		return nil, err
	}
	s.webLogins.EnableOIDC(login)
	return v, nil
}

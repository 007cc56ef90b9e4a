package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/bearer"
	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/service/replicas"
	"github.com/agenticd/agenticd/store"
)

// Scopes are what a principal may do, as a set of bits.
type Scopes uint8

// The scopes. admin reaches every session and implies read and write.
const (
	ScopeRead Scopes = 1 << iota
	ScopeWrite
	ScopeAdmin
	AllScopes = ScopeRead | ScopeWrite | ScopeAdmin
)

var scopeNames = []struct {
	s    Scopes
	name string
}{{ScopeRead, "read"}, {ScopeWrite, "write"}, {ScopeAdmin, "admin"}}

// ParseScope reads one scope's name; false when it names none.
func ParseScope(name string) (Scopes, bool) {
	for _, n := range scopeNames {
		if n.name == name {
			return n.s, true
		}
	}
	return 0, false
}

// Names are the scopes' names, in the order read, write, admin.
func (s Scopes) Names() []string {
	var out []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

func (s Scopes) String() string { return strings.Join(s.Names(), ",") }

// has reports whether the scopes include want; admin includes every scope.
func (s Scopes) has(want Scopes) bool { return s&ScopeAdmin != 0 || s&want == want }

// Principal is who calls: a name, its scopes, the groups it is in, and how it proved it.
// Names are one namespace, whatever the credential: a static principal and an OIDC
// subject with the same name are the same principal.
type Principal struct {
	Name   string   `json:"n"`
	Scopes Scopes   `json:"s"`
	Groups []string `json:"g,omitempty"`
	Via    string   `json:"v,omitempty"`
}

// How a principal proved who it is.
const (
	viaLocalSocket = "local socket"
	viaWebSession  = "web session"
	viaToken       = "token"
	viaOIDC        = "oidc"
	viaCert        = "client certificate"
	viaReplica     = "forwarded by replica"
)

// ownerPrincipal is the principal of the configured token and the local credentials.
func ownerPrincipal(via string) Principal {
	return Principal{Name: store.OwnerPrincipal, Scopes: AllScopes, Via: via}
}

func (p Principal) admin() bool { return p.Scopes&ScopeAdmin != 0 }

// reader is the filter of the lists this principal reads; nil for an admin, who reads
// everything.
func (p Principal) reader() *store.Reader {
	if p.admin() {
		return nil
	}
	return &store.Reader{Principal: p.Name, Groups: p.Groups}
}

func (p Principal) toPB() *pb.Caller {
	return &pb.Caller{Principal: p.Name, Scopes: p.Scopes.Names(), Groups: p.Groups, Via: p.Via}
}

type principalKey struct{}

// withPrincipal is ctx carrying the caller's principal; only the credentials check sets
// it (and tests).
func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// callerOf is the principal of ctx's caller: nobody, with no scopes, when no credentials
// check ran.
func callerOf(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// StaticPrincipal is a principal from the config: a token (known by its SHA-256 only)
// and/or a client certificate's subject or URI SAN.
type StaticPrincipal struct {
	Name        string
	TokenSHA256 []byte // empty: no token
	Scopes      Scopes
	CertSubject string // empty: no certificate
}

// TokenVerifier turns a bearer token that is a JWT into a principal (an OIDC issuer's);
// an error when it does not verify.
type TokenVerifier interface {
	VerifyToken(ctx context.Context, raw string) (Principal, error)
}

// authenticator finds the principal of a call's credentials.
type authenticator struct {
	owner    [][]byte                     // tokens of the owner principal
	static   map[[sha256.Size]byte]string // token hash -> static principal name
	byName   map[string]StaticPrincipal
	oidc     TokenVerifier
	replicas []byte // the token replicas forward with: its caller may name a principal
}

func newAuthenticator(c Credentials) *authenticator {
	a := &authenticator{owner: c.tokens(), static: map[[sha256.Size]byte]string{}, byName: map[string]StaticPrincipal{}, oidc: c.OIDC}
	for _, p := range c.Principals {
		a.byName[p.Name] = p
		if len(p.TokenSHA256) == sha256.Size {
			a.static[[sha256.Size]byte(p.TokenSHA256)] = p.Name
		}
	}
	if c.ReplicaToken != "" {
		a.replicas = []byte(c.ReplicaToken)
	}
	return a
}

// certPrincipal is the static principal a client certificate's subject or URI maps to.
func (a *authenticator) certPrincipal(ids []string) (Principal, bool) {
	for _, p := range a.byName {
		if p.CertSubject != "" && slices.Contains(ids, p.CertSubject) {
			return Principal{Name: p.Name, Scopes: p.Scopes, Via: viaCert}, true
		}
	}
	return Principal{}, false
}

// authenticate admits a caller that came through the local socket, carries a web
// session, a client certificate of a configured principal, or sends
// `authorization: Bearer <token>` with an accepted token (the owner's compared in
// constant time; static principals' by their SHA-256; JWTs by the OIDC verifier; the
// scheme is case-insensitive, RFC 6750 via RFC 9110 section 11.1).
func (a *authenticator) authenticate(ctx context.Context) (Principal, error) {
	if p, ok := peer.FromContext(ctx); ok {
		if localcred.IsLocal(p.LocalAddr) {
			return ownerPrincipal(viaLocalSocket), nil
		}
		// An editor's call over ACP, on a connection only the gateway makes: the
		// gateway checked its credentials when the editor connected.
		if b, ok := p.LocalAddr.(bridgeAddr); ok {
			return b.caller, nil
		}
	}
	if p, ok := ctx.Value(webSessionKey{}).(Principal); ok {
		if p, ok := a.current(p); ok {
			return p, nil
		}
	}
	if ids := clientCertIDs(ctx); len(ids) > 0 {
		if p, ok := a.certPrincipal(ids); ok {
			return p, nil
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) == 0 {
		return Principal{}, tokenInvalid("missing credentials (every call needs them, on this machine too): agenticctl finds them itself; " +
			"other clients send `authorization: Bearer <token>` with the token in the file `token` in agenticd's data dir, the configured one, or their own principal's; " +
			"a browser opens the sign-in link in agenticd's start-up log, or one from `agenticctl web`")
	}
	given, ok := bearer.Token(values[0])
	if !ok {
		return Principal{}, tokenInvalid("credentials must be `authorization: Bearer <token>`")
	}
	if a.replicas != nil && subtle.ConstantTimeCompare([]byte(given), a.replicas) == 1 && len(md.Get(replicas.ForwardedHeader)) > 0 {
		// Another replica checked the caller's credentials and vouches for its principal
		// with the token all replicas share.
		if vals := md.Get(principalHeader); len(vals) > 0 {
			p, err := decodePrincipal(vals[0])
			if err != nil {
				return Principal{}, tokenInvalid("a forwarded call's principal is not readable: " + err.Error())
			}
			return p, nil
		}
	}
	for _, t := range a.owner {
		if subtle.ConstantTimeCompare([]byte(given), t) == 1 {
			return ownerPrincipal(viaToken), nil
		}
	}
	if name, ok := a.static[sha256.Sum256([]byte(given))]; ok {
		return Principal{Name: name, Scopes: a.byName[name].Scopes, Via: viaToken}, nil
	}
	if a.oidc != nil && strings.Count(given, ".") == 2 {
		p, err := a.oidc.VerifyToken(ctx, given)
		if err != nil {
			return Principal{}, tokenInvalid("the bearer token is a JWT that does not verify: " + err.Error())
		}
		return p, nil
	}
	return Principal{}, tokenInvalid("invalid bearer token: use the token configured in agenticd (token, AGENTICD_TOKEN), the one in the file `token` in its data dir, or a principal's own")
}

// current is the principal a web session's cookie names, with the scopes the config
// gives it now: a principal taken out of the config loses its browsers' sessions too.
// An OIDC principal keeps what its token said when it signed in.
func (a *authenticator) current(p Principal) (Principal, bool) {
	via := viaWebSession + " (" + p.Via + ")"
	if p.Name == store.OwnerPrincipal {
		return ownerPrincipal(via), true
	}
	if sp, ok := a.byName[p.Name]; ok {
		return Principal{Name: sp.Name, Scopes: sp.Scopes, Via: via}, true
	}
	if p.Via == viaOIDC && a.oidc != nil {
		p.Via = via
		return p, true
	}
	return Principal{}, false
}

// principalHeader carries a forwarded call's principal between replicas; it counts only
// beside the replicas' shared token and the forwarded mark.
const principalHeader = "agenticd-principal"

// ForwardedPrincipal names a forwarded call's caller for the replica the call goes to.
type ForwardedPrincipal struct{}

// Header is the metadata key and value naming the caller of ctx.
func (ForwardedPrincipal) Header(ctx context.Context) (key, value string) {
	return principalHeader, encodePrincipal(callerOf(ctx))
}

func encodePrincipal(p Principal) string {
	b, _ := json.Marshal(p) // a struct of strings and an int: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePrincipal(s string) (Principal, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Principal{}, err
	}
	var p Principal
	if err := json.Unmarshal(b, &p); err != nil {
		return Principal{}, err
	}
	if p.Name == "" {
		return Principal{}, errors.New("no name")
	}
	p.Via = viaReplica + " (" + p.Via + ")"
	return p, nil
}

// scopeMissing is PERMISSION_DENIED naming the scope the caller lacks.
func scopeMissing(p Principal, want Scopes, method string) error {
	return withReason(pb.ErrorReason_ERROR_REASON_SCOPE_MISSING,
		fmt.Errorf("%w: principal %q has scopes [%s]; %s needs the %s scope: ask agenticd's operator for it", errForbidden, p.Name, p.Scopes, method, want),
		"scope", want.String(), "principal", p.Name)
}

// sessionScopeMissing is PERMISSION_DENIED for a session shared with the caller for less
// than the call needs.
func sessionScopeMissing(p Principal, sessionID string, want Scopes, method string) error {
	return withReason(pb.ErrorReason_ERROR_REASON_SCOPE_MISSING,
		fmt.Errorf("%w: session %s is shared with principal %q for reading only; %s needs %s access to it: its owner can grant it with ShareSession", errForbidden, sessionID, p.Name, method, want),
		"scope", want.String(), "principal", p.Name, "session_id", sessionID)
}

// errForbidden: the caller's credentials are valid but not enough (PERMISSION_DENIED).
var errForbidden = errors.New("permission denied")

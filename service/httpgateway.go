package service

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"github.com/rs/cors"
	"google.golang.org/grpc"
)

// maxTranscodedMessageBytes bounds one message the gateway holds to translate between
// Connect or gRPC-Web and gRPC, as grpc-go bounds a message it receives by default
// (4 MiB): a request is held whole before any interceptor (the token's included) runs,
// and the server sizes its responses and events for clients with that default.
const maxTranscodedMessageBytes = 4 << 20

// corsMaxAge is how long a browser may cache a preflight's answer.
const corsMaxAge = 2 * time.Hour

// Headers Connect and gRPC-Web clients send and read across origins.
var (
	corsAllowedHeaders = []string{
		"Authorization", "Content-Type", "Content-Encoding", "Accept-Encoding",
		"Connect-Protocol-Version", "Connect-Timeout-Ms", "Connect-Content-Encoding", "Connect-Accept-Encoding",
		"Grpc-Timeout", "Grpc-Encoding", "Grpc-Accept-Encoding", "X-Grpc-Web", "X-User-Agent",
	}
	corsExposedHeaders = []string{
		"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Grpc-Encoding", "Grpc-Accept-Encoding",
		"Content-Encoding", "Connect-Content-Encoding", "Connect-Accept-Encoding",
	}
)

// httpGateway is the handler of every connection that is not native gRPC: the Connect
// protocol (JSON and binary) and gRPC-Web, translated to gRPC and served by the same
// gRPC server (its interceptors, the credentials check included, apply alike), the web
// page's sign-in (/login), ACP over WebSocket for editors (ACPPath), and the page for
// every other path.
func httpGateway(g *grpc.Server, page, acp http.Handler, logins *WebLogins, secure bool, allowedOrigins []string, logger *slog.Logger) (http.Handler, error) {
	if page == nil {
		page = http.NotFoundHandler()
	}
	transcoder, err := vanguardgrpc.NewTranscoder(g,
		vanguard.WithUnknownHandler(page),
		vanguard.WithCodec(newStrictJSON),
		vanguard.WithDefaultServiceOptions(vanguard.WithMaxMessageBufferBytes(maxTranscodedMessageBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("the Connect and gRPC-Web gateway: %w", err)
	}
	var handler http.Handler = connectVersionDefault{next: transcoder}
	if len(allowedOrigins) > 0 {
		handler = cors.New(cors.Options{
			AllowedOrigins: allowedOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost},
			AllowedHeaders: corsAllowedHeaders,
			ExposedHeaders: corsExposedHeaders,
			MaxAge:         int(corsMaxAge / time.Second),
		}).Handler(handler)
	}
	allowed := make(map[string]bool, len(allowedOrigins))
	for _, o := range allowedOrigins {
		allowed[o] = true
	}
	return browserGuard{next: handler, acp: acp, logins: logins, secure: secure, allowed: allowed, logger: logger}, nil
}

// connectVersionDefault lets a Connect unary call leave out Connect-Protocol-Version
// (curl users do): the gateway would otherwise take a POST of JSON without it for a
// REST call, and answer 404. Only RPC paths (/package.Service/Method) get the header.
type connectVersionDefault struct{ next http.Handler }

func (c connectVersionDefault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.Header.Get("Connect-Protocol-Version") == "" && isRPCPath(r.URL.Path) {
		switch ct := strings.ToLower(r.Header.Get("Content-Type")); {
		case ct == "application/json", strings.HasPrefix(ct, "application/json;"), ct == "application/proto":
			r.Header.Set("Connect-Protocol-Version", "1")
		}
	}
	c.next.ServeHTTP(w, r)
}

// isRPCPath reports whether path has the shape of an RPC's: /package.Service/Method.
func isRPCPath(path string) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(service, ".") && method != "" && !strings.Contains(method, "/")
}

// browserGuard refuses what a web page of another site can make a browser send: a
// request with an Origin that is neither the server's own nor allowed. Every RPC needs
// credentials besides, and a page of another site has none: the session cookie is
// SameSite=Strict and bound to agenticd's own host, which also keeps out a name of
// theirs resolved to 127.0.0.1 (DNS rebinding). It serves /login, and marks a request
// whose session cookie is valid as authenticated for the RPC it carries.
type browserGuard struct {
	next    http.Handler
	acp     http.Handler // nil: no ACP endpoint
	logins  *WebLogins   // nil: no web sign-in
	secure  bool         // served over TLS: the cookie is Secure
	allowed map[string]bool
	logger  *slog.Logger
}

func (b browserGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !b.allowed[origin] && !sameOrigin(origin, r.Host) {
		b.refuse(w, r, fmt.Sprintf("the origin %q may not call agenticd: only pages agenticd serves itself may, and the origins listed under allowed_origins in its config", origin))
		return
	}
	if b.logins != nil {
		if r.URL.Path == webLoginPath {
			b.logins.serveLogin(w, r, b.secure)
			return
		}
		if b.logins.oidc != nil && b.logins.oidc.serve(w, r, b.secure) {
			return
		}
		if who, ok := b.logins.validSession(r); ok {
			r = r.WithContext(withWebSession(r.Context(), who))
		}
	}
	if r.URL.Path == ACPPath && b.acp != nil {
		b.acp.ServeHTTP(w, r)
		return
	}
	b.next.ServeHTTP(w, r)
}

func (b browserGuard) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	b.logger.Warn("refused an HTTP request", "host", r.Host, "origin", r.Header.Get("Origin"), "path", r.URL.Path, "remote", r.RemoteAddr)
	http.Error(w, msg, http.StatusForbidden)
}

// sameOrigin reports whether a browser's Origin is the server's own: its host and port
// are the ones the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// CheckOrigin says what is wrong with an allowed_origins entry: an origin is a scheme,
// a host and an optional port, as a browser sends it.
func CheckOrigin(origin string) error {
	u, err := url.Parse(origin)
	switch {
	case origin == "*":
		return fmt.Errorf("%q would let every web site drive agenticd: list the origins of the pages that call it, e.g. https://app.example.com", origin)
	case err != nil:
		return fmt.Errorf("%q is not an origin: %w", origin, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q is not an origin: it needs http:// or https://, as in https://app.example.com", origin)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q is not an origin: use a scheme, a host and an optional port only, as in https://app.example.com:8443", origin)
	case u.Path == "/":
		return fmt.Errorf("%q is not an origin: drop the trailing slash (browsers send %q)", origin, strings.TrimSuffix(origin, "/"))
	}
	return nil
}

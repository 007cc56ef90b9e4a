package service

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"github.com/rs/cors"
	"google.golang.org/grpc"

	"github.com/agenticd/agenticd/presenters"
)

// maxTranscodedMessageBytes bounds one message the gateway holds to translate between
// Connect or gRPC-Web and gRPC, as grpc-go bounds a message it receives by default
// (4 MiB): a request is held whole before any interceptor (the token's included) runs,
// and the server sizes its responses and events for clients with that default.
const maxTranscodedMessageBytes = maxRequestBytes

// maxRequestBytes is the largest request message agenticd accepts on every protocol
// (grpc-go's default receive limit); a larger one is RESOURCE_EXHAUSTED with reason
// REQUEST_TOO_LARGE.
const maxRequestBytes = 4 << 20

// maxWireRequestBytes is grpc-go's receive limit on the server: above maxRequestBytes,
// so that the codec refuses a message over that with the details every error carries
// (wire.Requests). A message over this one grpc-go refuses itself, from its length
// prefix and inside the stream's RecvMsg, before any interceptor or handler runs, with
// RESOURCE_EXHAUSTED and no details (native gRPC alone: connectChecks refuses the other
// protocols' first); raising it further would let an unauthenticated caller make the
// server hold that much per request.
const maxWireRequestBytes = 2 * maxRequestBytes

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
	var handler http.Handler = connectChecks{next: connectVersionDefault{next: transcoder}, errors: connect.NewErrorWriter()}
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

// connectChecks refuses, as Connect (or gRPC-Web) errors with the details every error
// carries, what the gateway would otherwise answer in plain text or with the web page: a
// Connect request of another protocol version or with a malformed timeout, and a unary
// one whose message is over maxRequestBytes (the gateway buffers it to transcode, and its
// buffer limit would say UNAVAILABLE, a code that invites retrying what cannot succeed).
// A streaming Connect or a gRPC-Web request whose message is over maxRequestBytes is
// refused here too, by its length or its first envelope's: passed on, one over
// maxWireRequestBytes would get grpc-go's bare refusal (the codec refuses the others).
type connectChecks struct {
	next   http.Handler
	errors *connect.ErrorWriter
}

// connectTimeout is a valid Connect-Timeout-Ms: at most 10 digits.
var connectTimeout = regexp.MustCompile(`^[0-9]{1,10}$`)

func (c connectChecks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	unary, streaming := connectContentType(ct)
	web := grpcWebContentType(ct)
	if !isRPCPath(r.URL.Path) || (!unary && !streaming && !web) {
		c.next.ServeHTTP(w, r)
		return
	}
	var err error
	switch v, t := r.Header.Get("Connect-Protocol-Version"), r.Header.Get("Connect-Timeout-Ms"); {
	case web:
		err = boundEnvelopedBody(r)
	case v != "" && v != "1":
		err = invalidArgument("the Connect-Protocol-Version header is %q: agenticd speaks version 1 of the Connect protocol; send 1, or leave the header out", v)
	case len(r.Header.Values("Connect-Timeout-Ms")) > 0 && !connectTimeout.MatchString(t):
		err = invalidArgument("the Connect-Timeout-Ms header is %q: give the timeout in milliseconds, a whole number of at most 10 digits, or leave the header out", t)
	case unary && r.ContentLength > maxRequestBytes:
		err = requestTooLarge(maxRequestBytes, fmt.Sprintf("the body has %d bytes", r.ContentLength))
	case streaming:
		err = boundEnvelopedBody(r)
	case unary && r.Method == http.MethodPost:
		err = boundUnaryBody(r)
	}
	if err != nil {
		_ = c.errors.Write(w, r, asConnectError(err))
		return
	}
	c.next.ServeHTTP(w, r)
}

// envelopeBytes is the prefix of each message of a streaming Connect or a gRPC-Web body:
// a flags byte and a 4-byte length.
const envelopeBytes = 5

// grpcWebContentType says whether a content type is binary gRPC-Web (the gateway serves
// no gRPC-Web text).
func grpcWebContentType(ct string) bool {
	ct, _, _ = strings.Cut(strings.ToLower(ct), ";")
	ct = strings.TrimSpace(ct)
	return ct == "application/grpc-web" || strings.HasPrefix(ct, "application/grpc-web+")
}

// boundEnvelopedBody refuses an enveloped body (streaming Connect, gRPC-Web) whose
// request message is over maxRequestBytes: by the body's length when it is known (the
// request of a unary or server-streaming call is its one message), else by the first
// envelope's length prefix, which is put back for the gateway.
func boundEnvelopedBody(r *http.Request) error {
	if r.ContentLength > maxRequestBytes+envelopeBytes {
		return requestTooLarge(maxRequestBytes, fmt.Sprintf("the body has %d bytes", r.ContentLength))
	}
	if r.ContentLength >= 0 || r.Body == nil {
		return nil
	}
	prefix := make([]byte, envelopeBytes)
	n, err := io.ReadFull(r.Body, prefix)
	r.Body = prefixedBody{Reader: io.MultiReader(bytes.NewReader(prefix[:n]), r.Body), Closer: r.Body}
	if err != nil {
		return nil // a body shorter than a prefix: the gateway says what is wrong with it
	}
	if size := binary.BigEndian.Uint32(prefix[1:]); size > maxRequestBytes {
		return requestTooLarge(maxRequestBytes, fmt.Sprintf("its first message has %d bytes", size))
	}
	return nil
}

// prefixedBody is a request body whose first bytes were read and are served again.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// connectContentType says whether a content type is the Connect protocol's, unary or
// streaming.
func connectContentType(ct string) (unary, streaming bool) {
	ct, _, _ = strings.Cut(strings.ToLower(ct), ";")
	switch strings.TrimSpace(ct) {
	case "application/json", "application/proto":
		return true, false
	case "application/connect+json", "application/connect+proto":
		return false, true
	}
	return false, false
}

// boundUnaryBody reads a unary body of unknown length up to the limit: over it, the
// request is too large; under it, the body is put back for the gateway.
func boundUnaryBody(r *http.Request) error {
	if r.ContentLength >= 0 {
		return nil // checked against the limit already; the gateway reads it
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return fmt.Errorf("%w: the request body could not be read: %v", presenters.ErrInvalidArgument, err)
	}
	if len(body) > maxRequestBytes {
		return requestTooLarge(maxRequestBytes, "the body has more bytes than that")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
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

package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// httpClient talks to the env's server over its loopback listener: HTTP/1.1, or HTTP/2 in
// clear text with prior knowledge (h2c). It sends the env's token unless a request sets
// Authorization itself.
func (e *testEnv) httpClient(t *testing.T, h2c bool) *http.Client {
	t.Helper()
	c := e.anonymousHTTPClient(t, h2c)
	c.Transport = withToken{next: c.Transport, token: e.token}
	return c
}

// withToken adds `Authorization: Bearer <token>` to requests that have none.
type withToken struct {
	next  http.RoundTripper
	token string
}

func (w withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+w.token)
	}
	return w.next.RoundTrip(r)
}

// anonymousHTTPClient is httpClient without credentials.
func (e *testEnv) anonymousHTTPClient(t *testing.T, h2c bool) *http.Client {
	t.Helper()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return e.lis.DialContext(ctx) },
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// rpcURL is the URL of a method of AgenticService on the env's server.
func rpcURL(method string) string {
	return "http://127.0.0.1:50051/" + pb.AgenticService_ServiceDesc.ServiceName + "/" + method
}

func post(t *testing.T, c *http.Client, url, contentType string, body []byte, header http.Header) *http.Response {
	t.Helper()
	return postFrom(t, c, url, contentType, bytes.NewReader(body), header)
}

// postFrom is post of a body read from r: one that is not a *bytes.Reader (or one of
// the other kinds net/http knows) has no length told in advance, and is sent chunked.
func postFrom(t *testing.T, c *http.Client, url, contentType string, r io.Reader, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Connect unary call in JSON, as curl sends it (no Connect-Protocol-Version), over
// HTTP/1.1 and over h2c, is answered by the same service as native gRPC.
func TestConnectUnaryJSON(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c=%v", h2c), func(t *testing.T) {
			resp := post(t, e.httpClient(t, h2c), rpcURL("ListAgents"), "application/json", []byte(`{}`), nil)
			body := readAll(t, resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %s: %s", resp.Status, body)
			}
			if wantMajor := map[bool]int{false: 1, true: 2}[h2c]; resp.ProtoMajor != wantMajor {
				t.Errorf("answered over HTTP/%d, want HTTP/%d", resp.ProtoMajor, wantMajor)
			}
			var got pb.ListAgentsResponse
			if err := protojson.Unmarshal(body, &got); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if len(got.GetAgents()) != 2 || got.GetAgents()[0].GetAgentId() != fakeID {
				t.Errorf("agents %v, want %s and %s", got.GetAgents(), fakeID, otherID)
			}
		})
	}
}

// connectError is the body of a Connect unary error.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"details"`
}

// errorInfo finds the ErrorInfo among a Connect error's details.
func (c connectError) errorInfo(t *testing.T) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range c.Details {
		if d.Type != "google.rpc.ErrorInfo" {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			t.Fatal(err)
		}
		var info errdetails.ErrorInfo
		if err := proto.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		return &info
	}
	t.Fatalf("no ErrorInfo in %+v", c)
	return nil
}

// Errors keep their code and their ErrorInfo in the Connect protocol.
func TestConnectErrorKeepsCodeAndReason(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp := post(t, e.httpClient(t, false), rpcURL("GetSession"), "application/json", []byte(`{"sessionId":"nope"}`), nil)
	body := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %s, want 404: %s", resp.Status, body)
	}
	var ce connectError
	if err := json.Unmarshal(body, &ce); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if ce.Code != "not_found" || ce.errorInfo(t).GetReason() != "SESSION_NOT_FOUND" {
		t.Errorf("error %+v, want not_found with reason SESSION_NOT_FOUND", ce)
	}
}

// The bearer token guards Connect and gRPC-Web calls as it guards native gRPC.
func TestHTTPProtocolsNeedTheToken(t *testing.T) {
	const token = "a-test-token-of-some-length"
	e := newEnv(t, envOptions{token: token})
	c := e.anonymousHTTPClient(t, false)
	resp := post(t, c, rpcURL("ListAgents"), "application/json", []byte(`{}`), nil)
	body := readAll(t, resp.Body)
	var ce connectError
	if err := json.Unmarshal(body, &ce); err != nil || resp.StatusCode != http.StatusUnauthorized || ce.Code != "unauthenticated" {
		t.Errorf("Connect without the token: %s %s, want 401 unauthenticated", resp.Status, body)
	}
	resp = post(t, c, rpcURL("ListAgents"), "application/grpc-web+proto", envelope(0, nil), nil)
	// The status comes in the headers (a trailers-only answer) or in the last frame.
	grpcStatus := resp.Header.Get("Grpc-Status")
	if frames := readFrames(t, resp.Body); grpcStatus == "" && len(frames) > 0 {
		trailer := string(frames[len(frames)-1].data)
		if _, rest, ok := strings.Cut(strings.ToLower(trailer), "grpc-status:"); ok {
			grpcStatus, _, _ = strings.Cut(strings.TrimSpace(rest), "\r")
		}
	}
	if grpcStatus != "16" {
		t.Errorf("gRPC-Web without the token: grpc-status %q, want 16 (unauthenticated)", grpcStatus)
	}
	resp = post(t, c, rpcURL("ListAgents"), "application/json", []byte(`{}`), http.Header{"Authorization": {"Bearer " + token}})
	if body := readAll(t, resp.Body); resp.StatusCode != http.StatusOK {
		t.Errorf("Connect with the token: %s %s, want 200", resp.Status, body)
	}
}

// envelope frames a streaming message (Connect and gRPC-Web share the shape).
func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

type frame struct {
	flags byte
	data  []byte
}

// readFrames reads enveloped messages until the end of the body.
func readFrames(t *testing.T, r io.Reader) []frame {
	t.Helper()
	var frames []frame
	br := bufio.NewReader(r)
	for {
		f, err := readFrame(br)
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
}

func readFrame(r io.Reader) (frame, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return frame{}, err
	}
	f := frame{flags: head[0], data: make([]byte, binary.BigEndian.Uint32(head[1:]))}
	_, err := io.ReadFull(r, f.data)
	return f, err
}

// Subscribe streams to Connect (JSON, over HTTP/1.1 and h2c) and gRPC-Web (binary, over
// HTTP/1.1) clients with every event in order, and resumes from a sequence.
func TestSubscribeOverHTTPProtocols(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s")
	seqs := publishDeltas(e.hub, fakeID, "s", 20)
	from := seqs[4] // resume after the fifth; each case adds a live event after the rest
	cases := []struct {
		name, contentType string
		h2c               bool
		encode            func(*pb.SubscribeRequest) []byte
		decode            func([]byte, proto.Message) error
		end               byte
	}{
		{"connect-json-http1", "application/connect+json", false, mustJSON, protojson.Unmarshal, 0x02},
		{"connect-json-h2c", "application/connect+json", true, mustJSON, protojson.Unmarshal, 0x02},
		{"grpc-web-proto-http1", "application/grpc-web+proto", false, mustProto, proto.Unmarshal, 0x80},
	}
	for _, unmerged := range []bool{true, false} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/unmerged_deltas=%v", tc.name, unmerged), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), streamWait)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, rpcURL("Subscribe"),
					bytes.NewReader(envelope(0, tc.encode(&pb.SubscribeRequest{SessionIds: []string{"s"}, Start: after(from), UnmergedDeltas: unmerged}))))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", tc.contentType)
				resp, err := e.httpClient(t, tc.h2c).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %s: %s", resp.Status, readAll(t, resp.Body))
				}
				br := bufio.NewReader(resp.Body)
				var got []uint64
				var text strings.Builder
				for caughtUp := false; !caughtUp; {
					f, err := readFrame(br)
					if err != nil {
						t.Fatalf("after %d events: %v", len(got), err)
					}
					if f.flags&tc.end != 0 {
						t.Fatalf("the stream ended: %s", f.data)
					}
					var msg pb.SubscribeResponse
					if err := tc.decode(f.data, &msg); err != nil {
						t.Fatalf("%v: %q", err, f.data)
					}
					for _, ev := range msg.GetEvents().GetEvents() {
						got = append(got, ev.GetSequence())
						text.WriteString(ev.GetMessageDelta().GetText())
					}
					caughtUp = msg.GetCaughtUp() != nil
				}
				want := seqs[5:]
				if !unmerged { // the replayed deltas waited together: one event, the last one's sequence
					want = want[len(want)-1:]
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || text.String() != strings.Repeat("x", len(seqs)-5) {
					t.Fatalf("replayed %v with text %q, want %v with %d x", got, text.String(), want, len(seqs)-5)
				}
				// Live events follow the replay on the same stream.
				live := publishDeltas(e.hub, fakeID, "s", 1)[0]
				seqs = append(seqs, live)
				for {
					f, err := readFrame(br)
					if err != nil {
						t.Fatalf("waiting for the live event %d: %v", live, err)
					}
					var msg pb.SubscribeResponse
					if err := tc.decode(f.data, &msg); err != nil {
						t.Fatal(err)
					}
					if evs := msg.GetEvents().GetEvents(); len(evs) > 0 {
						if evs[0].GetSequence() != live {
							t.Fatalf("live event %d, want %d", evs[0].GetSequence(), live)
						}
						return
					}
				}
			})
		}
	}
}

func mustJSON(m *pb.SubscribeRequest) []byte {
	b, err := protojson.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func mustProto(m *pb.SubscribeRequest) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// A page of another site is refused by its Origin before any RPC runs; the server's own
// page is not. Host names do not matter: credentials are what a page elsewhere lacks.
func TestBrowserGuard(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "the page") })
	e := newEnv(t, envOptions{page: page, allowedOrigins: []string{"https://app.example.com"}})
	c := e.httpClient(t, false)
	cases := []struct {
		name, host, origin string
		want               int
	}{
		{"own page by IP", "127.0.0.1:50051", "http://127.0.0.1:50051", http.StatusOK},
		{"own page as localhost", "localhost:50051", "http://localhost:50051", http.StatusOK},
		{"no origin (curl)", "127.0.0.1:50051", "", http.StatusOK},
		{"allowed origin", "127.0.0.1:50051", "https://app.example.com", http.StatusOK},
		{"served under a name", "agenticd.internal.example:50051", "http://agenticd.internal.example:50051", http.StatusOK},
		{"another site", "127.0.0.1:50051", "https://attacker.example", http.StatusForbidden},
		{"another port", "127.0.0.1:50051", "http://127.0.0.1:8080", http.StatusForbidden},
		{"opaque origin", "127.0.0.1:50051", "null", http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{}
			if tc.origin != "" {
				header.Set("Origin", tc.origin)
			}
			req, _ := http.NewRequest(http.MethodPost, rpcURL("ListAgents"), strings.NewReader(`{}`))
			req.Host = tc.host
			req.Header = header
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %s, want %d: %s", resp.Status, tc.want, body)
			}
			if tc.origin == "https://app.example.com" && resp.Header.Get("Access-Control-Allow-Origin") != tc.origin {
				t.Errorf("an allowed origin got no Access-Control-Allow-Origin: %v", resp.Header)
			}
		})
	}
	// A browser asks first for a cross-origin call; the allowed origin may send the token.
	req, _ := http.NewRequest(http.MethodOptions, rpcURL("ListAgents"), nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type") // as browsers send it: sorted, lower case
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if allow := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(allow, "authorization") {
		t.Errorf("preflight of an allowed origin: %s, Access-Control-Allow-Headers %q (%v)", resp.Status, allow, resp.Header)
	}
	// Every path that is no RPC is the page's.
	resp, err = c.Get("http://127.0.0.1:50051/")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp.Body); string(body) != "the page" {
		t.Errorf("GET / answered %s %q", resp.Status, body)
	}
	resp.Body.Close()
}

// A page of another site that reaches a loopback agenticd under a name of its own (DNS
// rebinding) has no credentials: the session cookie belongs to agenticd's own host.
func TestDNSRebindingGetsNoRPC(t *testing.T) {
	e := newEnv(t, envOptions{})
	req, _ := http.NewRequest(http.MethodPost, rpcURL("ListAgents"), strings.NewReader(`{}`))
	req.Host = "attacker.example:50051"
	req.Header.Set("Origin", "http://attacker.example:50051")
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.anonymousHTTPClient(t, false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %s, want 401: %s", resp.Status, body)
	}
}

func TestCheckOrigin(t *testing.T) {
	for origin, ok := range map[string]bool{
		"https://app.example.com":      true,
		"http://localhost:5173":        true,
		"*":                            false,
		"app.example.com":              false,
		"https://app.example.com/":     false,
		"https://app.example.com/path": false,
		"ftp://app.example.com":        false,
		"https://user@app.example.com": false,
	} {
		if err := CheckOrigin(origin); (err == nil) != ok {
			t.Errorf("CheckOrigin(%q) = %v, want ok %v", origin, err, ok)
		}
	}
}

// A request larger than native gRPC would take is refused (RESOURCE_EXHAUSTED, which
// clients do not retry) before it is held whole.
func TestHTTPRequestBodyBound(t *testing.T) {
	e := newEnv(t, envOptions{})
	big := []byte(`{"sessionId":"` + strings.Repeat("x", maxTranscodedMessageBytes) + `"}`)
	resp := post(t, e.httpClient(t, false), rpcURL("GetSession"), "application/json", big, nil)
	body := readAll(t, resp.Body)
	var ce connectError
	if err := json.Unmarshal(body, &ce); err != nil || ce.Code != "resource_exhausted" {
		t.Fatalf("a %d-byte request: %s %s; want resource_exhausted", len(big), resp.Status, body)
	}
}

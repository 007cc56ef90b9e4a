package service

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// malformedRequests is the corpus of requests a client may get wrong, with the code each
// must get: always with an ErrorInfo, never INTERNAL, UNKNOWN or a dropped connection,
// and, for INVALID_ARGUMENT, the field at fault where there is one. Rows with json are
// Connect JSON bodies; rows with proto go over the binary protocols (native gRPC,
// gRPC-Web, Connect proto); rows with Connect headers go over Connect alone.
var malformedRequests = []struct {
	name   string
	method string
	json   string
	proto  []byte
	header map[string]string // Connect headers: only the Connect protocol gets the row
	want   codes.Code
	reason string // the ErrorInfo's reason, when it must be a particular one
	field  string // the BadRequest's field, when one is at fault
}{
	{name: "unknown enum name in a filter", method: "ListSessions", json: `{"statuses":["NOPE"]}`, want: codes.InvalidArgument},
	{name: "unknown field", method: "ListSessions", json: `{"pageSize":5,"nope":1}`, want: codes.InvalidArgument},
	{name: "unknown enum number in a filter", method: "ListSessions", json: `{"agentId":"x","statuses":[7777777]}`, want: codes.InvalidArgument},
	{name: "fractional number", method: "ListSessions", json: `{"pageSize":1.5}`, want: codes.InvalidArgument},
	{name: "number out of range", method: "ListSessions", json: `{"pageSize":99999999999999}`, want: codes.InvalidArgument},
	{name: "truncated JSON", method: "GetSession", json: `{"sessionId":"a`, want: codes.InvalidArgument},
	{name: "wrong type", method: "GetSession", json: `{"sessionId":5}`, want: codes.InvalidArgument},
	{name: "an array, not an object", method: "GetSession", json: `[]`, want: codes.InvalidArgument},
	{name: "duplicate key", method: "GetSession", json: `{"sessionId":"a","sessionId":"b"}`, want: codes.InvalidArgument},
	{name: "deep nesting", method: "GetSession", json: strings.Repeat(`{"x":`, 200) + strings.Repeat("}", 200), want: codes.InvalidArgument},
	{name: "invalid UTF-8", method: "GetSession", json: "{\"sessionId\":\"\xff\"}", want: codes.InvalidArgument},
	{name: "truncated field", method: "GetSession", proto: []byte{0x0a, 0x05, 'a'}, want: codes.InvalidArgument},
	{name: "11-byte varint", method: "ListSessions", proto: []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, want: codes.InvalidArgument},
	{name: "invalid UTF-8 in a string field", method: "GetSession", proto: []byte{0x0a, 0x01, 0xff}, want: codes.InvalidArgument},

	{name: "over the size limit", method: "GetSession", json: `{"sessionId":"` + strings.Repeat("a", maxRequestBytes) + `"}`,
		want: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE"},
	{name: "over the size limit", method: "GetSession", proto: mustMarshal(&pb.GetSessionRequest{SessionId: strings.Repeat("a", maxRequestBytes)}),
		want: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE"},
	{name: "three times the size limit", method: "GetSession", json: `{"sessionId":"` + strings.Repeat("a", 3*maxRequestBytes) + `"}`,
		want: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE"},
	{name: "three times the size limit", method: "SendMessage", proto: mustMarshal(&pb.SendMessageRequest{SessionId: "s", Content: &pb.MessageContent{
		Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: strings.Repeat("t", 3*maxRequestBytes)}}}}}),
		want: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE"},
	{name: "image data URL with invalid base64", method: "SendMessage",
		json: `{"sessionId":"s","content":{"parts":[{"image":{"url":"data:image/png;base64,!!not base64!!"}}]}}`,
		want: codes.InvalidArgument, field: "content.parts[0].image.url"},
	{name: "image data URL with invalid base64", method: "SendMessage",
		proto: mustMarshal(&pb.SendMessageRequest{SessionId: "s", Content: &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Image{Image: &pb.ImageContent{Source: &pb.ImageContent_Url{Url: "data:image/png;base64,!!not base64!!"}}}}}}}),
		want:  codes.InvalidArgument, field: "content.parts[0].image.url"},
	{name: "1 MiB session title", method: "CreateSession",
		json: `{"agentId":"` + fakeID + `","config":{"workspace":"/tmp","title":"` + strings.Repeat("t", 1<<20) + `"}}`,
		want: codes.InvalidArgument, field: "config.title"},
	{name: "1 MiB session title", method: "CreateSession",
		proto: mustMarshal(&pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: "/tmp", Title: strings.Repeat("t", 1<<20)}}),
		want:  codes.InvalidArgument, field: "config.title"},
	{name: "bad Connect-Timeout-Ms", method: "GetSession", json: `{"sessionId":"s"}`, header: map[string]string{"Connect-Timeout-Ms": "soon"}, want: codes.InvalidArgument},
	{name: "bad Connect-Timeout-Ms", method: "GetSession", proto: mustMarshal(&pb.GetSessionRequest{SessionId: "s"}), header: map[string]string{"Connect-Timeout-Ms": "-5"}, want: codes.InvalidArgument},
	{name: "Connect-Timeout-Ms of 11 digits", method: "GetSession", json: `{"sessionId":"s"}`, header: map[string]string{"Connect-Timeout-Ms": "12345678901"}, want: codes.InvalidArgument},
	{name: "Connect-Protocol-Version 2", method: "GetSession", json: `{"sessionId":"s"}`, header: map[string]string{"Connect-Protocol-Version": "2"}, want: codes.InvalidArgument},
	{name: "Connect-Protocol-Version 2", method: "GetSession", proto: mustMarshal(&pb.GetSessionRequest{SessionId: "s"}), header: map[string]string{"Connect-Protocol-Version": "2"}, want: codes.InvalidArgument},
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Every malformed request gets its code with an ErrorInfo, on every protocol it can be
// sent in.
func TestMalformedRequestsOnEveryProtocol(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.httpClient(t, false)
	for _, tc := range malformedRequests {
		header := http.Header{}
		for k, v := range tc.header {
			header.Set(k, v)
		}
		connectRow := func(t *testing.T, contentType string, body []byte) {
			resp := post(t, client, rpcURL(tc.method), contentType, body, header)
			got := readAll(t, resp.Body)
			var ce connectError
			if err := json.Unmarshal(got, &ce); err != nil {
				t.Fatalf("HTTP %s, not a Connect error: %.300s", resp.Status, got)
			}
			sp := &spb.Status{Code: int32(tc.want), Message: ce.Message}
			for _, d := range ce.Details {
				raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
				if err != nil {
					t.Fatal(err)
				}
				sp.Details = append(sp.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type, Value: raw})
			}
			st := status.FromProto(sp)
			if ce.Code != connectCodeName(tc.want) {
				t.Fatalf("HTTP %s code %q (%s), want %s", resp.Status, ce.Code, ce.Message, connectCodeName(tc.want))
			}
			wantMalformed(t, st, tc.want, tc.reason, tc.field)
		}
		if tc.json != "" {
			t.Run("connect-json/"+tc.name, func(t *testing.T) { connectRow(t, "application/json", []byte(tc.json)) })
			continue
		}
		t.Run("connect-proto/"+tc.name, func(t *testing.T) { connectRow(t, "application/proto", tc.proto) })
		if len(tc.header) > 0 {
			continue
		}
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			err := e.conn.Invoke(bg, "/agentic.v1.AgenticService/"+tc.method, &rawMessage{b: tc.proto}, &rawMessage{}, grpc.ForceCodecV2(rawCodec{}))
			if len(tc.proto) > maxWireRequestBytes {
				// grpc-go refuses it from its length prefix and writes the status itself,
				// before any of the server's code runs: the code is right, the details
				// cannot be added (maxWireRequestBytes).
				if st := status.Convert(err); st.Code() != tc.want {
					t.Fatalf("%v (%.300s), want %v", st.Code(), st.Message(), tc.want)
				}
				_, err := pb.NewAgenticServiceClient(e.conn).GetSession(bg, &pb.GetSessionRequest{SessionId: "after-the-refusal"})
				wantMalformed(t, status.Convert(err), codes.NotFound, "SESSION_NOT_FOUND", "")
				return
			}
			wantMalformed(t, status.Convert(err), tc.want, tc.reason, tc.field)
		})
		t.Run("grpc-web/"+tc.name, func(t *testing.T) {
			resp := post(t, client, rpcURL(tc.method), "application/grpc-web+proto", envelope(0, tc.proto), nil)
			wantMalformed(t, grpcWebStatus(t, resp), tc.want, tc.reason, tc.field)
		})
	}
}

// wantMalformed checks a refusal: its code, an ErrorInfo (with the reason, when one is
// wanted) and, when a field is at fault, a BadRequest naming it.
func wantMalformed(t *testing.T, st *status.Status, want codes.Code, reason, field string) {
	t.Helper()
	if st.Code() != want {
		t.Fatalf("%v (%.300s), want %v", st.Code(), st.Message(), want)
	}
	info := errorInfo(st)
	if info == nil || info.GetReason() == "" {
		t.Errorf("%v %.300q carries no ErrorInfo", st.Code(), st.Message())
	} else if reason != "" && info.GetReason() != reason {
		t.Errorf("reason %s, want %s", info.GetReason(), reason)
	}
	if field != "" {
		if got := violatedField(st.Err()); got != field {
			t.Errorf("BadRequest names %q, want %q", got, field)
		}
	}
}

// grpcWebStatus reads a gRPC-Web answer's status: from its headers (trailers-only) or its
// trailer frame.
func grpcWebStatus(t *testing.T, resp *http.Response) *status.Status {
	t.Helper()
	header := resp.Header
	if header.Get("Grpc-Status") == "" {
		for _, f := range readFrames(t, resp.Body) {
			if f.flags&0x80 == 0 {
				continue
			}
			header = http.Header{}
			for _, line := range strings.Split(string(f.data), "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok {
					header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
				}
			}
		}
	}
	if raw := header.Get("Grpc-Status-Details-Bin"); raw != "" {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(raw, "="))
		if err != nil {
			t.Fatal(err)
		}
		var sp spb.Status
		if err := proto.Unmarshal(b, &sp); err != nil {
			t.Fatal(err)
		}
		return status.FromProto(&sp)
	}
	msg, _ := url.PathUnescape(header.Get("Grpc-Message"))
	t.Fatalf("gRPC-Web answer without status details: grpc-status %q, %q", header.Get("Grpc-Status"), msg)
	return nil
}

// connectCodeName is a code's name in the Connect protocol.
func connectCodeName(c codes.Code) string {
	switch c {
	case codes.InvalidArgument:
		return "invalid_argument"
	case codes.ResourceExhausted:
		return "resource_exhausted"
	}
	return strings.ToLower(c.String())
}

// A Connect request over the size limit whose body's length is not told in advance
// (chunked) is RESOURCE_EXHAUSTED with its reason too: unary, as a Connect error; a
// stream's, also when its length is known or it is far over, in the stream's end message.
func TestConnectOverSizeLimitChunked(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.httpClient(t, false)
	unary := io.MultiReader(bytes.NewReader(mustMarshal(&pb.GetSessionRequest{SessionId: strings.Repeat("a", maxRequestBytes)})))
	resp := post(t, client, rpcURL("GetSession"), "application/proto", nil, nil) // warms the connection
	readAll(t, resp.Body)
	resp = postFrom(t, client, rpcURL("GetSession"), "application/proto", unary, nil)
	var ce connectError
	if err := json.Unmarshal(readAll(t, resp.Body), &ce); err != nil || ce.Code != "resource_exhausted" || ce.errorInfo(t).GetReason() != "REQUEST_TOO_LARGE" {
		t.Errorf("chunked unary: HTTP %s %+v (%v), want resource_exhausted with REQUEST_TOO_LARGE", resp.Status, ce, err)
	}
	resp.Body.Close()
	for _, c := range []struct {
		size  int
		known bool
	}{{maxRequestBytes, true}, {maxRequestBytes, false}, {3 * maxRequestBytes, false}} {
		big, known := envelope(0, mustMarshal(&pb.SubscribeRequest{SessionIds: []string{strings.Repeat("s", c.size)}})), c.known
		var body io.Reader = bytes.NewReader(big)
		if !known {
			body = io.MultiReader(body) // hides the length: the request is chunked
		}
		resp := postFrom(t, client, rpcURL("Subscribe"), "application/connect+proto", body, nil)
		frames := readFrames(t, resp.Body)
		resp.Body.Close()
		if len(frames) != 1 || frames[0].flags&0x02 == 0 {
			t.Fatalf("%d bytes, length known %v: HTTP %s, %d frames; want one end message", c.size, known, resp.Status, len(frames))
		}
		var end struct {
			Error connectError `json:"error"`
		}
		if err := json.Unmarshal(frames[0].data, &end); err != nil {
			t.Fatalf("end message %.300s: %v", frames[0].data, err)
		}
		if end.Error.Code != "resource_exhausted" || end.Error.errorInfo(t).GetReason() != "REQUEST_TOO_LARGE" {
			t.Errorf("%d bytes, length known %v: %+v, want resource_exhausted with REQUEST_TOO_LARGE", c.size, known, end.Error)
		}
	}
}

// A native gRPC stream's request over the size limit, and a health check's, are refused
// with the reason every other protocol's refusal carries.
func TestGRPCOverSizeLimitBeyondUnaryCalls(t *testing.T) {
	e := newEnv(t, envOptions{})
	stream, err := pb.NewAgenticServiceClient(e.conn).Subscribe(bg, &pb.SubscribeRequest{SessionIds: []string{strings.Repeat("s", maxRequestBytes)}})
	if err == nil {
		_, err = stream.Recv()
	}
	wantMalformed(t, status.Convert(err), codes.ResourceExhausted, "REQUEST_TOO_LARGE", "")
	_, err = healthpb.NewHealthClient(e.conn).Check(bg, &healthpb.HealthCheckRequest{Service: strings.Repeat("h", maxRequestBytes)})
	wantMalformed(t, status.Convert(err), codes.ResourceExhausted, "REQUEST_TOO_LARGE", "")
}

// A gRPC-Web request whose body's length is not told in advance (chunked) is refused by
// its message's length prefix, with the reason, also far over the size limit.
func TestGRPCWebOverSizeLimitChunked(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.httpClient(t, false)
	for _, size := range []int{maxRequestBytes, 3 * maxRequestBytes} {
		body := io.MultiReader(bytes.NewReader(envelope(0, mustMarshal(&pb.GetSessionRequest{SessionId: strings.Repeat("a", size)}))))
		resp := postFrom(t, client, rpcURL("GetSession"), "application/grpc-web+proto", body, nil)
		wantMalformed(t, grpcWebStatus(t, resp), codes.ResourceExhausted, "REQUEST_TOO_LARGE", "")
		resp.Body.Close()
	}
	// A small chunked request still reaches the service whole.
	resp := postFrom(t, client, rpcURL("GetSession"), "application/grpc-web+proto", io.MultiReader(bytes.NewReader(envelope(0, mustMarshal(&pb.GetSessionRequest{SessionId: "nope"})))), nil)
	wantMalformed(t, grpcWebStatus(t, resp), codes.NotFound, "SESSION_NOT_FOUND", "")
}

// A 1 MiB metadata value on a connection's first call gets the call's answer on native
// gRPC, not a closed connection: the connection is routed by the start of its headers.
func TestLargeMetadataOnFirstCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	conn := dialListener(t, e.lis, e.token)
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(bg, "x-big", strings.Repeat("b", 1<<20))
	_, err := pb.NewAgenticServiceClient(conn).GetSession(ctx, &pb.GetSessionRequest{SessionId: "nope"})
	wantMalformed(t, status.Convert(err), codes.NotFound, "SESSION_NOT_FOUND", "")
}

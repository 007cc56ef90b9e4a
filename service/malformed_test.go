package service

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	spb "google.golang.org/genproto/googleapis/rpc/status"
)

// malformedRequests is the corpus of requests a client may get wrong, with the code each
// must get: always with an ErrorInfo, never INTERNAL, UNKNOWN or a dropped connection.
// Rows with json are Connect JSON bodies; rows with proto go over the binary protocols
// (native gRPC, gRPC-Web, Connect proto).
var malformedRequests = []struct {
	name   string
	method string
	json   string
	proto  []byte
	want   codes.Code
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
}

// Every malformed request gets its code with an ErrorInfo, on every protocol it can be
// sent in.
func TestMalformedRequestsOnEveryProtocol(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.httpClient(t, false)
	for _, tc := range malformedRequests {
		if tc.json != "" {
			t.Run("connect-json/"+tc.name, func(t *testing.T) {
				resp := post(t, client, rpcURL(tc.method), "application/json", []byte(tc.json), nil)
				body := readAll(t, resp.Body)
				var ce connectError
				if err := json.Unmarshal(body, &ce); err != nil {
					t.Fatalf("HTTP %s, not a Connect error: %s", resp.Status, body)
				}
				if ce.Code != connectCodeName(tc.want) {
					t.Fatalf("HTTP %s code %q (%s), want %s", resp.Status, ce.Code, ce.Message, connectCodeName(tc.want))
				}
				if ce.errorInfo(t).GetReason() == "" {
					t.Errorf("no reason in the ErrorInfo")
				}
			})
			continue
		}
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			err := e.conn.Invoke(bg, "/agentic.v1.AgenticService/"+tc.method, &rawMessage{b: tc.proto}, &rawMessage{}, grpc.ForceCodecV2(rawCodec{}))
			wantMalformed(t, status.Convert(err), tc.want)
		})
		t.Run("connect-proto/"+tc.name, func(t *testing.T) {
			resp := post(t, client, rpcURL(tc.method), "application/proto", tc.proto, nil)
			body := readAll(t, resp.Body)
			var ce connectError
			if err := json.Unmarshal(body, &ce); err != nil {
				t.Fatalf("HTTP %s, not a Connect error: %s", resp.Status, body)
			}
			if ce.Code != connectCodeName(tc.want) || ce.errorInfo(t).GetReason() == "" {
				t.Errorf("HTTP %s code %q (%s), want %s with a reason", resp.Status, ce.Code, ce.Message, connectCodeName(tc.want))
			}
		})
		t.Run("grpc-web/"+tc.name, func(t *testing.T) {
			resp := post(t, client, rpcURL(tc.method), "application/grpc-web+proto", envelope(0, tc.proto), nil)
			wantMalformed(t, grpcWebStatus(t, resp), tc.want)
		})
	}
}

func wantMalformed(t *testing.T, st *status.Status, want codes.Code) {
	t.Helper()
	if st.Code() != want {
		t.Fatalf("%v (%s), want %v", st.Code(), st.Message(), want)
	}
	if info := errorInfo(st); info == nil || info.GetReason() == "" {
		t.Errorf("%v %q carries no ErrorInfo", st.Code(), st.Message())
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

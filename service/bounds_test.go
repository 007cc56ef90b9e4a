package service

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// wantBounded checks that a status takes far less than the 8 KiB of headers a gRPC core
// client (Python, Ruby, C++) accepts, as it goes on the wire: the message percent-encoded
// (wireLen), and the details, which repeat it, in base64. No echoed run exceeds the bound.
func wantBounded(t *testing.T, st *status.Status) {
	t.Helper()
	msg := st.Message()
	onWire := wireLen(msg)
	if len(st.Proto().GetDetails()) > 0 {
		onWire += (proto.Size(st.Proto()) + 2) / 3 * 4
	}
	if onWire > 6<<10 || wireLen(msg) > maxStatusMessageBytes || longestRun(msg) > maxEchoedRunes+1 || !utf8.ValidString(msg) {
		t.Fatalf("status of %d bytes on the wire (message %d), longest run %d runes, valid UTF-8 %v: %.300q…",
			onWire, wireLen(msg), longestRun(msg), utf8.ValidString(msg), msg)
	}
}

// A client's overlong values come back shortened in the status message, with the code
// unchanged, so that every client can read why.
func TestStatusMessagesBoundEchoedValues(t *testing.T) {
	e := newEnv(t, envOptions{})
	longID := strings.Repeat("i", 9000)
	_, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: longID})
	st := wantCode(t, err, codes.NotFound)
	wantBounded(t, st)
	if !strings.Contains(st.Message(), `unknown session "`+strings.Repeat("i", maxEchoedRunes-1)+ellipsis) ||
		!strings.Contains(st.Message(), "ListSessions shows") {
		t.Errorf("message %q should name the session, shortened, and what to do", st.Message())
	}

	longWorkspace := e.root + "/" + strings.Repeat("w", 4000)
	_, err = e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: longWorkspace}})
	st = wantCode(t, err, codes.InvalidArgument)
	wantBounded(t, st)

	_, err = e.subscribe(t, &pb.SubscribeRequest{AgentIds: []string{longID}}).Recv()
	st = wantCode(t, err, codes.NotFound)
	wantBounded(t, st)

	// A presenter's message that is long in words, not in one value, is cut whole, and
	// the details (here the auth methods) survive.
	e.fake.createFn = func(context.Context, presenters.SessionConfig) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{}, fmt.Errorf("%s: %w", strings.Repeat("too many words ", 1000), presenters.ErrFailedPrecondition)
	}
	_, err = e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
	st = wantCode(t, err, codes.FailedPrecondition)
	wantBounded(t, st)
	if !strings.HasPrefix(st.Message(), "too many words") || !strings.HasSuffix(st.Message(), ellipsis) {
		t.Errorf("message %.100q… should keep its beginning and end with %q", st.Message(), ellipsis)
	}
	e.fake.createFn = func(context.Context, presenters.SessionConfig) (presenters.SessionInfo, error) {
		return presenters.SessionInfo{}, &presenters.AuthRequiredError{AgentID: fakeID, Methods: []presenters.AuthMethod{{ID: strings.Repeat("m", 5000)}}}
	}
	_, err = e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
	st = wantCode(t, err, codes.FailedPrecondition)
	wantBounded(t, st)
	if errorInfo(st) == nil {
		t.Errorf("bounding the message lost the details")
	}

	// What takes more room on the wire than in memory: characters gRPC percent-encodes,
	// invalid bytes it replaces, many auth methods in the details' metadata.
	for name, fail := range map[string]error{
		"CJK words":     fmt.Errorf("%s: %w", strings.Repeat("错误信息 ", 500), presenters.ErrFailedPrecondition),
		"invalid bytes": fmt.Errorf("%s: %w", strings.Repeat("\xff\xfe\xfd ", 500), presenters.ErrFailedPrecondition),
		"many methods": func() error {
			var methods []presenters.AuthMethod
			for i := range 400 {
				methods = append(methods, presenters.AuthMethod{ID: fmt.Sprintf("method-%03d-认证", i)})
			}
			return &presenters.AuthRequiredError{AgentID: fakeID, Methods: methods}
		}(),
	} {
		e.fake.createFn = func(context.Context, presenters.SessionConfig) (presenters.SessionInfo, error) {
			return presenters.SessionInfo{}, fail
		}
		_, err = e.client.CreateSession(bg, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}})
		st, _ := status.FromError(err)
		t.Run(name, func(t *testing.T) { wantBounded(t, st) })
	}
}

func TestBoundMessage(t *testing.T) {
	short := `unknown session "abc"; ListSessions shows the sessions this server knows`
	if got := boundMessage(short, maxStatusMessageBytes); got != short {
		t.Errorf("a short message changed: %q", got)
	}
	long := "id " + strings.Repeat("é", 300) + " end"
	if got, want := boundMessage(long, maxStatusMessageBytes), "id "+strings.Repeat("é", maxEchoedRunes)+ellipsis+" end"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// Cut at a UTF-8 boundary: three-byte characters in short words never split.
	words := strings.Repeat("日本語 ", 1000)
	got := boundMessage(words, maxStatusMessageBytes)
	if wireLen(got) > maxStatusMessageBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, ellipsis) {
		t.Errorf("cut message: %d bytes on the wire, valid %v, ends %q", wireLen(got), utf8.ValidString(got), got[len(got)-10:])
	}
}

// rawCodec sends and receives the bytes of a message as they are, so that a test can send
// what no well-behaved client would.
type rawCodec struct{}

type rawMessage struct{ b []byte }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*rawMessage).b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*rawMessage).b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// withInvalidUTF8 marshals msg and puts an invalid byte in place of the first byte of
// marker, a string in one of its fields (the length stays, so the encoding stays sound).
func withInvalidUTF8(t *testing.T, msg proto.Message, marker string) *rawMessage {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		t.Fatalf("marker %q not in the encoding", marker)
	}
	b[i] = 0xff
	return &rawMessage{b: b}
}

// A request with invalid UTF-8 in a string field is INVALID_ARGUMENT naming the field,
// in unary calls and streams alike, and the connection goes on serving.
func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	e := newEnv(t, envOptions{})
	raw := grpc.ForceCodecV2(rawCodec{})
	unary := []struct {
		method string
		req    *rawMessage
		field  string
	}{
		{"GetSession", withInvalidUTF8(t, &pb.GetSessionRequest{SessionId: "XXXX"}, "XXXX"), "session_id"},
		{"CreateSession", withInvalidUTF8(t, &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: "/XXXX"}}, "XXXX"), "config.workspace"},
		{"SendMessage", withInvalidUTF8(t, &pb.SendMessageRequest{SessionId: "s", Content: &pb.MessageContent{
			Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "hi XXXX"}}}}}, "XXXX"), "content.parts.text"},
	}
	for _, c := range unary {
		err := e.conn.Invoke(bg, "/agentic.v1.AgenticService/"+c.method, c.req, &rawMessage{}, raw)
		st := wantCode(t, err, codes.InvalidArgument)
		if !strings.HasPrefix(st.Message(), c.field+" is not valid UTF-8") {
			t.Errorf("%s: message %q should name %s", c.method, st.Message(), c.field)
		}
		wantReason(t, err, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, c.field)
	}
	stream, err := e.conn.NewStream(bg, &grpc.StreamDesc{ServerStreams: true}, "/agentic.v1.AgenticService/Subscribe", raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(withInvalidUTF8(t, &pb.SubscribeRequest{SessionIds: []string{"ok", "XXXX"}}, "XXXX")); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	err = stream.RecvMsg(&rawMessage{})
	st := wantCode(t, err, codes.InvalidArgument)
	if !strings.HasPrefix(st.Message(), "session_ids is not valid UTF-8") {
		t.Errorf("Subscribe: message %q should name session_ids", st.Message())
	}
	wantReason(t, err, codes.InvalidArgument, pb.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "session_ids")
	// Valid requests go on working.
	if _, err := e.client.ListAgents(bg, &pb.ListAgentsRequest{}); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// stampedText is chunk i of a stamped 64-byte flood.
func stampedText(i int) string {
	s := fmt.Sprintf("%08d|%019d|", i, time.Now().UnixNano())
	return s + strings.Repeat("x", 64-len(s))
}

func deltaEvent(seq uint64, text string) *pb.AgenticEvent {
	return &pb.AgenticEvent{Sequence: seq, Payload: &pb.AgenticEvent_MessageDelta{
		MessageDelta: &pb.MessageDelta{Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT, Text: text}}}
}

func endEvent(seq uint64) *pb.AgenticEvent {
	return &pb.AgenticEvent{Sequence: seq, Payload: &pb.AgenticEvent_MessageEnd{
		MessageEnd: &pb.MessageEnd{Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}}
}

func batch(evs ...*pb.AgenticEvent) *pb.SubscribeResponse {
	return &pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Events{Events: &pb.EventBatch{Events: evs}}}
}

// scriptedStream yields frames, then err.
type scriptedStream struct {
	frames []*pb.SubscribeResponse
	err    error
}

func (s *scriptedStream) Recv() (*pb.SubscribeResponse, error) {
	if len(s.frames) == 0 {
		return nil, s.err
	}
	f := s.frames[0]
	s.frames = s.frames[1:]
	return f, nil
}

// A stream that ends with RESOURCE_EXHAUSTED is resumed after the last sequence it
// delivered, and the turn is intact when the resumed stream carries on from there; an
// event lost, repeated or out of order fails the turn.
func TestReadProtocolTurn(t *testing.T) {
	caughtUp := &pb.SubscribeResponse{Frame: &pb.SubscribeResponse_CaughtUp{CaughtUp: &pb.CaughtUp{Sequence: 10}}}
	first := func() *scriptedStream {
		return &scriptedStream{frames: []*pb.SubscribeResponse{caughtUp, batch(deltaEvent(11, stampedText(0)), deltaEvent(12, stampedText(1)))},
			err: status.Error(codes.ResourceExhausted, "too slow")}
	}
	for _, tc := range []struct {
		name    string
		resumed []*pb.SubscribeResponse
		wantErr string
	}{
		{"resumed in order", []*pb.SubscribeResponse{batch(deltaEvent(13, stampedText(2)), endEvent(14))}, ""},
		{"an event lost", []*pb.SubscribeResponse{batch(deltaEvent(14, stampedText(2)), endEvent(15))}, "event 14 arrived after event 12"},
		{"an event repeated", []*pb.SubscribeResponse{batch(deltaEvent(12, stampedText(1)), endEvent(13))}, "event 12 arrived after event 12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resumedAfter []uint64
			open := func(_ context.Context, req *pb.SubscribeRequest) (frameStream, error) {
				resumedAfter = append(resumedAfter, req.GetAfterSequence())
				return &scriptedStream{frames: tc.resumed, err: io.EOF}, nil
			}
			turn := streamRead{check: newChunkCheck(64, 3)}
			_, err := readProtocolTurn(t.Context(), first(), open, &sequenceCheck{last: 10}, &turn)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(resumedAfter) != "[12]" || turn.resumes != 1 {
				t.Errorf("resumed after %v, %d resumes; want after 12, once", resumedAfter, turn.resumes)
			}
			if err := turn.intactErr(); err != nil || turn.events != 4 {
				t.Errorf("intact: %v, %d events; want intact, 4 events", err, turn.events)
			}
		})
	}
}

// The HTTP protocols' frames decode, and their end frames say how the stream ended:
// cleanly (io.EOF) or with a status code, RESOURCE_EXHAUSTED among them (the resume
// signal).
func TestHTTPFrameStream(t *testing.T) {
	msg := batch(deltaEvent(7, "hi"))
	for _, tc := range []struct {
		name     string
		p        httpStreaming
		end      []byte
		wantCode codes.Code // OK: the stream ends with io.EOF
	}{
		{"connect ok", connectJSON, []byte(`{}`), codes.OK},
		{"connect too slow", connectJSON, []byte(`{"error":{"code":"resource_exhausted","message":"subscriber too slow"}}`), codes.ResourceExhausted},
		{"connect unknown code", connectJSON, []byte(`{"error":{"code":"no_such_code"}}`), codes.Unknown},
		{"grpc-web ok", grpcWebProto, []byte("grpc-status: 0\r\n"), codes.OK},
		{"grpc-web too slow", grpcWebProto, []byte("Grpc-Status: 8\r\ngrpc-message: subscriber too slow\r\n"), codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.p.marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			body := append(envelope(0, data), envelope(tc.p.endFlag, tc.end)...)
			s := &httpFrameStream{p: tc.p, body: io.NopCloser(nil), r: bufio.NewReader(bytes.NewReader(body))}
			got, err := s.Recv()
			if err != nil || !proto.Equal(got, msg) {
				t.Fatalf("first frame %v, %v; want %v", got, err, msg)
			}
			_, err = s.Recv()
			switch {
			case tc.wantCode == codes.OK && !errors.Is(err, io.EOF):
				t.Fatalf("end frame: %v, want io.EOF", err)
			case tc.wantCode != codes.OK && status.Code(err) != tc.wantCode:
				t.Fatalf("end frame: %v (code %v), want code %v", err, status.Code(err), tc.wantCode)
			}
		})
	}
	// A body that stops without its end frame is an error, not a clean end.
	s := &httpFrameStream{p: connectJSON, body: io.NopCloser(nil), r: bufio.NewReader(bytes.NewReader(nil))}
	if _, err := s.Recv(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a body without its end frame: %v, want an error other than io.EOF", err)
	}
}

// The ratio to native gRPC is the median of per-run ratios, each taken only from a run
// where both reads were intact; the intact row is met only when every read was intact.
func TestProtocolRows(t *testing.T) {
	const count = 1000
	read := func(d time.Duration, intact bool) streamRead {
		c := newChunkCheck(64, count)
		if intact {
			c.next = count
		}
		return streamRead{elapsed: d, check: c, wireBytes: 200 * count}
	}
	native, connect := &protocolRuns{name: "native gRPC"}, &protocolRuns{name: "Connect JSON over HTTP/1.1"}
	// Live: run 1 both intact, Connect takes twice as long; run 2 native broken, so
	// Connect's read gives no ratio; run 3 both intact, Connect takes four times as long.
	// Replay: Connect takes three times as long in every run.
	for _, r := range []struct {
		native, connect time.Duration
		nativeIntact    bool
	}{{time.Second, 2 * time.Second, true}, {time.Second, 3 * time.Second, false}, {time.Second, 4 * time.Second, true}} {
		n := protocolTurn{live: read(r.native, r.nativeIntact), replay: read(time.Second, true)}
		native.add(n, n, count)
		connect.add(protocolTurn{live: read(r.connect, true), replay: read(3*time.Second, true)}, n, count)
	}
	rows := protocolRows("Protocols", count, 64, []*protocolRuns{native, connect})
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rows))
	}
	if want := "0.38 × native gRPC (median of 2 per-run ratio(s)"; !strings.HasPrefix(rows[1].Ratio, want) {
		t.Errorf("Connect live ratio %q, want it to start %q", rows[1].Ratio, want)
	}
	if want := "333 ev/s, 0.0 MB/s of text"; rows[1].Value != want {
		t.Errorf("Connect live value %q, want %q", rows[1].Value, want)
	}
	if want := "0.33 × native gRPC (median of 3 per-run ratio(s)"; !strings.HasPrefix(rows[3].Ratio, want) || !strings.Contains(rows[3].Figure, "replay") {
		t.Errorf("Connect replay row %q ratio %q, want a replay row starting %q", rows[3].Figure, rows[3].Ratio, want)
	}
	if rows[4].Met != "no" || !strings.Contains(rows[4].Value, "native gRPC 2/3 live, 3/3 replay intact") {
		t.Errorf("intact row %q met %q, want native 2/3 live and not met", rows[4].Value, rows[4].Met)
	}
	// A broken replay alone fails the intact row too.
	only := &protocolRuns{name: "native gRPC"}
	only.add(protocolTurn{live: read(time.Second, true), replay: read(time.Second, false)}, protocolTurn{}, count)
	rows = protocolRows("Protocols", count, 64, []*protocolRuns{only})
	if last := rows[len(rows)-1]; last.Met != "no" {
		t.Errorf("intact row %q met %q with a broken replay, want not met", last.Value, last.Met)
	}
}

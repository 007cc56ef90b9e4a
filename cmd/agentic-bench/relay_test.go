package main

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// startTestRelay serves a relay with no agent on loopback and returns a client of it.
func startTestRelay(t *testing.T) (*relayServer, pb.AgenticServiceClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relayServer{}
	srv := newRelayGRPCServer(r)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r, pb.NewAgenticServiceClient(conn)
}

// Every subscriber gets every chunk as a MESSAGE_DELTA, numbered in order, then the
// MESSAGE_END: the bytes marshalled once decode as the events they stand for.
func TestRelayFansChunksOut(t *testing.T) {
	r, client := startTestRelay(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []pb.AgenticService_SubscribeClient
	for range 2 {
		stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{relaySessionID}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Header(); err != nil { // registered once headers arrive
			t.Fatal(err)
		}
		streams = append(streams, stream)
	}
	chunks := []string{"one", "two", "three"}
	agent := &relayClient{r: r}
	for _, text := range chunks {
		n := sdk.SessionNotification{Update: sdk.SessionUpdate{AgentMessageChunk: &sdk.SessionUpdateAgentMessageChunk{Content: sdk.TextBlock(text)}}}
		if err := agent.SessionUpdate(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	end := r.event(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END)
	end.Payload = &pb.AgenticEvent_MessageEnd{MessageEnd: &pb.MessageEnd{Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
	r.publish(end)
	for i, stream := range streams {
		for j, text := range chunks {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatalf("subscriber %d, event %d: %v", i, j+1, err)
			}
			if ev.GetSequence() != uint64(j+1) || ev.GetSessionId() != relaySessionID || ev.GetMessageDelta().GetText() != text {
				t.Fatalf("subscriber %d got %v, want MESSAGE_DELTA %d %q", i, ev, j+1, text)
			}
		}
		ev, err := stream.Recv()
		if err != nil || ev.GetSequence() != 4 || ev.GetMessageEnd() == nil {
			t.Fatalf("subscriber %d: got %v, %v; want MESSAGE_END 4", i, ev, err)
		}
	}
}

// The relay holds no events: a resume point other than the newest sequence is refused
// with a reason, not answered with a gap.
func TestRelayRefusesReplay(t *testing.T) {
	_, client := startTestRelay(t)
	stream, err := client.Subscribe(context.Background(), &pb.SubscribeRequest{AfterSequence: 7})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Subscribe after_sequence=7 on a relay at 0: %v, want Unimplemented", err)
	}
}

// With the raw reader the relay waits for its slowest subscriber instead of dropping it:
// more events than a queue holds all arrive, in order, and a subscriber that leaves while
// the publisher waits for it releases the publisher.
func TestRelayRawReaderWaitsForSlowestSubscriber(t *testing.T) {
	r, client := startTestRelay(t)
	r.raw = true
	// A relay that kept waiting for the subscriber that left would stall the reader: its
	// Recv then fails at this deadline instead of the test hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subscribe := func(ctx context.Context) pb.AgenticService_SubscribeClient {
		stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Header(); err != nil {
			t.Fatal(err)
		}
		return stream
	}
	reader := subscribe(ctx)
	leaverCtx, leave := context.WithCancel(ctx)
	defer leave()
	subscribe(leaverCtx) // never reads: once its queue is full, the relay waits for it
	const events = 3 * relayQueue
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range events {
			r.publish(r.delta(fmt.Sprint(i)))
		}
	}()
	for i := range events {
		if i == relayQueue/2 {
			leave()
		}
		ev, err := reader.Recv()
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
		if ev.GetSequence() != uint64(i+1) || ev.GetMessageDelta().GetText() != fmt.Sprint(i) {
			t.Fatalf("got sequence %d text %q, want %d %q", ev.GetSequence(), ev.GetMessageDelta().GetText(), i+1, fmt.Sprint(i))
		}
	}
	<-published
}

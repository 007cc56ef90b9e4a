package main

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// startTestRelay serves a relay with no agent on loopback and returns a client of it.
func startTestRelay(t *testing.T, wait bool) (*relayServer, pb.AgenticServiceClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relayServer{wait: wait}
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

// subscribeRegistered opens a stream and waits for its headers: the relay sends them
// once the subscriber is registered.
func subscribeRegistered(ctx context.Context, t *testing.T, client pb.AgenticServiceClient) pb.AgenticService_SubscribeClient {
	t.Helper()
	stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{relaySessionID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	return stream
}

// newestSub is the subscriber registered last.
func newestSub(r *relayServer) *relaySub {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subs[len(r.subs)-1]
}

// publishInBackground publishes deltas "0", "1", … and closes the channel it returns
// once all are published.
func publishInBackground(r *relayServer, events int) <-chan struct{} {
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range events {
			r.publish(relayDelta(fmt.Sprint(i)))
		}
	}()
	return published
}

// Every subscriber gets every chunk as a MESSAGE_DELTA, numbered in order, then the
// MESSAGE_END: the bytes marshalled once decode as the events they stand for.
func TestRelayFansChunksOut(t *testing.T) {
	r, client := startTestRelay(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streams := []pb.AgenticService_SubscribeClient{subscribeRegistered(ctx, t, client), subscribeRegistered(ctx, t, client)}
	chunks := []string{"one", "two", "three"}
	for _, text := range chunks {
		r.publish(relayDelta(text))
	}
	end := relayEvent(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END)
	end.Payload = &pb.AgenticEvent_MessageEnd{MessageEnd: &pb.MessageEnd{Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
	r.publish(end)
	for i, stream := range streams {
		for j, text := range chunks {
			ev, err := relayRecv(stream)
			if err != nil {
				t.Fatalf("subscriber %d, event %d: %v", i, j+1, err)
			}
			if ev.GetSequence() != uint64(j+1) || ev.GetSessionId() != relaySessionID || ev.GetMessageDelta().GetText() != text {
				t.Fatalf("subscriber %d got %v, want MESSAGE_DELTA %d %q", i, ev, j+1, text)
			}
		}
		ev, err := relayRecv(stream)
		if err != nil || ev.GetSequence() != 4 || ev.GetMessageEnd() == nil {
			t.Fatalf("subscriber %d: got %v, %v; want MESSAGE_END 4", i, ev, err)
		}
	}
}

// The relay holds no events: a resume point other than the newest sequence is refused
// with a reason, not answered with a gap.
func TestRelayRefusesReplay(t *testing.T) {
	_, client := startTestRelay(t, false)
	stream, err := client.Subscribe(context.Background(), &pb.SubscribeRequest{Start: after(7)})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Subscribe after_sequence=7 on a relay at 0: %v, want Unimplemented", err)
	}
}

// Without -wait a subscriber that falls a whole queue behind is dropped: it gets what was
// queued, in order, then RESOURCE_EXHAUSTED, and the publisher never waits for it.
func TestRelayDropsSubscriberAQueueBehind(t *testing.T) {
	r, client := startTestRelay(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := subscribeRegistered(ctx, t, client)
	const events = 3 * relayQueue
	published := publishInBackground(r, events)
	select { // nothing reads yet: a relay that waited would still be publishing
	case <-published:
	case <-ctx.Done():
		t.Fatal("publishing to a subscriber that does not read never finished: the relay waited for it")
	}
	got := 0
	for {
		ev, err := relayRecv(stream)
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || got >= events {
				t.Fatalf("after %d of %d events: %v, want RESOURCE_EXHAUSTED before the end", got, events, err)
			}
			return
		}
		if ev.GetSequence() != uint64(got+1) {
			t.Fatalf("got sequence %d after %d events", ev.GetSequence(), got)
		}
		got++
	}
}

// With -wait the relay waits for its slowest subscriber instead of dropping it: more
// events than a queue holds all arrive, in order, and a subscriber that leaves while the
// publisher waits for it releases the publisher.
func TestRelayWaitsForSlowestSubscriber(t *testing.T) {
	r, client := startTestRelay(t, true)
	// A relay that kept waiting for the subscriber that left would stall the reader: its
	// Recv then fails at this deadline instead of the test hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader := subscribeRegistered(ctx, t, client)
	leaverCtx, leave := context.WithCancel(ctx)
	defer leave()
	subscribeRegistered(leaverCtx, t, client) // never reads
	leaver := newestSub(r)
	const events = 3 * relayQueue
	published := publishInBackground(r, events)
	// The leaver leaves once its queue is full, that is while the publisher waits for it.
	left := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				left <- false
				return
			case <-tick.C:
				if len(leaver.ch) == cap(leaver.ch) {
					leave()
					left <- true
					return
				}
			}
		}
	}()
	for i := range events {
		ev, err := relayRecv(reader)
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
		if ev.GetSequence() != uint64(i+1) || ev.GetMessageDelta().GetText() != fmt.Sprint(i) {
			t.Fatalf("got sequence %d text %q, want %d %q", ev.GetSequence(), ev.GetMessageDelta().GetText(), i+1, fmt.Sprint(i))
		}
	}
	<-published
	if !<-left {
		t.Fatal("the leaver's queue never filled: the publisher did not wait for it")
	}
}

// relayRecv reads the next frame and returns its event: the relay sends one per frame.
func relayRecv(stream pb.AgenticService_SubscribeClient) (*pb.AgenticEvent, error) {
	frame, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if evs := frame.GetEvents().GetEvents(); len(evs) == 1 {
		return evs[0], nil
	}
	return nil, fmt.Errorf("frame %v does not hold one event", frame)
}

package service

import (
	"fmt"
	"sync"
	"testing"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// BenchmarkHubPublish measures Publish with subscribers that drain their queues and
// encode each event (as a stream would), so the cost includes fan-out and the shared
// encoding.
func BenchmarkHubPublish(b *testing.B) {
	for _, subscribers := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			h, err := NewHub(bg, HubOptions{SubscriberQueue: 1 << 16})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for range subscribers {
				sub, _, err := h.subscribe(nil, nil, 0)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for he := range sub.ch {
						if _, err := he.encoded(); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			em := presenters.NewEmitter(h, "agent", "session")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				em.MessageDelta("m", presenters.RoleAssistant, "a chunk of text")
			}
			b.StopTimer()
			h.Close()
			wg.Wait()
		})
	}
}

// BenchmarkSubscribeStream measures events from Publish to a client's Recv over a real
// gRPC stream (bufconn), with 1 and 16 subscribers; ns/op is per event per run.
func BenchmarkSubscribeStream(b *testing.B) {
	for _, subscribers := range []int{1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			e := newEnv(b, envOptions{hub: HubOptions{SubscriberQueue: 1 << 16}})
			// One connection per subscriber, as separate clients would have.
			streams := make([]pb.AgenticService_SubscribeClient, subscribers)
			for i := range streams {
				conn := dialBufconn(b, e.lis, "")
				defer func() { _ = conn.Close() }()
				stream, err := pb.NewAgenticServiceClient(conn).Subscribe(b.Context(), &pb.SubscribeRequest{SessionIds: []string{"s"}, AfterSequence: e.hub.LastSequence()})
				if err != nil {
					b.Fatal(err)
				}
				streams[i] = stream
			}
			// Start each stream: one event through every subscriber.
			presenters.NewEmitter(e.hub, fakeID, "s").StatusChanged(presenters.SessionIdle, "")
			for _, s := range streams {
				if _, err := s.Recv(); err != nil {
					b.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, subscribers)
			for _, s := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range b.N {
						if _, err := s.Recv(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			em := presenters.NewEmitter(e.hub, fakeID, "s")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				em.MessageDelta("m", presenters.RoleAssistant, "a chunk of text")
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkCreateCloseSession measures the service's share of a session's life (validation,
// workspace check, SQLite owner record, hub events) with an in-memory presenter.
func BenchmarkCreateCloseSession(b *testing.B) {
	e := newEnv(b, envOptions{})
	req := &pb.CreateSessionRequest{AgentId: fakeID, Config: &pb.SessionConfig{Workspace: e.root}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := e.client.CreateSession(bg, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.client.CloseSession(bg, &pb.CloseSessionRequest{SessionId: resp.GetSession().GetSessionId()}); err != nil {
			b.Fatal(err)
		}
	}
}

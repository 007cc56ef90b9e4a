package service

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
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
				sub, err := h.subscribe(nil, nil, 0)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						if _, _, err := sub.Next(bg); err != nil {
							return
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
// gRPC stream (bufconn), with 1 and 16 subscribers; ns/op is per event per run. The
// publisher stays at most streamWindow events ahead of the slowest subscriber, so the
// figure is throughput, never the overflow path.
func BenchmarkSubscribeStream(b *testing.B) {
	const streamWindow = 1024 // well under the subscriber queue
	for _, subscribers := range []int{1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			e := newEnv(b, envOptions{hub: HubOptions{SubscriberQueue: 1 << 16}})
			e.storeSessions(b, fakeID, "s")
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			// One connection per subscriber, as separate clients would have.
			streams := make([]pb.AgenticService_SubscribeClient, subscribers)
			for i := range streams {
				conn := dialBufconn(b, e.lis, "")
				defer func() { _ = conn.Close() }()
				stream, err := pb.NewAgenticServiceClient(conn).Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{"s"}})
				if err != nil {
					b.Fatal(err)
				}
				// Subscribe sends the headers once the subscriber is registered.
				if _, err := stream.Header(); err != nil {
					b.Fatal(err)
				}
				streams[i] = stream
			}
			received := make([]atomic.Int64, subscribers)
			poke := make(chan struct{}, 1)
			failed := make(chan error, subscribers)
			var wg sync.WaitGroup
			for i, s := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range b.N {
						if _, err := s.Recv(); err != nil {
							failed <- err
							return
						}
						if n := received[i].Add(1); n%64 == 0 || n == int64(b.N) {
							select {
							case poke <- struct{}{}:
							default:
							}
						}
					}
				}()
			}
			slowest := func() int64 {
				m := received[0].Load()
				for i := range received {
					m = min(m, received[i].Load())
				}
				return m
			}
			// waitFor returns false when a subscriber failed.
			waitFor := func(n int64) bool {
				for slowest() < n {
					select {
					case <-poke:
					case err := <-failed:
						b.Error(err)
						return false
					}
				}
				return true
			}
			em := presenters.NewEmitter(e.hub, fakeID, "s")
			b.ReportAllocs()
			b.ResetTimer()
			ok := true
			for i := 0; i < b.N && ok; i++ {
				if i%256 == 0 {
					ok = waitFor(int64(i - streamWindow))
				}
				em.MessageDelta("m", presenters.RoleAssistant, "a chunk of text")
			}
			if ok {
				waitFor(int64(b.N))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
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

// storedPresenter describes sessions from SQLite, as a presenter with a stored history
// does: one query per GetSession, one per GetSessions batch (when batching is on).
type storedPresenter struct {
	*fakePresenter
	store *store.Store
}

func (p *storedPresenter) GetSession(ctx context.Context, id string) (presenters.SessionInfo, error) {
	rec, err := p.store.SessionOwner(ctx, id)
	return presenters.SessionInfo{SessionID: rec.SessionID, AgentID: rec.AgentID, Workspace: rec.Workspace, Status: presenters.SessionIdle}, err
}

type batchingStoredPresenter struct{ storedPresenter }

func (p *batchingStoredPresenter) GetSessions(ctx context.Context, ids []string) ([]presenters.SessionInfo, error) {
	known, err := p.store.KnownSessions(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]presenters.SessionInfo, 0, len(known))
	for _, id := range ids {
		if known[id] {
			out = append(out, presenters.SessionInfo{SessionID: id, AgentID: fakeID, Workspace: "/w", Status: presenters.SessionIdle})
		}
	}
	return out, nil
}

// BenchmarkListSessions measures one ListSessions page of 1000 sessions whose presenter
// reads SQLite: asked session by session, and through GetSessions (sessionsGetter).
func BenchmarkListSessions(b *testing.B) {
	st := openStore(b)
	for i := range 1000 {
		if err := st.AddSessionOwner(bg, store.SessionOwner{SessionID: fmt.Sprintf("s%04d", i), AgentID: fakeID, Workspace: "/w", CreatedUnixNano: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	hub, err := NewHub(bg, HubOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer hub.Close()
	stored := storedPresenter{fakePresenter: newFake(fakeID, hub), store: st}
	for name, p := range map[string]presenters.Presenter{"per-session": &stored, "batched": &batchingStoredPresenter{stored}} {
		b.Run(name, func(b *testing.B) {
			registry, err := NewRegistry(st, []presenters.Presenter{p})
			if err != nil {
				b.Fatal(err)
			}
			svc := New(Options{Registry: registry, Hub: hub, Logger: discard})
			b.ReportAllocs()
			for b.Loop() {
				resp, err := svc.ListSessions(bg, &pb.ListSessionsRequest{PageSize: 1000})
				if err != nil || len(resp.GetSessions()) != 1000 || resp.GetSessions()[999].GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE {
					b.Fatalf("%d sessions, %v", len(resp.GetSessions()), err)
				}
			}
		})
	}
}

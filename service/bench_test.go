package service

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// BenchmarkHubPublish measures Publish with subscribers that drain their queues in
// batches and encode each event (as a stream would), so the cost includes fan-out and the
// shared encoding.
func BenchmarkHubPublish(b *testing.B) {
	for _, subscribers := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			h, err := NewHub(bg, HubOptions{SubscriberQueue: 1 << 16})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for range subscribers {
				sub, err := h.subscribe(events.Filter{}, events.Live())
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					var buf []*wire.Event
					for {
						batch, err := sub.NextBatch(bg, nil, maxBatchEvents, maxBatchBytes, buf)
						if err != nil {
							return
						}
						buf = batch.Events
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

// captureStream is a Subscribe stream without a network: it copies out each frame's bytes
// and frees the frame, as gRPC's writer would, and notes the sequence of its last event.
type captureStream struct {
	ctx      context.Context
	received *atomic.Uint64
	buf      []byte
}

var _ pb.AgenticService_SubscribeServer = (*captureStream)(nil)

func (s *captureStream) Send(*pb.SubscribeResponse) error { return nil }

func (s *captureStream) SendMsg(m any) error {
	if f, ok := m.(*wire.Frame); ok {
		s.buf = s.buf[:0]
		for _, b := range f.BufferSlice() {
			s.buf = append(s.buf, b.ReadOnlyData()...)
		}
		s.received.Store(lastFrameSequence(s.buf))
		f.BufferSlice().Free() // as gRPC does once the frame is written
	}
	return nil
}

// lastFrameSequence reads the sequence of an EventBatch frame's last event, skipping
// over the others without decoding them.
func lastFrameSequence(frame []byte) uint64 {
	batch, _ := protowire.ConsumeBytes(frame[1:]) // SubscribeResponse.events
	var last []byte
	for len(batch) > 0 {
		_, _, n := protowire.ConsumeTag(batch)
		var m int
		last, m = protowire.ConsumeBytes(batch[n:])
		batch = batch[n+m:]
	}
	seq, _ := protowire.ConsumeVarint(last[1:]) // AgenticEvent.sequence comes first
	return seq
}

func (s *captureStream) Context() context.Context     { return s.ctx }
func (s *captureStream) SetHeader(metadata.MD) error  { return nil }
func (s *captureStream) SendHeader(metadata.MD) error { return nil }
func (s *captureStream) SetTrailer(metadata.MD)       {}
func (s *captureStream) RecvMsg(any) error            { return nil }

// BenchmarkSubscribeHandler measures the Subscribe handler's fan-out of 64-byte deltas to
// 1 and 16 streams in this process (hub, shared encoding, batch frames), without a
// network; ns/op is per event.
func BenchmarkSubscribeHandler(b *testing.B) {
	for _, subscribers := range []int{1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			h, err := NewHub(bg, HubOptions{SubscriberQueue: 1 << 16})
			if err != nil {
				b.Fatal(err)
			}
			svc := New(Options{Hub: h, Logger: discard})
			ctx, cancel := context.WithCancel(bg)
			received := make([]atomic.Uint64, subscribers)
			var wg sync.WaitGroup
			for i := range subscribers {
				wg.Go(func() {
					_ = svc.Subscribe(&pb.SubscribeRequest{}, &captureStream{ctx: ctx, received: &received[i]})
				})
			}
			slowest := func() uint64 {
				m := received[0].Load()
				for i := range received {
					m = min(m, received[i].Load())
				}
				return m
			}
			// All registered once each has an event.
			em := presenters.NewEmitter(h, "agent", "session")
			for slowest() == 0 {
				em.MessageDelta("m", presenters.RoleAssistant, "warm")
				time.Sleep(time.Millisecond)
			}
			chunk := strings.Repeat("x", 64)
			seqs := make([]uint64, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%256 == 0 && i >= 1024 {
					for slowest() < seqs[i-1024] {
						runtime.Gosched()
					}
				}
				seqs[i] = em.MessageDelta("m", presenters.RoleAssistant, chunk)
			}
			for slowest() < seqs[b.N-1] {
				runtime.Gosched()
			}
			b.StopTimer()
			cancel()
			h.Close()
			wg.Wait()
		})
	}
}

// BenchmarkSubscribeStream measures events from Publish to a client's Recv over a real
// gRPC stream (loopback TCP), with 1 and 16 subscribers; ns/op is per event per run, events
// arriving in batches when the stream falls behind. The
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
			streams := make([]*eventStream, subscribers)
			for i := range streams {
				conn := dialListener(b, e.lis, e.token)
				defer func() { _ = conn.Close() }()
				stream, err := pb.NewAgenticServiceClient(conn).Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{"s"}})
				if err != nil {
					b.Fatal(err)
				}
				// Subscribe sends the headers once the subscriber is registered.
				if _, err := stream.Header(); err != nil {
					b.Fatal(err)
				}
				streams[i] = &eventStream{AgenticService_SubscribeClient: stream}
			}
			received := make([]atomic.Uint64, subscribers) // the last sequence each got
			poke := make(chan struct{}, 1)
			failed := make(chan error, subscribers)
			var wg sync.WaitGroup
			for i, s := range streams {
				wg.Go(func() {
					for {
						frame, err := s.Recv()
						if err != nil {
							if ctx.Err() == nil {
								failed <- err
							}
							return
						}
						if evs := frame.GetEvents().GetEvents(); len(evs) > 0 {
							received[i].Store(evs[len(evs)-1].GetSequence())
						}
						select {
						case poke <- struct{}{}:
						default:
						}
					}
				})
			}
			slowest := func() uint64 {
				m := received[0].Load()
				for i := range received {
					m = min(m, received[i].Load())
				}
				return m
			}
			// waitFor returns false when a subscriber failed.
			waitFor := func(seq uint64) bool {
				for slowest() < seq {
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
			seqs := make([]uint64, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			ok := true
			for i := 0; i < b.N && ok; i++ {
				if i%256 == 0 && i >= streamWindow {
					ok = waitFor(seqs[i-streamWindow])
				}
				seqs[i] = em.MessageDelta("m", presenters.RoleAssistant, "a chunk of text")
			}
			if ok {
				waitFor(seqs[b.N-1])
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
	benchmarkCreateClose(b, newEnv(b, envOptions{}))
}

// BenchmarkCreateCloseSessionLogged is BenchmarkCreateCloseSession as agenticd serves it:
// with the event log and the audit log in the same SQLite store, and the queue of
// messages (which looks at a session's queue when it closes).
func BenchmarkCreateCloseSessionLogged(b *testing.B) {
	st := openStore(b)
	e := newEnv(b, envOptions{store: st, eventLog: true, hub: HubOptions{Queue: st, Logger: discard}})
	ctx, cancel := context.WithCancel(bg)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		e.hub.Queue().Run(ctx)
	}()
	b.Cleanup(func() {
		cancel()
		<-ran
	})
	benchmarkCreateClose(b, e)
}

func benchmarkCreateClose(b *testing.B, e *testEnv) {
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
				// As the owner, who reads every session (the interceptors set the caller).
				resp, err := svc.ListSessions(withPrincipal(bg, ownerPrincipal("test")), &pb.ListSessionsRequest{PageSize: 1000})
				if err != nil || len(resp.GetSessions()) != 1000 || resp.GetSessions()[999].GetStatus() != pb.SessionStatus_SESSION_STATUS_IDLE {
					b.Fatalf("%d sessions, %v", len(resp.GetSessions()), err)
				}
			}
		})
	}
}

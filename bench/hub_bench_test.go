// Package bench holds agenticd's Go micro-benchmarks (testing.B, run with -benchmem by
// `make bench`): the event hub, the gRPC Subscribe path on loopback, and the transcript
// store (the Subscribe handler's fan-out without a network is in service's benchmarks).
// The end-to-end load program is bench/agentic-bench.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service"
)

const (
	benchSession = "bench-session"
	benchAgent   = "acp.bench.agent"
	// window is how far the publisher may run ahead of the slowest subscriber: well
	// under the hub's subscriber queue, so that the benchmark measures throughput
	// and never the overflow path.
	window = 1024
)

var chunk64 = strings.Repeat("x", 64)

// progress tracks how many events each subscriber received.
type progress struct {
	counts []atomic.Int64
	poke   chan struct{}
}

func newProgress(n int) *progress {
	return &progress{counts: make([]atomic.Int64, n), poke: make(chan struct{}, 1)}
}

// add counts n events received by subscriber i.
func (p *progress) add(i, n int) {
	if total := p.counts[i].Add(int64(n)); total%256 < int64(n) {
		select {
		case p.poke <- struct{}{}:
		default:
		}
	}
}

func (p *progress) min() int64 {
	m := p.counts[0].Load()
	for i := range p.counts {
		m = min(m, p.counts[i].Load())
	}
	return m
}

// waitFor blocks until every subscriber received at least n events.
func (p *progress) waitFor(n int64) {
	for p.min() < n {
		select {
		case <-p.poke:
		case <-time.After(time.Millisecond):
		}
	}
}

func (p *progress) reset() {
	for i := range p.counts {
		p.counts[i].Store(0)
	}
}

// publishAll publishes n deltas, never more than window ahead of the slowest
// subscriber, and waits until all of them arrived everywhere.
func publishAll(hub *service.Hub, p *progress, n int) {
	emit := presenters.NewEmitter(hub, benchAgent, benchSession)
	for i := 0; i < n; i++ {
		if i%256 == 0 {
			p.waitFor(int64(i - window))
		}
		emit.MessageDelta("msg-1", presenters.RoleAssistant, chunk64)
	}
	p.waitFor(int64(n))
}

// warm publishes until every subscriber has seen an event (their subscriptions are
// registered), then zeroes the counts.
func warm(hub *service.Hub, p *progress) {
	emit := presenters.NewEmitter(hub, benchAgent, benchSession)
	for p.min() == 0 {
		emit.MessageDelta("msg-0", presenters.RoleAssistant, "warm")
		time.Sleep(time.Millisecond)
	}
	// Drain what the warm-up left in flight before counting from zero.
	time.Sleep(20 * time.Millisecond)
	p.reset()
}

// benchToken is the bearer token serveGRPC's server accepts.
const benchToken = "hub-bench-token"

type benchCredentials struct{}

func (benchCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + benchToken}, nil
}

func (benchCredentials) RequireTransportSecurity() bool { return false }

// serveGRPC serves the service over a hub on loopback TCP as agenticd does
// (service.NewGRPCServer: its codec and interceptors) and returns a client; stop ends
// both.
func serveGRPC(b *testing.B, hub *service.Hub, registry *service.Registry) (pb.AgenticServiceClient, func()) {
	srv, err := service.NewGRPCServer(service.New(service.Options{Hub: hub, Registry: registry}), service.GRPCOptions{
		Credentials: service.Credentials{Tokens: []string{benchToken}}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(benchCredentials{}))
	if err != nil {
		b.Fatal(err)
	}
	return pb.NewAgenticServiceClient(conn), func() {
		conn.Close()
		srv.Stop(context.Background())
		<-served
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func newHub(b *testing.B) *service.Hub {
	hub, err := service.NewHub(context.Background(), service.HubOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return hub
}

// BenchmarkHubPublishNoSubscribers is the cost of Publish alone (sequence, ring,
// projection).
func BenchmarkHubPublishNoSubscribers(b *testing.B) {
	hub := newHub(b)
	emit := presenters.NewEmitter(hub, benchAgent, benchSession)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		emit.MessageDelta("msg-1", presenters.RoleAssistant, chunk64)
	}
}

// BenchmarkSubscribeGRPC: the hub's fan-out through a real gRPC server and clients on
// loopback TCP in this process; events/s is per subscriber (events arrive in batches when
// a subscriber falls behind, every delta on its own: unmerged).
func BenchmarkSubscribeGRPC(b *testing.B) {
	for _, subs := range []int{1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			hub := newHub(b)
			heldSession(hub)
			client, stop := serveGRPC(b, hub, nil)
			ctx, cancel := context.WithCancel(context.Background())
			p := newProgress(subs)
			var wg sync.WaitGroup
			for i := 0; i < subs; i++ {
				stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{benchSession}, UnmergedDeltas: true})
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						frame, err := stream.Recv()
						if err != nil {
							return
						}
						p.add(i, len(frame.GetEvents().GetEvents()))
					}
				}()
			}
			warm(hub, p)
			b.ReportAllocs()
			b.ResetTimer()
			publishAll(hub, p, b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			cancel()
			wg.Wait()
			hub.Close()
			stop()
		})
	}
}

// heldSession publishes one event of benchSession, so that the hub knows it and
// Subscribe accepts it without a registry.
func heldSession(hub *service.Hub) {
	presenters.NewEmitter(hub, benchAgent, benchSession).StatusChanged(presenters.SessionIdle, "")
}

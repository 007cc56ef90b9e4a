package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/acp"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// BenchmarkACPFlood: the ACP presenter reading a flood of b.N agent_message_chunk
// notifications from the test agent (a real child process), through the hub and a real
// gRPC Subscribe stream on loopback to one client. ns/op is per chunk; the agent's own
// cost is in it (compare agentic-bench's raw-reader rows).
func BenchmarkACPFlood(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			st, err := store.Open(ctx, filepath.Join(dir, "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			roots, err := sandbox.NewRoots([]string{dir}, sandbox.Options{})
			if err != nil {
				b.Fatal(err)
			}
			hub := newHub(b)
			defer hub.Close()
			client, stop := serveGRPC(b, hub, nil)
			defer stop()
			p, err := acp.New(acp.Config{ID: "acp.bench.flood", Command: testAgent, Env: map[string]string{
				"TESTAGENT_FLOOD_COUNT": fmt.Sprint(b.N), "TESTAGENT_FLOOD_SIZE": fmt.Sprint(size),
			}}, acp.Deps{Publisher: hub, Roots: roots, Store: st, Logger: discard})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(ctx)
			ws, err := roots.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			info, err := p.CreateSession(ctx, presenters.SessionConfig{Workspace: ws})
			if err != nil {
				b.Fatal(err)
			}
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := client.Subscribe(sctx, &pb.SubscribeRequest{SessionIds: []string{info.SessionID}})
			if err != nil {
				b.Fatal(err)
			}
			// The server sends headers once the subscription is registered.
			if _, err := stream.Header(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			if _, err := p.SendMessage(ctx, info.SessionID, presenters.TextContent("go"), presenters.SendOptions{}); err != nil {
				b.Fatal(err)
			}
			// Deltas that wait together arrive merged: the chunks are counted in bytes.
			text := 0
			for done := false; !done; {
				frame, err := stream.Recv()
				if err != nil {
					b.Fatalf("stream ended after %d of %d chunks: %v", text/size, b.N, err)
				}
				for _, ev := range frame.GetEvents().GetEvents() {
					switch p := ev.GetPayload().(type) {
					case *pb.AgenticEvent_MessageDelta:
						if p.MessageDelta.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
							text += len(p.MessageDelta.GetText())
						}
					case *pb.AgenticEvent_MessageEnd:
						done = p.MessageEnd.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER
					}
				}
			}
			b.StopTimer()
			if text != b.N*size {
				b.Fatalf("%d bytes of %d chunks of %d arrived", text, b.N, size)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

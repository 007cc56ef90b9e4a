package validate

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/ringhash" // registers ring_hash_experimental
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// ringHashServiceConfig is the service config deploy/README.md gives grpc-go clients.
const ringHashServiceConfig = `{"loadBalancingConfig":[{"ring_hash_experimental":{"requestHashHeader":"agenticd-session-id"}}]}`

// The grpc-go snippet of deploy/README.md works with the grpc-go agenticd uses: its
// service config is accepted, and with it every call of a session goes to one backend,
// while sessions spread over the backends.
func TestRingHashServiceConfig(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{ringHashServiceConfig, `_ "google.golang.org/grpc/balancer/ringhash"`, `metadata.AppendToOutgoingContext(ctx, "agenticd-session-id", sessionID)`} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("deploy/README.md does not show %s", want)
		}
	}

	// Three backends that answer every call with their own name (as an error: no
	// service is needed for that).
	var addrs []resolver.Address
	for _, name := range []string{"a", "b", "c"} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			return status.Error(codes.Unimplemented, name)
		}))
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		addrs = append(addrs, resolver.Address{Addr: lis.Addr().String()})
	}
	r := manual.NewBuilderWithScheme("agenticd")
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient(r.Scheme()+":///agenticd-pods",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(ringHashServiceConfig))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	backend := func(sessionID string) string {
		t.Helper()
		callCtx := ctx
		if sessionID != "" {
			callCtx = metadata.AppendToOutgoingContext(ctx, "agenticd-session-id", sessionID)
		}
		err := conn.Invoke(callCtx, "/agentic.v1.AgenticService/GetSession", &emptypb.Empty{}, &emptypb.Empty{}, grpc.WaitForReady(true))
		s := status.Convert(err)
		if s.Code() != codes.Unimplemented {
			t.Fatalf("call for session %q: %v", sessionID, err)
		}
		return s.Message()
	}
	used := map[string]bool{}
	for i := range 30 {
		id := fmt.Sprintf("session-%d", i)
		first := backend(id)
		used[first] = true
		for range 3 {
			if again := backend(id); again != first {
				t.Fatalf("session %s went to backend %s, then to %s", id, first, again)
			}
		}
	}
	if len(used) < 2 {
		t.Errorf("30 sessions all went to backends %v: the hash does not spread them", used)
	}
	backend("") // a call without the header goes to any backend
}

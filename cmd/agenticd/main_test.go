package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRefusals(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "")
	cfg := filepath.Join(t.TempDir(), "agenticd.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 0.0.0.0:50051\nworkspace_roots: ["+t.TempDir()+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--listen", "0.0.0.0:0", "--data-dir", t.TempDir()}, 1, "refusing to listen on 0.0.0.0:0 without a token"},
		{[]string{"--config", cfg, "--data-dir", t.TempDir()}, 1, "refusing to listen on 0.0.0.0:50051"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, 1, "read config"},
		{[]string{"serve"}, 2, "unexpected argument"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"--log-level", "loud", "--data-dir", t.TempDir()}, 1, "log_level"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		if code := run(c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("agenticd %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.code, c.says)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, &stderr); code != 0 || !strings.Contains(stderr.String(), "-listen") {
		t.Errorf("-h: exit %d, %q", code, stderr.String())
	}
}

// agenticd serves with the flags and the environment's token, and SIGTERM stops it with
// status 0.
func TestServesUntilSIGTERM(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "from-env")
	cfg := filepath.Join(t.TempDir(), "agenticd.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:1\ntoken: from-file\nworkspace_roots: ["+t.TempDir()+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &serveLog{ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, log)
	}()
	var addr string
	select {
	case addr = <-log.ready:
	case code := <-done:
		t.Fatalf("agenticd exited %d before serving; log:\n%s", code, log.String())
	}

	if token, set := os.LookupEnv("AGENTICD_TOKEN"); set {
		t.Errorf("AGENTICD_TOKEN=%q is still in the environment that agents and their commands inherit", token)
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := pb.NewAgenticServiceClient(conn)
	if _, err := client.ListAgents(context.Background(), &pb.ListAgentsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("without a token: %v, want UNAUTHENTICATED", err)
	}
	for token, want := range map[string]codes.Code{"from-file": codes.Unauthenticated, "from-env": codes.OK} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
		if _, err := client.ListAgents(ctx, &pb.ListAgentsRequest{}); status.Code(err) != want {
			t.Errorf("token %s: %v, want %v (AGENTICD_TOKEN overrides the file)", token, err, want)
		}
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0; log:\n%s", code, log.String())
	}
}

// serveLog captures agenticd's log and reports the address once it serves.
type serveLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan string
	once  sync.Once
}

var servingLine = regexp.MustCompile(`msg="agenticd serving" addr=(\S+)`)

func (l *serveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if m := servingLine.FindSubmatch(p); m != nil {
		l.once.Do(func() { l.ready <- string(m[1]) })
	}
	return len(p), nil
}

func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

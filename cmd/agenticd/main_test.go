package main

import (
	"bytes"
	"context"
	"io"
	"net"
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
	"github.com/agenticd/agenticd/internal/version"
	"github.com/agenticd/agenticd/sandbox/confine"
)

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	// deepchat.default configures itself from these: the tests run without them.
	for _, name := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"} {
		_ = os.Unsetenv(name)
	}
	goleak.VerifyTestMain(m)
}

func TestRefusals(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
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
		if code := run(c.args, io.Discard, &stderr); code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("agenticd %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.code, c.says)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, io.Discard, &stderr); code != 0 || !strings.Contains(stderr.String(), "-listen") {
		t.Errorf("-h: exit %d, %q", code, stderr.String())
	}
}

// agenticd serves with the flags and the environment's token, and SIGTERM stops it with
// status 0.
func TestServesUntilSIGTERM(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "from-env-0123456789abcdef")
	cfg := filepath.Join(t.TempDir(), "agenticd.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:1\ntoken: from-file-0123456789abcdef\nworkspace_roots: ["+t.TempDir()+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &serveLog{ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, io.Discard, log)
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
	for token, want := range map[string]codes.Code{"from-file-0123456789abcdef": codes.Unauthenticated, "from-env-0123456789abcdef": codes.OK} {
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

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 || stdout.String() != version.String("agenticd")+"\n" || stderr.Len() > 0 {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout.String(), stderr.String(), version.String("agenticd"))
	}
}

// -h says where the config file goes, what it holds, where it is documented, and what
// configures deepchat.default without one.
func TestHelpExplainsTheConfig(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, want := range []string{"--config FILE", "~/.config/agenticd/agenticd.yaml", "$XDG_CONFIG_HOME/agenticd/agenticd.yaml",
		"listen", "data_dir", "token", "tls", "workspace_roots", "agents", "docs/configuration.md",
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "Ollama", "127.0.0.1:11434", "OLLAMA_HOST", "-version"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %q:\n%s", want, stderr.String())
		}
	}
}

// Without --config, agenticd reads $XDG_CONFIG_HOME/agenticd/agenticd.yaml, else
// ~/.config/agenticd/agenticd.yaml; an explicit empty --config reads no file.
func TestDefaultConfigFile(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "")
	write := func(dir, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, "agenticd"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "agenticd", "agenticd.yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	xdg, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	// A data dir that cannot be created: should the file go unread, agenticd fails
	// instead of serving.
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	write(xdg, "listen: 0.0.0.0:50051\n")
	write(filepath.Join(home, ".config"), "listen: 0.0.0.0:50052\n")
	cases := []struct {
		xdg  string
		args []string
		says string
	}{
		{xdg, nil, "refusing to listen on 0.0.0.0:50051"},
		{"", nil, "refusing to listen on 0.0.0.0:50052"},
		// The default file is not read: the flag's error is the first one.
		{xdg, []string{"--config", "", "--log-level", "loud"}, "log_level"},
	}
	for _, c := range cases {
		t.Setenv("XDG_CONFIG_HOME", c.xdg)
		var stderr bytes.Buffer
		args := append([]string{"--data-dir", notADir}, c.args...)
		if code := run(args, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("XDG_CONFIG_HOME=%q agenticd %q: exit %d, stderr %q; want 1 and %q", c.xdg, args, code, stderr.String(), c.says)
		}
	}
	write(xdg, "listen: 127.0.0.1:0\nworkspace_root: [/tmp]\n")
	t.Setenv("XDG_CONFIG_HOME", xdg)
	var stderr bytes.Buffer
	if code := run([]string{"--data-dir", notADir}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "did you mean `workspace_roots`?") ||
		!strings.Contains(stderr.String(), "default config file") {
		t.Errorf("a broken default file: exit %d, stderr %q; want it named as the default and the typo's fix", code, stderr.String())
	}
}

// An error is printed once, in the file's terms: no Go type names, no log line repeating it.
func TestErrorsPrintOnceInPlainWords(t *testing.T) {
	t.Setenv("AGENTICD_TOKEN", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	var stderr bytes.Buffer
	if code := run([]string{"--listen", taken.Addr().String(), "--data-dir", t.TempDir()}, io.Discard, &stderr); code != 1 ||
		strings.Count(stderr.String(), "is another agenticd running") != 1 {
		t.Errorf("a taken address: exit %d, stderr %q; want the error once", code, stderr.String())
	}

	cfg := filepath.Join(t.TempDir(), "agenticd.yaml")
	if err := os.WriteFile(cfg, []byte("shutdown_timeout: 10\nworkspace_roots: /tmp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	code := run([]string{"--config", cfg}, io.Discard, &stderr)
	out := stderr.String()
	if code != 1 || !strings.Contains(out, "key `shutdown_timeout` at line 1: 10 has no unit; write 10s") ||
		!strings.Contains(out, "key `workspace_roots` at line 2: expected a list of strings") {
		t.Errorf("a bad config: exit %d, stderr %q", code, out)
	}
	if goType := regexp.MustCompile(`time\.Duration|\[\]string|daemon\.|!!`).FindString(out); goType != "" {
		t.Errorf("the error shows %q, a Go or YAML type name: %s", goType, out)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"gopkg.in/yaml.v3"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// server is a running server under test and a client connected to it: agenticd as a real
// bin/agenticd process by default or daemon.Start in this process (for pprof profiles and
// for figures read from the Go heap), or the plain gRPC relay (relay.go) as a process.
type server struct {
	name    string // for messages: "agenticd" or "the relay"
	addr    string
	conn    *grpc.ClientConn
	client  pb.AgenticServiceClient
	started time.Duration // process start -> health SERVING

	proc   *exec.Cmd      // process mode
	exited <-chan error   // process mode: Wait's result
	inproc *daemon.Server // in-process mode
}

// startAgenticd starts a server with cfg (Listen is chosen here). binary "" runs it in
// this process.
func startAgenticd(ctx context.Context, binary string, cfg daemon.Config) (*server, error) {
	if cfg.Token == "" {
		cfg.Token = benchToken
	}
	if cfg.MaxProcs == 0 {
		cfg.MaxProcs = benchMaxProcs()
	}
	if binary == "" {
		return startInProcess(ctx, cfg)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg.Listen = addr
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(cfg.DataDir, "bench-config.yaml")
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		return nil, err
	}
	return startProcess(ctx, "agenticd", exec.Command(binary, "--config", cfgFile), addr, filepath.Join(cfg.DataDir, "agenticd.log"))
}

// startProcess starts a server process that will serve on addr, its output appended to
// logPath, and waits until its health service says SERVING.
func startProcess(ctx context.Context, name string, cmd *exec.Cmd, addr, logPath string) (*server, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &server{name: name, addr: addr, proc: cmd}
	if err := s.waitServing(ctx, exited); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		tail, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("%w; its log ends: %s", err, lastLines(string(tail), 5))
	}
	s.started = time.Since(start)
	s.exited = exited
	return s, nil
}

func startInProcess(ctx context.Context, cfg daemon.Config) (*server, error) {
	cfg.Listen = "127.0.0.1:0"
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	start := time.Now()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := daemon.Start(ctx, cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("start agenticd in-process: %w", err)
	}
	s := &server{name: "agenticd", addr: srv.Addr(), inproc: srv}
	if err := s.waitServing(ctx, nil); err != nil {
		_ = srv.Stop(context.Background())
		return nil, err
	}
	s.started = time.Since(start)
	return s, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitServing polls until the port accepts connections and health says SERVING. The
// polling step is 1 ms, the resolution of the start-up figure.
func (s *server) waitServing(ctx context.Context, exited <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited before serving: %v", s.name, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within 60 s", s.name, s.addr)
		}
	}
	conn, err := s.dial()
	if err != nil {
		return err
	}
	health := healthpb.NewHealthClient(conn)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			conn.Close()
			return fmt.Errorf("%s on %s not SERVING within 60 s (last: %v %v)", s.name, s.addr, resp.GetStatus(), err)
		}
		time.Sleep(time.Millisecond)
	}
	s.conn, s.client = conn, pb.NewAgenticServiceClient(conn)
	return nil
}

// dial opens a client connection to the server.
func (s *server) dial() (*grpc.ClientConn, error) {
	return grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(benchCredentials{}), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// benchMaxProcs is the GOMAXPROCS of the agenticd the benchmark starts: half the CPUs,
// at least one. The agent, agenticd and the clients share the machine, and on 2 CPUs one
// P made the ACP flood 5-15 % faster at a small price in p99 latency (docs/BENCHMARKS.md).
func benchMaxProcs() int { return max(1, runtime.NumCPU()/2) }

// benchToken is the bearer token the benchmark's agenticd accepts (every call needs
// one); the relay ignores it.
const benchToken = "agentic-bench-token-0123456789"

type benchCredentials struct{}

func (benchCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + benchToken}, nil
}

func (benchCredentials) RequireTransportSecurity() bool { return false }

// pid of the server (this process in-process).
func (s *server) pid() int {
	if s.proc != nil {
		return s.proc.Process.Pid
	}
	return os.Getpid()
}

// stop ends the server gracefully (SIGTERM; SIGKILL after 20 s).
func (s *server) stop() error {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.inproc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return s.inproc.Stop(ctx)
	}
	_ = syscall.Kill(s.proc.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-s.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("%s exited with %v after SIGTERM", s.name, err)
		}
		return err
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGKILL)
		<-s.exited
		return fmt.Errorf("%s did not stop within 20 s of SIGTERM; killed", s.name)
	}
}

// processCPU is the CPU time a process has used (user and system), from /proc; its
// clock ticks are USER_HZ, 100 a second on Linux.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	stat := string(b)
	// "pid (comm) state ppid ...": utime and stime are the 14th and 15th fields, the
	// 12th and 13th after comm, which may itself hold spaces and parentheses.
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}

// procMem is a process's resident memory from /proc (KiB).
type procMem struct{ rssKiB, hwmKiB int64 }

func readProcMem(pid int) (procMem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, err
	}
	var m procMem
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			m.rssKiB = n
		case "VmHWM":
			m.hwmKiB = n
		}
	}
	return m, nil
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux clear_refs 5).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

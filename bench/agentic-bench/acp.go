package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

// common are the flags every subcommand takes.
type common struct {
	agenticd  string // bin/agenticd; empty with -inprocess
	inprocess bool
	agent     string // the test agent binary
	runs      int
	work      string // scratch directory (a temp dir when empty)
	results   string // JSON-lines file the rows are appended to
	profile   profileFlags
	// sharedConn puts several subscribers on one gRPC connection (one frontend
	// multiplexing them) instead of one connection each (separate frontends).
	sharedConn bool
	// unmerged asks agenticd for every delta as the agent sent it
	// (SubscribeRequest.unmerged_deltas) instead of runs of waiting deltas merged.
	unmerged bool
}

func (c *common) register(fs *flag.FlagSet, runs int) {
	fs.StringVar(&c.agenticd, "agenticd", "bin/agenticd", "agenticd binary to run as a process")
	fs.BoolVar(&c.inprocess, "inprocess", false, "run agenticd inside this process (needed for -cpuprofile/-memprofile to see the server)")
	fs.StringVar(&c.agent, "agent", "bin/testagent", "the scripted ACP test agent binary (internal/testagent)")
	fs.IntVar(&c.runs, "runs", runs, "runs per figure; figures are medians")
	fs.StringVar(&c.work, "work", "", "scratch directory (default: a new temp dir, removed afterwards)")
	fs.StringVar(&c.results, "results", "", "append result rows (JSON lines) to this file")
	fs.BoolVar(&c.sharedConn, "shared-conn", false, "several subscribers share one gRPC connection instead of one each")
	c.profile.register(fs)
}

// prepare resolves binaries and the scratch directory; the returned func cleans up.
func (c *common) prepare() (func(), error) {
	if c.inprocess {
		c.agenticd = ""
	} else if c.agenticd != "" {
		abs, err := filepath.Abs(c.agenticd)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("agenticd binary: %w (build it: go build -o bin/ ./cmd/agenticd)", err)
		}
		c.agenticd = abs
	}
	if c.agent != "" {
		abs, err := filepath.Abs(c.agent)
		if err != nil {
			return nil, err
		}
		c.agent = abs
	}
	cleanup := func() {}
	if c.work == "" {
		dir, err := os.MkdirTemp("", "agentic-bench-")
		if err != nil {
			return nil, err
		}
		c.work = dir
		cleanup = func() { os.RemoveAll(dir) }
	}
	stopProfile, err := c.profile.start()
	if err != nil {
		cleanup()
		return nil, err
	}
	return func() { stopProfile(); cleanup() }, nil
}

// runDir is a fresh data dir and workspace for one run.
func (c *common) runDir(name string) (dataDir, workspace string, err error) {
	dir, err := os.MkdirTemp(c.work, name+"-")
	if err != nil {
		return "", "", err
	}
	// Sessions may not work inside agenticd's data dir: keep the two apart. The
	// workspace root is the workspace's parent.
	dataDir = filepath.Join(dir, "data")
	workspace = filepath.Join(dir, "workspaces", "ws")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", "", err
	}
	return dataDir, workspace, os.MkdirAll(workspace, 0o755)
}

func (c *common) checkAgent() error {
	if _, err := os.Stat(c.agent); err != nil {
		return fmt.Errorf("test agent: %w (build it: go build -o bin/testagent ./internal/testagent)", err)
	}
	return nil
}

const benchACPAgent = "acp.bench.testagent"

// acpConfig is agenticd with the test agent as its one ACP agent.
func acpConfig(dataDir, workspace, agentBin string, env map[string]string, args []string) daemon.Config {
	return daemon.Config{
		DataDir:        dataDir,
		WorkspaceRoots: []string{filepath.Dir(workspace)},
		Agents: []daemon.AgentConfig{{
			ID: benchACPAgent, Type: presenters.AgentTypeACP, Command: agentBin, Args: args, Env: env,
		}},
	}
}

// subResult is what one gRPC subscriber saw of one turn.
type subResult struct {
	end        time.Time // MESSAGE_END of the assistant message received
	check      *chunkCheck
	toolStarts int
	toolEnds   int
	errors     []string // ERROR events
	lastSeq    uint64   // sequence of the last event received (the resume point)
	resumes    int      // streams ended with RESOURCE_EXHAUSTED and resumed
	err        error    // the stream failed or the turn never ended
}

// grpcTurn is one prompt through agenticd with subs subscribers on its session.
type grpcTurn struct {
	start    time.Time
	subs     []*subResult
	rssStart procMem // just before SendMessage (peak reset there)
	rssEnd   procMem // after every subscriber saw MESSAGE_END
	err      error   // setup or SendMessage failed
}

// elapsed is the time from SendMessage to MESSAGE_END at subscriber i.
func (t *grpcTurn) elapsed(i int) time.Duration { return t.subs[i].end.Sub(t.start) }

// intactErr is nil when the turn ended at every subscriber with everything in order.
func (t *grpcTurn) intactErr() error {
	if t.err != nil {
		return t.err
	}
	for i, s := range t.subs {
		if s.err != nil {
			return fmt.Errorf("subscriber %d: %w", i, s.err)
		}
		if s.check != nil {
			if err := s.check.intact(); err != nil {
				return fmt.Errorf("subscriber %d: %w", i, err)
			}
		}
	}
	return nil
}

// registerUnmerged adds -unmerged-deltas, for the subcommands whose subscribers take it.
func (c *common) registerUnmerged(fs *flag.FlagSet) {
	fs.BoolVar(&c.unmerged, "unmerged-deltas", false, "subscribe with unmerged_deltas: one event per chunk, never merged")
}

// runGRPCTurn creates a session of agentID, subscribes subs streams to it, sends one
// message and waits until every subscriber got the assistant's MESSAGE_END.
func runGRPCTurn(ctx context.Context, s *server, agentID, workspace string, subs int, shared, unmerged bool, newCheck func() *chunkCheck) *grpcTurn {
	t := &grpcTurn{}
	created, err := s.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: agentID, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		t.err = fmt.Errorf("CreateSession: %w", err)
		return t
	}
	id := created.GetSession().GetSessionId()
	got, err := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.err = fmt.Errorf("GetSession: %w", err)
		return t
	}
	// Resuming from the session's last sequence closes the gap between Subscribe
	// returning here and the server registering the stream.
	after := got.GetSession().GetLastSequence()
	// Several subscribers stand for several frontends, each with its own connection
	// (and so its own HTTP/2 writer in agenticd), unless shared says they are one
	// frontend multiplexing them on the control connection.
	clients := slices.Repeat([]pb.AgenticServiceClient{s.client}, subs)
	if subs > 1 && !shared {
		clients = clients[:0]
		for i := range subs {
			conn, err := s.dial()
			if err != nil {
				t.err = fmt.Errorf("connect subscriber %d: %w", i, err)
				return t
			}
			defer conn.Close()
			clients = append(clients, pb.NewAgenticServiceClient(conn))
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg, ready sync.WaitGroup
	t.subs = make([]*subResult, subs)
	for i := range t.subs {
		r := &subResult{lastSeq: after}
		if newCheck != nil {
			r.check = newCheck()
		}
		t.subs[i] = r
		wg.Add(1)
		ready.Add(1)
		client := clients[i]
		go func() {
			defer wg.Done()
			r.err = followTurn(sctx, client, &pb.SubscribeRequest{SessionIds: []string{id}, UnmergedDeltas: unmerged}, r, ready.Done)
		}()
	}
	// Every subscription is registered (the server sends headers only then) before the
	// message goes out.
	ready.Wait()
	pid := s.pid()
	_ = resetPeakRSS(pid)
	t.rssStart, _ = readProcMem(pid)
	t.start = time.Now()
	if _, err := s.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: textContent("go")}); err != nil {
		t.err = fmt.Errorf("SendMessage: %w", err)
		cancel()
		wg.Wait()
		return t
	}
	wg.Wait()
	t.rssEnd, _ = readProcMem(pid)
	if _, err := s.client.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: id}); err != nil && t.err == nil {
		t.err = fmt.Errorf("CloseSession: %w", err)
	}
	return t
}

// layout says how several subscribers connect, and whether deltas are merged, for the
// rows' figures.
func (c *common) layout(subs int) string {
	out := ""
	switch {
	case subs <= 1:
	case c.sharedConn:
		out = ", all on one gRPC connection"
	default:
		out = ", one gRPC connection each"
	}
	if c.unmerged {
		out += ", unmerged deltas"
	}
	return out
}

// followTurn subscribes with req and reads until the assistant's MESSAGE_END. A stream
// ended with RESOURCE_EXHAUSTED (the subscriber fell a whole queue behind) is resumed
// from the last sequence received, as the API asks clients to do; the resumes are
// counted. registered is called once the first subscription is registered.
func followTurn(ctx context.Context, client pb.AgenticServiceClient, req *pb.SubscribeRequest, r *subResult, registered func()) error {
	first := true
	for {
		req.Start = after(r.lastSeq)
		stream, err := client.Subscribe(ctx, req)
		if err == nil && first {
			_, err = stream.Header()
		}
		if first {
			first = false
			registered()
		}
		if err != nil {
			return fmt.Errorf("Subscribe: %w", err)
		}
		err = readTurn(stream, r)
		if status.Code(err) != codes.ResourceExhausted {
			return err
		}
		r.resumes++
	}
}

func readTurn(stream pb.AgenticService_SubscribeClient, r *subResult) error {
	events := &eventReader{stream: stream}
	for {
		ev, err := events.next()
		recv := events.received
		if err != nil {
			return err
		}
		r.lastSeq = ev.GetSequence()
		switch p := ev.GetPayload().(type) {
		case *pb.AgenticEvent_MessageDelta:
			if p.MessageDelta.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER && r.check != nil {
				r.check.feed(p.MessageDelta.GetText(), recv.UnixNano())
			}
		case *pb.AgenticEvent_MessageEnd:
			if p.MessageEnd.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
				r.end = recv
				return nil
			}
		case *pb.AgenticEvent_ToolStart:
			r.toolStarts++
		case *pb.AgenticEvent_ToolEnd:
			r.toolEnds++
		case *pb.AgenticEvent_Error:
			r.errors = append(r.errors, p.Error.GetMessage())
		}
	}
}

// floodEnv is the test agent's environment for a stamped flood (rate 0: unpaced).
func floodEnv(count, size int, rate float64) map[string]string {
	env := map[string]string{
		"TESTAGENT_FLOOD_COUNT": fmt.Sprint(count),
		"TESTAGENT_FLOOD_SIZE":  fmt.Sprint(size),
		"TESTAGENT_STAMP":       "1",
	}
	if rate > 0 {
		env["TESTAGENT_PACE_RATE"] = fmt.Sprint(rate)
	}
	return env
}

// agenticdRun starts agenticd for one run, runs one turn through it and stops it.
func (c *common) agenticdRun(ctx context.Context, name string, env map[string]string, args []string, subs int, newCheck func() *chunkCheck) *grpcTurn {
	return c.serverRun(ctx, name, subs, newCheck, func(dataDir, workspace string) (*server, error) {
		return startAgenticd(ctx, c.agenticd, acpConfig(dataDir, workspace, c.agent, env, args))
	})
}

// relayRun starts the relay on the agent for one run (wait: see relayServer), runs one
// turn through it as through agenticd, and stops it.
func (c *common) relayRun(ctx context.Context, spec agentSpec, wait bool, subs int, newCheck func() *chunkCheck) *grpcTurn {
	return c.serverRun(ctx, "relay", subs, newCheck, func(dataDir, _ string) (*server, error) {
		return startRelay(ctx, spec, wait, dataDir)
	})
}

// serverRun starts a server in a fresh run directory, runs one turn through it and stops it.
func (c *common) serverRun(ctx context.Context, name string, subs int, newCheck func() *chunkCheck, start func(dataDir, workspace string) (*server, error)) *grpcTurn {
	dataDir, workspace, err := c.runDir(name)
	if err != nil {
		return &grpcTurn{err: err}
	}
	s, err := start(dataDir, workspace)
	if err != nil {
		return &grpcTurn{err: err}
	}
	t := runGRPCTurn(ctx, s, benchACPAgent, workspace, subs, c.sharedConn, c.unmerged, newCheck)
	if err := s.stop(); err != nil && t.err == nil {
		t.err = fmt.Errorf("stop %s: %w", s.name, err)
	}
	return t
}

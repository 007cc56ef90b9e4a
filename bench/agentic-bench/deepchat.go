package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agenticd/agenticd/bench/fakeopenai"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

const benchDeepChatAgent = "deepchat.bench.fake"

// deepchatConfig is agenticd with one DeepChat agent talking to the fake provider.
func deepchatConfig(dataDir, workspace, baseURL string) daemon.Config {
	return daemon.Config{
		DataDir:        dataDir,
		WorkspaceRoots: []string{filepath.Dir(workspace)},
		Agents: []daemon.AgentConfig{{
			ID: benchDeepChatAgent, Type: presenters.AgentTypeDeepChat, Provider: "bench", BaseURL: baseURL,
			Models: []string{fakeopenai.Model}, DefaultModel: fakeopenai.Model,
		}},
	}
}

// deepchatReplyCmd: one DeepChat turn whose provider streams -chunks deltas; counts the
// SQLite write transactions agenticd commits from SendMessage until shortly after
// MESSAGE_END, and checks the reply arrived and was stored whole.
func deepchatReplyCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("deepchat-reply", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	chunks := fs.Int("chunks", 10_000, "content deltas the provider streams")
	size := fs.Int("size", 16, "bytes per delta")
	settle := fs.Duration("settle", 500*time.Millisecond, "how long after MESSAGE_END commits still count (late writes of the turn)")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "DeepChat"
	figure := fmt.Sprintf("SQLite write transactions for one %d-chunk reply", *chunks)
	target := "≤ 20"
	fake, err := fakeopenai.Start(*chunks, *size)
	if err != nil {
		return err
	}
	defer fake.Close()
	want := fakeopenai.Reply(*chunks, *size)
	var txs, secs []float64
	var fails []string
	for run := 0; run < c.runs; run++ {
		n, elapsed, err := c.deepchatReplyRun(ctx, fake.BaseURL(), want, *settle)
		if err != nil {
			fails = append(fails, oneLine(err.Error()))
			fmt.Printf("run %d: %v\n", run+1, err)
			continue
		}
		txs = append(txs, float64(n))
		secs = append(secs, elapsed.Seconds())
		fmt.Printf("run %d: %d write transactions, %v\n", run+1, n, elapsed)
	}
	runs := fmt.Sprintf("%d/%d intact", len(txs), c.runs)
	if len(txs) == 0 {
		return emit(c.results, Row{Section: section, Figure: figure, Target: target, Value: "not available: " + failNotes(fails),
			Met: "n/a", Runs: runs, Command: commandLine()})
	}
	return emit(c.results,
		Row{Section: section, Figure: figure, Target: target, Value: fmt.Sprintf("%.0f", median(txs)), Met: metStr(median(txs) <= 20),
			Runs: runs, Command: commandLine(), Notes: strings.TrimPrefix(failNotes(fails)+
				"; counted from outside the process as new commit frames in agenticd's WAL (a read transaction pins the WAL), SendMessage → MESSAGE_END + settle", "; ")},
		Row{Section: section, Figure: fmt.Sprintf("SendMessage → MESSAGE_END, %d-chunk reply from the fake provider", *chunks),
			Value: fmt.Sprintf("%.0f ms (%s chunks/s)", median(secs)*1000, si(float64(*chunks)/median(secs))), Runs: runs, Command: commandLine()})
}

// deepchatReplyRun is one DeepChat turn on SQLite (engineReply).
func (c *common) deepchatReplyRun(ctx context.Context, baseURL, want string, settle time.Duration) (int, time.Duration, error) {
	var resumes int
	return c.engineReply(ctx, &engine{name: "SQLite"}, baseURL, want, settle, &resumes)
}

// storedText reports whether the stored message holds exactly want in its text blocks.
func storedText(m *pb.SessionMessage, want string) bool {
	var b strings.Builder
	for _, blk := range m.GetBlocks() {
		b.WriteString(blk.GetText().GetText())
	}
	return b.String() == want
}

// createSessions opens n DeepChat sessions with `workers` concurrent clients.
func createSessions(ctx context.Context, client pb.AgenticServiceClient, workspace string, n, workers int, closeThem bool) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				resp, err := client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchDeepChatAgent, Config: &pb.SessionConfig{Workspace: workspace}})
				if err == nil {
					ids[i] = resp.GetSession().GetSessionId()
					if closeThem {
						_, err = client.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: ids[i]})
					}
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return ids, firstErr
}

// sessionsCmd: heap in use per idle DeepChat session with -sessions open (read from the
// Go heap, so agenticd runs in this process), then CreateSession + CloseSession pairs per
// second (in a bin/agenticd process unless -inprocess).
func sessionsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	n := fs.Int("sessions", 10_000, "idle sessions to hold open for the memory figure")
	pairs := fs.Int("pairs", 2000, "CreateSession + CloseSession pairs per churn run")
	workers := fs.Int("workers", 4, "concurrent clients")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "DeepChat"
	fake, err := fakeopenai.Start(1, 16)
	if err != nil {
		return err
	}
	defer fake.Close()
	memFigure := fmt.Sprintf("heap in use per idle session, %d sessions open", *n)
	var rows []Row
	if row, err := c.idleHeap(ctx, fake.BaseURL(), *n, *workers); err != nil {
		rows = append(rows, notAvailable(section, memFigure, "≤ 32 KiB", err))
	} else {
		row.Section, row.Figure, row.Target = section, memFigure, "≤ 32 KiB"
		rows = append(rows, row)
	}
	churnFigure := fmt.Sprintf("CreateSession + CloseSession pairs per second, %d workers", *workers)
	if row, err := c.churn(ctx, fake.BaseURL(), *pairs, *workers); err != nil {
		rows = append(rows, notAvailable(section, churnFigure, "≥ 2,000/s", err))
	} else {
		row.Section, row.Figure, row.Target = section, churnFigure, "≥ 2,000/s"
		rows = append(rows, row)
	}
	return emit(c.results, rows...)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func (c *common) idleHeap(ctx context.Context, baseURL string, n, workers int) (Row, error) {
	var perSession []float64
	var rssPer []float64
	for run := 0; run < c.runs; run++ {
		dataDir, workspace, err := c.runDir("idle")
		if err != nil {
			return Row{}, err
		}
		s, err := startAgenticd(ctx, "", deepchatConfig(dataDir, workspace, baseURL))
		if err != nil {
			return Row{}, err
		}
		// Warm up: connections, statement caches, first-use allocations.
		if _, err := createSessions(ctx, s.client, workspace, 200, workers, true); err != nil {
			s.stop()
			return Row{}, fmt.Errorf("warm-up sessions: %w", err)
		}
		before := heapInUse()
		memBefore, _ := readProcMem(s.pid())
		ids, err := createSessions(ctx, s.client, workspace, n, workers, false)
		if err != nil {
			s.stop()
			return Row{}, fmt.Errorf("open %d sessions: %w", n, err)
		}
		after := heapInUse()
		memAfter, _ := readProcMem(s.pid())
		runtime.KeepAlive(ids)
		perSession = append(perSession, (float64(after)-float64(before))/float64(n)/1024)
		rssPer = append(rssPer, float64(memAfter.rssKiB-memBefore.rssKiB)/float64(n))
		fmt.Printf("run %d: heap in use %.1f KiB/session, RSS %.1f KiB/session\n", run+1, perSession[len(perSession)-1], rssPer[len(rssPer)-1])
		if err := s.stop(); err != nil {
			return Row{}, err
		}
	}
	v := median(perSession)
	return Row{Value: fmt.Sprintf("%.1f KiB", v), Met: metStr(v <= 32), Runs: fmt.Sprintf("%d/%d", len(perSession), c.runs),
		Command: commandLine(), Notes: fmt.Sprintf("agenticd in-process (Go heap: runtime.MemStats.HeapInuse after GC, before/after opening the sessions; includes the hub's held SESSION_CREATED events); process RSS grew %.1f KiB/session", median(rssPer))}, nil
}

func (c *common) churn(ctx context.Context, baseURL string, pairs, workers int) (Row, error) {
	var rates, txPerPair, cpuPerPair []float64
	for run := 0; run < c.runs; run++ {
		dataDir, workspace, err := c.runDir("churn")
		if err != nil {
			return Row{}, err
		}
		s, err := startAgenticd(ctx, c.agenticd, deepchatConfig(dataDir, workspace, baseURL))
		if err != nil {
			return Row{}, err
		}
		if _, err := createSessions(ctx, s.client, workspace, 100, workers, true); err != nil {
			s.stop()
			return Row{}, fmt.Errorf("warm-up: %w", err)
		}
		wal, err := pinWAL(ctx, filepath.Join(dataDir, daemon.DatabaseFile))
		if err != nil {
			s.stop()
			return Row{}, err
		}
		cpuBefore, cpuErr := processCPU(s.pid())
		start := time.Now()
		_, err = createSessions(ctx, s.client, workspace, pairs, workers, true)
		elapsed := time.Since(start)
		if cpuAfter, err := processCPU(s.pid()); cpuErr == nil && err == nil && c.agenticd != "" {
			cpuPerPair = append(cpuPerPair, float64((cpuAfter-cpuBefore).Microseconds())/float64(pairs))
		}
		if n, werr := wal.since(); werr == nil {
			txPerPair = append(txPerPair, float64(n)/float64(pairs))
		}
		wal.close()
		if stopErr := s.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return Row{}, err
		}
		rates = append(rates, float64(pairs)/elapsed.Seconds())
		fmt.Printf("run %d: %.0f pairs/s\n", run+1, rates[len(rates)-1])
	}
	v := median(rates)
	where := "bin/agenticd process"
	if c.agenticd == "" {
		where = "agenticd in-process"
	}
	notes := fmt.Sprintf("%s, gRPC clients on loopback; %.1f SQLite write transactions per pair (WAL commit frames)", where, median(txPerPair))
	if len(cpuPerPair) > 0 {
		// What a pair costs agenticd whatever else loads the machine.
		notes += fmt.Sprintf("; agenticd's CPU time %.0f µs per pair (user + system)", median(cpuPerPair))
	}
	return Row{Value: fmt.Sprintf("%.0f/s", v), Met: metStr(v >= 2000), Runs: fmt.Sprintf("%d/%d", len(rates), c.runs),
		Command: commandLine(), Notes: notes}, nil
}

// startupCmd: agenticd start → grpc.health.v1 SERVING with a database of -sessions
// DeepChat sessions (made through the API first), median of -runs starts.
func startupCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("startup", flag.ExitOnError)
	var c common
	c.register(fs, 5)
	n := fs.Int("sessions", 10_000, "sessions in the database")
	workers := fs.Int("workers", 4, "concurrent clients creating the sessions")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "Start-up"
	figure := fmt.Sprintf("agenticd start → health SERVING, database with %d sessions", *n)
	target := "≤ 200 ms"
	if c.agenticd == "" {
		return emit(c.results, notAvailable(section, figure, target, fmt.Errorf("start-up is measured on a bin/agenticd process; drop -inprocess")))
	}
	fake, err := fakeopenai.Start(1, 16)
	if err != nil {
		return err
	}
	defer fake.Close()
	dataDir, workspace, err := c.runDir("startup")
	if err != nil {
		return err
	}
	cfg := deepchatConfig(dataDir, workspace, fake.BaseURL())
	s, err := startAgenticd(ctx, c.agenticd, cfg)
	if err != nil {
		return emit(c.results, notAvailable(section, figure, target, err))
	}
	empty := s.started
	ids, err := createSessions(ctx, s.client, workspace, *n, *workers, false)
	if stopErr := s.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return emit(c.results, notAvailable(section, figure, target, fmt.Errorf("fill the database: %w", err)))
	}
	var starts []float64
	var fails []string
	for run := 0; run < c.runs; run++ {
		s, err := startAgenticd(ctx, c.agenticd, cfg)
		if err != nil {
			fails = append(fails, oneLine(err.Error()))
			continue
		}
		// The sessions must be there: a start that lost them would be fast and wrong.
		_, getErr := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: ids[len(ids)-1]})
		if err := s.stop(); err != nil && getErr == nil {
			getErr = err
		}
		if getErr != nil {
			fails = append(fails, oneLine(getErr.Error()))
			continue
		}
		starts = append(starts, ms(s.started))
		fmt.Printf("run %d: %.1f ms\n", run+1, ms(s.started))
	}
	runs := fmt.Sprintf("%d/%d", len(starts), c.runs)
	if len(starts) == 0 {
		return emit(c.results, Row{Section: section, Figure: figure, Target: target, Value: "no successful start: " + failNotes(fails), Met: "no", Runs: runs, Command: commandLine()})
	}
	v := median(starts)
	return emit(c.results, Row{Section: section, Figure: figure, Target: target, Value: fmt.Sprintf("%.0f ms", v), Met: metStr(v <= 200),
		Runs: runs, Command: commandLine(), Notes: strings.TrimPrefix(failNotes(fails)+
			fmt.Sprintf("; exec → TCP accept → health Check SERVING, polled every 1 ms; the same binary on an empty database: %.0f ms", ms(empty)), "; ")})
}

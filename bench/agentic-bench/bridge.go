package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/coder/websocket"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// acpBridgeCmd: what the ACP bridge adds per update over agenticd's own Subscribe. An
// editor (an acp-go-sdk client, as editors written in Go are) opens a session through
// `agenticctl acp` on stdio, or through agenticd's /acp/v1 WebSocket, and prompts a
// paced, stamped flood; a plain gRPC subscriber follows the same session at the same
// time. Both timestamp every chunk on receipt, so the added latency is the editor's
// percentile minus the subscriber's, run by run, on the very same updates.
func acpBridgeCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("acp-bridge", flag.ExitOnError)
	var c common
	c.register(fs, 5)
	ctl := fs.String("agenticctl", "bin/agenticctl", "the agenticctl binary the editor starts (-transport stdio)")
	transport := fs.String("transport", "stdio", "how the editor reaches agenticd: stdio (agenticctl acp) or websocket (/acp/v1)")
	rate := fs.Float64("rate", 1000, "chunks per second")
	seconds := fs.Float64("seconds", 5, "length of each paced turn")
	size := fs.Int("size", 64, "bytes per chunk")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "ACP bridge"
	via := "`agenticctl acp` on stdio"
	if *transport == "websocket" {
		via = "agenticd's /acp/v1 WebSocket"
	} else if *transport != "stdio" {
		return fmt.Errorf("-transport %q: use stdio or websocket", *transport)
	}
	figure := fmt.Sprintf("added latency per update, ACP editor through %s over a gRPC Subscribe of the same session, p50 / p99, %g ev/s", via, *rate)
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvailable(section, figure, "", err))
	}
	if *transport == "stdio" {
		abs, err := filepath.Abs(*ctl)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return emit(c.results, notAvailable(section, figure, "", fmt.Errorf("agenticctl: %w (build it: go build -o bin/ ./cmd/agenticctl)", err)))
		}
		*ctl = abs
	}
	count := int(*rate * *seconds)
	env := floodEnv(count, *size, *rate)
	var editor50, editor99, sub50, sub99, added50, added99, paired50, paired99 []float64
	var fails []string
	for run := 0; run < c.runs; run++ {
		r := c.bridgeRun(ctx, *transport, *ctl, env, func() *chunkCheck { return newChunkCheck(*size, count) })
		if r.err != nil {
			fails = append(fails, oneLine(r.err.Error()))
			fmt.Printf("run %d: %v\n", run+1, r.err)
			continue
		}
		e50, e99 := r.editor.lat.p50p99()
		s50, s99 := r.sub.lat.p50p99()
		editor50, editor99 = append(editor50, ms(e50)), append(editor99, ms(e99))
		sub50, sub99 = append(sub50, ms(s50)), append(sub99, ms(s99))
		added50, added99 = append(added50, ms(e50-s50)), append(added99, ms(e99-s99))
		// Both checks hold chunk i's latency at index i: the difference is what the
		// bridge added to that very update.
		diffs := make(latencies, len(r.editor.lat))
		for i := range diffs {
			diffs[i] = r.editor.lat[i] - r.sub.lat[i]
		}
		d50, d99 := diffs.p50p99()
		paired50, paired99 = append(paired50, ms(d50)), append(paired99, ms(d99))
		fmt.Printf("run %d: editor p50 %.3f / p99 %.3f ms, subscriber p50 %.3f / p99 %.3f ms, per update +%.3f / +%.3f ms\n",
			run+1, ms(e50), ms(e99), ms(s50), ms(s99), ms(d50), ms(d99))
	}
	runs := fmt.Sprintf("%d/%d intact", len(paired50), c.runs)
	if len(paired50) == 0 {
		return emit(c.results, Row{Section: section, Figure: figure, Value: "no intact run", Runs: runs, Command: commandLine(), Notes: failNotes(fails)})
	}
	return emit(c.results, Row{Section: section, Figure: figure,
		Value: fmt.Sprintf("%+.3f ms / %+.3f ms", median(paired50), median(paired99)),
		Ratio: fmt.Sprintf("ACP editor p50 %.3f / p99 %.3f ms; gRPC subscriber p50 %.3f / p99 %.3f ms (differences of these percentiles %+.3f / %+.3f ms)",
			median(editor50), median(editor99), median(sub50), median(sub99), median(added50), median(added99)),
		Runs: runs, Command: commandLine(),
		Notes: strings.TrimPrefix(failNotes(fails)+"; per update = the editor's receive time minus the subscriber's for the same chunk, its p50 and p99 per run, median of runs; "+
			"the editor is an acp-go-sdk client whose SessionUpdate only checks the chunk; both take agenticd's default (waiting deltas merged)", "; ")})
}

// bridgeResult is what the editor and the subscriber saw of one turn.
type bridgeResult struct {
	editor, sub *chunkCheck
	err         error
}

// bridgeRun starts agenticd for one run, opens a session from an editor over transport,
// subscribes to it over gRPC, prompts from the editor and waits for both to see the end.
func (c *common) bridgeRun(ctx context.Context, transport, ctl string, env map[string]string, newCheck func() *chunkCheck) bridgeResult {
	dataDir, workspace, err := c.runDir("bridge")
	if err != nil {
		return bridgeResult{err: err}
	}
	s, err := startAgenticd(ctx, c.agenticd, acpConfig(dataDir, workspace, c.agent, env, nil))
	if err != nil {
		return bridgeResult{err: err}
	}
	r := bridgeTurn(ctx, s, transport, ctl, workspace, newCheck)
	if err := s.stop(); err != nil && r.err == nil {
		r.err = fmt.Errorf("stop agenticd: %w", err)
	}
	return r
}

func bridgeTurn(ctx context.Context, s *server, transport, ctl, workspace string, newCheck func() *chunkCheck) bridgeResult {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	editor := &sdkClient{check: newCheck()}
	var conn *sdk.ClientSideConnection
	switch transport {
	case "stdio":
		a, err := startAgent(agentSpec{bin: ctl, args: []string{"--addr", s.addr, "--token", benchToken, "acp", "--agent", benchACPAgent}})
		if err != nil {
			return bridgeResult{err: err}
		}
		defer a.stop()
		conn = sdk.NewClientSideConnection(editor, a.stdin, a.stdout)
	default:
		ws, _, err := websocket.Dial(ctx, "ws://"+s.addr+"/acp/v1?agent="+benchACPAgent,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + benchToken}}})
		if err != nil {
			return bridgeResult{err: fmt.Errorf("WebSocket: %w", err)}
		}
		ws.SetReadLimit(10 << 20)
		defer ws.CloseNow()
		p := &wsLines{c: ws}
		conn = sdk.NewClientSideConnection(editor, p, p)
	}
	conn.SetLogger(discardLogger)
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		return bridgeResult{err: fmt.Errorf("initialize: %w", err)}
	}
	sess, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		return bridgeResult{err: fmt.Errorf("session/new: %w", err)}
	}
	id := string(sess.SessionId)
	got, err := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return bridgeResult{err: fmt.Errorf("GetSession: %w", err)}
	}
	sub := &subResult{check: newCheck(), lastSeq: got.GetSession().GetLastSequence()}
	sctx, stopSub := context.WithCancel(ctx)
	defer stopSub()
	var wg, ready sync.WaitGroup
	ready.Add(1)
	wg.Go(func() {
		sub.err = followTurn(sctx, s.client, &pb.SubscribeRequest{SessionIds: []string{id}}, sub, ready.Done)
	})
	ready.Wait()
	_, err = conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("go")}})
	editor.stop()
	if err != nil {
		stopSub()
		wg.Wait()
		return bridgeResult{err: fmt.Errorf("prompt: %w", err)}
	}
	wg.Wait()
	for _, check := range []struct {
		who string
		err error
	}{{"editor", editor.check.intact()}, {"subscriber", sub.err}, {"subscriber", sub.check.intact()}} {
		if check.err != nil {
			return bridgeResult{err: fmt.Errorf("%s: %w", check.who, check.err)}
		}
	}
	return bridgeResult{editor: editor.check, sub: sub.check}
}

// wsLines carries the SDK's newline-delimited messages over WebSocket messages, one
// message each, as /acp/v1 takes them.
type wsLines struct {
	c   *websocket.Conn
	buf []byte
}

func (p *wsLines) Read(b []byte) (int, error) {
	for len(p.buf) == 0 {
		_, data, err := p.c.Read(context.Background())
		if err != nil {
			return 0, err
		}
		p.buf = append(data, '\n')
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

func (p *wsLines) Write(b []byte) (int, error) {
	return len(b), p.c.Write(context.Background(), websocket.MessageText, bytes.TrimRight(b, "\n"))
}

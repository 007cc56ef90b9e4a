package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gopkg.in/yaml.v3"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/internal/localcred"
)

// agenticdProcess is bin/agenticd running as a process of its own, so that it can be
// killed as a crash kills it: no deferred function, no flush, no graceful stop.
type agenticdProcess struct {
	cmd    *exec.Cmd
	exited chan error
	conn   *grpc.ClientConn
	client agenticv1.AgenticServiceClient
	log    string
}

// buildAgenticd builds cmd/agenticd for one test.
func buildAgenticd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agenticd")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/agenticd").CombinedOutput(); err != nil {
		t.Fatalf("building agenticd: %v\n%s", err, out)
	}
	return bin
}

// startAgenticdProcess runs bin with cfg (written as its config file) and waits until it
// answers; its output goes to a log file in the data dir.
func startAgenticdProcess(t *testing.T, bin string, cfg daemon.Config) *agenticdProcess {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(cfg.DataDir, "crash-test.yaml")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &agenticdProcess{log: filepath.Join(cfg.DataDir, "agenticd.log"), exited: make(chan error, 1)}
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	p.cmd = exec.Command(bin, "--config", cfgFile)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start agenticd: %v", err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill(t) })
	// The port first: a client that dials too early waits out gRPC's reconnect backoff.
	deadline := time.Now().Add(eventWait)
	for {
		c, err := net.DialTimeout("tcp", cfg.Listen, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case werr := <-p.exited:
			p.exited <- werr
			t.Fatalf("agenticd exited before serving (%v); its log:\n%s", werr, p.logTail())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("agenticd did not listen on %s within %s; its log:\n%s", cfg.Listen, eventWait, p.logTail())
		}
	}
	// Every call needs credentials: the configured token, else the one agenticd wrote.
	token := cfg.Token
	if token == "" {
		if token, err = localcred.ReadToken(cfg.DataDir); err != nil {
			t.Fatalf("read agenticd's local token: %v", err)
		}
	}
	if p.conn, err = grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearerToken(token))); err != nil {
		t.Fatal(err)
	}
	p.client = agenticv1.NewAgenticServiceClient(p.conn)
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if _, err := p.client.GetServerInfo(ctx, &agenticv1.GetServerInfoRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("agenticd on %s does not answer: %v; its log:\n%s", cfg.Listen, err, p.logTail())
	}
	return p
}

// kill ends the process with SIGKILL and waits for it; idempotent.
func (p *agenticdProcess) kill(t *testing.T) {
	t.Helper()
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
	if p.exited == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.exited = nil
}

func (p *agenticdProcess) logTail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// crashChunk is the size of the agent's paced chunks, and crashRate how many it sends a
// second: the pace of an LLM streaming tokens.
const (
	crashChunk = 40
	crashRate  = 100
)

// chunkIndexes reads a text made of paced chunks (each begins with its index) into the
// indexes, failing on a chunk out of place.
func chunkIndexes(t *testing.T, what, text string) []int {
	t.Helper()
	if len(text)%crashChunk != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of %d-byte chunks", what, len(text), crashChunk)
	}
	var out []int
	for off := 0; off < len(text); off += crashChunk {
		i, err := strconv.Atoi(text[off : off+8])
		if err != nil {
			t.Fatalf("%s: chunk at byte %d does not begin with its index: %q", what, off, text[off:off+crashChunk])
		}
		out = append(out, i)
	}
	return out
}

// wantRun fails unless got is first, first+1, ... (no gap, no repeat).
func wantRun(t *testing.T, what string, got []int, first int) {
	t.Helper()
	for k, i := range got {
		if i != first+k {
			t.Fatalf("%s: chunk %d is #%d, want #%d (a gap or a repeat)", what, k, i, first+k)
		}
	}
}

// A kill -9 in the middle of a streamed reply loses at most what the event log had not
// committed yet: a subscriber resumes from the last sequence it got, on the restarted
// server, with nothing missing and nothing twice; the stored reply holds what subscribers
// were sent (less that window), marked incomplete; new sequences are above the old ones.
func TestKillNineMidReply(t *testing.T) {
	bin := buildAgenticd(t)
	script := fmt.Sprintf(`{"turns": [[{"paced": {"count": 3000, "size": %d, "rate": %d}}]]}`, crashChunk, crashRate)
	root, ws := workspaceUnder(t)
	cfg := daemon.Config{Listen: freeLoopbackAddr(t), DataDir: t.TempDir(), WorkspaceRoots: []string{root}, LogLevel: "debug",
		Agents: []daemon.AgentConfig{scriptedAgent(t, "acp.test.paced", script)}}
	first := startAgenticdProcess(t, bin, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	created, err := first.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: "acp.test.paced",
		Config: &agenticv1.SessionConfig{Workspace: ws}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	sessionID := created.GetSession().GetSessionId()
	// Every event of the server, each on its own, so that its sequences must follow one
	// another.
	stream, err := first.client.Subscribe(ctx, &agenticv1.SubscribeRequest{Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true},
		UnmergedDeltas: true})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	type received struct {
		events []*agenticv1.AgenticEvent
		err    error
	}
	// The kill comes once this many chunks of the reply arrived: 1.5 s of it at the pace,
	// before its first 2 s checkpoint, so the stored text must come from the event log.
	const killAfterChunks = crashRate * 3 / 2
	enough := make(chan struct{})
	before := make(chan received, 1)
	go func() {
		var r received
		deltas := 0
		for {
			frame, err := stream.Recv()
			if err != nil {
				r.err = err
				before <- r
				return
			}
			for _, ev := range frame.GetEvents().GetEvents() {
				if len(r.events) > 0 && ev.GetSequence() != r.events[len(r.events)-1].GetSequence()+1 {
					r.err = fmt.Errorf("%w: sequence %d after %d", errSequenceGap, ev.GetSequence(), r.events[len(r.events)-1].GetSequence())
					before <- r
					return
				}
				if isReplyDelta(ev, sessionID) {
					if deltas++; deltas == killAfterChunks {
						close(enough)
					}
				}
				r.events = append(r.events, ev)
			}
		}
	}()
	if _, err := first.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: sessionID,
		Content: &agenticv1.MessageContent{Parts: []*agenticv1.ContentPart{{Part: &agenticv1.ContentPart_Text{Text: "stream"}}}}}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	select {
	case <-enough:
	case r := <-before:
		t.Fatalf("the stream ended before %d chunks of the reply: %v", killAfterChunks, r.err)
	case <-time.After(eventWait):
		t.Fatalf("not %d chunks of the reply within a minute", killAfterChunks)
	}
	killedAt := time.Now()
	first.kill(t)
	got := <-before
	if errors.Is(got.err, errSequenceGap) {
		t.Fatalf("the stream before the kill: %v", got.err) // any other error is the kill's
	}
	if len(got.events) == 0 {
		t.Fatal("no event before the kill")
	}
	textBefore := replyText(got.events, sessionID)
	chunksBefore := chunkIndexes(t, "text received before the kill", textBefore)
	wantRun(t, "text received before the kill", chunksBefore, 0)

	second := startAgenticdProcess(t, bin, cfg)
	// The stored reply: what the log holds, which is all that was received before the
	// kill but what the log had not committed yet.
	msgs, err := second.client.ListMessages(ctx, &agenticv1.ListMessagesRequest{SessionId: sessionID})
	if err != nil {
		t.Fatalf("ListMessages: %v", err)
	}
	var reply *agenticv1.SessionMessage
	for _, m := range msgs.GetMessages() {
		if m.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			reply = m
		}
	}
	if reply == nil {
		t.Fatalf("no stored reply after the restart: %v", msgs.GetMessages())
	}
	if reply.GetStatus() != agenticv1.MessageStatus_MESSAGE_STATUS_INCOMPLETE {
		t.Errorf("stored reply status %v, want INCOMPLETE", reply.GetStatus())
	}
	var stored strings.Builder
	for _, b := range reply.GetBlocks() {
		stored.WriteString(b.GetText().GetText())
	}
	chunksStored := chunkIndexes(t, "stored reply", stored.String())
	wantRun(t, "stored reply", chunksStored, 0)

	// Resuming from the last sequence received, and from one halfway (a subscriber that
	// lagged): the logged events follow on with nothing missing or twice, and they end
	// where the stored reply ends.
	halfway := 0
	for i, ev := range got.events {
		if isReplyDelta(ev, sessionID) {
			halfway = i
			if len(replyText(got.events[:i+1], sessionID)) >= len(textBefore)/2 {
				break
			}
		}
	}
	var resumedAtEnd int
	for _, point := range []int{len(got.events) - 1, halfway} {
		after := got.events[point].GetSequence()
		chunksUpTo := chunkIndexes(t, "text received up to the resume point", replyText(got.events[:point+1], sessionID))
		old := resumeAfterRestart(ctx, t, second, after, killedAt)
		chunksResumed := chunkIndexes(t, "text resumed from the log", replyText(old, sessionID))
		what := fmt.Sprintf("text received up to sequence %d, then resumed from the log", after)
		wantRun(t, what, append(chunksUpTo, chunksResumed...), 0)
		if n := len(chunksUpTo) + len(chunksResumed); n < len(chunksStored) {
			t.Errorf("%s: %d chunks, fewer than the %d of the stored reply", what, n, len(chunksStored))
		}
		if point == len(got.events)-1 {
			resumedAtEnd = len(chunksResumed)
		}
	}

	missing := max(0, len(chunksBefore)-len(chunksStored))
	window := time.Duration(missing) * time.Second / crashRate
	t.Logf("kill -9 after %d chunks received (%d B/chunk, %d chunks/s); %d more resumed from the log; stored %d; "+
		"received but not stored: %d chunks = %s of output",
		len(chunksBefore), crashChunk, crashRate, resumedAtEnd, len(chunksStored), missing, window)
	if window > 100*time.Millisecond {
		t.Errorf("the stored reply lacks %d chunks (%s of output) the subscriber got before the kill; want at most 100 ms",
			missing, window)
	}
}

// resumeAfterRestart subscribes to every event after sequence after on the restarted
// server, reads up to the caught-up marker and returns the events from before the kill.
// It fails unless those follow after one by one and every event the restarted server
// made has a sequence above all of them.
func resumeAfterRestart(ctx context.Context, t *testing.T, p *agenticdProcess, after uint64, killedAt time.Time) []*agenticv1.AgenticEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.client.Subscribe(ctx, &agenticv1.SubscribeRequest{Start: &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: after},
		UnmergedDeltas: true})
	if err != nil {
		t.Fatalf("Subscribe after the restart: %v", err)
	}
	var old, fresh []*agenticv1.AgenticEvent
	for caughtUp := false; !caughtUp; {
		frame, err := stream.Recv()
		if err != nil {
			t.Fatalf("resuming after %d on the restarted server: %v; its log:\n%s", after, err, p.logTail())
		}
		caughtUp = frame.GetCaughtUp() != nil
		for _, ev := range frame.GetEvents().GetEvents() {
			if ev.GetEventTime().AsTime().Before(killedAt) {
				old = append(old, ev)
			} else {
				fresh = append(fresh, ev)
			}
		}
	}
	for k, ev := range old {
		if want := after + 1 + uint64(k); ev.GetSequence() != want {
			t.Fatalf("resuming after %d: event %d from before the kill has sequence %d, want %d (a gap or a repeat)", after, k, ev.GetSequence(), want)
		}
	}
	newestOld := after
	if len(old) > 0 {
		newestOld = old[len(old)-1].GetSequence()
	}
	for _, ev := range fresh {
		if ev.GetSequence() <= newestOld {
			t.Fatalf("an event of the restarted server has sequence %d, not above the old ones (up to %d)", ev.GetSequence(), newestOld)
		}
	}
	return old
}

var errSequenceGap = errors.New("the live stream skipped or repeated a sequence")

// isReplyDelta reports whether ev is a chunk of the assistant's text in the session.
func isReplyDelta(ev *agenticv1.AgenticEvent, sessionID string) bool {
	d := ev.GetMessageDelta()
	return d != nil && ev.GetSessionId() == sessionID && d.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_ASSISTANT
}

// replyText joins the assistant's text chunks of the session among events.
func replyText(events []*agenticv1.AgenticEvent, sessionID string) string {
	var b strings.Builder
	for _, ev := range events {
		if isReplyDelta(ev, sessionID) {
			b.WriteString(ev.GetMessageDelta().GetText())
		}
	}
	return b.String()
}

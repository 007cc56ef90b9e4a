package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/pgtest"
)

// The fault harness: two replicas, A and B, on one Postgres; a session lives on A and a
// paced reply runs in it while followers on A and B stream the session. Mid-reply the
// database breaks: it restarts, stops for longer than the lease ttl, or its postmaster is
// killed with SIGKILL (outages both replicas see); or only A is cut off, by a TCP proxy
// that holds its bytes without closing anything, or by the database turning read-only
// for A's role. Each run then checks that the streams and the store agree and that
// nothing published was lost: an outage must leave A the owner and the reply whole, a
// fault of A alone must hand the session to B, which ends the reply as interrupted with
// exactly what the streams showed.

// faultChunks is the length of a run's reply: faultChunks chunks at crashRate a second.
const faultChunks = 400

// faultRuns is how many times each fault runs (take-over is a race):
// AGENTICD_FAULT_RUNS, else 2.
func faultRuns() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTICD_FAULT_RUNS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// faultEnv is what a fault acts on.
type faultEnv struct {
	cluster *pgtest.Cluster
	proxy   *holdingProxy
}

// A fault breaks something and returns how to mend it; ownerOnly says it hits A alone.
type fault struct {
	name      string
	ownerOnly bool
	// outage is how long the fault lasts before it is mended (0: mended at once).
	outage time.Duration
	apply  func(t *testing.T, ctx context.Context, e faultEnv) (heal func())
}

func TestFaultDatabaseRestart(t *testing.T) {
	runFault(t, fault{name: "restart", apply: func(t *testing.T, ctx context.Context, e faultEnv) func() {
		if err := e.cluster.Halt(ctx); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := e.cluster.Resume(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}})
}

func TestFaultDatabaseStoppedPastTheTTL(t *testing.T) {
	runFault(t, fault{name: "stopped for twice the ttl", outage: 2 * replicaTTL, apply: func(t *testing.T, ctx context.Context, e faultEnv) func() {
		if err := e.cluster.Halt(ctx); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := e.cluster.Resume(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}})
}

func TestFaultDatabaseKilled(t *testing.T) {
	runFault(t, fault{name: "postmaster killed", apply: func(t *testing.T, ctx context.Context, e faultEnv) func() {
		if err := e.cluster.Crash(ctx); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := e.cluster.Resume(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}})
}

func TestFaultOwnerPartitioned(t *testing.T) {
	runFault(t, fault{name: "owner partitioned", ownerOnly: true, outage: 2 * replicaTTL, apply: func(t *testing.T, ctx context.Context, e faultEnv) func() {
		e.proxy.partition()
		return e.proxy.heal
	}})
}

func TestFaultOwnerReadOnly(t *testing.T) {
	runFault(t, fault{name: "read-only for the owner", ownerOnly: true, outage: 2 * replicaTTL, apply: func(t *testing.T, ctx context.Context, e faultEnv) func() {
		setReadOnly(t, ctx, e.cluster, true)
		return func() { setReadOnly(t, ctx, e.cluster, false) }
	}})
}

// ownerRole is the role A logs in as, which the read-only fault acts on.
const ownerRole = "replica_a"

// setReadOnly makes the database read-only for ownerRole, or writable again, and ends
// its connections so that the new ones take the setting.
func setReadOnly(t *testing.T, ctx context.Context, c *pgtest.Cluster, on bool) {
	t.Helper()
	set := `ALTER ROLE ` + ownerRole + ` RESET default_transaction_read_only`
	if on {
		set = `ALTER ROLE ` + ownerRole + ` SET default_transaction_read_only = on`
	}
	if err := c.Exec(ctx, pgtest.Superuser, set,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+ownerRole+`'`); err != nil {
		t.Fatal(err)
	}
}

// runFault runs f faultRuns times on one group of replicas, each run on a new session.
func runFault(t *testing.T, f fault) {
	agent := scriptedAgent(t, "acp.test.faults", fmt.Sprintf(`{"turns": [[{"paced": {"count": %d, "size": %d, "rate": %d}}]]}`, faultChunks, crashChunk, crashRate))
	agent.IdleTimeout = time.Second // a replica that let go of its sessions stops their agent soon
	g := newReplicaGroup(t, agent)
	cluster := g.cluster
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cluster.Exec(ctx, pgtest.Superuser, `CREATE ROLE `+ownerRole+` LOGIN SUPERUSER`); err != nil {
		t.Fatal(err)
	}
	proxy := newHoldingProxy(t, fmt.Sprintf("127.0.0.1:%d", cluster.Port()))
	// Commits as durable as a production server's, which the test cluster's are not (a
	// killed postmaster would take the last commits, events subscribers read, with it).
	// A reaches the database through the proxy, as its own role.
	durable := func(host string, user *url.Userinfo) string {
		u, err := url.Parse(g.dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("synchronous_commit", "on")
		u.Host, u.User, u.RawQuery = host, user, q.Encode()
		return u.String()
	}
	a := g.startWith(t, "a", agent, durable(proxy.addr(), url.User(ownerRole)))
	// B's agent answers a turn it runs after a take-over with a short text.
	b := g.startWith(t, "b", withScript(t, agent, `{"turns": [[{"text": "served by B"}]]}`), durable(fmt.Sprintf("127.0.0.1:%d", cluster.Port()), url.User(pgtest.Superuser)))
	for run := 1; run <= faultRuns(); run++ {
		t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) {
			faultRun(t, ctx, f, faultEnv{cluster: cluster, proxy: proxy}, g, a, b, agent.Command)
		})
	}
}

func faultRun(t *testing.T, ctx context.Context, f fault, env faultEnv, g *replicaGroup, a, b *agenticdProcess, agentCommand string) {
	created, err := a.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: "acp.test.faults", Config: &agenticv1.SessionConfig{Workspace: g.ws}})
	if err != nil {
		t.Fatalf("CreateSession through A: %v", err)
	}
	id := created.GetSession().GetSessionId()
	onA := followSession(t, "A", a.client, id)
	onB := followSession(t, "B", b.client, id)
	sent, err := a.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("stream")})
	if err != nil {
		t.Fatalf("SendMessage through A: %v", err)
	}
	reply := sent.GetMessageId()
	onB.wait(t, "a quarter of the reply", time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
		_, n := deltasOf(evs, reply)
		return n >= faultChunks/4
	})

	hit := time.Now()
	heal := f.apply(t, ctx, env)
	var tookOver, served time.Duration
	var next string // the message sent through B while A is cut off
	if f.ownerOnly {
		// B takes the session over once A's lease ran out: the reply ends interrupted.
		// Meanwhile a caller of B is told to retry (never left hanging), then served.
		for next == "" {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second) // a hang guard
			resp, err := b.client.SendMessage(cctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("again")})
			cancel()
			switch {
			case err == nil:
				next, served = resp.GetMessageId(), time.Since(hit)
			case status.Code(err) == codes.Unavailable || (status.Code(err) == codes.FailedPrecondition && reasonOf(err) == "SESSION_BUSY"):
				time.Sleep(50 * time.Millisecond) // a client's pause before it retries
			default:
				t.Fatalf("SendMessage through B while A is cut off: %v (reason %q); want success, or UNAVAILABLE to retry", err, reasonOf(err))
			}
		}
		onB.wait(t, "the reply's end after the take-over", time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
			return slices.ContainsFunc(evs, endOf(reply))
		})
		tookOver = time.Since(hit)
	}
	if f.outage > 0 {
		time.Sleep(f.outage - time.Since(hit)) // the fault's length, not a wait for a condition
	}
	heal()
	healed := time.Now()
	outage := healed.Sub(hit) // the database was away (for A, or for both) at most this long
	events := onB.wait(t, "the reply's end", time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
		return slices.ContainsFunc(evs, endOf(reply)) && (next == "" || slices.ContainsFunc(evs, endOf(next)))
	})
	ended := time.Since(healed)

	// The log, read through B from the session's start, is what every stream shows.
	logged := replay(t, "B (the session, replayed)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	last := logged[len(logged)-1].GetSequence()
	checkRising(t, "the logged session", logged)
	for _, fl := range []*follower{onB, onA} {
		seen := fl.wait(t, fmt.Sprintf("the session's last logged event (%d)", last), time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
			return hasSequence(evs, id, last)
		})
		checkRising(t, fl.name+"'s stream", seen)
		sameEvents(t, fl.name+"'s stream vs the log", seen, logged)
		for _, err := range fl.ended() {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s's stream ended with %v; want UNAVAILABLE only (a database fault is no internal error)", fl.name, err)
			}
		}
	}
	text, chunks := deltasOf(events, reply)
	wantRun(t, "the reply's chunks on B's stream", chunkIndexes(t, "the reply on B's stream", text), 0)
	end := events[slices.IndexFunc(events, endOf(reply))].GetMessageEnd()
	lostAt := slices.IndexFunc(events, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetError().GetMessageId() == reply && ev.GetError().GetReason() == agenticv1.ErrorReason_ERROR_REASON_OWNER_LOST
	})
	holder, _ := g.leaseHolder(t, id)
	wantStatus := agenticv1.MessageStatus_MESSAGE_STATUS_COMPLETE
	if f.ownerOnly {
		wantStatus = agenticv1.MessageStatus_MESSAGE_STATUS_INCOMPLETE
		if lostAt < 0 || end.GetStopReason() != agenticv1.StopReason_STOP_REASON_INTERRUPTED || holder != "b" {
			t.Errorf("A cut off: the reply ends with stop reason %s (ERROR owner_lost at %d), the lease is %q's; want ERROR owner_lost, then MESSAGE_END INTERRUPTED, and b's lease",
				end.GetStopReason(), lostAt, holder)
		}
	} else {
		// An outage robs no healthy owner: A keeps the session and the reply is whole.
		if lostAt >= 0 || end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN || chunks != faultChunks || holder != "a" {
			t.Errorf("after the outage the reply ends with stop reason %s after %d of %d chunks (ERROR owner_lost at %d), the lease is %q's; want the whole reply, END_TURN, and a's lease",
				end.GetStopReason(), chunks, faultChunks, lostAt, holder)
		}
	}

	// The store agrees with the streams, through either replica.
	for _, r := range []*agenticdProcess{a, b} {
		// As a client does: UNAVAILABLE (a connection the fault left dead) is tried again.
		got, err := r.client.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: id, MessageId: reply})
		for tries := 1; status.Code(err) == codes.Unavailable && tries < 20; tries++ {
			time.Sleep(100 * time.Millisecond)
			got, err = r.client.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: id, MessageId: reply})
		}
		if err != nil {
			t.Errorf("GetMessage: %v", err)
			continue
		}
		m := got.GetMessage()
		if m.GetStatus() != wantStatus || storedText(m) != text {
			t.Errorf("the stored reply is %s with %d bytes (%d chunks); the streams showed %d chunks and an end with %s, want %s with the same text",
				m.GetStatus(), len(storedText(m)), len(storedText(m))/crashChunk, chunks, end.GetStopReason(), wantStatus)
		}
	}
	if f.ownerOnly {
		// A said it was cut off: in its log, and to its subscribers, whose streams it ended.
		waitLogLine(t, a.log, "cut off from the database")
		if len(onA.ended()) == 0 {
			t.Error("A's stream never ended while A was cut off from the database")
		}
		// A lets go of the session it lost: closed there, so its agent process goes once
		// idle.
		waitLogLine(t, a.log, "let go of a session another replica took over", id)
		// With no session left in the workspace, A's agent process ends within its
		// idle_timeout.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var left []int
			for pid := range processesOf([]string{agentCommand}) {
				if descendsFrom(pid, a.cmd.Process.Pid) {
					left = append(left, pid)
				}
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("A's agent processes %v outlived the session A let go of", left)
			}
		}
	}
	if next != "" {
		if text, _ := deltasOf(events, next); text != "served by B" {
			t.Errorf("the reply B ran after the take-over: %q on B's stream", text)
		}
	}
	failover := "A kept the session"
	if f.ownerOnly {
		failover = fmt.Sprintf("B ended the reply %s and served a SendMessage %s after the fault", tookOver.Round(time.Millisecond), served.Round(time.Millisecond))
	}
	t.Logf("fault %q: outage %s; %s; the reply ended %s after it was mended; %d of %d chunks, stop reason %s, %d stream ends on A, %d on B",
		f.name, outage.Round(time.Millisecond), failover, ended.Round(time.Millisecond), chunks, faultChunks, end.GetStopReason(),
		len(onA.ended()), len(onB.ended()))
	onA.Close()
	onB.Close()
}

// follower streams one session through a replica for the whole run, as a client would:
// when the stream ends it subscribes again after the last event it got.
type follower struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{}

	mu     sync.Mutex
	events []*agenticv1.AgenticEvent
	ends   []error
}

func followSession(t *testing.T, name string, client agenticv1.AgenticServiceClient, sessionID string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{name: name, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	subscribed := make(chan error, 1)
	go func() {
		defer close(f.done)
		req := &agenticv1.SubscribeRequest{SessionIds: []string{sessionID}, UnmergedDeltas: true,
			Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}}
		first := true
		for ctx.Err() == nil {
			stream, err := client.Subscribe(ctx, req)
			if err == nil {
				_, err = stream.Header()
			}
			if first {
				subscribed <- err
				first = false
				if err != nil {
					return
				}
			}
			for err == nil {
				var frame *agenticv1.SubscribeResponse
				if frame, err = stream.Recv(); err != nil {
					break
				}
				f.mu.Lock()
				for _, ev := range frame.GetEvents().GetEvents() {
					f.events = append(f.events, ev)
					req.Start = &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: ev.GetSequence()}
				}
				f.mu.Unlock()
				select {
				case f.notify <- struct{}{}:
				default:
				}
			}
			if ctx.Err() != nil {
				return
			}
			f.mu.Lock()
			f.ends = append(f.ends, err)
			f.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // a client's pause before it resubscribes
			}
		}
	}()
	if err := <-subscribed; err != nil {
		cancel()
		t.Fatalf("Subscribe (%s): %v", name, err)
	}
	t.Cleanup(f.Close)
	return f
}

// Close ends the follower and waits for it; idempotent.
func (f *follower) Close() {
	f.cancel()
	<-f.done
}

// ended is how each of its streams so far ended.
func (f *follower) ended() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ends)
}

// wait returns the events once cond holds for them; within is a hang guard.
func (f *follower) wait(t *testing.T, what string, within time.Duration, cond func([]*agenticv1.AgenticEvent) bool) []*agenticv1.AgenticEvent {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		events := slices.Clone(f.events)
		f.mu.Unlock()
		if cond(events) {
			return events
		}
		select {
		case <-f.notify:
		case <-deadline.C:
			t.Fatalf("%s: not %s within %s; stream ends %v; %d events: %s", f.name, what, within, f.ended(), len(events), describe(events))
		}
	}
}

// holdingProxy forwards TCP connections to a server until partition: from then on it
// holds what either side sends, closing nothing, as a network that drops every packet
// does; heal delivers what it held and forwards again.
type holdingProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	healed  *sync.Cond
	conns   []net.Conn
	copiers sync.WaitGroup
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{ln: ln, target: target}
	p.healed = sync.NewCond(&p.mu)
	p.copiers.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *holdingProxy) addr() string { return p.ln.Addr().String() }

func (p *holdingProxy) accept() {
	defer p.copiers.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.copiers.Add(2)
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// pipe copies from src to dst, holding each read while the proxy is partitioned.
func (p *holdingProxy) pipe(dst, src net.Conn) {
	defer p.copiers.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.cut {
			p.healed.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			_ = dst.Close()
			return
		}
	}
}

func (p *holdingProxy) partition() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

func (p *holdingProxy) heal() {
	p.mu.Lock()
	p.cut = false
	p.healed.Broadcast()
	p.mu.Unlock()
}

// close stops the proxy and its connections and waits for its goroutines.
func (p *holdingProxy) close() {
	p.heal()
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.copiers.Wait()
}

// waitLogLine waits until a line of the log at path holds every one of parts.
func waitLogLine(t *testing.T, path string, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line of %s holds %q", path, parts)
		}
	}
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/internal/pgtest"
	"github.com/agenticd/agenticd/presenters"
)

// The fault harness: two replicas, A and B, on one Postgres; two sessions live on A, one
// of an ACP agent and one of DeepChat, and a paced reply runs in each while followers
// on A and B stream the sessions. Mid-reply the database breaks: it restarts, stops for
// longer than the lease ttl, or its postmaster is killed with SIGKILL (outages both
// replicas see); or only A is cut off, by a TCP proxy that holds its bytes without
// closing anything, or by the database turning read-only for A's role. Each run then
// checks, for each session, that the streams and the store agree and that nothing
// published was lost: an outage must leave A the owner and the reply whole, a fault of A
// alone must hand the session to B, which ends the reply as interrupted with exactly
// what the streams showed.

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
	proxy   *pgtest.Proxy
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
		e.proxy.Partition()
		return e.proxy.Heal
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

// The agents of the harness: the scripted ACP agent, and DeepChat on a paced fake of
// its provider. Both run a paced reply of faultChunks chunks in each run, side by side.
const (
	faultACP      = "acp.test.faults"
	faultDeepChat = "deepchat.fake.faults"
)

// runFault runs f faultRuns times on one group of replicas, each run on new sessions.
func runFault(t *testing.T, f fault) {
	agent := scriptedAgent(t, faultACP, fmt.Sprintf(`{"turns": [[{"paced": {"count": %d, "size": %d, "rate": %d}}]]}`, faultChunks, crashChunk, crashRate))
	agent.IdleTimeout = time.Second // a replica that let go of its sessions stops their agent soon
	llm := newPacedLLM(t)
	deepchat := daemon.AgentConfig{ID: faultDeepChat, Type: presenters.AgentTypeDeepChat, Provider: "fake",
		BaseURL: llm.srv.URL + "/v1", Models: []string{"fake-model"}}
	g := newReplicaGroup(t, agent)
	cluster := g.cluster
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cluster.Exec(ctx, pgtest.Superuser, `CREATE ROLE `+ownerRole+` LOGIN SUPERUSER`); err != nil {
		t.Fatal(err)
	}
	proxy := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", cluster.Port()))
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
	a := g.startWith(t, "a", durable(proxy.Addr(), url.User(ownerRole)), agent, deepchat)
	// B's agents answer a turn they run after a take-over with a short text.
	b := g.startWith(t, "b", durable(fmt.Sprintf("127.0.0.1:%d", cluster.Port()), url.User(pgtest.Superuser)),
		withScript(t, agent, `{"turns": [[{"text": "`+servedByB+`"}]]}`), deepchat)
	for run := 1; run <= faultRuns(); run++ {
		t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) {
			faultRun(t, ctx, f, faultEnv{cluster: cluster, proxy: proxy}, g, a, b, agent.Command)
		})
	}
}

// servedByB is the reply of a turn B runs after it took a session over.
const servedByB = "served by B"

// subject is one session a run follows, with its reply and its followers on A and B.
type subject struct {
	agent    string
	id       string
	reply    string
	onA, onB *follower
	// next is the message sent through B while A is cut off, served that long after the
	// fault.
	next   string
	served time.Duration
}

func faultRun(t *testing.T, ctx context.Context, f fault, env faultEnv, g *replicaGroup, a, b *agenticdProcess, agentCommand string) {
	var subjects []*subject
	for _, agent := range []string{faultACP, faultDeepChat} {
		created, err := a.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent, Config: &agenticv1.SessionConfig{Workspace: g.ws}})
		if err != nil {
			t.Fatalf("CreateSession of %s through A: %v", agent, err)
		}
		s := &subject{agent: agent, id: created.GetSession().GetSessionId()}
		s.onA = followSession(t, "A", a.client, s.id)
		s.onB = followSession(t, "B", b.client, s.id)
		subjects = append(subjects, s)
	}
	for _, s := range subjects {
		sent, err := a.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: s.id, Content: textContent("stream")})
		if err != nil {
			t.Fatalf("SendMessage to %s through A: %v", s.agent, err)
		}
		s.reply = sent.GetMessageId()
	}
	for _, s := range subjects {
		s.onB.wait(t, s.agent+": a quarter of the reply", time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
			_, n := deltasOf(evs, s.reply)
			return n >= faultChunks/4
		})
	}

	hit := time.Now()
	heal := f.apply(t, ctx, env)
	if f.ownerOnly {
		// B takes the sessions over once A's leases ran out: the replies end interrupted.
		// Meanwhile a caller of B is told to retry (never left hanging), then served.
		// The first failure stops the other senders, and every one is waited for before
		// it is reported: none outlives the run.
		sendCtx, stopSending := context.WithCancel(ctx)
		errs := make(chan error, len(subjects))
		for _, s := range subjects {
			go func() { errs <- sendUntilServed(sendCtx, b.client, s, hit) }()
		}
		var failed []error
		for range subjects {
			if err := <-errs; err != nil {
				failed = append(failed, err)
				stopSending()
			}
		}
		stopSending()
		if len(failed) > 0 {
			t.Fatal(errors.Join(failed...))
		}
		for _, s := range subjects {
			s.onB.wait(t, s.agent+": the reply's end after the take-over", time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
				return slices.ContainsFunc(evs, endOf(s.reply))
			})
		}
	}
	if f.outage > 0 {
		time.Sleep(f.outage - time.Since(hit)) // the fault's length, not a wait for a condition
	}
	heal()
	healed := time.Now()
	outage := healed.Sub(hit) // the database was away (for A, or for both) at most this long
	for _, s := range subjects {
		checkSubject(t, ctx, f, g, a, b, s)
		end := s.onB.arrival(endOf(s.reply))
		failover := "A kept the session"
		if f.ownerOnly {
			failover = fmt.Sprintf("B ended the reply %s and served a SendMessage %s after the fault",
				end.Sub(hit).Round(time.Millisecond), s.served.Round(time.Millisecond))
		}
		t.Logf("fault %q, %s: outage %s; %s; the reply ended %s after it was mended; %d stream ends on A, %d on B",
			f.name, s.agent, outage.Round(time.Millisecond), failover, max(end.Sub(healed), 0).Round(time.Millisecond),
			len(s.onA.ended()), len(s.onB.ended()))
	}
	if f.ownerOnly {
		// A said it was cut off: in its log, and to its subscribers, whose streams it ended.
		waitLogLine(t, a.log, "cut off from the database")
		for _, s := range subjects {
			if len(s.onA.ended()) == 0 {
				t.Errorf("%s: A's stream never ended while A was cut off from the database", s.agent)
			}
			// A lets go of the sessions it lost: closed there, so their agent process goes
			// once idle.
			waitLogLine(t, a.log, "let go of a session another replica took over", s.id)
		}
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
	for _, s := range subjects {
		s.onA.Close()
		s.onB.Close()
	}
}

// sendUntilServed sends a message to s through B, as a client does: again after
// UNAVAILABLE, or while the reply running on A keeps the session busy, until B serves it.
func sendUntilServed(ctx context.Context, b agenticv1.AgenticServiceClient, s *subject, hit time.Time) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second) // a hang guard
		resp, err := b.SendMessage(cctx, &agenticv1.SendMessageRequest{SessionId: s.id, Content: textContent("again")})
		cancel()
		switch {
		case err == nil:
			s.next, s.served = resp.GetMessageId(), time.Since(hit)
			return nil
		case status.Code(err) == codes.Unavailable || (status.Code(err) == codes.FailedPrecondition && reasonOf(err) == "SESSION_BUSY"):
			time.Sleep(50 * time.Millisecond) // a client's pause before it retries
		default:
			return fmt.Errorf("%s: SendMessage through B while A is cut off: %v (reason %q); want success, or UNAVAILABLE to retry", s.agent, err, reasonOf(err))
		}
	}
}

// checkSubject checks that every stream of s and the store agree, and that nothing
// published was lost: an outage leaves A the owner and the reply whole; a fault of A
// alone hands the session to B, which ends the reply interrupted with what was shown.
func checkSubject(t *testing.T, ctx context.Context, f fault, g *replicaGroup, a, b *agenticdProcess, s *subject) {
	t.Helper()
	events := s.onB.wait(t, s.agent+": the reply's end", time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
		return slices.ContainsFunc(evs, endOf(s.reply)) && (s.next == "" || slices.ContainsFunc(evs, endOf(s.next)))
	})
	// The log, read through B from the session's start, is what every stream shows.
	logged := replay(t, s.agent+" on B (the session, replayed)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{s.id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	last := logged[len(logged)-1].GetSequence()
	checkRising(t, s.agent+": the logged session", logged)
	for _, fl := range []*follower{s.onB, s.onA} {
		seen := fl.wait(t, fmt.Sprintf("%s: the session's last logged event (%d)", s.agent, last), time.Minute, func(evs []*agenticv1.AgenticEvent) bool {
			return hasSequence(evs, s.id, last)
		})
		checkRising(t, s.agent+": "+fl.name+"'s stream", seen)
		sameEvents(t, s.agent+": "+fl.name+"'s stream vs the log", seen, logged)
		for _, err := range fl.ended() {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: %s's stream ended with %v; want UNAVAILABLE only (a database fault is no internal error)", s.agent, fl.name, err)
			}
		}
	}
	text, chunks := deltasOf(events, s.reply)
	wantRun(t, s.agent+": the reply's chunks on B's stream", chunkIndexes(t, s.agent+": the reply on B's stream", text), 0)
	end := events[slices.IndexFunc(events, endOf(s.reply))].GetMessageEnd()
	lostAt := slices.IndexFunc(events, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetError().GetMessageId() == s.reply && ev.GetError().GetReason() == agenticv1.ErrorReason_ERROR_REASON_OWNER_LOST
	})
	holder, _ := g.leaseHolder(t, s.id)
	wantStatus := agenticv1.MessageStatus_MESSAGE_STATUS_COMPLETE
	if f.ownerOnly {
		wantStatus = agenticv1.MessageStatus_MESSAGE_STATUS_INCOMPLETE
		if lostAt < 0 || end.GetStopReason() != agenticv1.StopReason_STOP_REASON_INTERRUPTED || holder != "b" {
			t.Errorf("%s: A cut off: the reply ends with stop reason %s (ERROR owner_lost at %d), the lease is %q's; want ERROR owner_lost, then MESSAGE_END INTERRUPTED, and b's lease",
				s.agent, end.GetStopReason(), lostAt, holder)
		}
	} else if lostAt >= 0 || end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN || chunks != faultChunks || holder != "a" {
		// An outage robs no healthy owner: A keeps the session and the reply is whole.
		t.Errorf("%s: after the outage the reply ends with stop reason %s after %d of %d chunks (ERROR owner_lost at %d), the lease is %q's; want the whole reply, END_TURN, and a's lease",
			s.agent, end.GetStopReason(), chunks, faultChunks, lostAt, holder)
	}
	// The store agrees with the streams, through either replica.
	for _, r := range []*agenticdProcess{a, b} {
		// As a client does: UNAVAILABLE (a connection the fault left dead) is tried again.
		got, err := r.client.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: s.id, MessageId: s.reply})
		for tries := 1; status.Code(err) == codes.Unavailable && tries < 20; tries++ {
			time.Sleep(100 * time.Millisecond)
			got, err = r.client.GetMessage(ctx, &agenticv1.GetMessageRequest{SessionId: s.id, MessageId: s.reply})
		}
		if err != nil {
			t.Errorf("%s: GetMessage: %v", s.agent, err)
			continue
		}
		m := got.GetMessage()
		if m.GetStatus() != wantStatus || storedText(m) != text {
			t.Errorf("%s: the stored reply is %s with %d bytes (%d chunks); the streams showed %d chunks and an end with %s, want %s with the same text",
				s.agent, m.GetStatus(), len(storedText(m)), len(storedText(m))/crashChunk, chunks, end.GetStopReason(), wantStatus)
		}
	}
	if s.next != "" {
		if text, _ := deltasOf(events, s.next); text != servedByB {
			t.Errorf("%s: the reply B ran after the take-over: %q on B's stream", s.agent, text)
		}
	}
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
	at     []time.Time // when each of events arrived
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
					f.at = append(f.at, time.Now())
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

// arrival is when the first event that match holds for arrived (zero if none did).
func (f *follower) arrival(match func(*agenticv1.AgenticEvent) bool) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.IndexFunc(f.events, match); i >= 0 {
		return f.at[i]
	}
	return time.Time{}
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

// pacedLLM is a fake of DeepChat's provider (OpenAI chat completions over SSE): it
// streams faultChunks chunks in the test agent's paced format at crashRate a second, or,
// to a conversation that asks "again" (a turn B runs after a take-over), servedByB.
type pacedLLM struct{ srv *httptest.Server }

func newPacedLLM(t *testing.T) *pacedLLM {
	l := &pacedLLM{srv: httptest.NewServer(http.HandlerFunc(servePaced))}
	t.Cleanup(l.srv.Close)
	return l
}

func servePaced(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(text string) bool {
		fmt.Fprintf(w, "data: %s\n\n", dcDelta(map[string]any{"content": text}, nil))
		flusher.Flush()
		return r.Context().Err() == nil
	}
	if strings.Contains(string(body), `"again"`) {
		send(servedByB)
	} else {
		start := time.Now()
		for i := range faultChunks {
			// A fixed schedule, as the test agent's, keeps the rate when one send is late.
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / crashRate)))
			chunk := fmt.Sprintf("%08d|%019d|", i, time.Now().UnixNano())
			if !send(chunk + strings.Repeat("x", crashChunk-len(chunk))) {
				return
			}
		}
	}
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", dcDelta(map[string]any{}, "stop"))
}

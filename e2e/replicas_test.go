package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to read the lease table
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/internal/pgtest"
)

// Several agenticd processes (bin/agenticd, killed with SIGKILL where a test says so) on
// one throw-away Postgres: sessions owned by one replica through a lease, calls forwarded
// to the owner, Subscribe served on every replica from the event log, and failover once
// a killed owner's lease ran out.

// replicaTTL is the replicas' lease ttl: the longest a dead owner's session waits.
const replicaTTL = 3 * time.Second

// replicaGroup is what the replicas of one test share: a Postgres of the test's own, the
// agenticd binary, one workspace root.
type replicaGroup struct {
	cluster            *pgtest.Cluster
	dsn, bin, root, ws string
}

// newReplicaGroup starts the test's Postgres and builds agenticd. Once the test's cleanups
// killed its processes, no process may still run agenticd or one of the agents' commands.
func newReplicaGroup(t *testing.T, agents ...daemon.AgentConfig) *replicaGroup {
	t.Helper()
	cluster, dsn := pgtest.StartForTest(t) // first: its cleanup (stopping Postgres) runs last
	g := &replicaGroup{cluster: cluster, dsn: dsn, bin: buildAgenticd(t)}
	g.root, g.ws = workspaceUnder(t)
	bins := []string{g.bin}
	for _, a := range agents {
		bins = append(bins, a.Command)
	}
	// Registered before any process starts, so it runs after their kills.
	t.Cleanup(func() { waitNoProcesses(t, bins) })
	return g
}

// replicasToken is the token the replicas of a group share (a database requires one).
const replicasToken = "e2e-replicas-token-0123456789"

// start runs one replica named id with agent and lease ttl replicaTTL. fromEnv passes the
// database and the id as AGENTICD_* variables instead of in the config file.
func (g *replicaGroup) start(t *testing.T, id string, agent daemon.AgentConfig, fromEnv bool) *agenticdProcess {
	t.Helper()
	cfg := daemon.Config{Listen: freeLoopbackAddr(t), DataDir: t.TempDir(), WorkspaceRoots: []string{g.root}, LogLevel: "debug",
		Database: g.dsn, Token: replicasToken, Replica: daemon.ReplicaConfig{ID: id, LeaseTTL: replicaTTL}, Agents: []daemon.AgentConfig{agent}}
	if fromEnv {
		// cmd/agenticd reads these (and unsets them) at start; the advertised address is
		// left to its default, the listener's.
		t.Setenv("AGENTICD_DATABASE", g.dsn)
		t.Setenv("AGENTICD_REPLICA_ID", id)
		cfg.Database, cfg.Replica.ID = "", ""
	}
	p := startAgenticdProcess(t, g.bin, cfg)
	if fromEnv {
		_ = os.Unsetenv("AGENTICD_DATABASE")
		_ = os.Unsetenv("AGENTICD_REPLICA_ID")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica %s's warnings and errors, and its last lines:\n%s", id, logExcerpt(p.log))
		}
	})
	return p
}

// startWith runs one replica named id with agents on the database at dsn (the group's
// through a proxy, or as another role), with heartbeats every half second so that a
// stream it can no longer vouch for ends soon.
func (g *replicaGroup) startWith(t *testing.T, id, dsn string, agents ...daemon.AgentConfig) *agenticdProcess {
	t.Helper()
	cfg := daemon.Config{Listen: freeLoopbackAddr(t), DataDir: t.TempDir(), WorkspaceRoots: []string{g.root}, LogLevel: "debug",
		Database: dsn, Token: replicasToken, Replica: daemon.ReplicaConfig{ID: id, LeaseTTL: replicaTTL}, Agents: agents,
		HeartbeatInterval: 500 * time.Millisecond}
	p := startAgenticdProcess(t, g.bin, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica %s's warnings and errors, and its last lines:\n%s", id, logExcerpt(p.log))
		}
	})
	return p
}

// logExcerpt is a process log's warnings and errors and its last lines.
func logExcerpt(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var out []string
	for _, l := range lines[:max(0, len(lines)-30)] {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return strings.Join(append(append(out, "..."), lines[max(0, len(lines)-30):]...), "\n")
}

// leaseHolder is the replica whose lease on the session the lease table holds ("" for
// none), by its configured id (the table adds a suffix per process), and whether it has
// expired by the database's clock.
func (g *replicaGroup) leaseHolder(t *testing.T, sessionID string) (string, bool) {
	t.Helper()
	db, err := sql.Open("pgx", g.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var replica string
	var expired bool
	err = db.QueryRowContext(context.Background(), `SELECT replica, expires_at <= (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000000)::BIGINT
		FROM session_leases WHERE session_id = $1`, sessionID).Scan(&replica, &expired)
	if err == sql.ErrNoRows {
		return "", false
	}
	if err != nil {
		t.Fatalf("reading the lease of session %s: %v", sessionID, err)
	}
	id, _, _ := strings.Cut(replica, "/")
	return id, expired
}

// withScript is agent (a scripted test agent) running another script, same binary.
func withScript(t *testing.T, agent daemon.AgentConfig, script string) daemon.AgentConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	agent.Env = map[string]string{"TESTAGENT_SCRIPT": path}
	agent.ReadPaths = []string{filepath.Dir(path)}
	return agent
}

// waitNoProcesses fails the test when a process running one of bins outlives the test
// (a killed agenticd's agents die by Pdeathsig, which takes a moment).
func waitNoProcesses(t *testing.T, bins []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesRunning(bins)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left after the test: %s", strings.Join(left, "; "))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processesRunning lists the live processes (zombies aside) whose executable or an
// argument is one of bins, as "pid: command line".
func processesRunning(bins []string) []string {
	var out []string
	for pid, cmd := range processesOf(bins) {
		out = append(out, fmt.Sprintf("%d: %s", pid, cmd))
	}
	return out
}

// processesOf maps the live processes (zombies aside) whose executable or an argument is
// one of bins to their command lines.
func processesOf(bins []string) map[int]string {
	entries, _ := os.ReadDir("/proc")
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		match := false
		for _, bin := range bins {
			if strings.HasPrefix(exe, bin) || slices.Contains(args, bin) {
				match = true
			}
		}
		if state, _ := procStat(pid); match && state != "" && state != "Z" {
			out[pid] = strings.Join(args, " ")
		}
	}
	return out
}

// descendsFrom reports whether root is among pid's ancestors.
func descendsFrom(pid, root int) bool {
	for range 64 {
		_, ppid := procStat(pid)
		if ppid == root {
			return true
		}
		if ppid <= 1 {
			return false
		}
		pid = ppid
	}
	return false
}

// recorder reads a Subscribe stream in the background and keeps every event with the
// time it arrived.
type recorder struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{} // signalled after each frame and at the end

	mu       sync.Mutex
	events   []*agenticv1.AgenticEvent
	received []time.Time
	caughtUp int // events before the caught_up frame; -1 until it came
	err      error
}

// record subscribes through client and records the stream until the test ends.
func record(t *testing.T, name string, client agenticv1.AgenticServiceClient, req *agenticv1.SubscribeRequest) *recorder {
	t.Helper()
	// Deltas one by one: the recordings are compared with the log event by event.
	req.UnmergedDeltas = true
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Subscribe(ctx, req)
	if err == nil {
		_, err = stream.Header() // sent once the subscription is registered
	}
	if err != nil {
		cancel()
		t.Fatalf("Subscribe (%s): %v", name, err)
	}
	r := &recorder{name: name, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{}, 1), caughtUp: -1}
	go func() {
		defer close(r.done)
		for {
			frame, err := stream.Recv()
			now := time.Now()
			r.mu.Lock()
			if err != nil {
				r.err = err
			} else {
				for _, ev := range frame.GetEvents().GetEvents() {
					r.events = append(r.events, ev)
					r.received = append(r.received, now)
				}
				if frame.GetCaughtUp() != nil && r.caughtUp < 0 {
					r.caughtUp = len(r.events)
				}
			}
			r.mu.Unlock()
			select {
			case r.notify <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(r.Close)
	return r
}

// Close ends the stream and waits for its reader; idempotent.
func (r *recorder) Close() {
	r.cancel()
	<-r.done
}

// snapshot is the events so far.
func (r *recorder) snapshot() []*agenticv1.AgenticEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// wait returns the events once cond holds for them (caughtUp: whether the caught_up
// frame came); it fails the test when the stream ends first or within passes.
func (r *recorder) wait(t *testing.T, what string, within time.Duration, cond func(events []*agenticv1.AgenticEvent, caughtUp bool) bool) []*agenticv1.AgenticEvent {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		events, caughtUp, err := slices.Clone(r.events), r.caughtUp >= 0, r.err
		r.mu.Unlock()
		if cond(events, caughtUp) {
			return events
		}
		if err != nil {
			t.Fatalf("%s: the stream ended (%v) before %s; %d events: %s", r.name, err, what, len(events), describe(events))
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			t.Fatalf("%s: not %s within %s; %d events: %s", r.name, what, within, len(events), describe(events))
		}
	}
}

// latencies is how long after their event_time the events matching keep arrived.
func (r *recorder) latencies(keep func(*agenticv1.AgenticEvent) bool) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for i, ev := range r.events {
		if keep(ev) {
			out = append(out, r.received[i].Sub(ev.GetEventTime().AsTime()))
		}
	}
	return out
}

// replay subscribes with req and returns the events before the caught_up frame.
func replay(t *testing.T, name string, client agenticv1.AgenticServiceClient, req *agenticv1.SubscribeRequest) []*agenticv1.AgenticEvent {
	t.Helper()
	r := record(t, name, client, req)
	r.wait(t, "the caught_up frame", 20*time.Second, func(_ []*agenticv1.AgenticEvent, caughtUp bool) bool { return caughtUp })
	r.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[:r.caughtUp])
}

// ofSession keeps the events of one session.
func ofSession(events []*agenticv1.AgenticEvent, sessionID string) []*agenticv1.AgenticEvent {
	var out []*agenticv1.AgenticEvent
	for _, ev := range events {
		if ev.GetSessionId() == sessionID {
			out = append(out, ev)
		}
	}
	return out
}

// after keeps the events with a sequence above seq.
func after(events []*agenticv1.AgenticEvent, seq uint64) []*agenticv1.AgenticEvent {
	var out []*agenticv1.AgenticEvent
	for _, ev := range events {
		if ev.GetSequence() > seq {
			out = append(out, ev)
		}
	}
	return out
}

// hasSequence reports whether an event of the session has sequence seq.
func hasSequence(events []*agenticv1.AgenticEvent, sessionID string, seq uint64) bool {
	return slices.ContainsFunc(events, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetSessionId() == sessionID && ev.GetSequence() == seq
	})
}

// checkRising fails unless each session's events have
// strictly rising sequences, and no sequence comes twice in the stream.
func checkRising(t *testing.T, what string, events []*agenticv1.AgenticEvent) {
	t.Helper()
	last := map[string]uint64{}
	seen := map[uint64]bool{}
	for i, ev := range events {
		if seen[ev.GetSequence()] {
			t.Errorf("%s: event %d (%s) repeats sequence %d", what, i, ev.GetType(), ev.GetSequence())
		}
		seen[ev.GetSequence()] = true
		s := ev.GetSessionId()
		if s == "" {
			// Agent events: each replica's rise apart, and the wire does not say which
			// replica an agent event is from.
			continue
		}
		if prev, ok := last[s]; ok && ev.GetSequence() <= prev {
			t.Errorf("%s: event %d (%s, session %q) has sequence %d after %d", what, i, ev.GetType(), s, ev.GetSequence(), prev)
		}
		last[s] = ev.GetSequence()
	}
}

// sameEvents fails unless got and want are the same events (proto.Equal) in the same
// order.
func sameEvents(t *testing.T, what string, got, want []*agenticv1.AgenticEvent) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s: event %d differs:\n got %v\nwant %v", what, i, got[i], want[i])
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d\n got %s\nwant %s", what, len(got), len(want), describe(got), describe(want))
	}
}

// describe is a short listing of events (sequence:type), the middle of a long one left out.
func describe(events []*agenticv1.AgenticEvent) string {
	var b strings.Builder
	for i, ev := range events {
		if len(events) > 60 && i >= 40 && i < len(events)-20 {
			if i == 40 {
				fmt.Fprintf(&b, " ...(%d more)...", len(events)-60)
			}
			continue
		}
		fmt.Fprintf(&b, " %d:%s", ev.GetSequence(), strings.TrimPrefix(ev.GetType().String(), "AGENTIC_EVENT_TYPE_"))
		if ev.GetReplay() {
			b.WriteString("(replay)")
		}
	}
	return b.String()
}

// deltasOf joins the assistant text chunks of one message (history a load replays aside).
func deltasOf(events []*agenticv1.AgenticEvent, messageID string) (string, int) {
	var b strings.Builder
	n := 0
	for _, ev := range events {
		if d := ev.GetMessageDelta(); d != nil && !ev.GetReplay() && d.GetMessageId() == messageID && d.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			b.WriteString(d.GetText())
			n++
		}
	}
	return b.String(), n
}

// endOf reports whether ev is the MESSAGE_END of message id.
func endOf(id string) func(*agenticv1.AgenticEvent) bool {
	return func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetMessageEnd() != nil && ev.GetMessageEnd().GetMessageId() == id
	}
}

// storedText is a stored message's text.
func storedText(m *agenticv1.SessionMessage) string {
	var b strings.Builder
	for _, bl := range m.GetBlocks() {
		b.WriteString(bl.GetText().GetText())
	}
	return b.String()
}

// waitIdle waits until GetSession through client shows the session idle, and returns it.
func waitIdle(t *testing.T, client agenticv1.AgenticServiceClient, sessionID string) *agenticv1.SessionInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID})
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		s := resp.GetSession()
		if s.GetStatus() == agenticv1.SessionStatus_SESSION_STATUS_IDLE && s.GetMessageInFlight() == "" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s not idle within 20s: %v", sessionID, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spread is the median and largest of ds, for the log.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, p99 %s, max %s (n=%d)", s[len(s)/2], s[len(s)*99/100], s[len(s)-1], len(s))
}

// A session created through A, written to through C (forwarded to A), followed from B
// (replay, then live, that session only) and from C (live, everything; C owns a session
// of its own, so its sequences run above A's): both streams carry every event of the
// session once, in rising order, the same events as the log and each other; C's stream
// also has the other replicas' agent events, and its caught_up point is one to resume
// from; what GetSession and ListMessages say through B (forwarded to A) agrees; a resume
// from the middle replays exactly the tail the live streams saw.
func TestReplicasCreateSubscribeSend(t *testing.T) {
	script := `{"turns": [[{"text": "hello from the owner; "}, {"paced": {"count": 300, "size": 40, "rate": 0}}, {"text": " the end"}]]}`
	agent := scriptedAgent(t, "acp.test.replicas", script)
	g := newReplicaGroup(t, agent)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := g.start(t, "a", agent, false)
	b := g.start(t, "b", agent, false)
	c := g.start(t, "c", agent, true) // database and id from the environment

	// C runs a session of its own first: its agent's events are logged with sequences of
	// C's block, above A's.
	if _, err := c.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent.ID, Config: &agenticv1.SessionConfig{Workspace: g.ws}}); err != nil {
		t.Fatalf("CreateSession through C: %v", err)
	}
	liveC := record(t, "C (every session, live)", c.client, &agenticv1.SubscribeRequest{})
	subscribedC := time.Now()
	created, err := a.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent.ID, Config: &agenticv1.SessionConfig{Workspace: g.ws}})
	if err != nil {
		t.Fatalf("CreateSession through A: %v", err)
	}
	id := created.GetSession().GetSessionId()
	if holder, _ := g.leaseHolder(t, id); holder != "a" {
		t.Errorf("the lease of the session created through A is held by %q", holder)
	}
	fromB := record(t, "B (the session, from the oldest)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})

	sent, err := c.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("hello")})
	if err != nil {
		t.Fatalf("SendMessage through C: %v; C's log:\n%s", err, c.logTail())
	}
	if holder, _ := g.leaseHolder(t, id); holder != "a" {
		t.Errorf("after SendMessage through C the lease is held by %q, want a (forwarded, not taken over)", holder)
	}
	reply := sent.GetMessageId()
	for _, r := range []*recorder{fromB, liveC} {
		r.wait(t, "the reply's MESSAGE_END", 30*time.Second, func(evs []*agenticv1.AgenticEvent, _ bool) bool {
			return slices.ContainsFunc(evs, endOf(reply))
		})
	}
	info := waitIdle(t, b.client, id)

	// The log, as a replay through B; each live stream must come to hold exactly it.
	logged := replay(t, "B (the session, replayed)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	if len(logged) == 0 {
		t.Fatal("the log holds no event of the session")
	}
	checkRising(t, "the logged session", logged)
	lastSeq := logged[len(logged)-1].GetSequence()
	for _, r := range []*recorder{fromB, liveC} {
		got := r.wait(t, fmt.Sprintf("the session's last logged event (%d)", lastSeq), 10*time.Second, func(evs []*agenticv1.AgenticEvent, _ bool) bool {
			return hasSequence(evs, id, lastSeq)
		})
		checkRising(t, r.name, got)
		sameEvents(t, r.name+" vs the log", ofSession(got, id), logged)
	}
	sameEvents(t, "B's stream vs C's", ofSession(fromB.snapshot(), id), ofSession(liveC.snapshot(), id))
	if !slices.ContainsFunc(logged, IsType(agenticv1.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CREATED)) {
		t.Errorf("no SESSION_CREATED among the session's events: %s", describe(logged))
	}
	text, deltas := deltasOf(logged, reply)
	const head, tail = "hello from the owner; ", " the end"
	if !strings.HasPrefix(text, head) || !strings.HasSuffix(text, tail) {
		t.Fatalf("the reply's text (%d deltas): %.80q...", deltas, text)
	}
	if chunks := chunkIndexes(t, "the reply", text[len(head):len(text)-len(tail)]); len(chunks) != 300 {
		t.Errorf("the reply has %d chunks, want 300", len(chunks))
	} else {
		wantRun(t, "the reply", chunks, 0)
	}

	// Everything C streamed (agent events of any replica too) is in the log, identical.
	all := replay(t, "C (everything, replayed)", c.client, &agenticv1.SubscribeRequest{Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	checkRising(t, "C's replay of everything", all)
	bySeq := map[uint64]*agenticv1.AgenticEvent{}
	for _, ev := range all {
		bySeq[ev.GetSequence()] = ev
	}
	streamedC := map[uint64]bool{}
	for _, ev := range liveC.snapshot() {
		streamedC[ev.GetSequence()] = true
		if want := bySeq[ev.GetSequence()]; want == nil || !proto.Equal(ev, want) {
			t.Errorf("C streamed %v, which the log has as %v", ev, want)
		}
	}
	// ... and C streamed every logged event made after it subscribed, whichever replica
	// made it (agent events of other replicas included).
	var missed []*agenticv1.AgenticEvent
	for _, ev := range all {
		if ev.GetEventTime().AsTime().After(subscribedC) && !streamedC[ev.GetSequence()] {
			missed = append(missed, ev)
		}
	}
	if len(missed) > 0 {
		t.Errorf("C's live stream lacks %d logged events made after it subscribed: %s (first: %v); the log: %s",
			len(missed), describe(missed), missed[0], describe(all))
	}

	// GetSession and ListMessages through B: the owner's answers, agreeing with the streams.
	if info.GetLastSequence() < lastSeq {
		t.Errorf("GetSession through B: last_sequence %d, below the session's last event %d", info.GetLastSequence(), lastSeq)
	}
	if rest := after(logged, info.GetLastSequence()); len(rest) > 0 {
		t.Errorf("GetSession through B: events after its last_sequence %d: %s", info.GetLastSequence(), describe(rest))
	}
	if info.GetMessageCount() != 2 {
		t.Errorf("GetSession through B: message_count %d, want 2", info.GetMessageCount())
	}
	fromA, err := a.client.GetSession(ctx, &agenticv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("GetSession through A: %v", err)
	}
	// last_sequence is the owner's newest event of any session when it answered: another
	// session's event (an agent's status, say) may come between the two calls.
	if fromA.GetSession().GetLastSequence() < info.GetLastSequence() || fromA.GetSession().GetAgentSessionId() != info.GetAgentSessionId() {
		t.Errorf("GetSession through B (last_sequence %d, agent session %q) is not the owner's (%d, %q)", info.GetLastSequence(),
			info.GetAgentSessionId(), fromA.GetSession().GetLastSequence(), fromA.GetSession().GetAgentSessionId())
	}
	msgs, err := b.client.ListMessages(ctx, &agenticv1.ListMessagesRequest{SessionId: id, Order: agenticv1.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST})
	if err != nil {
		t.Fatalf("ListMessages through B: %v", err)
	}
	if m := msgs.GetMessages(); len(m) != 2 || m[0].GetMessageId() != sent.GetUserMessageId() || storedText(m[0]) != "hello" ||
		m[1].GetMessageId() != reply || m[1].GetStatus() != agenticv1.MessageStatus_MESSAGE_STATUS_COMPLETE || storedText(m[1]) != text {
		t.Errorf("ListMessages through B: %d messages %v; want the user's %s \"hello\" and the complete reply %s of the %d streamed bytes",
			len(m), m, sent.GetUserMessageId(), reply, len(text))
	}

	// A resume from the middle on B replays what the live streams saw after that point.
	mid := logged[len(logged)/2].GetSequence()
	resumed := replay(t, "B (the session, after the middle)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: mid}})
	sameEvents(t, fmt.Sprintf("resumed after %d vs C's live tail", mid), resumed, after(ofSession(liveC.snapshot(), id), mid))

	t.Logf("session %s: %d events, sequences %d..%d; reply: %d deltas; delivery after event_time of the deltas: on B %s; on C %s",
		id, len(logged), logged[0].GetSequence(), lastSeq, deltas,
		spread(fromB.latencies(func(ev *agenticv1.AgenticEvent) bool { return ev.GetMessageDelta() != nil })),
		spread(liveC.latencies(func(ev *agenticv1.AgenticEvent) bool { return ev.GetMessageDelta() != nil })))
}

// A (the owner) is killed with SIGKILL mid-reply while B follows the session. A
// SendMessage through C answers SESSION_OWNER_UNAVAILABLE no longer than A's lease can
// last, then succeeds: C takes the session over. The interrupted reply ends visibly
// (ERROR owner_lost, MESSAGE_END) and is stored incomplete with every chunk B saw; the new
// reply reaches B; the session's sequences rise across owners; a resume on C from the
// last event B had before the kill gets exactly the logged events after it.
func TestReplicasFailover(t *testing.T) {
	long := scriptedAgent(t, "acp.test.replicas", fmt.Sprintf(`{"turns": [[{"paced": {"count": 3000, "size": %d, "rate": %d}}]]}`, crashChunk, crashRate))
	short := withScript(t, long, `{"turns": [[{"text": "after the failover"}]]}`)
	g := newReplicaGroup(t, long)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := g.start(t, "a", long, false)
	b := g.start(t, "b", short, false)
	c := g.start(t, "c", short, false)

	created, err := a.client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: long.ID, Config: &agenticv1.SessionConfig{Workspace: g.ws}})
	if err != nil {
		t.Fatalf("CreateSession through A: %v", err)
	}
	id := created.GetSession().GetSessionId()
	fromB := record(t, "B (the session, from the oldest)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	first, err := a.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("stream")})
	if err != nil {
		t.Fatalf("SendMessage through A: %v", err)
	}
	interrupted := first.GetMessageId()
	const killAfter = crashRate / 2 // chunks: half a second of the reply
	fromB.wait(t, fmt.Sprintf("%d chunks of the reply", killAfter), 20*time.Second, func(evs []*agenticv1.AgenticEvent, _ bool) bool {
		_, n := deltasOf(evs, interrupted)
		return n >= killAfter
	})
	// Mid-turn, GetSession through B (forwarded to A) names the running reply, and a
	// replay from just before its first event on B holds it from its first chunk.
	inFlight, err := b.client.GetSession(ctx, &agenticv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("GetSession through B mid-turn: %v", err)
	}
	if s := inFlight.GetSession(); s.GetMessageInFlight() != interrupted || s.GetMessageInFlightFirstSequence() == 0 {
		t.Errorf("GetSession through B mid-turn: message_in_flight %q (first sequence %d), want %s", s.GetMessageInFlight(),
			s.GetMessageInFlightFirstSequence(), interrupted)
	} else {
		midTurn := replay(t, "B (the running reply, replayed)", b.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
			Start: &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: s.GetMessageInFlightFirstSequence() - 1}})
		text, _ := deltasOf(midTurn, interrupted)
		if chunks := chunkIndexes(t, "the running reply replayed from message_in_flight_first_sequence-1", text); len(chunks) == 0 || chunks[0] != 0 {
			t.Errorf("the running reply replayed from message_in_flight_first_sequence-1 (%d) starts at chunk %v: %s",
				s.GetMessageInFlightFirstSequence()-1, chunks[:min(1, len(chunks))], describe(midTurn))
		}
	}
	// A's agent processes, which must not outlive A.
	var agentsOfA []int
	for pid := range processesOf([]string{long.Command}) {
		if descendsFrom(pid, a.cmd.Process.Pid) {
			agentsOfA = append(agentsOfA, pid)
		}
	}
	if len(agentsOfA) == 0 {
		t.Errorf("no agent process under A (pid %d) running %s", a.cmd.Process.Pid, long.Command)
	}
	before := ofSession(fromB.snapshot(), id)
	killedAt := time.Now()
	a.kill(t)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		alive := slices.DeleteFunc(slices.Clone(agentsOfA), func(pid int) bool { state, _ := procStat(pid); return state == "" || state == "Z" })
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("A's agent processes %v outlived A's kill -9 by 10s", alive)
			break
		}
	}
	lastBefore := before[len(before)-1].GetSequence()

	// Through C: SESSION_OWNER_UNAVAILABLE while A's lease may still run, then success.
	// Every refusal names the same lease end (a dead owner renews nothing), and that end
	// is at most a ttl after the kill (A renewed before it, on this machine's clock).
	var unavailable int
	var leaseExpires string
	var second *agenticv1.SendMessageResponse
	for second == nil {
		resp, err := c.client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("again")})
		switch {
		case err == nil:
			second = resp
		case status.Code(err) == codes.Unavailable && reasonOf(err) == "SESSION_OWNER_UNAVAILABLE":
			unavailable++
			named := agenticdErrorInfo(err).GetMetadata()["lease_expires"]
			if leaseExpires != "" && named != leaseExpires {
				t.Errorf("SESSION_OWNER_UNAVAILABLE named lease_expires %s, then %s: the dead owner's lease cannot move", leaseExpires, named)
			}
			leaseExpires = named
			if expires, perr := time.Parse(time.RFC3339Nano, named); perr != nil {
				t.Errorf("SESSION_OWNER_UNAVAILABLE with lease_expires %q: %v", named, perr)
			} else if expires.After(killedAt.Add(replicaTTL)) {
				t.Errorf("lease_expires %s is more than the ttl (%s) after the kill at %s", named, replicaTTL, killedAt.Format(time.RFC3339Nano))
			}
			time.Sleep(50 * time.Millisecond) // the retry pause a client would take
		default:
			t.Fatalf("SendMessage through C %s after the kill: %v (code %s, reason %q), want success or UNAVAILABLE SESSION_OWNER_UNAVAILABLE; C's log:\n%s",
				time.Since(killedAt), err, status.Code(err), reasonOf(err), c.logTail())
		}
	}
	failover := time.Since(killedAt)
	if holder, expired := g.leaseHolder(t, id); holder != "c" || expired {
		t.Errorf("after the failover the lease is %q's (expired %v), want c's", holder, expired)
	}

	// B's stream: the interrupted reply ends (ERROR owner_lost, MESSAGE_END), then the new
	// reply comes, the whole session in rising order.
	events := ofSession(fromB.wait(t, "the new reply's MESSAGE_END", 20*time.Second, func(evs []*agenticv1.AgenticEvent, _ bool) bool {
		return slices.ContainsFunc(evs, endOf(second.GetMessageId()))
	}), id)
	checkRising(t, "B's stream across the failover", events)
	errAt := slices.IndexFunc(events, func(ev *agenticv1.AgenticEvent) bool { return ev.GetError().GetMessageId() == interrupted })
	endAt := slices.IndexFunc(events, endOf(interrupted))
	switch {
	case errAt < 0 || endAt < 0:
		t.Errorf("B's stream lacks the interrupted reply's ERROR (at %d) or MESSAGE_END (at %d): %s", errAt, endAt, describe(events))
	default:
		if e := events[errAt].GetError(); e.GetReason() != agenticv1.ErrorReason_ERROR_REASON_OWNER_LOST {
			t.Errorf("the interrupted reply's ERROR has reason %s (message %q); want ERROR_REASON_OWNER_LOST", e.GetReason(), e.GetMessage())
		}
		if endAt < errAt {
			t.Errorf("the interrupted reply's MESSAGE_END (%d) comes before its ERROR (%d)", endAt, errAt)
		}
		if r := events[endAt].GetMessageEnd().GetStopReason(); r != agenticv1.StopReason_STOP_REASON_INTERRUPTED {
			t.Errorf("the interrupted reply's MESSAGE_END has stop reason %s, want INTERRUPTED", r)
		}
		if _, n := deltasOf(events[errAt:], interrupted); n > 0 {
			t.Errorf("%d chunks of the interrupted reply after its ERROR: %s", n, describe(events[max(0, errAt-3):]))
		}
		if newAt := slices.IndexFunc(events, func(ev *agenticv1.AgenticEvent) bool {
			return ev.GetMessageDelta() != nil && ev.GetMessageDelta().GetMessageId() == second.GetMessageId()
		}); newAt >= 0 && newAt < endAt {
			t.Errorf("the new reply's first chunk (%d) comes before the interrupted reply's end (%d)", newAt, endAt)
		}
	}
	if text, _ := deltasOf(events, second.GetMessageId()); text != "after the failover" {
		t.Errorf("the new reply on B's stream: %q", text)
	}
	seen, seenChunks := deltasOf(events, interrupted)
	wantRun(t, "the interrupted reply's chunks on B's stream", chunkIndexes(t, "the interrupted reply on B's stream", seen), 0)
	_, chunksBefore := deltasOf(before, interrupted)

	// The store: the interrupted reply incomplete, with every chunk B saw.
	msgs, err := c.client.ListMessages(ctx, &agenticv1.ListMessagesRequest{SessionId: id, Order: agenticv1.MessageOrder_MESSAGE_ORDER_OLDEST_FIRST})
	if err != nil {
		t.Fatalf("ListMessages through C: %v", err)
	}
	var stored *agenticv1.SessionMessage
	for _, m := range msgs.GetMessages() {
		if m.GetMessageId() == interrupted {
			stored = m
		}
	}
	switch {
	case stored == nil:
		t.Errorf("ListMessages through C lacks the interrupted reply %s: %v", interrupted, msgs.GetMessages())
	case stored.GetStatus() != agenticv1.MessageStatus_MESSAGE_STATUS_INCOMPLETE:
		t.Errorf("the interrupted reply is stored %s, want INCOMPLETE", stored.GetStatus())
	}
	if got := storedText(stored); got != seen {
		t.Errorf("the interrupted reply stores %d bytes (%d chunks), B saw %d (%d chunks)", len(got), len(got)/crashChunk, len(seen), seenChunks)
	}
	if n := len(msgs.GetMessages()); n != 4 {
		t.Errorf("ListMessages through C: %d messages, want 4 (two turns)", n)
	}

	// A resume on C after the last event B had before the kill gets exactly the logged
	// events after it, which are what B went on to see.
	logged := replay(t, "C (the session, replayed)", c.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	resumed := replay(t, "C (the session, resumed)", c.client, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: lastBefore}})
	checkRising(t, "the logged session", logged)
	sameEvents(t, fmt.Sprintf("resumed on C after %d vs the log", lastBefore), resumed, after(logged, lastBefore))
	lastSeq := logged[len(logged)-1].GetSequence()
	events = ofSession(fromB.wait(t, fmt.Sprintf("the session's last logged event (%d)", lastSeq), 10*time.Second,
		func(evs []*agenticv1.AgenticEvent, _ bool) bool { return hasSequence(evs, id, lastSeq) }), id)
	sameEvents(t, "B's stream vs the log", events, logged)
	sameEvents(t, "B's stream before the kill vs the log", before, logged[:min(len(before), len(logged))])
	if errAt >= 0 {
		for _, ev := range events[:errAt] {
			if ev.GetSequence() >= events[errAt].GetSequence() {
				t.Errorf("A's event %d (%s) is not below the take-over's ERROR (%d)", ev.GetSequence(), ev.GetType(), events[errAt].GetSequence())
			}
		}
	}
	info := waitIdle(t, b.client, id)
	if info.GetLastSequence() < lastSeq {
		t.Errorf("GetSession through B after the failover: last_sequence %d, below the session's last event %d", info.GetLastSequence(), lastSeq)
	}

	t.Logf("kill -9 of A after %d chunks on B's stream (last sequence %d); failover: SendMessage through C succeeded %s after the kill "+
		"(ttl %s; %d SESSION_OWNER_UNAVAILABLE answers, last lease_expires %s, killed at %s); B saw %d chunks of the interrupted reply "+
		"(%d after the kill), stored %d; %d events resumed after %d, sequences %d..%d across owners",
		chunksBefore, lastBefore, failover.Round(time.Millisecond), replicaTTL, unavailable, leaseExpires, killedAt.UTC().Format(time.RFC3339Nano),
		seenChunks, seenChunks-chunksBefore, len(storedText(stored))/crashChunk, len(resumed), lastBefore, logged[0].GetSequence(), lastSeq)
}

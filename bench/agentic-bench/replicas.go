package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// replicasCmd measures several bin/agenticd replicas on one throw-away Postgres:
//
//   - latency: a session on replica A streams stamped chunks at -rate for -seconds (the
//     scripted test agent's paced flood, as the ACP latency row); one subscriber on
//     replica B and one on A (in replica mode both read the event log, woken by
//     LISTEN/NOTIFY) time each chunk's event from its event_time (stamped by A's hub
//     when it publishes it; one machine, one clock) to its receipt. A single SQLite
//     agenticd (events from its ring) with one subscriber runs the same stream for
//     reference.
//   - failover: replicas A, B, C; a session owned by A mid-reply; kill -9 of A; then
//     SendMessage through B, retried every -retry, until it succeeds: the time from the
//     kill to that success, and to the first event of the new reply on a subscriber on C.
//     For each lease ttl of -ttls, -runs runs.
func replicasCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("replicas", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	rate := fs.Float64("rate", 1000, "latency: chunks per second")
	seconds := fs.Float64("seconds", 10, "latency: length of the paced turn across replicas")
	sqliteSeconds := fs.Float64("sqlite-seconds", 5, "latency: length of the paced turn on the SQLite reference")
	size := fs.Int("size", 64, "latency: bytes per chunk")
	latencyRuns := fs.Int("latency-runs", 1, "latency: runs (figures are medians of the runs' percentiles)")
	ttlList := fs.String("ttls", "3s,15s", "failover: the lease ttls to run, comma-separated")
	killAfter := fs.Int("kill-after", 500, "failover: chunks of A's reply the subscriber on C has seen when A is killed")
	retry := fs.Duration("retry", 10*time.Millisecond, "failover: pause between SendMessage attempts through B")
	only := fs.String("only", "", "run only these figures, comma-separated: latency, failover (default: both)")
	fs.Parse(args)
	run := map[string]bool{"latency": true, "failover": true}
	if *only != "" {
		run = map[string]bool{}
		for _, f := range strings.Split(*only, ",") {
			f = strings.TrimSpace(f)
			if f != "latency" && f != "failover" {
				return fmt.Errorf("-only: unknown figure %q; name latency and/or failover", f)
			}
			run[f] = true
		}
	}
	var ttls []time.Duration
	for _, s := range strings.Split(*ttlList, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < time.Second {
			return fmt.Errorf("-ttls: %q is not a duration of 1s or more", s)
		}
		ttls = append(ttls, d)
	}
	const section = "Replicas"
	latFig := fmt.Sprintf("Subscribe latency event_time → receipt, p50 / p99, %g ev/s for %gs, session on replica A", *rate, *seconds)
	failFig := func(ttl time.Duration, what string) string {
		return fmt.Sprintf("failover, lease_ttl %s: kill -9 of the owner mid-reply → %s", ttl, what)
	}
	notAvail := func(err error) []Row {
		var rows []Row
		if run["latency"] {
			rows = append(rows, notAvailable(section, latFig+", subscriber on replica B", "", err))
		}
		if run["failover"] {
			for _, ttl := range ttls {
				rows = append(rows, notAvailable(section, failFig(ttl, "first successful SendMessage through replica B"), "", err))
			}
		}
		return rows
	}
	if c.inprocess {
		return emit(c.results, notAvail(errors.New("replicas are bin/agenticd processes (one is killed); drop -inprocess"))...)
	}
	cleanup, err := c.prepare()
	if err != nil {
		return emit(c.results, notAvail(err)...)
	}
	defer cleanup()
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvail(err)...)
	}
	pg, err := startPostgres(ctx)
	if err != nil {
		return emit(c.results, notAvail(err)...)
	}
	defer pg.stop()
	var rows []Row
	if run["latency"] {
		var runs []latencyRun
		for i := 0; i < *latencyRuns; i++ {
			r := c.replicaLatencyRun(ctx, pg, *rate, *seconds, *sqliteSeconds, *size)
			fmt.Printf("latency run %d: %s\n", i+1, r)
			runs = append(runs, r)
		}
		rows = append(rows, latencyRows(section, latFig, *rate, *sqliteSeconds, runs)...)
	}
	if run["failover"] {
		for _, ttl := range ttls {
			var runs []failoverRun
			for i := 0; i < c.runs; i++ {
				// The kill falls at a different point of the lease's renewal period
				// (ttl/3) in each run: i/runs of the way further along.
				phase := time.Duration(i) * ttl / 3 / time.Duration(c.runs)
				r := c.failoverRun(ctx, pg, ttl, *killAfter, phase, *retry)
				fmt.Printf("failover ttl %s run %d: %s\n", ttl, i+1, r)
				runs = append(runs, r)
			}
			rows = append(rows, failoverRows(section, ttl, *retry, *killAfter, failFig, runs)...)
		}
	}
	return emit(c.results, rows...)
}

// replicaConfig is a replica of the group on dsn with the test agent (agent env).
func replicaConfig(dataDir, workspace, agentBin, dsn, id string, ttl time.Duration, env map[string]string) daemon.Config {
	cfg := acpConfig(dataDir, workspace, agentBin, env, nil)
	cfg.Database = dsn
	cfg.Replica = daemon.ReplicaConfig{ID: id, LeaseTTL: ttl}
	return cfg
}

// startReplicas starts one bin/agenticd replica per config, in order; on failure it stops
// the ones started.
func (c *common) startReplicas(ctx context.Context, cfgs ...daemon.Config) ([]*server, error) {
	var out []*server
	for _, cfg := range cfgs {
		s, err := startAgenticd(ctx, c.agenticd, cfg)
		if err != nil {
			for _, o := range out {
				o.stop()
			}
			return nil, fmt.Errorf("start replica %s: %w", cfg.Replica.ID, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// killServer ends a bin/agenticd process with SIGKILL (its agents die with it, by
// Pdeathsig) and reaps it.
func killServer(s *server) {
	_ = syscall.Kill(s.proc.Process.Pid, syscall.SIGKILL)
	if s.conn != nil {
		s.conn.Close()
	}
	<-s.exited
}

// stampedSub is one subscriber of a paced stamped turn: every chunk checked, and each
// assistant delta's delay from its event_time to the arrival of its frame.
type stampedSub struct {
	r        *subResult
	eventLat latencies // event_time → receipt, ns
	err      error
}

// followStamped subscribes through client after sequence from and reads until the
// assistant's MESSAGE_END, resuming after RESOURCE_EXHAUSTED as a client must.
func followStamped(ctx context.Context, client pb.AgenticServiceClient, sessionID string, from uint64, check *chunkCheck, registered func()) *stampedSub {
	sub := &stampedSub{r: &subResult{lastSeq: from, check: check}}
	first := true
	for {
		// Unmerged: each delta's own event_time is the latency's start.
		stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{sessionID}, Start: after(sub.r.lastSeq), UnmergedDeltas: true})
		if err == nil && first {
			_, err = stream.Header() // sent once the subscription is registered
		}
		if first {
			first = false
			registered()
		}
		if err != nil {
			sub.err = fmt.Errorf("Subscribe: %w", err)
			return sub
		}
		events := &eventReader{stream: stream}
		for {
			ev, err := events.next()
			if err != nil {
				if status.Code(err) == codes.ResourceExhausted {
					sub.r.resumes++
					break
				}
				sub.err = err
				return sub
			}
			sub.r.lastSeq = ev.GetSequence()
			switch p := ev.GetPayload().(type) {
			case *pb.AgenticEvent_MessageDelta:
				if p.MessageDelta.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
					sub.r.check.feed(p.MessageDelta.GetText(), events.received.UnixNano())
					sub.eventLat = append(sub.eventLat, events.received.Sub(ev.GetEventTime().AsTime()).Nanoseconds())
				}
			case *pb.AgenticEvent_Error:
				sub.r.errors = append(sub.r.errors, p.Error.GetMessage())
			case *pb.AgenticEvent_MessageEnd:
				if p.MessageEnd.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
					sub.r.end = events.received
					if err := sub.r.check.intact(); err != nil {
						sub.err = err
					}
					return sub
				}
			}
		}
	}
}

// subLatency is one subscriber's percentiles in a latency run (ms).
type subLatency struct {
	event50, event99 float64 // event_time → receipt
	agent50, agent99 float64 // the agent's stamp → receipt
	n                int
	resumes          int
	err              error
}

func (s subLatency) String() string {
	if s.err != nil {
		return "failed: " + oneLine(s.err.Error())
	}
	return fmt.Sprintf("event_time→receipt p50 %.2f p99 %.2f ms (agent write→receipt p50 %.2f p99 %.2f ms, %d chunks)", s.event50, s.event99, s.agent50, s.agent99, s.n)
}

func summarize(sub *stampedSub) subLatency {
	if sub.err != nil {
		return subLatency{err: sub.err}
	}
	e50, e99 := sub.eventLat.p50p99()
	a50, a99 := sub.r.check.lat.p50p99()
	return subLatency{event50: ms(e50), event99: ms(e99), agent50: ms(a50), agent99: ms(a99), n: len(sub.eventLat), resumes: sub.r.resumes}
}

// latencyRun is one latency run: the subscribers on B and A of the replicas' turn, and
// the subscriber of the SQLite reference turn.
type latencyRun struct {
	onB, onA, sqlite subLatency
}

func (r latencyRun) String() string {
	return fmt.Sprintf("on B %s; on A %s; SQLite %s", r.onB, r.onA, r.sqlite)
}

// replicaLatencyRun runs the paced turn on replica A with subscribers on B and A, then
// the SQLite reference turn.
func (c *common) replicaLatencyRun(ctx context.Context, pg *pgCluster, rate, seconds, sqliteSeconds float64, size int) latencyRun {
	var out latencyRun
	fail := func(err error) latencyRun {
		out.onA.err, out.onB.err = err, err
		return out
	}
	count := int(rate * seconds)
	func() {
		dsn, err := pg.newDatabase(ctx)
		if err != nil {
			fail(err)
			return
		}
		dataDir, workspace, err := c.runDir("replicas-latency")
		if err != nil {
			fail(err)
			return
		}
		env := floodEnv(count, size, rate)
		group, err := c.startReplicas(ctx,
			replicaConfig(filepath.Join(dataDir, "a"), workspace, c.agent, dsn, "a", 0, env),
			replicaConfig(filepath.Join(dataDir, "b"), workspace, c.agent, dsn, "b", 0, env))
		if err != nil {
			fail(err)
			return
		}
		defer func() {
			for _, s := range group {
				if err := s.stop(); err != nil {
					fmt.Printf("stop replica: %v\n", err)
				}
			}
		}()
		subs := c.pacedTurn(ctx, group[0], []*server{group[1], group[0]}, workspace, size, count, seconds)
		out.onB, out.onA = subs[0], subs[1]
	}()
	// The reference: one agenticd on SQLite, the subscriber on it.
	func() {
		dataDir, workspace, err := c.runDir("sqlite-latency")
		if err != nil {
			out.sqlite.err = err
			return
		}
		n := int(rate * sqliteSeconds)
		s, err := startAgenticd(ctx, c.agenticd, acpConfig(dataDir, workspace, c.agent, floodEnv(n, size, rate), nil))
		if err != nil {
			out.sqlite.err = err
			return
		}
		defer s.stop()
		out.sqlite = c.pacedTurn(ctx, s, []*server{s}, workspace, size, n, sqliteSeconds)[0]
	}()
	return out
}

// pacedTurn creates a session on owner, subscribes one stream on each of readers (a
// connection each), sends one message to owner and reads the whole paced turn.
func (c *common) pacedTurn(ctx context.Context, owner *server, readers []*server, workspace string, size, count int, seconds float64) []subLatency {
	out := make([]subLatency, len(readers))
	fail := func(err error) []subLatency {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds*float64(time.Second))+time.Minute)
	defer cancel()
	created, err := owner.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return fail(fmt.Errorf("CreateSession: %w", err))
	}
	id := created.GetSession().GetSessionId()
	got, err := owner.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return fail(fmt.Errorf("GetSession: %w", err))
	}
	from := got.GetSession().GetLastSequence()
	subs := make([]*stampedSub, len(readers))
	var wg, ready sync.WaitGroup
	for i, rd := range readers {
		conn, err := rd.dial()
		if err != nil {
			return fail(err)
		}
		defer conn.Close()
		client := pb.NewAgenticServiceClient(conn)
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			subs[i] = followStamped(ctx, client, id, from, newChunkCheck(size, count), ready.Done)
		}()
	}
	ready.Wait()
	if _, err := owner.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: textContent("go")}); err != nil {
		cancel()
		wg.Wait()
		return fail(fmt.Errorf("SendMessage: %w", err))
	}
	wg.Wait()
	for i, s := range subs {
		out[i] = summarize(s)
	}
	return out
}

// latencyRows renders the latency runs: the subscriber on B (the row with a target-like
// comparison), on A, and the SQLite reference.
func latencyRows(section, figure string, rate, sqliteSeconds float64, runs []latencyRun) []Row {
	cmd := commandLine()
	pick := func(f func(latencyRun) subLatency) (e50, e99, a50, a99 []float64, fails []string, resumes int) {
		for _, r := range runs {
			s := f(r)
			if s.err != nil {
				fails = append(fails, oneLine(s.err.Error()))
				continue
			}
			e50, e99 = append(e50, s.event50), append(e99, s.event99)
			a50, a99 = append(a50, s.agent50), append(a99, s.agent99)
			resumes += s.resumes
		}
		return
	}
	type series struct {
		name  string
		fig   string
		get   func(latencyRun) subLatency
		notes string
	}
	all := []series{
		{"B", figure + ", subscriber on replica B", func(r latencyRun) subLatency { return r.onB },
			"replicas A and B (bin/agenticd) on one Postgres; B reads the session's events from the event log, woken by LISTEN/NOTIFY; "},
		{"A", figure + ", subscriber on replica A (the owner)", func(r latencyRun) subLatency { return r.onA },
			"the same turn and run as the row above; in replica mode A serves Subscribe from the event log too, its own sessions included; "},
		{"SQLite", fmt.Sprintf("Subscribe latency event_time → receipt, p50 / p99, %g ev/s for %gs, one agenticd on SQLite (reference)", rate, sqliteSeconds),
			func(r latencyRun) subLatency { return r.sqlite },
			"one bin/agenticd on SQLite, the same paced stream, one subscriber served from the hub's ring; "},
	}
	var rows []Row
	var ref [3][2]float64 // p50, p99 per series, for the comparisons
	var ok [3]bool
	for i, s := range all {
		e50, e99, a50, a99, fails, resumes := pick(s.get)
		runsCell := fmt.Sprintf("%d/%d intact", len(e50), len(runs))
		if len(e50) == 0 {
			rows = append(rows, Row{Section: section, Figure: s.fig, Value: "not available: " + failNotes(fails), Met: "n/a", Runs: runsCell, Command: cmd})
			continue
		}
		ref[i] = [2]float64{median(e50), median(e99)}
		ok[i] = true
		notes := s.notes + fmt.Sprintf("the test agent's stamped chunks paced at %g/s (internal/testagent), each checked in order; event_time is stamped by the owner's hub at publish, read on the same machine's clock; from the agent's write instead: p50 %.2f / p99 %.2f ms", rate, median(a50), median(a99))
		if resumes > 0 {
			notes += fmt.Sprintf("; the stream fell a queue behind and resumed %d times", resumes)
		}
		if f := failNotes(fails); f != "" {
			notes += "; failed runs: " + f
		}
		rows = append(rows, Row{Section: section, Figure: s.fig, Value: fmt.Sprintf("p50 %.2f ms / p99 %.2f ms", ref[i][0], ref[i][1]),
			Runs: runsCell, Command: cmd, Notes: notes})
	}
	// The cross-replica row compared with the owner's own subscriber and with SQLite.
	if ok[0] {
		var parts []string
		if ok[1] {
			parts = append(parts, fmt.Sprintf("subscriber on A (same replica, from the log): p50 %.2f / p99 %.2f ms", ref[1][0], ref[1][1]))
		}
		if ok[2] {
			parts = append(parts, fmt.Sprintf("SQLite single process (ring): p50 %.2f / p99 %.2f ms", ref[2][0], ref[2][1]))
		}
		rows[0].Ratio = strings.Join(parts, "; ")
	}
	return rows
}

// failoverRun is one kill -9 of a session's owner mid-reply.
type failoverRun struct {
	toSend  time.Duration // kill → the first successful SendMessage through B returned
	toFirst time.Duration // kill → the new reply's first event received on C
	// leaseOut is when, after the kill, the lease that SESSION_OWNER_UNAVAILABLE named
	// ran out (0 when no such answer came).
	leaseOut time.Duration
	// lateRefusal is the longest a SESSION_OWNER_UNAVAILABLE answer came after the
	// lease_expires it named (0 when none came late).
	lateRefusal time.Duration
	attempts    int            // SendMessage calls through B
	refusals    map[string]int // the failed calls' code/reason
	ownerLost   bool           // C saw the interrupted reply's ERROR (owner_lost) and MESSAGE_END
	order       string         // what was wrong with the order of C's stream ("" if nothing)
	err         error
}

func (r failoverRun) String() string {
	if r.err != nil {
		return "failed: " + oneLine(r.err.Error())
	}
	return fmt.Sprintf("SendMessage through B ok %.0f ms after the kill (lease ran out at %.0f ms; latest refusal %.0f ms after the lease_expires it named), new reply's first event on C at %.0f ms; %d attempts (%s); interrupted reply ended on C: %v; C's stream in order: %s",
		ms(r.toSend), ms(r.leaseOut), ms(r.lateRefusal), ms(r.toFirst), r.attempts, refusalList(r.refusals), r.ownerLost, cmp.Or(r.order, "yes"))
}

func refusalList(m map[string]int) string {
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%d × %s", n, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// agenticReason is agenticd's ErrorInfo reason and metadata on err.
func agenticReason(err error) (string, map[string]string) {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "agenticd" {
			return info.GetReason(), info.GetMetadata()
		}
	}
	return "", nil
}

// eventRecorder keeps every event a Subscribe stream brings, with its arrival time.
type eventRecorder struct {
	mu       sync.Mutex
	events   []*pb.AgenticEvent
	received []time.Time
	err      error
	notify   chan struct{}
}

func recordStream(stream pb.AgenticService_SubscribeClient) *eventRecorder {
	r := &eventRecorder{notify: make(chan struct{}, 1)}
	go func() {
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
	return r
}

// waitFor returns the arrival time of the first recorded event matching match, waiting
// up to within for it.
func (r *eventRecorder) waitFor(ctx context.Context, within time.Duration, what string, match func(*pb.AgenticEvent) bool) (time.Time, error) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	seen := 0
	for {
		r.mu.Lock()
		for ; seen < len(r.events); seen++ {
			if match(r.events[seen]) {
				at := r.received[seen]
				r.mu.Unlock()
				return at, nil
			}
		}
		err, n := r.err, len(r.events)
		r.mu.Unlock()
		if err != nil {
			return time.Time{}, fmt.Errorf("the stream ended (%v) before %s (%d events)", err, what, n)
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("no %s within %s (%d events)", what, within, n)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// messageOf is the message an event belongs to ("" for none).
func messageOf(ev *pb.AgenticEvent) string {
	switch p := ev.GetPayload().(type) {
	case *pb.AgenticEvent_MessageDelta:
		return p.MessageDelta.GetMessageId()
	case *pb.AgenticEvent_MessageBlock:
		return p.MessageBlock.GetMessageId()
	case *pb.AgenticEvent_MessageEnd:
		return p.MessageEnd.GetMessageId()
	case *pb.AgenticEvent_Error:
		return p.Error.GetMessageId()
	}
	return ""
}

// failoverRun starts replicas A (its agent streams a long paced reply), B and C (their
// agents answer shortly), creates a session on A, follows it from C, sends a message on
// A, kills A once C has seen killAfter chunks of the reply, and retries SendMessage
// through B every retry until it succeeds.
func (c *common) failoverRun(ctx context.Context, pg *pgCluster, ttl time.Duration, killAfter int, phase, retry time.Duration) (out failoverRun) {
	ctx, cancel := context.WithTimeout(ctx, 2*ttl+2*time.Minute)
	defer cancel()
	dsn, err := pg.newDatabase(ctx)
	if err != nil {
		return failoverRun{err: err}
	}
	dataDir, workspace, err := c.runDir("replicas-failover")
	if err != nil {
		return failoverRun{err: err}
	}
	const size, rate = 64, 1000
	long := floodEnv(1_000_000, size, rate) // far longer than the run: A dies mid-reply
	short := floodEnv(10, size, 0)
	group, err := c.startReplicas(ctx,
		replicaConfig(filepath.Join(dataDir, "a"), workspace, c.agent, dsn, "a", ttl, long),
		replicaConfig(filepath.Join(dataDir, "b"), workspace, c.agent, dsn, "b", ttl, short),
		replicaConfig(filepath.Join(dataDir, "c"), workspace, c.agent, dsn, "c", ttl, short))
	if err != nil {
		return failoverRun{err: err}
	}
	a, b, cc := group[0], group[1], group[2]
	killed := false
	defer func() {
		if !killed {
			a.stop()
		}
		for _, s := range []*server{b, cc} {
			if err := s.stop(); err != nil && out.err == nil {
				out.err = err
			}
		}
	}()
	created, err := a.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return failoverRun{err: fmt.Errorf("CreateSession through A: %w", err)}
	}
	id := created.GetSession().GetSessionId()
	got, err := a.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return failoverRun{err: fmt.Errorf("GetSession through A: %w", err)}
	}
	sctx, stopSub := context.WithCancel(ctx)
	defer stopSub()
	// Unmerged: the chunks are counted one delta each.
	stream, err := cc.client.Subscribe(sctx, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(got.GetSession().GetLastSequence()),
		UnmergedDeltas: true})
	if err == nil {
		_, err = stream.Header()
	}
	if err != nil {
		return failoverRun{err: fmt.Errorf("Subscribe on C: %w", err)}
	}
	onC := recordStream(stream)
	first, err := a.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: textContent("stream")})
	if err != nil {
		return failoverRun{err: fmt.Errorf("SendMessage through A: %w", err)}
	}
	interrupted := first.GetMessageId()
	chunks := 0
	if _, err := onC.waitFor(ctx, 30*time.Second, fmt.Sprintf("%d chunks of A's reply on C", killAfter), func(ev *pb.AgenticEvent) bool {
		if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == interrupted {
			chunks++
		}
		return chunks >= killAfter
	}); err != nil {
		return failoverRun{err: err}
	}
	select {
	case <-time.After(phase):
	case <-ctx.Done():
		return failoverRun{err: ctx.Err()}
	}

	killedAt := time.Now()
	killed = true
	killServer(a)
	out.refusals = map[string]int{}
	var second *pb.SendMessageResponse
	for second == nil {
		if time.Since(killedAt) > ttl+time.Minute {
			return failoverRun{err: fmt.Errorf("SendMessage through B still fails %s after the kill (lease_ttl %s): %s", time.Since(killedAt).Round(time.Millisecond), ttl, refusalList(out.refusals))}
		}
		callCtx, callCancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := b.client.SendMessage(callCtx, &pb.SendMessageRequest{SessionId: id, Content: textContent("again")})
		callCancel()
		out.attempts++
		if err == nil {
			out.toSend = time.Since(killedAt)
			second = resp
			break
		}
		reason, md := agenticReason(err)
		key := status.Code(err).String()
		if reason != "" {
			key += " " + reason
		}
		out.refusals[key]++
		if exp, perr := time.Parse(time.RFC3339Nano, md["lease_expires"]); perr == nil {
			out.leaseOut = exp.Sub(killedAt)
			// A refusal after the lease_expires it names breaks its own promise.
			out.lateRefusal = max(out.lateRefusal, time.Since(exp))
		}
		if ctx.Err() != nil {
			return failoverRun{err: fmt.Errorf("SendMessage through B: %w", err)}
		}
		time.Sleep(retry)
	}
	reply := second.GetMessageId()
	at, err := onC.waitFor(ctx, 30*time.Second, "the new reply's first event on C", func(ev *pb.AgenticEvent) bool {
		return messageOf(ev) == reply && reply != ""
	})
	if err != nil {
		return failoverRun{err: err}
	}
	out.toFirst = at.Sub(killedAt)
	// The interrupted reply must have ended visibly on C (ERROR owner_lost, MESSAGE_END).
	_, errEv := onC.waitFor(ctx, 5*time.Second, "the interrupted reply's ERROR", func(ev *pb.AgenticEvent) bool {
		return ev.GetError() != nil && ev.GetError().GetMessageId() == interrupted && ev.GetError().GetReason() == pb.ErrorReason_ERROR_REASON_OWNER_LOST
	})
	_, endEv := onC.waitFor(ctx, 5*time.Second, "the interrupted reply's MESSAGE_END", func(ev *pb.AgenticEvent) bool {
		return ev.GetMessageEnd() != nil && ev.GetMessageEnd().GetMessageId() == interrupted
	})
	out.ownerLost = errEv == nil && endEv == nil
	out.order = onC.checkRising()
	return out
}

// checkRising says what is wrong with the order of the recorded events ("" when each
// session's sequences rise strictly, none twice).
func (r *eventRecorder) checkRising() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := map[string]uint64{}
	for i, ev := range r.events {
		if prev, ok := last[ev.GetSessionId()]; ok && ev.GetSequence() <= prev {
			return fmt.Sprintf("event %d of %d (%s) has sequence %d after %d", i, len(r.events), ev.GetType(), ev.GetSequence(), prev)
		}
		last[ev.GetSessionId()] = ev.GetSequence()
	}
	return ""
}

// failoverRows renders one ttl's failover runs: kill → SendMessage, kill → first event.
func failoverRows(section string, ttl, retry time.Duration, killAfter int, figure func(time.Duration, string) string, runs []failoverRun) []Row {
	cmd := commandLine()
	var send, firstEv, gap, leaseOut, overhead []float64
	var late time.Duration
	var fails []string
	refusals := map[string]int{}
	ended := 0
	var disorder []string
	for _, r := range runs {
		if r.err != nil {
			fails = append(fails, oneLine(r.err.Error()))
			continue
		}
		send = append(send, r.toSend.Seconds())
		firstEv = append(firstEv, r.toFirst.Seconds())
		gap = append(gap, (r.toFirst - r.toSend).Seconds())
		if r.leaseOut > 0 {
			leaseOut = append(leaseOut, r.leaseOut.Seconds())
			overhead = append(overhead, (r.toSend - r.leaseOut).Seconds())
		}
		late = max(late, r.lateRefusal)
		for k, n := range r.refusals {
			refusals[k] += n
		}
		if r.ownerLost {
			ended++
		}
		if r.order != "" {
			disorder = append(disorder, r.order)
		}
	}
	runsCell := fmt.Sprintf("%d/%d", len(send), len(runs))
	sendFig := figure(ttl, "first successful SendMessage through replica B")
	firstFig := figure(ttl, "first event of the new reply on a subscriber on replica C")
	if len(send) == 0 {
		na := "not available: " + failNotes(fails)
		return []Row{
			{Section: section, Figure: sendFig, Value: na, Met: "n/a", Runs: runsCell, Command: cmd},
			{Section: section, Figure: firstFig, Value: na, Met: "n/a", Runs: runsCell, Command: cmd},
		}
	}
	secs := func(xs []float64) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprintf("%.2f", x)
		}
		return strings.Join(parts, ", ") + " s"
	}
	notes := fmt.Sprintf("three bin/agenticd replicas on one Postgres; A streams a paced reply (1000 chunks/s) and is killed (SIGKILL) once a subscriber on C has seen %d chunks of it; "+
		"SendMessage through B retried every %s; runs: %s. Until A's lease runs out B answers (all runs' attempts) %s; the lease was last renewed at most lease_ttl/3 before the kill, so it runs out between 2/3 × lease_ttl and lease_ttl after it", killAfter, retry, secs(send), refusalList(refusals))
	if len(leaseOut) > 0 {
		notes += fmt.Sprintf(" (here %s after the kill, median; the first success came %.0f ms after that, median: the take-over of the session plus the retry pause)", fmt.Sprintf("%.2f s", median(leaseOut)), median(overhead)*1000)
	}
	if late > 0 {
		notes += fmt.Sprintf("; a SESSION_OWNER_UNAVAILABLE answer came up to %.0f ms after the lease_expires it named", ms(late))
	}
	notes += fmt.Sprintf("; the kill fell at a different point of the renewal period in each run (i/runs × lease_ttl/3 later than the %d chunks)", killAfter)
	notes += fmt.Sprintf("; the interrupted reply ended visibly on C (ERROR owner_lost and MESSAGE_END) in %d of %d runs", ended, len(send))
	if len(disorder) == 0 {
		notes += "; C's stream had each sequence once, rising, in every run"
	} else {
		notes += "; C's stream out of order: " + failNotes(disorder)
	}
	if f := failNotes(fails); f != "" {
		notes += "; failed runs: " + f
	}
	return []Row{
		{Section: section, Figure: sendFig, Value: fmt.Sprintf("%.2f s", median(send)), Runs: runsCell, Command: cmd, Notes: notes},
		{Section: section, Figure: firstFig, Value: fmt.Sprintf("%.2f s", median(firstEv)), Runs: runsCell, Command: cmd,
			Ratio: fmt.Sprintf("%.0f ms after the successful SendMessage returned (median of the runs' differences)", median(gap)*1000),
			Notes: fmt.Sprintf("the subscriber on C followed the session from before the kill; the new reply's first event is the first carrying its message id; runs: %s", secs(firstEv))},
	}
}

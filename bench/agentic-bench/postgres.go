package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agenticd/agenticd/bench/fakeopenai"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/internal/pgtest"
)

// The Postgres rows run agenticd on a throw-away Postgres cluster (internal/pgtest:
// Debian's binaries, a temp dir, a free loopback port; fsync off, as a test cluster
// has it) next to the same figures on SQLite, measured the same way in the same
// invocation, run by run.

// pgCluster is a throw-away Postgres server; each run gets a database of its own.
type pgCluster struct {
	c *pgtest.Cluster
	n atomic.Int64
}

// startPostgres starts the cluster (a few seconds: initdb and start).
func startPostgres(ctx context.Context) (*pgCluster, error) {
	c, err := pgtest.Start(ctx)
	if err != nil {
		if errors.Is(err, pgtest.ErrNotInstalled) {
			return nil, err
		}
		return nil, fmt.Errorf("start a throw-away Postgres (internal/pgtest): %w", err)
	}
	return &pgCluster{c: c}, nil
}

func (p *pgCluster) stop() {
	if err := p.c.Stop(); err != nil {
		fmt.Printf("stop postgres: %v\n", oneLine(err.Error()))
	}
}

// newDatabase creates an empty database and returns its URL.
func (p *pgCluster) newDatabase(ctx context.Context) (string, error) {
	return p.c.CreateDatabase(ctx, fmt.Sprintf("bench_%d", p.n.Add(1)))
}

// writeCounter counts the write transactions committed to agenticd's database between
// its creation and since(): on SQLite the WAL's commit frames (walcount.go), on Postgres
// the transaction ids handed out (every transaction that writes a row takes one; a
// read-only one takes none), read from the cluster as pg_current_snapshot()'s xmax.
type writeCounter interface {
	since() (int, error)
	close()
}

type pgXidCounter struct {
	ctx   context.Context
	db    *sql.DB
	start uint64
}

func pinXids(ctx context.Context, dsn string) (*pgXidCounter, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	c := &pgXidCounter{ctx: ctx, db: db}
	if c.start, err = c.next(); err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}

// next is the next transaction id the cluster will hand out (the latest completed + 1).
func (c *pgXidCounter) next() (uint64, error) {
	var n uint64
	err := c.db.QueryRowContext(c.ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read the transaction id counter: %w", err)
	}
	return n, nil
}

func (c *pgXidCounter) since() (int, error) {
	n, err := c.next()
	return int(n - c.start), err
}

func (c *pgXidCounter) close() { c.db.Close() }

// engine is where agenticd keeps its database for a run: the SQLite file in its data
// dir (pg nil) or a new database on the Postgres cluster.
type engine struct {
	name string
	pg   *pgCluster
}

// engineRun is one run's database.
type engineRun struct {
	*engine
	dsn string // Postgres: the run's database; "" on SQLite
}

// prepare gives cfg this engine's database (a new one on Postgres).
func (e *engine) prepare(ctx context.Context, cfg *daemon.Config) (*engineRun, error) {
	r := &engineRun{engine: e}
	if e.pg != nil {
		dsn, err := e.pg.newDatabase(ctx)
		if err != nil {
			return nil, err
		}
		r.dsn = dsn
		cfg.Database = dsn
	}
	return r, nil
}

// counter starts counting write transactions to the run's database.
func (r *engineRun) counter(ctx context.Context, dataDir string) (writeCounter, error) {
	if r.pg != nil {
		return pinXids(ctx, r.dsn)
	}
	return pinWAL(ctx, filepath.Join(dataDir, daemon.DatabaseFile))
}

// enginePair collects one figure's runs on both engines.
type enginePair struct {
	vals  [2][]float64 // [0] SQLite, [1] Postgres
	extra [2][]float64 // a second figure per run (write transactions, start on an empty database)
	fails [2][]string
	total int
}

func (p *enginePair) add(i int, v float64, err error) {
	if err != nil {
		p.fails[i] = append(p.fails[i], oneLine(err.Error()))
		return
	}
	p.vals[i] = append(p.vals[i], v)
}

func (p *enginePair) runs() string {
	return fmt.Sprintf("SQLite %d/%d, Postgres %d/%d", len(p.vals[0]), p.total, len(p.vals[1]), p.total)
}

// row renders both engines' medians side by side; ratio says Postgres against SQLite
// (higher is better when higherBetter).
func (p *enginePair) row(section, figure string, format func(float64) string, notes string) Row {
	r := Row{Section: section, Figure: figure, Runs: p.runs(), Command: commandLine()}
	var parts []string
	for i, name := range []string{"SQLite", "Postgres"} {
		if len(p.vals[i]) == 0 {
			parts = append(parts, name+" not available: "+failNotes(p.fails[i]))
			continue
		}
		parts = append(parts, name+" "+format(median(p.vals[i])))
	}
	r.Value = strings.Join(parts, " · ")
	if len(p.vals[0]) > 0 && len(p.vals[1]) > 0 && median(p.vals[0]) != 0 {
		r.Ratio = fmt.Sprintf("Postgres %.2f × SQLite (same runs)", median(p.vals[1])/median(p.vals[0]))
	}
	fails := failNotes(p.fails[0], p.fails[1])
	if fails != "" {
		notes = strings.TrimPrefix(notes+"; failed runs: "+fails, "; ")
	}
	r.Notes = notes
	return r
}

// postgresCmd: the session and DeepChat rows on SQLite and on one agenticd on Postgres,
// side by side: CreateSession + CloseSession pairs per second, heap per idle session,
// start-up with those sessions in the database, and one long DeepChat reply (write
// transactions and time). Each run measures SQLite and Postgres back to back, the order
// alternating run by run.
func postgresCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("postgres", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	idle := fs.Int("sessions", 3000, "idle sessions held open for the memory figure (then in the database for the start-up figure)")
	pairs := fs.Int("pairs", 1000, "CreateSession + CloseSession pairs per churn run")
	workers := fs.Int("workers", 4, "concurrent clients")
	chunks := fs.Int("chunks", 10_000, "content deltas of the DeepChat reply")
	settle := fs.Duration("settle", 500*time.Millisecond, "how long after MESSAGE_END commits still count")
	fs.Parse(args)
	const section = "SQLite vs. Postgres"
	churnFig := fmt.Sprintf("CreateSession + CloseSession pairs per second, %d workers, one agenticd", *workers)
	memFig := fmt.Sprintf("heap in use per idle DeepChat session, %d sessions open, one agenticd", *idle)
	startFig := fmt.Sprintf("agenticd start → health SERVING, database with %d sessions", *idle)
	txFig := fmt.Sprintf("write transactions for one %d-chunk DeepChat reply", *chunks)
	timeFig := fmt.Sprintf("DeepChat SendMessage → MESSAGE_END, %d-chunk reply from the fake provider", *chunks)
	notAvail := func(err error) error {
		var rows []Row
		for _, f := range []string{churnFig, memFig, startFig, txFig, timeFig} {
			rows = append(rows, notAvailable(section, f, "", err))
		}
		return emit(c.results, rows...)
	}
	if c.inprocess {
		return notAvail(errors.New("the Postgres rows run bin/agenticd processes; drop -inprocess"))
	}
	cleanup, err := c.prepare()
	if err != nil {
		return notAvail(err)
	}
	defer cleanup()
	pg, err := startPostgres(ctx)
	if err != nil {
		return notAvail(err)
	}
	defer pg.stop()
	engines := []*engine{{name: "SQLite"}, {name: "Postgres", pg: pg}}
	small, err := fakeopenai.Start(1, 16)
	if err != nil {
		return err
	}
	defer small.Close()
	long, err := fakeopenai.Start(*chunks, 16)
	if err != nil {
		return err
	}
	defer long.Close()
	want := fakeopenai.Reply(*chunks, 16)

	var churn, mem, start, tx, reply enginePair
	var resumes [2]int // DeepChat reply streams that fell a queue behind and resumed
	for run := 0; run < c.runs; run++ {
		for k := range engines {
			i := (run + k) % len(engines)
			e := engines[i]
			churn.total, mem.total, start.total, tx.total, reply.total = run+1, run+1, run+1, run+1, run+1
			rate, perPair, err := c.engineChurn(ctx, e, small.BaseURL(), *pairs, *workers)
			churn.add(i, rate, err)
			if err == nil {
				churn.extra[i] = append(churn.extra[i], perPair)
			}
			heap, started, empty, err := c.engineIdle(ctx, e, small.BaseURL(), *idle, *workers)
			mem.add(i, heap, err)
			start.add(i, ms(started), err)
			if err == nil {
				start.extra[i] = append(start.extra[i], ms(empty))
			}
			n, elapsed, err := c.engineReply(ctx, e, long.BaseURL(), want, *settle, &resumes[i])
			tx.add(i, float64(n), err)
			reply.add(i, elapsed.Seconds(), err)
			fmt.Printf("run %d %s: churn %.0f/s (%.1f tx/pair), heap %.2f KiB/session, start %.0f ms, reply %d tx in %.0f ms\n",
				run+1, e.name, rate, perPair, heap, ms(started), n, ms(elapsed))
		}
	}
	perPair := func(i int) string { return fmt.Sprintf("%.1f", median(churn.extra[i])) }
	emptyStart := func(i int) string { return fmt.Sprintf("%.0f ms", median(start.extra[i])) }
	counted := "SQLite: new commit frames in the WAL (a read transaction pins it); Postgres: transaction ids handed out by the cluster (pg_current_snapshot() xmax; a transaction that writes takes one, a read-only one none, so the two count the same thing)"
	return emit(c.results,
		churn.row(section, churnFig, func(v float64) string { return fmt.Sprintf("%.0f/s", v) },
			fmt.Sprintf("bin/agenticd process, gRPC clients on loopback, %d pairs per run; write transactions per pair: SQLite %s, Postgres %s (%s); Postgres: a throw-away local cluster (internal/pgtest, fsync off), one replica", *pairs, perPair(0), perPair(1), counted)),
		mem.row(section, memFig, func(v float64) string { return fmt.Sprintf("%.1f KiB", v) },
			"agenticd in-process (Go heap: runtime.MemStats.HeapInuse after GC, before/after opening the sessions, after 200 warm-up sessions); on Postgres the replica's lease bookkeeping is in it"),
		start.row(section, startFig, func(v float64) string { return fmt.Sprintf("%.0f ms", v) },
			fmt.Sprintf("bin/agenticd started on the database the memory figure left (its sessions open, agenticd stopped gracefully), exec → TCP accept → health SERVING, polled every 1 ms; on an empty database (its schema made by an earlier start): SQLite %s, Postgres %s", emptyStart(0), emptyStart(1))),
		tx.row(section, txFig, func(v float64) string { return fmt.Sprintf("%.0f", v) },
			"SendMessage → MESSAGE_END + settle, one subscriber; "+counted+"; on Postgres a lease renewal (one every lease_ttl/3 = 5 s) may fall in the window"),
		reply.row(section, timeFig, func(v float64) string { return fmt.Sprintf("%.0f ms (%s chunks/s)", v*1000, si(float64(*chunks)/v)) },
			fmt.Sprintf("bin/agenticd process; the reply checked whole on the stream and in the store; the subscriber fell a whole queue behind and resumed (after_sequence): SQLite %d, Postgres %d times in all runs", resumes[0], resumes[1])),
	)
}

// engineServer starts a bin/agenticd with DeepChat on baseURL, on the engine's database
// (a new one on Postgres), in a run directory named after what runs there.
func (c *common) engineServer(ctx context.Context, e *engine, what, baseURL string) (s *server, r *engineRun, dataDir, workspace string, err error) {
	dataDir, workspace, err = c.runDir(what + "-" + strings.ToLower(e.name))
	if err != nil {
		return nil, nil, "", "", err
	}
	cfg := deepchatConfig(dataDir, workspace, baseURL)
	if r, err = e.prepare(ctx, &cfg); err != nil {
		return nil, nil, "", "", err
	}
	if s, err = startAgenticd(ctx, c.agenticd, cfg); err != nil {
		return nil, nil, "", "", err
	}
	return s, r, dataDir, workspace, nil
}

// engineChurn is one churn run: pairs/s and write transactions per pair.
func (c *common) engineChurn(ctx context.Context, e *engine, baseURL string, pairs, workers int) (float64, float64, error) {
	s, r, dataDir, workspace, err := c.engineServer(ctx, e, "churn", baseURL)
	if err != nil {
		return 0, 0, err
	}
	if _, err := createSessions(ctx, s.client, workspace, 100, workers, true); err != nil {
		s.stop()
		return 0, 0, fmt.Errorf("warm-up: %w", err)
	}
	counter, err := r.counter(ctx, dataDir)
	if err != nil {
		s.stop()
		return 0, 0, err
	}
	begin := time.Now()
	_, err = createSessions(ctx, s.client, workspace, pairs, workers, true)
	elapsed := time.Since(begin)
	n, cerr := counter.since()
	counter.close()
	if stopErr := s.stop(); err == nil {
		err = stopErr
	}
	if err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	return float64(pairs) / elapsed.Seconds(), float64(n) / float64(pairs), nil
}

// engineIdle holds n idle sessions open in an in-process agenticd (heap per session),
// stops it, then times a bin/agenticd start on that database, and one on an empty one.
func (c *common) engineIdle(ctx context.Context, e *engine, baseURL string, n, workers int) (heapKiB float64, started, empty time.Duration, err error) {
	dataDir, workspace, err := c.runDir("idle-" + strings.ToLower(e.name))
	if err != nil {
		return 0, 0, 0, err
	}
	cfg := deepchatConfig(dataDir, workspace, baseURL)
	if _, err := e.prepare(ctx, &cfg); err != nil {
		return 0, 0, 0, err
	}
	s, err := startAgenticd(ctx, "", cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := createSessions(ctx, s.client, workspace, 200, workers, true); err != nil {
		s.stop()
		return 0, 0, 0, fmt.Errorf("warm-up sessions: %w", err)
	}
	before := heapInUse()
	ids, err := createSessions(ctx, s.client, workspace, n, workers, false)
	if err != nil {
		s.stop()
		return 0, 0, 0, fmt.Errorf("open %d sessions: %w", n, err)
	}
	after := heapInUse()
	runtime.KeepAlive(ids)
	heapKiB = (float64(after) - float64(before)) / float64(n) / 1024
	if err := s.stop(); err != nil {
		return 0, 0, 0, fmt.Errorf("stop the in-process agenticd: %w", err)
	}
	// The same database, now holding the sessions, under a bin/agenticd process.
	p, err := startAgenticd(ctx, c.agenticd, cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	_, getErr := p.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: ids[len(ids)-1]})
	if err := p.stop(); err != nil && getErr == nil {
		getErr = err
	}
	if getErr != nil {
		return 0, 0, 0, fmt.Errorf("after the restart: %w", getErr)
	}
	started = p.started
	// An empty database of the same engine, for the baseline.
	emptyDir, emptyWS, err := c.runDir("empty-" + strings.ToLower(e.name))
	if err != nil {
		return 0, 0, 0, err
	}
	emptyCfg := deepchatConfig(emptyDir, emptyWS, baseURL)
	if _, err := e.prepare(ctx, &emptyCfg); err != nil {
		return 0, 0, 0, err
	}
	// The first start creates the schema; the second is the one timed.
	var q *server
	for range 2 {
		if q, err = startAgenticd(ctx, c.agenticd, emptyCfg); err != nil {
			return 0, 0, 0, err
		}
		if err := q.stop(); err != nil {
			return 0, 0, 0, err
		}
	}
	return heapKiB, started, q.started, nil
}

// engineReply is one DeepChat turn on either engine, whose provider
// streams the whole reply, timed SendMessage → MESSAGE_END at one subscriber, its write
// transactions counted until settle after it, the reply checked on the stream and in
// the store.
func (c *common) engineReply(ctx context.Context, e *engine, baseURL, want string, settle time.Duration, resumes *int) (int, time.Duration, error) {
	s, r, dataDir, workspace, err := c.engineServer(ctx, e, "deepchat", baseURL)
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	created, err := s.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchDeepChatAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return 0, 0, fmt.Errorf("CreateSession: %w", err)
	}
	id := created.GetSession().GetSessionId()
	got, err := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return 0, 0, fmt.Errorf("GetSession: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.client.Subscribe(sctx, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(got.GetSession().GetLastSequence())})
	if err == nil {
		_, err = stream.Header() // sent once the subscription is registered
	}
	if err != nil {
		return 0, 0, fmt.Errorf("Subscribe: %w", err)
	}
	counter, err := r.counter(ctx, dataDir)
	if err != nil {
		return 0, 0, err
	}
	defer counter.close()
	begin := time.Now()
	sent, err := s.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: textContent("write a long answer")})
	if err != nil {
		return 0, 0, fmt.Errorf("SendMessage: %w", err)
	}
	var text strings.Builder
	var errs []string
	events := &eventReader{stream: stream}
	last := got.GetSession().GetLastSequence()
	for done := false; !done; {
		ev, err := events.next()
		if status.Code(err) == codes.ResourceExhausted {
			// The subscriber fell a whole queue behind (a loaded machine): resume after
			// the last event read, as the API asks clients to.
			*resumes++
			stream, err = s.client.Subscribe(sctx, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(last)})
			if err != nil {
				return 0, 0, fmt.Errorf("resume Subscribe: %w", err)
			}
			events = &eventReader{stream: stream}
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("stream ended before MESSAGE_END: %w", err)
		}
		last = ev.GetSequence()
		switch p := ev.GetPayload().(type) {
		case *pb.AgenticEvent_MessageDelta:
			if p.MessageDelta.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
				text.WriteString(p.MessageDelta.GetText())
			}
		case *pb.AgenticEvent_MessageBlock:
			if b := p.MessageBlock.GetBlock(); b != nil && b.GetError() != nil {
				errs = append(errs, b.GetError().GetMessage())
			}
		case *pb.AgenticEvent_Error:
			errs = append(errs, p.Error.GetMessage())
		case *pb.AgenticEvent_MessageEnd:
			done = p.MessageEnd.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER
		}
	}
	elapsed := events.received.Sub(begin)
	time.Sleep(settle)
	n, err := counter.since()
	if err != nil {
		return 0, 0, err
	}
	if text.String() != want {
		return n, elapsed, fmt.Errorf("the reply arrived incomplete (%d of %d bytes; errors: %s)", text.Len(), len(want), strings.Join(errs, "; "))
	}
	stored, err := s.client.GetMessage(ctx, &pb.GetMessageRequest{SessionId: id, MessageId: sent.GetMessageId()})
	if err != nil {
		return n, elapsed, fmt.Errorf("GetMessage: %w", err)
	}
	if !storedText(stored.GetMessage(), want) {
		return n, elapsed, fmt.Errorf("the stored reply %s is not the text that was streamed", sent.GetMessageId())
	}
	return n, elapsed, nil
}

package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// eventLogCmd measures the durable event log: what a flood costs it (SQLite write
// transactions, bytes on disk), how fast a subscriber resumes from it, and agenticd's
// memory through a large flood and after it.
func eventLogCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eventlog", flag.ExitOnError)
	var c common
	c.register(fs, 1)
	count := fs.Int("count", 100_000, "chunks of the 64 B flood (log cost, resume)")
	ring := fs.Int("resume-buffer", 1000, "event_buffer of the resume run: small, so that the log serves the resume")
	bigCount := fs.Int("big-count", 100_000, "chunks of the 1 KiB flood (memory)")
	idle := fs.Duration("idle", time.Minute, "how long agenticd idles after the 1 KiB flood before its RSS is read again")
	crashRate := fs.Float64("crash-rate", 1000, "chunks/s of the reply a kill -9 cuts short")
	crashAfter := fs.Int("crash-after", 500, "chunks a subscriber sees before the kill -9")
	only := fs.String("only", "", "run only these figures, comma-separated: cost, resume, memory, crash (default: all)")
	heap := fs.String("heapprofile", "", "with -inprocess: write a heap profile at the 1 KiB flood's MESSAGE_END (its in-use figures are the live heap at the last collection in the flood)")
	fs.Parse(args)
	if *heap != "" && !c.inprocess {
		return fmt.Errorf("-heapprofile profiles this process: add -inprocess")
	}
	run, err := eventLogFigures(*only)
	if err != nil {
		return err
	}
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	const section = "Event log"
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvailable(section, "event log", "", err))
	}
	var costs []logCost
	var resumes []resumeRun
	var mems []memRun
	var crashes []crashRun
	for i := 0; i < c.runs; i++ {
		var said []string
		if run["cost"] {
			lc := c.logCostRun(ctx, *count, 64)
			costs = append(costs, lc)
			said = append(said, lc.String())
		}
		if run["resume"] {
			rr := c.resumeRun(ctx, *count, 64, *ring)
			resumes = append(resumes, rr)
			said = append(said, rr.String())
		}
		if run["memory"] {
			mr := c.memRun(ctx, *bigCount, 1024, *idle, *heap)
			mems = append(mems, mr)
			said = append(said, mr.String())
		}
		if run["crash"] {
			cr := c.crashRun(ctx, *crashRate, *crashAfter)
			crashes = append(crashes, cr)
			said = append(said, cr.String())
		}
		fmt.Printf("run %d: %s\n", i+1, strings.Join(said, "; "))
	}
	rows := eventLogRows(section, *count, *bigCount, *ring, *idle, costs, resumes, mems)
	if len(crashes) > 0 {
		rows = append(rows, crashRows(section, commandLine(), *crashRate, *crashAfter, crashes)...)
	}
	return emit(c.results, rows...)
}

// eventLogFigures reads -only: which of the subcommand's figures to run.
func eventLogFigures(only string) (map[string]bool, error) {
	run := map[string]bool{"cost": true, "resume": true, "memory": true, "crash": true}
	if only == "" {
		return run, nil
	}
	chosen := map[string]bool{}
	for _, f := range strings.Split(only, ",") {
		f = strings.TrimSpace(f)
		if !run[f] {
			return nil, fmt.Errorf("-only: unknown figure %q; name some of cost, resume, memory, crash, comma-separated", f)
		}
		chosen[f] = true
	}
	return chosen, nil
}

// logCost is what one flood cost the log: write transactions and disk.
type logCost struct {
	elapsed  time.Duration // SendMessage → MESSAGE_END
	commits  int           // SQLite write transactions committed meanwhile
	events   int64         // rows in event_log afterwards
	data     int64         // their encoded events' bytes
	logBytes int64         // pages the log's table and indexes take
	err      error
}

func (l logCost) String() string {
	if l.err != nil {
		return "log cost: " + oneLine(l.err.Error())
	}
	return fmt.Sprintf("flood %.0f ms, %d write transactions (%.0f/s), %d logged events in %.1f MiB (data %.1f MiB)",
		ms(l.elapsed), l.commits, float64(l.commits)/l.elapsed.Seconds(), l.events, mibOf(l.logBytes), mibOf(l.data))
}

// logCostRun floods one turn through agenticd (default config) counting the SQLite
// write transactions it commits, then stops it and measures the log's share of the file.
func (c *common) logCostRun(ctx context.Context, count, size int) logCost {
	dataDir, workspace, err := c.runDir("eventlog-cost")
	if err != nil {
		return logCost{err: err}
	}
	s, err := startAgenticd(ctx, c.agenticd, acpConfig(dataDir, workspace, c.agent, floodEnv(count, size, 0), nil))
	if err != nil {
		return logCost{err: err}
	}
	dbPath := filepath.Join(dataDir, daemon.DatabaseFile)
	var out logCost
	t := c.floodTurn(ctx, s, workspace, count, size, func() (func() error, error) {
		wal, err := pinWAL(ctx, dbPath)
		if err != nil {
			return nil, err
		}
		return func() error {
			defer wal.close()
			out.commits, err = wal.since()
			return err
		}, nil
	})
	if err := s.stop(); err != nil && t.err == nil {
		t.err = fmt.Errorf("stop agenticd: %w", err)
	}
	if t.err != nil {
		return logCost{err: t.err}
	}
	out.elapsed = t.elapsed
	out.events, out.data, out.logBytes, out.err = measureLog(ctx, dbPath)
	return out
}

// measureLog counts the event log's rows and bytes in a database no one else has open,
// and the pages its table and indexes take: the pages that deleting every row frees.
// It deletes the log.
func measureLog(ctx context.Context, dbPath string) (events, data, pages int64, err error) {
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_busy_timeout=10000")
	if err != nil {
		return 0, 0, 0, err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(data)), 0) FROM event_log`).Scan(&events, &data); err != nil {
		return 0, 0, 0, fmt.Errorf("count the logged events: %w", err)
	}
	free := func() (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&n)
		return n, err
	}
	var pageSize int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return 0, 0, 0, err
	}
	before, err := free()
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM event_log`); err != nil {
		return 0, 0, 0, fmt.Errorf("delete the log to measure it: %w", err)
	}
	after, err := free()
	if err != nil {
		return 0, 0, 0, err
	}
	return events, data, (after - before) * pageSize, nil
}

// resumeRun is a subscriber resuming, after a flood, from the point before it.
type resumeRun struct {
	elapsed time.Duration // Subscribe → MESSAGE_END
	events  int           // gRPC events it received (merged deltas count once)
	chunks  int           // the agent's chunks they carried, every one checked
	err     error
}

func (r resumeRun) String() string {
	if r.err != nil {
		return "resume: " + oneLine(r.err.Error())
	}
	return fmt.Sprintf("resume of %d chunks in %d events %.0f ms", r.chunks, r.events, ms(r.elapsed))
}

// resumeRun floods one turn through agenticd holding only ring events, then times a
// second subscriber that resumes from before the turn: the ring holds only its end, so
// the log serves the rest.
func (c *common) resumeRun(ctx context.Context, count, size, ring int) resumeRun {
	dataDir, workspace, err := c.runDir("eventlog-resume")
	if err != nil {
		return resumeRun{err: err}
	}
	cfg := acpConfig(dataDir, workspace, c.agent, floodEnv(count, size, 0), nil)
	cfg.EventBuffer = ring
	s, err := startAgenticd(ctx, c.agenticd, cfg)
	if err != nil {
		return resumeRun{err: err}
	}
	defer s.stop()
	var out resumeRun
	t := c.floodTurn(ctx, s, workspace, count, size, nil)
	if t.err != nil {
		return resumeRun{err: t.err}
	}
	counter := &countingEvents{}
	r := &subResult{lastSeq: t.before, check: newChunkCheck(size, count)}
	start := time.Now()
	err = followTurnCounting(ctx, s.client, t.sessionID, r, counter)
	out.elapsed, out.events, out.chunks = time.Since(start), counter.n, count
	if err == nil {
		err = r.check.intact()
	}
	if err == nil && r.resumes > 0 {
		err = fmt.Errorf("the resuming subscriber fell a queue behind %d times", r.resumes)
	}
	out.err = err
	return out
}

// countingEvents counts the events a subscriber reads.
type countingEvents struct{ n int }

// followTurnCounting is followTurn, counting the events read.
func followTurnCounting(ctx context.Context, client pb.AgenticServiceClient, sessionID string, r *subResult, counter *countingEvents) error {
	stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionIds: []string{sessionID}, Start: after(r.lastSeq)})
	if err != nil {
		return fmt.Errorf("Subscribe: %w", err)
	}
	events := &eventReader{stream: stream}
	for {
		ev, err := events.next()
		if err != nil {
			return fmt.Errorf("resuming after %d: %w", r.lastSeq, err)
		}
		counter.n++
		r.lastSeq = ev.GetSequence()
		switch p := ev.GetPayload().(type) {
		case *pb.AgenticEvent_MessageDelta:
			if p.MessageDelta.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
				r.check.feed(p.MessageDelta.GetText(), events.received.UnixNano())
			}
		case *pb.AgenticEvent_MessageEnd:
			if p.MessageEnd.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
				return nil
			}
		}
	}
}

// memRun is agenticd's memory through a large flood and after idling.
type memRun struct {
	elapsed  time.Duration // SendMessage → MESSAGE_END
	before   procMem       // just before SendMessage
	peak     procMem       // at MESSAGE_END (peak since SendMessage)
	afterIdl procMem       // after the idle time
	err      error
}

func (m memRun) growth() float64 { return float64(m.peak.hwmKiB-m.before.rssKiB) / 1024 }
func (m memRun) residue() float64 {
	return float64(m.afterIdl.rssKiB-m.before.rssKiB) / 1024
}

func (m memRun) String() string {
	if m.err != nil {
		return "memory: " + oneLine(m.err.Error())
	}
	return fmt.Sprintf("flood %.0f ms, RSS before %.0f MiB, peak growth %.0f MiB, after idling %.0f MiB above before",
		ms(m.elapsed), float64(m.before.rssKiB)/1024, m.growth(), m.residue())
}

// memRun floods one turn of count × size through agenticd (default config) with one
// subscriber, then lets it idle for idle and reads its RSS again. With heapFile it writes
// this process's heap profile at MESSAGE_END.
func (c *common) memRun(ctx context.Context, count, size int, idle time.Duration, heapFile string) memRun {
	dataDir, workspace, err := c.runDir("eventlog-memory")
	if err != nil {
		return memRun{err: err}
	}
	s, err := startAgenticd(ctx, c.agenticd, acpConfig(dataDir, workspace, c.agent, floodEnv(count, size, 0), nil))
	if err != nil {
		return memRun{err: err}
	}
	defer s.stop()
	t := c.floodTurn(ctx, s, workspace, count, size, nil)
	if t.err != nil {
		return memRun{err: t.err}
	}
	out := memRun{elapsed: t.elapsed, before: t.rssStart, peak: t.rssEnd}
	if heapFile != "" {
		if err := writeHeapProfile(heapFile); err != nil {
			return memRun{err: err}
		}
	}
	select {
	case <-ctx.Done():
		return memRun{err: ctx.Err()}
	case <-time.After(idle):
	}
	out.afterIdl, out.err = readProcMem(s.pid())
	return out
}

// logTurn is one flood turn through a running agenticd.
type logTurn struct {
	sessionID string
	before    uint64        // the session's last sequence before the turn
	elapsed   time.Duration // SendMessage → MESSAGE_END at the subscriber
	rssStart  procMem
	rssEnd    procMem
	err       error
}

// floodTurn creates a session, subscribes one stream, sends one message and waits for the
// reply's end, every chunk checked. around (if not nil) runs just before SendMessage and
// returns what to run at MESSAGE_END.
func (c *common) floodTurn(ctx context.Context, s *server, workspace string, count, size int, around func() (func() error, error)) logTurn {
	var t logTurn
	created, err := s.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return logTurn{err: fmt.Errorf("CreateSession: %w", err)}
	}
	t.sessionID = created.GetSession().GetSessionId()
	got, err := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: t.sessionID})
	if err != nil {
		return logTurn{err: fmt.Errorf("GetSession: %w", err)}
	}
	t.before = got.GetSession().GetLastSequence()
	r := &subResult{lastSeq: t.before, check: newChunkCheck(size, count)}
	registered := make(chan struct{})
	followed := make(chan error, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		followed <- followTurn(sctx, s.client, &pb.SubscribeRequest{SessionIds: []string{t.sessionID}}, r, func() { close(registered) })
	}()
	<-registered
	var atEnd func() error
	if around != nil {
		if atEnd, err = around(); err != nil {
			return logTurn{err: err}
		}
	}
	pid := s.pid()
	_ = resetPeakRSS(pid)
	t.rssStart, _ = readProcMem(pid)
	start := time.Now()
	if _, err := s.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: t.sessionID, Content: textContent("go")}); err != nil {
		return logTurn{err: fmt.Errorf("SendMessage: %w", err)}
	}
	if err := <-followed; err != nil {
		return logTurn{err: err}
	}
	t.elapsed = r.end.Sub(start)
	t.rssEnd, _ = readProcMem(pid)
	if atEnd != nil {
		if err := atEnd(); err != nil {
			return logTurn{err: err}
		}
	}
	if err := r.check.intact(); err != nil {
		return logTurn{err: err}
	}
	return t
}

// mibOf is a byte count in MiB.
func mibOf(b int64) float64 { return float64(b) / (1 << 20) }

// eventLogRows renders the runs' figures; a figure that was not run (no runs) has no rows.
func eventLogRows(section string, count, bigCount, ring int, idle time.Duration, costs []logCost, resumes []resumeRun, mems []memRun) []Row {
	cmd := commandLine()
	label := fmt.Sprintf("%s × 64 B", thousands(count))
	var rows []Row
	if len(costs) > 0 {
		rows = append(rows, logCostRows(section, cmd, label, costs)...)
	}
	if len(resumes) > 0 {
		rows = append(rows, resumeRows(section, cmd, label, ring, resumes)...)
	}
	if len(mems) > 0 {
		rows = append(rows, memoryRows(section, cmd, bigCount, idle, mems)...)
	}
	return rows
}

// logCostRows renders the log cost runs' figures.
func logCostRows(section, cmd, label string, costs []logCost) []Row {
	var rows []Row
	var rates, perEvent, sizes, datas []float64
	var fails []string
	for _, l := range costs {
		if l.err != nil {
			fails = append(fails, oneLine(l.err.Error()))
			continue
		}
		rates = append(rates, float64(l.commits)/l.elapsed.Seconds())
		if l.events > 0 {
			perEvent = append(perEvent, float64(l.events)/float64(l.commits))
			sizes = append(sizes, mibOf(l.logBytes)*1e5/float64(l.events))
			datas = append(datas, mibOf(l.data)*1e5/float64(l.events))
		}
	}
	runs := fmt.Sprintf("%d of %d intact", len(rates), len(costs))
	if len(rates) == 0 {
		rows = append(rows, Row{Section: section, Figure: "SQLite write transactions/s during a " + label + " flood", Value: "no intact run",
			Met: "n/a", Runs: runs, Command: cmd, Notes: failNotes(fails)})
	} else {
		rows = append(rows, Row{Section: section, Figure: "SQLite write transactions/s during a " + label + " flood (default config)",
			Value: fmt.Sprintf("%.0f/s", median(rates)), Runs: runs, Command: cmd,
			Notes: fmt.Sprintf("every commit to the database file (WAL commit frames), the log's batches and the transcript's checkpoints alike, SendMessage → MESSAGE_END; "+
				"%.0f logged events per commit (median)", median(perEvent))})
		size := fmt.Sprintf("%.1f MiB", median(sizes))
		if len(sizes) == 0 {
			size = "no event was logged"
		}
		rows = append(rows, Row{Section: section, Figure: "event log size per 100k events, 64 B chunks",
			Value: size, Runs: runs, Command: cmd,
			Notes: fmt.Sprintf("pages the event_log table and its indexes take (freed by deleting every row after the run); the encoded events alone are %.1f MiB", median(datas))})
	}
	return rows
}

// resumeRows renders the resume runs' figure.
func resumeRows(section, cmd, label string, ring int, resumes []resumeRun) []Row {
	var rows []Row
	var resumeMs, resumeEvents, resumeChunks []float64
	var fails []string
	for _, r := range resumes {
		if r.err != nil {
			fails = append(fails, oneLine(r.err.Error()))
			continue
		}
		resumeMs = append(resumeMs, ms(r.elapsed))
		resumeEvents = append(resumeEvents, float64(r.events))
		resumeChunks = append(resumeChunks, float64(r.chunks))
	}
	runs := fmt.Sprintf("%d of %d intact", len(resumeMs), len(resumes))
	resumeFigure := fmt.Sprintf("resume of a %s turn from the log (event_buffer %d, so the ring holds only its end)", label, ring)
	if len(resumeMs) == 0 {
		rows = append(rows, Row{Section: section, Figure: resumeFigure, Value: "no intact run", Met: "n/a", Runs: runs, Command: cmd, Notes: failNotes(fails)})
	} else {
		rows = append(rows, Row{Section: section, Figure: resumeFigure,
			Value: fmt.Sprintf("%.0f ms (%s chunks/s)", median(resumeMs), si(median(resumeChunks)/median(resumeMs)*1000)), Runs: runs, Command: cmd,
			Notes: fmt.Sprintf("Subscribe(after_sequence = before the turn) → its MESSAGE_END, every chunk checked in order; %.0f gRPC events carried the %.0f chunks (the deltas waiting together merged)", median(resumeEvents), median(resumeChunks))})
	}
	return rows
}

// memoryRows renders the memory runs' figures.
func memoryRows(section, cmd string, bigCount int, idle time.Duration, mems []memRun) []Row {
	var rows []Row
	var growth, residue, before []float64
	var fails []string
	for _, m := range mems {
		if m.err != nil {
			fails = append(fails, oneLine(m.err.Error()))
			continue
		}
		growth = append(growth, m.growth())
		residue = append(residue, m.residue())
		before = append(before, float64(m.before.rssKiB)/1024)
	}
	runs := fmt.Sprintf("%d of %d intact", len(growth), len(mems))
	budget := mibOf(daemon.DefaultEventBufferBytes)
	bigLabel := fmt.Sprintf("%s × 1 KiB", thousands(bigCount))
	if len(growth) == 0 {
		rows = append(rows, Row{Section: section, Figure: "agenticd RSS through a " + bigLabel + " flood", Value: "no intact run", Met: "n/a",
			Runs: runs, Command: cmd, Notes: failNotes(fails)})
		return rows
	}
	rows = append(rows, Row{Section: section, Figure: "agenticd peak RSS growth during a " + bigLabel + " flood, 1 subscriber",
		Target: fmt.Sprintf("≤ ring byte budget + 32 MiB (%.0f MiB)", budget+32),
		Value:  fmt.Sprintf("%.0f MiB", median(growth)), Met: metStr(median(growth) <= budget+32), Runs: runs, Command: cmd,
		Notes: fmt.Sprintf("peak RSS during the turn (VmHWM reset at SendMessage) − RSS at SendMessage (%.0f MiB); ring byte budget = event_buffer_bytes default %.0f MiB", median(before), budget)})
	idleLabel := "an idle minute"
	if idle != time.Minute {
		idleLabel = "idling " + idle.String()
	}
	rows = append(rows, Row{Section: section, Figure: "agenticd RSS after " + idleLabel + ", after the " + bigLabel + " flood",
		Target: "≤ RSS before the flood + 32 MiB",
		Value:  fmt.Sprintf("%+.0f MiB vs. before", median(residue)), Met: metStr(median(residue) <= 32), Runs: runs, Command: cmd,
		Notes: "RSS (VmRSS) after the turn ended and the server idled, minus RSS at SendMessage"})
	return rows
}

// thousands writes n with commas: 100,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeHeapProfile writes this process's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

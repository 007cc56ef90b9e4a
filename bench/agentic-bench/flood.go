package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// baselineRuns collects one baseline client's runs of a figure.
type baselineRuns struct {
	name    string
	total   int
	elapsed []float64 // seconds, intact runs only
	p50     []float64 // ms
	p99     []float64
	fails   []string
	// cutRates are chunks/s of runs the connection broke in (the bare SDK's queue
	// overflow): chunks handled in order before the break over the time to it.
	cutRates   []float64
	cutHandled []int
}

func (b *baselineRuns) add(r turnResult) {
	b.total++
	if err := r.intactErr(); err != nil {
		b.fails = append(b.fails, oneLine(err.Error()))
		if r.err != nil && r.handledBeforeBreak > 0 && r.elapsed > 0 {
			b.cutRates = append(b.cutRates, float64(r.handledBeforeBreak)/r.elapsed.Seconds())
			b.cutHandled = append(b.cutHandled, r.handledBeforeBreak)
		}
		return
	}
	b.elapsed = append(b.elapsed, r.elapsed.Seconds())
	if r.check != nil {
		p50, p99 := r.check.lat.p50p99()
		b.p50 = append(b.p50, ms(p50))
		b.p99 = append(b.p99, ms(p99))
	}
}

func (b *baselineRuns) intact() string {
	return fmt.Sprintf("%s %d/%d intact", b.name, len(b.elapsed), b.total)
}

// last describes the latest intact run, for progress lines.
func (b *baselineRuns) last() string {
	if len(b.elapsed) == 0 {
		return b.name + " -"
	}
	s := fmt.Sprintf("%s %.0f ms", b.name, b.elapsed[len(b.elapsed)-1]*1000)
	if len(b.p50) > 0 {
		s += fmt.Sprintf(" (p50 %.2f p99 %.2f ms)", b.p50[len(b.p50)-1], b.p99[len(b.p99)-1])
	}
	return s
}

// serverRuns collects the runs through agenticd, or through the relay when name says so.
type serverRuns struct {
	name       string // "" is agenticd
	total      int
	slowest    []float64 // seconds to MESSAGE_END at the slowest subscriber, intact runs
	fastest    []float64
	p50, p99   []float64 // ms, over all subscribers' chunks
	peakMiB    []float64
	growthMiB  []float64
	fails      []string
	errorEvent []string
	resumes    []float64 // per run, summed over subscribers
}

func (a *serverRuns) add(t *grpcTurn) {
	a.total++
	resumes := 0
	for _, s := range t.subs {
		a.errorEvent = append(a.errorEvent, s.errors...)
		resumes += s.resumes
	}
	a.resumes = append(a.resumes, float64(resumes))
	if err := t.intactErr(); err != nil {
		a.fails = append(a.fails, oneLine(err.Error()))
		return
	}
	var slowest, fastest time.Duration
	var all latencies
	for i, s := range t.subs {
		e := t.elapsed(i)
		if i == 0 || e > slowest {
			slowest = e
		}
		if i == 0 || e < fastest {
			fastest = e
		}
		if s.check != nil {
			all = append(all, s.check.lat...)
		}
	}
	a.slowest = append(a.slowest, slowest.Seconds())
	a.fastest = append(a.fastest, fastest.Seconds())
	if len(all) > 0 {
		p50, p99 := all.p50p99()
		a.p50 = append(a.p50, ms(p50))
		a.p99 = append(a.p99, ms(p99))
	}
	if t.rssEnd.hwmKiB > 0 {
		a.peakMiB = append(a.peakMiB, float64(t.rssEnd.hwmKiB)/1024)
		a.growthMiB = append(a.growthMiB, float64(t.rssEnd.hwmKiB-t.rssStart.rssKiB)/1024)
	}
}

func (a *serverRuns) last() string {
	name := cmp.Or(a.name, "agenticd")
	if len(a.slowest) == 0 {
		return name + " -"
	}
	s := fmt.Sprintf("%s %.0f ms", name, a.slowest[len(a.slowest)-1]*1000)
	if len(a.p50) > 0 {
		s += fmt.Sprintf(" (p50 %.2f p99 %.2f ms)", a.p50[len(a.p50)-1], a.p99[len(a.p99)-1])
	}
	return s
}

func (a *serverRuns) intact() string {
	return fmt.Sprintf("%s %d/%d intact", cmp.Or(a.name, "agenticd"), len(a.slowest), a.total)
}

func failNotes(parts ...[]string) string {
	var notes []string
	for _, p := range parts {
		for _, f := range p {
			if !slices.Contains(notes, f) {
				notes = append(notes, f)
			}
		}
	}
	if len(notes) > 3 {
		notes = append(notes[:3], fmt.Sprintf("and %d more", len(notes)-3))
	}
	return strings.Join(notes, "; ")
}

func floodCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	c.registerUnmerged(fs)
	count := fs.Int("count", 100_000, "chunks per turn")
	size := fs.Int("size", 64, "bytes per chunk")
	subs := fs.Int("subs", 1, "gRPC subscribers on the session")
	baselines := fs.Bool("baselines", true, "also run the raw reader and the bare SDK client")
	withRelay := fs.Bool("relay", true, "with several subscribers, also run the plain gRPC relay (raw reader, waits for a subscriber a queue behind; see relay.go)")
	var tel floodTelemetry
	fs.BoolVar(&tel.metrics, "metrics", false, "serve agenticd's metrics (metrics.listen) and scrape them every second of each run")
	fs.BoolVar(&tel.tracing, "tracing", false, "trace agenticd (OTLP over HTTP to a sink in this process that reads and discards the spans)")
	fs.Parse(args)
	stopSink, err := tel.start()
	if err != nil {
		return err
	}
	defer stopSink()
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "ACP flood" + tel.label()
	what := fmt.Sprintf("%d × %d B chunks, %d subscriber(s)", *count, *size, *subs)
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvailable(section, what, "", err))
	}
	env := floodEnv(*count, *size, 0)
	newCheck := func() *chunkCheck { return newChunkCheck(*size, *count) }
	raw := &baselineRuns{name: "raw reader"}
	bare := &baselineRuns{name: "bare SDK"}
	var through serverRuns
	var relay *serverRuns
	if *withRelay && *subs > 1 {
		relay = &serverRuns{name: "relay"}
	}
	spec := agentSpec{bin: c.agent, env: env}
	for run := 0; run < c.runs; run++ {
		if *baselines {
			_, ws, err := c.runDir("raw")
			if err != nil {
				return err
			}
			raw.add(rawTurn(ctx, spec, ws, newCheck()))
			bare.add(sdkTurn(ctx, spec, ws, newCheck()))
		}
		through.add(tel.run(ctx, &c, env, *subs, newCheck))
		progress := []string{raw.last(), bare.last(), through.last()}
		if relay != nil {
			relay.add(c.relayRun(ctx, spec, true, *subs, newCheck))
			progress = append(progress, relay.last())
		}
		fmt.Printf("run %d: %s\n", run+1, strings.Join(progress, "; "))
	}
	rows := floodRows(section, *count, *size, *subs, c.layout(*subs), c.unmerged, raw, bare, &through, relay)
	if !*baselines {
		rows = withoutBaselineTargets(rows)
	}
	if c.unmerged {
		// The targets are for what a client gets by default; this run shows what the
		// fan-out costs per gRPC event.
		for i := range rows {
			if strings.Contains(rows[i].Target, "bare SDK") || strings.Contains(rows[i].Target, "raw reader") {
				rows[i].Target, rows[i].Met = "", ""
			}
		}
	}
	return emit(c.results, rows...)
}

// withoutBaselineTargets drops the targets measured against the raw reader or the bare
// SDK from rows of a run without them: such a row is read against the same row of the
// run with them (the metrics and tracing rows against the plain flood's).
func withoutBaselineTargets(rows []Row) []Row {
	for i, r := range rows {
		if strings.Contains(r.Target, "raw reader") || strings.Contains(r.Target, "bare SDK") {
			rows[i].Target, rows[i].Met = "", ""
			rows[i].Ratio = "no baselines in this run: compare with the same row of the run without metrics and tracing"
		}
	}
	return rows
}

// floodRows renders a flood's rows; relay is nil when the relay did not run.
func floodRows(section string, count, size, subs int, layout string, unmerged bool, raw, bare *baselineRuns, a, relay *serverRuns) []Row {
	intact := []string{a.intact(), raw.intact(), bare.intact()}
	notes := failNotes(a.fails, raw.fails, bare.fails)
	if relay != nil {
		intact = append(intact, relay.intact())
		notes = failNotes(a.fails, raw.fails, bare.fails, relay.fails)
	}
	runs := strings.Join(intact, ", ")
	if r := median(a.resumes); r > 0 {
		notes = strings.TrimPrefix(notes+fmt.Sprintf("; subscribers overflowed their queue and resumed with after_sequence %.0f times per run (median, all subscribers)", r), "; ")
	}
	if len(a.errorEvent) > 0 {
		notes = strings.TrimPrefix(notes+"; ERROR events: "+failNotes(a.errorEvent), "; ")
	}
	cmd := commandLine()
	label := fmt.Sprintf("%d × %s chunks", count, sizeLabel(size))
	if len(a.slowest) == 0 {
		return []Row{{Section: section, Figure: label + fmt.Sprintf(", %d subscriber(s)", subs), Value: "no intact run through agenticd",
			Met: "no", Runs: runs, Command: cmd, Notes: notes}}
	}
	evs := float64(count) / median(a.slowest)
	var rows []Row
	rawEvs := 0.0
	if len(raw.elapsed) > 0 {
		rawEvs = float64(count) / median(raw.elapsed)
	}
	// The bare SDK's rate is the median over every run that says how fast it read: an
	// intact run's, and a broken run's until the break (it handled every chunk up to
	// there in order, as fast as it could). Intact runs alone would be the fast ones,
	// since a run survives only when its handler keeps up. With no such run at all the
	// raw reader stands in.
	bareRates := slices.Clone(bare.cutRates)
	for _, e := range bare.elapsed {
		bareRates = append(bareRates, float64(count)/e)
	}
	ratioToBare := func(v float64) (string, float64) {
		rawPart := ""
		if rawEvs > 0 {
			rawPart = fmt.Sprintf("; %.2f × raw reader (%s ev/s)", v/rawEvs, si(rawEvs))
		}
		switch {
		case len(bareRates) > 0:
			bareEvs := median(bareRates)
			r := v / bareEvs
			how := fmt.Sprintf("%d intact", len(bare.elapsed))
			if len(bare.cutRates) > 0 {
				how += fmt.Sprintf(", %d until its connection broke (after %s chunks)", len(bare.cutRates), joinInts(bare.cutHandled))
			}
			return fmt.Sprintf("%.2f × bare SDK (%s ev/s, median of %d run(s): %s)", r, si(bareEvs), len(bareRates), how) + rawPart, r
		case rawEvs > 0:
			r := v / rawEvs
			return fmt.Sprintf("bare SDK: no run to measure; %.2f × raw reader (%s ev/s), standing in for it", r, si(rawEvs)), r
		}
		return "bare SDK: no run to measure", 0
	}
	if subs == 1 {
		ratio, r := ratioToBare(evs)
		row := Row{Section: section, Figure: "events/s to 1 gRPC subscriber, " + label, Value: si(evs) + " ev/s",
			Ratio: ratio, Runs: runs, Command: cmd, Notes: notes}
		if size == 64 {
			row.Target, row.Met = "≥ 0.8 × bare SDK", metStr(r >= 0.8)
		}
		rows = append(rows, row)
		timeRow := Row{Section: section, Figure: "SendMessage → MESSAGE_END, " + label,
			Value: fmt.Sprintf("%.0f ms", median(a.slowest)*1000), Runs: runs, Command: cmd}
		var parts []string
		rawRatio := 0.0
		if len(raw.elapsed) > 0 {
			rawRatio = median(a.slowest) / median(raw.elapsed)
			parts = append(parts, fmt.Sprintf("%.2f × raw reader (%.0f ms)", rawRatio, median(raw.elapsed)*1000))
		} else {
			parts = append(parts, "raw reader: no intact run")
		}
		if len(bare.elapsed) > 0 {
			parts = append(parts, fmt.Sprintf("%.2f × bare SDK (%.0f ms, %d intact)", median(a.slowest)/median(bare.elapsed), median(bare.elapsed)*1000, len(bare.elapsed)))
		} else {
			parts = append(parts, "bare SDK: no intact run")
		}
		timeRow.Ratio = strings.Join(parts, "; ")
		// A 64 B flood is where per-event overhead shows most: batching the events that
		// wait for a subscriber keeps agenticd within 10 % of reading the agent directly.
		limit := map[int]float64{64: 1.1, 1024: 1.5}[size]
		if limit > 0 {
			timeRow.Target = fmt.Sprintf("≤ %.1f × raw reader", limit)
			timeRow.Met = metStr(rawRatio > 0 && rawRatio <= limit)
		}
		rows = append(rows, timeRow)
		intactRow := Row{Section: section, Figure: "intact runs through agenticd, " + label,
			Value: fmt.Sprintf("%d of %d", len(a.slowest), a.total), Target: fmt.Sprintf("%d of %d", a.total, a.total),
			Met: metStr(len(a.slowest) == a.total), Runs: runs, Command: cmd}
		rows = append(rows, intactRow)
	} else {
		ratio, r := ratioToBare(evs)
		if relay != nil && len(relay.slowest) > 0 {
			relayEvs := float64(count) / median(relay.slowest)
			ratio += fmt.Sprintf("; plain gRPC relay (raw reader, waits for the slowest subscriber, one event per chunk) %s ev/s, agenticd %.2f × relay", si(relayEvs), evs/relayEvs)
			if !unmerged {
				ratio += " (agenticd merging the deltas that wait)"
			}
		}
		rows = append(rows, Row{Section: section, Figure: fmt.Sprintf("per-subscriber events/s, %d subscribers on one session%s, %s (slowest subscriber)", subs, layout, label),
			Value: si(evs) + " ev/s", Ratio: ratio, Target: "≥ 0.8 × bare SDK", Met: metStr(r >= 0.8),
			Runs: runs, Command: cmd, Notes: strings.TrimPrefix(notes+fmt.Sprintf("; fastest subscriber %s ev/s", si(float64(count)/median(a.fastest))), "; ")})
	}
	if len(a.p50) > 0 {
		lat := Row{Section: section, Figure: fmt.Sprintf("chunk latency agent write → receive, unpaced, %s, %d subscriber(s)%s", label, subs, layout),
			Value: fmt.Sprintf("p50 %.2f ms / p99 %.2f ms", median(a.p50), median(a.p99)), Runs: runs, Command: cmd}
		var parts []string
		for _, b := range []*baselineRuns{raw, bare} {
			if len(b.p50) > 0 {
				parts = append(parts, fmt.Sprintf("%s p50 %.2f / p99 %.2f ms", b.name, median(b.p50), median(b.p99)))
			}
		}
		lat.Ratio = strings.Join(parts, "; ")
		lat.Notes = "an unpaced flood queues at every stage: this is mostly queueing time, not per-event cost"
		rows = append(rows, lat)
	}
	if len(a.peakMiB) > 0 {
		mem := Row{Section: section, Figure: fmt.Sprintf("agenticd peak RSS during the turn, %s, %d subscriber(s)%s", label, subs, layout),
			Value: fmt.Sprintf("peak %.0f MiB, growth %.0f MiB", median(a.peakMiB), median(a.growthMiB)), Runs: runs, Command: cmd,
			Notes: "growth = peak RSS during the turn (VmHWM reset at SendMessage) − RSS at SendMessage"}
		if size == 1024 && subs == 1 {
			mem.Target, mem.Met = "growth < 100 MiB", metStr(median(a.growthMiB) < 100)
		}
		rows = append(rows, mem)
	}
	return rows
}

func sizeLabel(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%d KiB", size/1024)
	}
	return fmt.Sprintf("%d B", size)
}

// si formats a rate with a k/M suffix.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// floodTelemetry turns agenticd's metrics and traces on for a flood, to show what they
// cost: with -metrics a scraper reads /metrics every second of a run (harsher than the
// usual 15 s or more), with -tracing spans go out over OTLP/HTTP, batched as the SDK
// does by default, to a sink in this process that reads every request whole.
type floodTelemetry struct {
	metrics, tracing bool
	scrapes          atomic.Int64
	sinkRequests     atomic.Int64
	sinkBytes        atomic.Int64
}

func (t *floodTelemetry) label() string {
	switch {
	case t.metrics && t.tracing:
		return " (metrics and tracing on)"
	case t.metrics:
		return " (metrics on)"
	case t.tracing:
		return " (tracing on)"
	}
	return ""
}

// start starts the trace sink and points the OTEL_* variables at it (agenticd reads them
// in process and inherits them as a process).
func (t *floodTelemetry) start() (stop func(), err error) {
	if !t.tracing {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sink := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		t.sinkRequests.Add(1)
		t.sinkBytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = sink.Serve(lis) }()
	os.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+lis.Addr().String()+"/v1/traces")
	os.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	os.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	return func() {
		_ = sink.Close()
		fmt.Printf("trace sink: %d export requests, %d bytes\n", t.sinkRequests.Load(), t.sinkBytes.Load())
	}, nil
}

// run is agenticdRun with the metrics listener on when asked, scraped every second until
// the run's server stops.
func (t *floodTelemetry) run(ctx context.Context, c *common, env map[string]string, subs int, newCheck func() *chunkCheck) *grpcTurn {
	if !t.metrics {
		return c.agenticdRun(ctx, "flood", env, nil, subs, newCheck)
	}
	done := make(chan struct{})
	turn := c.serverRun(ctx, "flood", subs, newCheck, func(dataDir, workspace string) (*server, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cfg := acpConfig(dataDir, workspace, c.agent, env, nil)
		cfg.Metrics.Listen = addr
		s, err := startAgenticd(ctx, c.agenticd, cfg)
		if err == nil {
			go t.scrape(addr, done)
		}
		return s, err
	})
	close(done)
	fmt.Printf("metrics: %d scrapes so far\n", t.scrapes.Load())
	return turn
}

func (t *floodTelemetry) scrape(addr string, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.scrapes.Add(1)
	}
}

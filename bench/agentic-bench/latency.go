package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// latencyCmd: the test agent paces stamped chunks at -rate per second; the bare SDK
// client and agenticd's subscribers timestamp each chunk on receipt. The added latency
// is agenticd's percentile minus the bare client's, run by run.
func latencyCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	c.registerUnmerged(fs)
	rate := fs.Float64("rate", 1000, "chunks per second")
	seconds := fs.Float64("seconds", 5, "length of each paced turn")
	size := fs.Int("size", 64, "bytes per chunk")
	subs := fs.Int("subs", 16, "gRPC subscribers on the session")
	withRelay := fs.Bool("relay", true, "also run the plain gRPC relay (raw reader, drops a subscriber a queue behind; see relay.go)")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "ACP latency"
	count := int(*rate * *seconds)
	figure := fmt.Sprintf("added latency agent write → gRPC receive, p50 / p99, %g ev/s, %d subscribers%s", *rate, *subs, c.layout(*subs))
	target := "≤ 0.2 ms / ≤ 1 ms"
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvailable(section, figure, target, err))
	}
	env := floodEnv(count, *size, *rate)
	newCheck := func() *chunkCheck { return newChunkCheck(*size, count) }
	bare := &baselineRuns{name: "bare SDK"}
	raw := &baselineRuns{name: "raw reader"}
	var through serverRuns
	var relay *serverRuns
	if *withRelay {
		relay = &serverRuns{name: "relay"}
	}
	var added50, added99, own50 []float64
	for run := 0; run < c.runs; run++ {
		_, ws, err := c.runDir("paced")
		if err != nil {
			return err
		}
		spec := agentSpec{bin: c.agent, env: env}
		raw.add(rawTurn(ctx, spec, ws, newCheck()))
		b := sdkTurn(ctx, spec, ws, newCheck())
		bare.add(b)
		before := len(through.p50)
		through.add(c.agenticdRun(ctx, "paced", env, nil, *subs, newCheck))
		if b.intactErr() == nil && len(through.p50) > before {
			p50, p99 := b.check.lat.p50p99()
			added50 = append(added50, through.p50[before]-ms(p50))
			added99 = append(added99, through.p99[before]-ms(p99))
		}
		progress := []string{bare.intact(), through.intact()}
		if relay != nil {
			relayBefore := len(relay.p50)
			relay.add(c.relayRun(ctx, spec, false, *subs, newCheck))
			if len(through.p50) > before && len(relay.p50) > relayBefore {
				own50 = append(own50, through.p50[before]-relay.p50[relayBefore])
			}
			progress = append(progress, relay.intact())
		}
		fmt.Printf("run %d: %s\n", run+1, strings.Join(progress, ", "))
	}
	intact := []string{through.intact(), bare.intact(), raw.intact()}
	notes := failNotes(through.fails, bare.fails, raw.fails)
	if relay != nil {
		intact = append(intact, relay.intact())
		notes = failNotes(through.fails, bare.fails, raw.fails, relay.fails)
	}
	runs := strings.Join(intact, ", ")
	if len(added50) == 0 {
		return emit(c.results, Row{Section: section, Figure: figure, Target: target, Value: "no run where both agenticd and the bare SDK client were intact",
			Met: "no", Runs: runs, Command: commandLine(), Notes: notes})
	}
	a50, a99 := median(added50), median(added99)
	var parts []string
	parts = append(parts, fmt.Sprintf("agenticd p50 %.3f / p99 %.3f ms", median(through.p50), median(through.p99)))
	for _, b := range []*baselineRuns{bare, raw} {
		if len(b.p50) > 0 {
			parts = append(parts, fmt.Sprintf("%s p50 %.3f / p99 %.3f ms", b.name, median(b.p50), median(b.p99)))
		}
	}
	if relay != nil && len(relay.p50) > 0 {
		part := fmt.Sprintf("plain gRPC relay p50 %.3f / p99 %.3f ms", median(relay.p50), median(relay.p99))
		if len(own50) > 0 {
			part += fmt.Sprintf(" (agenticd − relay: %+.3f ms p50)", median(own50))
		}
		parts = append(parts, part)
	}
	return emit(c.results, Row{Section: section, Figure: figure, Target: target,
		Value: fmt.Sprintf("+%.3f ms / +%.3f ms", a50, a99), Ratio: strings.Join(parts, "; "),
		Met: metStr(a50 <= 0.2 && a99 <= 1), Runs: runs, Command: commandLine(),
		Notes: strings.TrimPrefix(notes+"; latencies pooled over all subscribers' chunks; added = agenticd − bare SDK client, per run, median of runs", "; ")})
}

// toolsCmd: bursts of tool calls (tool_call, in_progress, completed with content) from a
// script, through agenticd against the two baselines.
func toolsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tools", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	calls := fs.Int("calls", 2000, "tool calls per turn (3 updates each)")
	baselines := fs.Bool("baselines", true, "also run the raw reader and the bare SDK client")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	section := "ACP tool calls"
	figure := fmt.Sprintf("tool-call updates/s to 1 gRPC subscriber, %d calls × 3 updates", *calls)
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvailable(section, figure, "", err))
	}
	script := filepath.Join(c.work, "tool-burst.json")
	if err := writeToolScript(script, *calls); err != nil {
		return err
	}
	spec := agentSpec{bin: c.agent, args: []string{"-script", script}}
	updates := 3 * *calls
	raw := &baselineRuns{name: "raw reader"}
	bare := &baselineRuns{name: "bare SDK"}
	var through serverRuns
	for run := 0; run < c.runs; run++ {
		_, ws, err := c.runDir("tools")
		if err != nil {
			return err
		}
		for _, b := range []*baselineRuns{raw, bare} {
			if !*baselines {
				break
			}
			turn := rawTurn
			if b == bare {
				turn = sdkTurn
			}
			r := turn(ctx, spec, ws, nil)
			if r.err == nil && r.updates != int64(updates) {
				r.err = fmt.Errorf("%d of %d updates arrived", r.updates, updates)
			}
			b.add(r)
		}
		t := c.agenticdRun(ctx, "tools", nil, spec.args, 1, nil)
		if t.err == nil && len(t.subs) == 1 && t.subs[0].err == nil {
			if s := t.subs[0]; s.toolStarts != *calls || s.toolEnds != *calls {
				s.err = fmt.Errorf("%d TOOL_START and %d TOOL_END of %d calls arrived", s.toolStarts, s.toolEnds, *calls)
			}
		}
		through.add(t)
		fmt.Printf("run %d: %s, %s, %s\n", run+1, raw.intact(), bare.intact(), through.intact())
	}
	runs := strings.Join([]string{through.intact(), raw.intact(), bare.intact()}, ", ")
	notes := failNotes(through.fails, raw.fails, bare.fails)
	if len(through.slowest) == 0 {
		return emit(c.results, Row{Section: section, Figure: figure, Value: "no intact run through agenticd", Runs: runs, Command: commandLine(), Notes: notes})
	}
	v := float64(updates) / median(through.slowest)
	var parts []string
	for _, b := range []*baselineRuns{bare, raw} {
		if len(b.elapsed) > 0 {
			bv := float64(updates) / median(b.elapsed)
			parts = append(parts, fmt.Sprintf("%.2f × %s (%s/s)", v/bv, b.name, si(bv)))
		}
	}
	return emit(c.results, Row{Section: section, Figure: figure, Value: si(v) + " updates/s", Ratio: strings.Join(parts, "; "),
		Runs: runs, Command: commandLine(), Notes: notes})
}

// writeToolScript writes a test agent script whose one turn is calls tool calls, each a
// tool_call, an in_progress update and a completed update with text content.
func writeToolScript(path string, calls int) error {
	type step struct {
		Update json.RawMessage `json:"update"`
	}
	steps := make([]step, 0, 3*calls)
	for i := 0; i < calls; i++ {
		id := fmt.Sprintf("call-%d", i)
		steps = append(steps,
			step{json.RawMessage(fmt.Sprintf(`{"sessionUpdate":"tool_call","toolCallId":%q,"title":"Read f%d.txt","kind":"read","status":"pending","locations":[{"path":"{cwd}/f%d.txt"}],"rawInput":{"path":"{cwd}/f%d.txt"}}`, id, i, i, i))},
			step{json.RawMessage(fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":"in_progress"}`, id))},
			step{json.RawMessage(fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":"completed","content":[{"type":"content","content":{"type":"text","text":"%s"}}]}`, id, strings.Repeat("y", 64)))},
		)
	}
	b, err := json.Marshal(map[string]any{"turns": [][]step{steps}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

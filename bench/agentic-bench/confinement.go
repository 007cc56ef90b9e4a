package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

const confinementSection = "Confinement"

// confinementTurnScript is the test agent's script for the turns measured here: a short
// answer, the smallest turn that still goes agent → agenticd → subscriber.
const confinementTurnScript = `{"turns": [[{"text": "ok"}]]}`

// confinementCmd: what confining agent processes (sandbox/confine) costs, measured on
// bin/agenticd processes with confinement: off and with confinement: on. Agent starts
// (the first CreateSession in a new workspace) and small turns on a warm agent alternate
// between servers running side by side, so that the load of this shared machine falls
// on all alike; a second unconfined server in the turns shows what two identical servers
// differ by. Memory is read from /proc with each mode's server running alone.
func confinementCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("confinement", flag.ExitOnError)
	var c common
	c.register(fs, 1)
	starts := fs.Int("starts", 10, "agent starts per mode and run (each the first session in a new workspace)")
	turns := fs.Int("turns", 300, "turns per mode and run on a warm agent")
	workspaces := fs.Int("workspaces", 8, "workspaces with an open session for the memory per workspace (at least 2)")
	fs.Parse(args)
	if *workspaces < 2 || *starts < 1 || *turns < 1 {
		return fmt.Errorf("-workspaces must be at least 2, -starts and -turns at least 1 (got %d, %d, %d)", *workspaces, *starts, *turns)
	}
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	b := confinementBench{c: &c, starts: *starts, turns: *turns, workspaces: *workspaces}
	if c.agenticd == "" {
		return emit(c.results, b.unavailable(errors.New("measured on bin/agenticd processes (their memory and their children); drop -inprocess"))...)
	}
	if err := c.checkAgent(); err != nil {
		return emit(c.results, b.unavailable(err)...)
	}
	script := filepath.Join(c.work, "agent", "turn.json")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(script, []byte(confinementTurnScript), 0o644); err != nil {
		return err
	}
	// An absolute file argument is part of the agent's installation: the confined agent
	// may read it.
	b.agentArgs = []string{"-script", script}
	var fails []string
	for run := 0; run < c.runs; run++ {
		if err := b.run(ctx); err != nil {
			fails = append(fails, oneLine(err.Error()))
			fmt.Printf("run %d: %v\n", run+1, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if b.completed == 0 {
		return emit(c.results, b.unavailable(errors.New(failNotes(fails)))...)
	}
	return emit(c.results, b.rows(fails)...)
}

// confinementBench holds the samples of all runs of the confinement subcommand.
type confinementBench struct {
	c                         *common
	starts, turns, workspaces int
	agentArgs                 []string
	completed                 int
	startOff, startOn, startD []float64 // ms; startD: on − off of each pair
	turnOff, turnOn, turnD    []float64 // ms
	// turnDControl is on − the control server, turnControl the control − off: what two
	// identical unconfined servers differ by.
	turnDControl, turnControl []float64
	oneOff, oneOn             []agentTree
	perExtraOff, perExtraOn   []float64 // KiB Pss per extra workspace
	firstOff, firstOn         []float64 // KiB Pss the first workspace added
	agenticdOff, agenticdOn   []float64 // KiB RSS of agenticd itself with all workspaces open

	startFigure, turnFigure, oneFigure, perExtraFigure, turnTarget string
}

func (b *confinementBench) figures() {
	b.startFigure = "agent start: CreateSession, first session in a new workspace → its answer"
	b.turnFigure = "small turn on a warm agent: SendMessage → MESSAGE_END"
	b.oneFigure = "memory of one agent process (its workspace's only one)"
	b.perExtraFigure = fmt.Sprintf("memory added per extra workspace (1 → %d workspaces, a session and a turn each)", b.workspaces)
	b.turnTarget = "no measurable added latency"
}

func (b *confinementBench) unavailable(err error) []Row {
	b.figures()
	var rows []Row
	for _, f := range []string{b.startFigure, b.turnFigure, b.oneFigure, b.perExtraFigure} {
		for _, mode := range []string{"off", "on"} {
			target := ""
			if f == b.turnFigure && mode == "on" {
				target = b.turnTarget
			}
			rows = append(rows, notAvailable(confinementSection, f+", confinement "+mode, target, err))
		}
	}
	return rows
}

// The servers of a run: two unconfined ones (the second is the control that shows how
// much two identical servers differ) and a confined one.
const (
	serverOff = iota
	serverControl
	serverOn
	serverCount
)

// run measures memory on each mode's server alone, then starts the three servers of a
// run and alternates agent starts and turns between them.
func (b *confinementBench) run(ctx context.Context) error {
	// One server at a time: the servers run the same binaries, and a page two processes
	// share counts half to each in Pss.
	var mem [2]memoryResult
	for i, mode := range []string{"off", "on"} {
		s, err := b.startServer(ctx, mode, mode)
		if err != nil {
			return err
		}
		mem[i], err = s.memory(ctx, b.workspaces)
		s.stop()
		if err != nil {
			return fmt.Errorf("confinement %s: memory: %w", mode, err)
		}
	}

	var servers [serverCount]*confinedServer
	for i, mode := range [serverCount]string{"off", "off", "on"} {
		name := mode
		if i == serverControl {
			name = "off-control"
		}
		s, err := b.startServer(ctx, name, mode)
		if err != nil {
			return err
		}
		defer s.stop()
		servers[i] = s
		dir, err := s.workspace("turns")
		if err != nil {
			return err
		}
		if s.warm, err = openWarmSession(ctx, s.srv.client, dir); err != nil {
			return fmt.Errorf("confinement %s: session for the turns: %w", s.name, err)
		}
	}

	// Rotate which server goes first, so that none is always the one that runs just
	// after another has made the machine busy.
	startOrder := func(i int) []int {
		if i%2 == 0 {
			return []int{serverOff, serverOn}
		}
		return []int{serverOn, serverOff}
	}
	var startMS [serverCount][]float64
	for i := 0; i < b.starts; i++ {
		for _, k := range startOrder(i) {
			d, err := servers[k].startAgent(ctx, fmt.Sprintf("start-%d", i))
			if err != nil {
				return fmt.Errorf("confinement %s: agent start %d: %w", servers[k].name, i+1, err)
			}
			startMS[k] = append(startMS[k], ms(d))
		}
	}

	const warmUp = 5
	var turnMS [serverCount][]float64
	for i := -warmUp; i < b.turns; i++ {
		for j := range serverCount {
			k := (i + warmUp + j) % serverCount
			d, err := servers[k].warm.turn(ctx)
			if err != nil {
				return fmt.Errorf("confinement %s: turn %d: %w", servers[k].name, i+warmUp+1, err)
			}
			if i >= 0 {
				turnMS[k] = append(turnMS[k], ms(d))
			}
		}
	}

	b.completed++
	b.startOff = append(b.startOff, startMS[serverOff]...)
	b.startOn = append(b.startOn, startMS[serverOn]...)
	b.startD = append(b.startD, pairedDiffs(startMS[serverOn], startMS[serverOff])...)
	b.turnOff = append(b.turnOff, turnMS[serverOff]...)
	b.turnOn = append(b.turnOn, turnMS[serverOn]...)
	b.turnD = append(b.turnD, pairedDiffs(turnMS[serverOn], turnMS[serverOff])...)
	b.turnDControl = append(b.turnDControl, pairedDiffs(turnMS[serverOn], turnMS[serverControl])...)
	b.turnControl = append(b.turnControl, pairedDiffs(turnMS[serverControl], turnMS[serverOff])...)
	b.oneOff = append(b.oneOff, mem[0].one)
	b.oneOn = append(b.oneOn, mem[1].one)
	b.perExtraOff = append(b.perExtraOff, mem[0].perExtraKiB)
	b.perExtraOn = append(b.perExtraOn, mem[1].perExtraKiB)
	b.firstOff = append(b.firstOff, mem[0].firstKiB)
	b.firstOn = append(b.firstOn, mem[1].firstKiB)
	b.agenticdOff = append(b.agenticdOff, float64(mem[0].agenticd.rssKiB))
	b.agenticdOn = append(b.agenticdOn, float64(mem[1].agenticd.rssKiB))
	fmt.Printf("run %d: start median off %.1f ms, on %.1f ms; turn median off %.3f ms, control %.3f ms, on %.3f ms; one agent Pss off %d KiB, on %d KiB (init %d); per extra workspace off %.0f KiB, on %.0f KiB\n",
		b.completed, median(startMS[serverOff]), median(startMS[serverOn]), median(turnMS[serverOff]), median(turnMS[serverControl]), median(turnMS[serverOn]),
		mem[0].one.total().pssKiB, mem[1].one.total().pssKiB, mem[1].one.init.pssKiB, mem[0].perExtraKiB, mem[1].perExtraKiB)
	return nil
}

// pairedDiffs is on[i] − off[i] for each pair.
func pairedDiffs(on, off []float64) []float64 {
	d := make([]float64, min(len(on), len(off)))
	for i := range d {
		d[i] = on[i] - off[i]
	}
	return d
}

func (b *confinementBench) rows(fails []string) []Row {
	b.figures()
	runs := func(per int) string { return fmt.Sprintf("%d/%d runs × %d", b.completed, b.c.runs, per) }
	failed := failNotes(fails)
	note := func(s string) string { return strings.TrimPrefix(failed+"; "+s, "; ") }
	var rows []Row

	how := "bin/agenticd processes with confinement: off and on run side by side and take turns start by start; the test agent runs a one-line script"
	rows = append(rows,
		Row{Section: confinementSection, Figure: b.startFigure + ", confinement off", Value: fmt.Sprintf("%.1f ms", median(b.startOff)),
			Runs: runs(b.starts), Command: commandLine(),
			Notes: note(fmt.Sprintf("middle half %s; the agent process's start, ACP initialize and session/new, and agenticd's own work; %s", iqr(b.startOff, "%.1f", " ms"), how))},
		Row{Section: confinementSection, Figure: b.startFigure + ", confinement on", Value: fmt.Sprintf("%.1f ms", median(b.startOn)),
			Ratio: pairedRatio(b.startD, median(b.startOn), median(b.startOff), "%+.1f", 1, " ms"),
			Runs:  runs(b.starts), Command: commandLine(),
			Notes: note(fmt.Sprintf("middle half %s; adds the init (a re-executed agenticd in new user, PID and mount namespaces with its own /proc, then Landlock) and a private temp dir", iqr(b.startOn, "%.1f", " ms")))},
	)

	rows = append(rows,
		Row{Section: confinementSection, Figure: b.turnFigure + ", confinement off", Value: fmt.Sprintf("%.3f ms", median(b.turnOff)),
			Runs: runs(b.turns), Command: commandLine(),
			Notes: note(fmt.Sprintf("middle half %s; one session subscribed, the agent answers \"ok\"; three servers take turns turn by turn: off, a second off (the control) and on; 5 warm-up turns each", iqr(b.turnOff, "%.3f", " ms")))},
		Row{Section: confinementSection, Figure: b.turnFigure + ", confinement on", Target: b.turnTarget, Value: fmt.Sprintf("%.3f ms", median(b.turnOn)),
			Ratio: pairedRatio(b.turnD, median(b.turnOn), median(b.turnOff), "%+.0f", 1000, " µs") + "; vs. the control " + pairedDiff(b.turnDControl, "%+.0f", 1000, " µs"),
			Met:   metStr(!addedLatencyMeasurable(b.turnD, b.turnDControl)),
			Runs:  runs(b.turns), Command: commandLine(),
			Notes: note(fmt.Sprintf("middle half %s; two unconfined servers differ by %s (control − off), the noise floor; met unless confinement is slower than both unconfined servers (both 95%% CIs of the median paired difference above 0)",
				iqr(b.turnOn, "%.3f", " ms"), pairedDiff(b.turnControl, "%+.0f", 1000, " µs")))},
	)

	oneOff, oneOn := medianTree(b.oneOff), medianTree(b.oneOn)
	firstOff, firstOn := median(b.firstOff), median(b.firstOn)
	memRuns := fmt.Sprintf("%d/%d", b.completed, b.c.runs)
	rows = append(rows,
		Row{Section: confinementSection, Figure: b.oneFigure + ", confinement off", Value: fmt.Sprintf("%s Pss", mib(oneOff.total().pssKiB)),
			Runs: memRuns, Command: commandLine(),
			Notes: note(fmt.Sprintf("RSS %s; the first workspace (its agent process and agenticd's part) added %.1f MiB Pss to agenticd and its descendants; "+
				"Pss (/proc/PID/smaps_rollup) divides a shared page among the processes that map it, RSS counts it whole; read after the session's first turn, each mode's server running alone",
				mib(oneOff.total().rssKiB), firstOff/1024))},
		Row{Section: confinementSection, Figure: b.oneFigure + ", confinement on: the agent and its init", Value: fmt.Sprintf("%s Pss (agent %s + init %s)", mib(oneOn.total().pssKiB), mib(oneOn.agent.pssKiB), mib(oneOn.init.pssKiB)),
			Ratio: fmt.Sprintf("%+.1f MiB Pss vs. off; the first workspace added %+.1f MiB vs. off", float64(oneOn.total().pssKiB-oneOff.total().pssKiB)/1024, (firstOn-firstOff)/1024),
			Runs:  memRuns, Command: commandLine(),
			Notes: note(fmt.Sprintf("RSS agent %s + init %s; the first workspace added %.1f MiB Pss to agenticd and its descendants; the init runs agenticd's binary and shares its pages with agenticd (Pss gives the init part of them); "+
				"the namespaces' kernel memory is in no figure", mib(oneOn.agent.rssKiB), mib(oneOn.init.rssKiB), firstOn/1024))},
	)
	perOff, perOn := median(b.perExtraOff), median(b.perExtraOn)
	rows = append(rows,
		Row{Section: confinementSection, Figure: b.perExtraFigure + ", confinement off", Value: fmt.Sprintf("%.1f MiB Pss", perOff/1024),
			Runs: memRuns, Command: commandLine(),
			Notes: note(fmt.Sprintf("(Pss of agenticd and all its descendants with %d workspaces − with 1) / %d: a further agent process and agenticd's part; agenticd's own RSS at the end %s",
				b.workspaces, b.workspaces-1, mib(int64(median(b.agenticdOff)))))},
		Row{Section: confinementSection, Figure: b.perExtraFigure + ", confinement on", Value: fmt.Sprintf("%.1f MiB Pss", perOn/1024),
			Ratio: fmt.Sprintf("%+.1f MiB Pss vs. off", (perOn-perOff)/1024),
			Runs:  memRuns, Command: commandLine(),
			Notes: note(fmt.Sprintf("as off, each agent with its init; agenticd's own RSS at the end %s", mib(int64(median(b.agenticdOn)))))},
	)
	return rows
}

// pairedRatio describes on against off: the median paired difference with its 95 %
// confidence interval (see pairedDiff), and the ratio of the medians.
func pairedRatio(diffs []float64, on, off float64, format string, scale float64, unit string) string {
	ratio := ""
	if off > 0 {
		ratio = fmt.Sprintf(", ×%.2f", on/off)
	}
	return pairedDiff(diffs, format, scale, unit) + ratio
}

// pairedDiff is the median of paired differences (values in ms, shown times scale in
// unit) with its 95 % confidence interval.
func pairedDiff(diffs []float64, format string, scale float64, unit string) string {
	med, lo, hi, ok := medianCI(diffs, 0.95)
	f := func(v float64) string { return fmt.Sprintf(format, v*scale) }
	ci := fmt.Sprintf("95%% CI %s … %s%s", f(lo), f(hi), unit)
	if !ok {
		ci = fmt.Sprintf("too few pairs for a 95%% CI; range %s … %s%s", f(lo), f(hi), unit)
	}
	return fmt.Sprintf("%s%s (median of %d paired differences; %s)", f(med), unit, len(diffs), ci)
}

// addedLatencyMeasurable says whether the confined server was slower than both unconfined
// ones: the 95 % CIs of both median paired differences lie above 0. Against one server
// alone a CI is not enough: two identical servers differ by a few per cent, each in its
// own way, depending on where the scheduler puts them.
func addedLatencyMeasurable(vsOff, vsControl []float64) bool {
	above := func(d []float64) bool {
		_, lo, _, ok := medianCI(d, 0.95)
		return ok && lo > 0
	}
	return above(vsOff) && above(vsControl)
}

// iqr is "p25–p75 unit" of xs (the middle half of the samples).
func iqr(xs []float64, format, unit string) string {
	if len(xs) == 0 {
		return "none"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	q := func(p float64) float64 { return s[min(int(p*float64(len(s))), len(s)-1)] }
	return fmt.Sprintf(format+"–"+format+"%s", q(0.25), q(0.75), unit)
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// medianTree is the tree with the median total Pss (the first of the two middle ones).
func medianTree(ts []agentTree) agentTree {
	if len(ts) == 0 {
		return agentTree{}
	}
	s := slices.Clone(ts)
	slices.SortFunc(s, func(a, b agentTree) int { return int(a.total().pssKiB - b.total().pssKiB) })
	return s[(len(s)-1)/2]
}

// confinedServer is one bin/agenticd of the comparison, its workspaces under root.
type confinedServer struct {
	name     string // off, on or off-control
	mode     string // the confinement setting: off or on
	srv      *server
	root     string
	agent    string         // the agent binary (absolute), to tell the agent's processes apart
	self     string         // the agenticd binary: confine's init is agenticd re-executed
	warm     *warmSession   // the session of the turn figure
	sessions []*warmSession // the memory figure's sessions, held open
}

// startServer starts agenticd with confinement: mode; name tells servers apart.
func (b *confinementBench) startServer(ctx context.Context, name, mode string) (*confinedServer, error) {
	dataDir, workspace, err := b.c.runDir("confinement-" + name)
	if err != nil {
		return nil, err
	}
	cfg := acpConfig(dataDir, workspace, b.c.agent, nil, b.agentArgs)
	cfg.Confinement = mode
	srv, err := startAgenticd(ctx, b.c.agenticd, cfg)
	if err != nil {
		return nil, fmt.Errorf("start agenticd with confinement: %s (%s): %w", mode, name, err)
	}
	self, _ := filepath.EvalSymlinks(b.c.agenticd)
	agent, _ := filepath.EvalSymlinks(b.c.agent)
	return &confinedServer{name: name, mode: mode, srv: srv, root: filepath.Dir(workspace), agent: agent, self: self}, nil
}

func (s *confinedServer) stop() {
	if s.warm != nil {
		s.warm.close()
	}
	for _, w := range s.sessions {
		w.close()
	}
	_ = s.srv.stop()
}

// workspace makes a new workspace directory under the server's root.
func (s *confinedServer) workspace(name string) (string, error) {
	dir := filepath.Join(s.root, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// startAgent times CreateSession of the first session in a new workspace (so a new agent
// process starts) and closes the session again.
func (s *confinedServer) startAgent(ctx context.Context, name string) (time.Duration, error) {
	dir, err := s.workspace(name)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	created, err := s.srv.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: dir}})
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("CreateSession: %w", err)
	}
	if _, err := s.srv.client.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: created.GetSession().GetSessionId()}); err != nil {
		return 0, fmt.Errorf("CloseSession: %w", err)
	}
	return elapsed, nil
}

// memoryResult is the memory figures of one server.
type memoryResult struct {
	one         agentTree // the agent of the first workspace, alone
	firstKiB    float64   // Pss the first workspace added to agenticd and its descendants
	perExtraKiB float64   // Pss added per further workspace
	agenticd    memUse    // agenticd itself with every workspace open
}

// memorySettle lets the processes finish what the turn started (stderr lines logged,
// buffers released) before their memory is read.
const memorySettle = 300 * time.Millisecond

// memory opens a session with one turn in a first workspace and reads its agent's memory
// and the server's total, then does the same in workspaces-1 more.
func (s *confinedServer) memory(ctx context.Context, workspaces int) (memoryResult, error) {
	var r memoryResult
	open := func(i int) error {
		dir, err := s.workspace(fmt.Sprintf("memory-%d", i))
		if err != nil {
			return err
		}
		w, err := openWarmSession(ctx, s.srv.client, dir)
		if err != nil {
			return err
		}
		s.sessions = append(s.sessions, w)
		_, err = w.turn(ctx)
		return err
	}
	trees, self, err := s.trees()
	if err != nil {
		return r, err
	}
	if len(trees) != 0 {
		return r, fmt.Errorf("agenticd has %d child processes before any session", len(trees))
	}
	empty := totalPss(self, nil)
	if err := open(1); err != nil {
		return r, err
	}
	time.Sleep(memorySettle)
	trees, self, err = s.trees()
	if err != nil {
		return r, err
	}
	if len(trees) != 1 {
		return r, fmt.Errorf("expected one agent process tree under agenticd, found %d", len(trees))
	}
	if err := s.checkConfined(trees[0]); err != nil {
		return r, err
	}
	r.one = trees[0]
	before := totalPss(self, trees)
	r.firstKiB = float64(before - empty)
	for i := 2; i <= workspaces; i++ {
		if err := open(i); err != nil {
			return r, fmt.Errorf("workspace %d: %w", i, err)
		}
	}
	time.Sleep(memorySettle)
	trees, self, err = s.trees()
	if err != nil {
		return r, err
	}
	if len(trees) != workspaces {
		return r, fmt.Errorf("expected %d agent process trees under agenticd, found %d", workspaces, len(trees))
	}
	for _, t := range trees {
		if err := s.checkConfined(t); err != nil {
			return r, err
		}
	}
	r.agenticd = self
	r.perExtraKiB = float64(totalPss(self, trees)-before) / float64(workspaces-1)
	return r, nil
}

// checkConfined makes sure the mode is what runs: an init above the agent when on, none
// when off, and the agent itself found.
func (s *confinedServer) checkConfined(t agentTree) error {
	switch {
	case t.agents == 0:
		return fmt.Errorf("no process of %s in the agent's process tree (workspace %s)", s.agent, t.workspace)
	case s.mode == "on" && t.inits != 1:
		return fmt.Errorf("confinement on, but the agent of %s runs under %d inits", t.workspace, t.inits)
	case s.mode == "off" && t.inits != 0:
		return fmt.Errorf("confinement off, but the agent of %s runs under an init", t.workspace)
	}
	return nil
}

func totalPss(self memUse, trees []agentTree) int64 {
	sum := self.pssKiB
	for _, t := range trees {
		sum += t.total().pssKiB
	}
	return sum
}

// trees reads the process trees agenticd started (one per workspace) and agenticd's own
// memory.
func (s *confinedServer) trees() ([]agentTree, memUse, error) {
	pid := s.srv.pid()
	self, err := readMemUse(pid)
	if err != nil {
		return nil, self, err
	}
	children, err := processChildren()
	if err != nil {
		return nil, self, err
	}
	var trees []agentTree
	for _, child := range children[pid] {
		t, err := readAgentTree(children, child, s.agent, s.self)
		if err != nil {
			return nil, self, err
		}
		trees = append(trees, t)
	}
	return trees, self, nil
}

// memUse is a process's memory from /proc/PID/smaps_rollup (KiB).
type memUse struct{ pssKiB, rssKiB int64 }

func (m memUse) add(o memUse) memUse { return memUse{m.pssKiB + o.pssKiB, m.rssKiB + o.rssKiB} }

func readMemUse(pid int) (memUse, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return memUse{}, err
	}
	return parseSmapsRollup(string(b))
}

// parseSmapsRollup reads the Pss and Rss lines of a smaps_rollup file.
func parseSmapsRollup(s string) (memUse, error) {
	var m memUse
	var seen int
	for _, line := range strings.Split(s, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "Pss":
			dst = &m.pssKiB
		case "Rss":
			dst = &m.rssKiB
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("smaps_rollup line %q: %w", line, err)
		}
		*dst = n
		seen++
	}
	if seen != 2 {
		return m, errors.New("smaps_rollup without Pss and Rss lines")
	}
	return m, nil
}

// agentTree is the processes agenticd started for one workspace: confine's init (when
// confined) and the agent with whatever it started.
type agentTree struct {
	workspace string // the working directory of the tree's first process
	agent     memUse // the agent binary's processes and their children
	init      memUse // confine's init; zero when unconfined
	agents    int    // processes running the agent binary
	inits     int    // processes running agenticd's binary (the init)
}

func (t agentTree) total() memUse { return t.agent.add(t.init) }

// readAgentTree reads the memory of root and its descendants, telling the init (a
// process of agenticd's binary) from the agent's processes.
func readAgentTree(children map[int][]int, root int, agentBin, agenticdBin string) (agentTree, error) {
	t := agentTree{}
	t.workspace, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", root))
	for _, pid := range append([]int{root}, descendants(children, root)...) {
		m, err := readMemUse(pid)
		if err != nil {
			return t, fmt.Errorf("memory of process %d: %w", pid, err)
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		// A binary rebuilt while it runs shows as "PATH (deleted)".
		exe = strings.TrimSuffix(exe, " (deleted)")
		switch exe {
		case agenticdBin:
			t.init = t.init.add(m)
			t.inits++
		case agentBin:
			t.agent = t.agent.add(m)
			t.agents++
		default:
			t.agent = t.agent.add(m)
		}
	}
	return t, nil
}

// processChildren maps each process to its children, from /proc/*/stat.
func processChildren() (map[int][]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		if ppid, ok := parentPID(string(b)); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	for _, c := range children {
		slices.Sort(c)
	}
	return children, nil
}

// parentPID reads the parent from a /proc/PID/stat line: "pid (comm) state ppid ...",
// where comm may itself hold spaces and parentheses.
func parentPID(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

func descendants(children map[int][]int, pid int) []int {
	var out []int
	for _, c := range children[pid] {
		out = append(out, c)
		out = append(out, descendants(children, c)...)
	}
	return out
}

// warmSession is an open session with one subscriber following its turns.
type warmSession struct {
	client pb.AgenticServiceClient
	id     string
	ends   chan messageEnd
	cancel context.CancelFunc
	done   chan struct{}
}

// messageEnd is the assistant's MESSAGE_END as the subscriber saw it, or the stream's end.
type messageEnd struct {
	id  string
	at  time.Time
	err error
}

func openWarmSession(ctx context.Context, client pb.AgenticServiceClient, workspace string) (*warmSession, error) {
	created, err := client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return nil, fmt.Errorf("CreateSession: %w", err)
	}
	id := created.GetSession().GetSessionId()
	sctx, cancel := context.WithCancel(ctx)
	stream, err := client.Subscribe(sctx, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(created.GetSession().GetLastSequence())})
	if err == nil {
		// Headers come once the subscription is registered: no turn can be missed.
		_, err = stream.Header()
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("Subscribe: %w", err)
	}
	w := &warmSession{client: client, id: id, ends: make(chan messageEnd, 16), cancel: cancel, done: make(chan struct{})}
	go w.follow(stream)
	return w, nil
}

func (w *warmSession) follow(stream pb.AgenticService_SubscribeClient) {
	defer close(w.done)
	var errs []string
	events := &eventReader{stream: stream}
	for {
		ev, err := events.next()
		at := events.received
		if err != nil {
			w.ends <- messageEnd{err: fmt.Errorf("the event stream ended: %w", err)}
			return
		}
		switch p := ev.GetPayload().(type) {
		case *pb.AgenticEvent_Error:
			errs = append(errs, p.Error.GetMessage())
		case *pb.AgenticEvent_MessageEnd:
			if p.MessageEnd.GetRole() == pb.MessageRole_MESSAGE_ROLE_USER {
				continue
			}
			end := messageEnd{id: p.MessageEnd.GetMessageId(), at: at}
			if len(errs) > 0 {
				end.err = fmt.Errorf("the turn reported errors: %s", strings.Join(errs, "; "))
				errs = nil
			}
			select {
			case w.ends <- end:
			default: // nobody waits for it: a late end of a turn given up on
			}
		}
	}
}

// turnTimeout bounds one turn of the short script.
const turnTimeout = 30 * time.Second

// turn sends a message and returns the time until the subscriber got its MESSAGE_END.
func (w *warmSession) turn(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	sent, err := w.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: w.id, Content: textContent("go")})
	if status.Code(err) == codes.FailedPrecondition {
		return 0, fmt.Errorf("SendMessage refused although the subscriber had seen the previous turn's MESSAGE_END: %w", err)
	}
	if err != nil {
		return 0, fmt.Errorf("SendMessage: %w", err)
	}
	timeout := time.NewTimer(turnTimeout)
	defer timeout.Stop()
	for {
		select {
		case end := <-w.ends:
			if end.err != nil {
				return 0, end.err
			}
			if end.id == sent.GetMessageId() {
				return end.at.Sub(start), nil
			}
		case <-timeout.C:
			return 0, fmt.Errorf("no MESSAGE_END for message %s within %s", sent.GetMessageId(), turnTimeout)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// close ends the subscription (the session stays open until agenticd stops).
func (w *warmSession) close() {
	w.cancel()
	for {
		select {
		case <-w.done:
			return
		case <-w.ends: // let follow deliver its last word and return
		}
	}
}

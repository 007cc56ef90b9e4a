package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The interval is the pair of order statistics a binomial table gives for the median:
// x(2)…x(9) of 10 values and x(6)…x(15) of 20 at 95 %, whatever order the values come in.
func TestMedianCIIsTheBinomialOrderStatistics(t *testing.T) {
	for _, tc := range []struct {
		n      int
		lo, hi float64 // ranks, 1-based
	}{{10, 2, 9}, {20, 6, 15}, {6, 1, 6}} {
		xs := make([]float64, tc.n)
		for i := range xs {
			xs[i] = float64(tc.n - i) // descending: the function must sort
		}
		med, lo, hi, ok := medianCI(xs, 0.95)
		if !ok || lo != tc.lo || hi != tc.hi {
			t.Errorf("n=%d: CI %v…%v ok=%v, want x(%v)…x(%v)", tc.n, lo, hi, ok, tc.lo, tc.hi)
		}
		if want := float64(tc.n+1) / 2; med != want {
			t.Errorf("n=%d: median %v, want %v", tc.n, med, want)
		}
	}
	// Five values cannot give 95 %: P(all on one side) = 2/32 > 5 %.
	if _, lo, hi, ok := medianCI([]float64{3, 1, 2, 5, 4}, 0.95); ok || lo != 1 || hi != 5 {
		t.Errorf("n=5: CI %v…%v ok=%v, want the whole range and not ok", lo, hi, ok)
	}
	// Large n stays finite and narrows around the median.
	xs := make([]float64, 2001)
	for i := range xs {
		xs[i] = float64(i)
	}
	if med, lo, hi, ok := medianCI(xs, 0.95); !ok || med != 1000 || lo < 950 || lo >= 1000 || hi > 1050 || hi <= 1000 {
		t.Errorf("n=2001: median %v CI %v…%v ok=%v, want about 956…1044", med, lo, hi, ok)
	}
}

func TestParseSmapsRollupReadsPssAndRss(t *testing.T) {
	const rollup = `55d0c0a00000-7ffd2b5fe000 ---p 00000000 00:00 0                          [rollup]
Rss:               21400 kB
Pss:                6486 kB
Pss_Dirty:          3044 kB
Pss_Anon:           3044 kB
Shared_Clean:      18356 kB
`
	m, err := parseSmapsRollup(rollup)
	if err != nil || m.pssKiB != 6486 || m.rssKiB != 21400 {
		t.Fatalf("got %+v, %v; want Pss 6486 and Rss 21400", m, err)
	}
	if _, err := parseSmapsRollup("Rss: 1 kB\n"); err == nil {
		t.Fatal("a rollup without Pss parsed")
	}
	// This process's own file has both.
	if m, err := readMemUse(os.Getpid()); err != nil || m.pssKiB <= 0 || m.rssKiB < m.pssKiB {
		t.Fatalf("own smaps_rollup: %+v, %v", m, err)
	}
}

func TestParentPIDSkipsTheCommandName(t *testing.T) {
	ppid, ok := parentPID("4242 (a (b) c) S 17 4242 4242 0 -1 4194560")
	if !ok || ppid != 17 {
		t.Fatalf("got %d, %v; want 17", ppid, ok)
	}
	if _, ok := parentPID("4242 (truncated"); ok {
		t.Fatal("a stat line without its closing parenthesis parsed")
	}
}

// A shell standing for the init with a sleep under it standing for the agent: the tree
// under this process must be found whole and its two kinds of process told apart.
func TestReadAgentTreeTellsTheInitFromTheAgent(t *testing.T) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip(err)
	}
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	sleep, _ := filepath.EvalSymlinks(sleepPath)
	dir := t.TempDir()
	cmd := exec.Command(sh, "-c", "sleep 30 & wait")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sleepPID := 0
	defer func() {
		if sleepPID > 0 {
			_ = syscall.Kill(sleepPID, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var tree agentTree
	deadline := time.Now().Add(5 * time.Second)
	for {
		children, err := processChildren()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range children[os.Getpid()] {
			if c == cmd.Process.Pid {
				found = true
			}
		}
		if !found {
			t.Fatalf("the shell %d is not among this process's children %v", cmd.Process.Pid, children[os.Getpid()])
		}
		if kids := children[cmd.Process.Pid]; len(kids) == 1 {
			sleepPID = kids[0]
		}
		// Between fork and exec the shell's child is still a shell.
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", sleepPID)); sleepPID > 0 && exe == sleep {
			if tree, err = readAgentTree(children, cmd.Process.Pid, sleep, sh); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell did not start its sleep")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tree.inits != 1 || tree.agents != 1 || tree.init.pssKiB <= 0 || tree.agent.pssKiB <= 0 {
		t.Fatalf("tree %+v: want one init (the shell) and one agent (sleep), each with memory", tree)
	}
	if tree.workspace != dir {
		t.Fatalf("workspace %q, want the shell's directory %q", tree.workspace, dir)
	}
	if got := tree.total(); got.pssKiB != tree.init.pssKiB+tree.agent.pssKiB {
		t.Fatalf("total %+v is not init + agent", got)
	}
}

// Confinement counts as adding latency only when the confined server was slower than
// both unconfined ones; slower than one of them is what two identical servers show too.
func TestAddedLatencyMeasurableNeedsBothComparisons(t *testing.T) {
	seq := func(from float64, n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = from + float64(i)*0.001
		}
		return xs
	}
	slower := seq(0.010, 100)     // every pair 10 µs or more slower
	straddles := seq(-0.050, 100) // −50 … +49 µs
	if !addedLatencyMeasurable(slower, slower) {
		t.Error("slower than both unconfined servers: not counted as measurable")
	}
	if addedLatencyMeasurable(slower, straddles) || addedLatencyMeasurable(straddles, slower) {
		t.Error("slower than one unconfined server only: counted as measurable")
	}
	if addedLatencyMeasurable(seq(0.010, 5), seq(0.010, 5)) {
		t.Error("five pairs (too few for a 95 % interval): counted as measurable")
	}
}

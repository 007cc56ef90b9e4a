package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// bombProcesses is the process limit of every confined tree in the starvation test.
const bombProcesses = 48

// While one session's terminal runs a process bomb, another session's 20 commands all
// succeed and health keeps answering; the bomb stays at its limit, and its processes end
// with it. agenticd runs as an ordinary user (RLIMIT_NPROC is never enforced for root).
func TestOneSessionCannotStarveAnother(t *testing.T) {
	if missing := confine.Probe().Missing(); len(missing) > 0 {
		t.Skipf("this kernel cannot confine: %s", strings.Join(missing, "; "))
	}
	acct := unprivileged.User(t)
	home := unprivileged.Dir(t)
	agent := unprivileged.Executable(t, buildTestAgent(t))
	marker := fmt.Sprintf("bomb-%d", time.Now().UnixNano())
	// Each bomb process forks two more and waits: at the limit, bash retries the forks
	// that fail, so the bomb stays there until the terminal's command ends, and with it
	// the tree. The marker names the bomb's processes ($0) for pgrep. At the limit no
	// fork succeeds, so the count uses the shell's builtins only.
	bomb := fmt.Sprintf("bash -c 'b(){ b & b & wait; }; b' %s 2>/dev/null & sleep 12; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo %s procs=$n", marker, marker)
	bomber, _ := json.Marshal(map[string]any{"turns": [][]map[string]any{{{"terminal": map[string]any{"command": bomb, "toolCallId": "bomb"}}}}})
	var steps []map[string]any
	for i := range 20 {
		steps = append(steps, map[string]any{"terminal": map[string]any{"command": fmt.Sprintf("echo ok-%d", i), "toolCallId": fmt.Sprintf("echo-%d", i)}})
	}
	worker, _ := json.Marshal(map[string]any{"turns": [][]map[string]any{steps}})
	port := freePort(t)
	config := fmt.Sprintf("listen: 127.0.0.1:%d\nlimits: {processes: %d}\nagents:\n", port, bombProcesses)
	for _, a := range []struct{ id, script string }{{"acp.test.bomber", "bomber.json"}, {"acp.test.worker", "worker.json"}} {
		config += fmt.Sprintf("  - id: %s\n    type: acp\n    command: %s\n    env: {TESTAGENT_SCRIPT: %s}\n    read_paths: [%s]\n    permission_timeout: 1m\n",
			a.id, agent, filepath.Join(home, "scripts", a.script), filepath.Join(home, "scripts"))
	}
	for path, content := range map[string]string{
		filepath.Join(home, "scripts", "bomber.json"):               string(bomber),
		filepath.Join(home, "scripts", "worker.json"):               string(worker),
		filepath.Join(home, "bombs", "README"):                      "a workspace\n",
		filepath.Join(home, "work", "README"):                       "a workspace\n",
		filepath.Join(home, ".config", "agenticd", "agenticd.yaml"): config,
	} {
		writeOwned(t, home, path, content, acct)
	}
	conn := startUnprivilegedAgenticd(t, home, port)
	client := agenticv1.NewAgenticServiceClient(conn)
	ctx := context.Background()

	sessionOf := func(agentID, ws string) *agenticv1.SessionInfo {
		t.Helper()
		created, err := client.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agentID, Config: &agenticv1.SessionConfig{Workspace: filepath.Join(home, ws)}})
		if err != nil {
			t.Fatalf("CreateSession %s: %v", agentID, err)
		}
		return created.GetSession()
	}
	bombSession, workSession := sessionOf("acp.test.bomber", "bombs"), sessionOf("acp.test.worker", "work")
	bombEvents := subscribe(t, client, subscribeAfter(bombSession.GetLastSequence(), bombSession.GetSessionId()))
	workEvents := subscribe(t, client, subscribeAfter(workSession.GetLastSequence(), workSession.GetSessionId()))
	bombTurn, err := client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: bombSession.GetSessionId(), Content: textContent("bomb")})
	if err != nil {
		t.Fatal(err)
	}
	// The bomb's terminal has started once its tool runs.
	bombEvents.Until(t, func(ev *agenticv1.AgenticEvent) bool {
		return ev.GetToolStart() != nil || ev.GetToolRunning() != nil
	})
	time.Sleep(time.Second) // let the bomb reach its limit; no bound is asserted on time

	var (
		healthMu    sync.Mutex
		healthMax   time.Duration
		healthCalls int
		healthErr   error
	)
	stopHealth := make(chan struct{})
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		health := healthpb.NewHealthClient(conn)
		for {
			select {
			case <-stopHealth:
				return
			case <-time.After(100 * time.Millisecond):
			}
			// A hang guard, not a speed target: the figure is logged.
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			start := time.Now()
			resp, err := health.Check(callCtx, &healthpb.HealthCheckRequest{})
			took := time.Since(start)
			cancel()
			healthMu.Lock()
			healthCalls++
			healthMax = max(healthMax, took)
			if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				err = fmt.Errorf("health %v", resp.GetStatus())
			}
			if err != nil && healthErr == nil {
				healthErr = err
			}
			healthMu.Unlock()
		}
	}()

	workTurn, err := client.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: workSession.GetSessionId(), Content: textContent("work")})
	if err != nil {
		t.Fatal(err)
	}
	var work strings.Builder
	for _, ev := range workEvents.Until(t, turnEnd(workTurn.GetMessageId())) {
		if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == workTurn.GetMessageId() {
			work.WriteString(d.GetText())
		}
	}
	close(stopHealth)
	<-healthDone
	for i := range 20 {
		// The scripted agent reports each terminal's output quoted: output="ok-0\n".
		if !strings.Contains(work.String(), fmt.Sprintf(`output="ok-%d\n"`, i)) {
			t.Errorf("command %d of the other session did not succeed while the bomb ran:\n%s", i, work.String())
		}
	}
	healthMu.Lock()
	t.Logf("health during the bomb: %d calls, slowest %v", healthCalls, healthMax)
	if healthErr != nil || healthCalls == 0 {
		t.Errorf("health during the bomb: %d calls, error %v", healthCalls, healthErr)
	}
	healthMu.Unlock()

	var bombOut strings.Builder
	for _, ev := range bombEvents.Until(t, turnEnd(bombTurn.GetMessageId())) {
		if d := ev.GetMessageDelta(); d != nil && d.GetMessageId() == bombTurn.GetMessageId() {
			bombOut.WriteString(d.GetText())
		}
	}
	m := regexp.MustCompile(marker + ` procs=(\d+)`).FindStringSubmatch(bombOut.String())
	if m == nil {
		t.Fatalf("the bomb's terminal did not report its processes:\n%s", bombOut.String())
	}
	procs, _ := strconv.Atoi(m[1])
	t.Logf("the bomb's tree held %d processes at its limit of %d", procs, bombProcesses)
	if procs > bombProcesses+2 || procs < bombProcesses/2 {
		t.Errorf("the bomb's tree held %d processes; want it held near its limit of %d", procs, bombProcesses)
	}
	// Its processes end with its terminal.
	deadline := time.Now().Add(eventWait)
	for {
		out, _ := exec.Command("pgrep", "-u", acct.Name, "-f", marker).Output()
		if strings.TrimSpace(string(out)) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bomb processes outlived their terminal: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

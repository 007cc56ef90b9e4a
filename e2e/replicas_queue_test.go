package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// replicaAs is a replica of the group that also knows the static principal alice, and a
// client calling it as alice.
type replicaAs struct {
	proc  *agenticdProcess
	addr  string
	alice agenticv1.AgenticServiceClient
}

// startWithAlice runs one replica that knows alice and takes sessions' webhooks to hooks
// (signed with sessionHookSecret, from the environment).
func (g *replicaGroup) startWithAlice(t *testing.T, id string, agent daemon.AgentConfig, hooks *hookReceiver) replicaAs {
	t.Helper()
	t.Setenv(sessionHookSecretEnv, sessionHookSecret)
	cfg := daemon.Config{Listen: freeLoopbackAddr(t), DataDir: t.TempDir(), WorkspaceRoots: []string{g.root}, LogLevel: "debug",
		Database: g.dsn, Token: replicasToken, Replica: daemon.ReplicaConfig{ID: id, LeaseTTL: replicaTTL}, Agents: []daemon.AgentConfig{agent},
		Principals:      alicePrincipal(),
		SessionWebhooks: daemon.SessionWebhooksConfig{AllowedURLs: []string{hooks.URL + "/sessions/"}, SecretEnv: sessionHookSecretEnv}}
	p := startAgenticdProcess(t, g.bin, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica %s's warnings and errors, and its last lines:\n%s", id, logExcerpt(p.log))
		}
	})
	return replicaAs{proc: p, addr: cfg.Listen, alice: clientAs(t, cfg.Listen, aliceToken)}
}

// A message alice queued on A starts on B by itself once A is gone, with no call to
// the session meanwhile: A killed mid-turn (B takes the session over once A's lease has
// run out), or A stopped (its turn ends, its leases are given up, and the session is
// idle with its queue). It runs for alice: its user message's MESSAGE_END and
// ListMessages through B, over gRPC and Connect, name her. The session's own webhook,
// given to A, hears of the turns B ends.
func TestReplicasStartAQueueTheirOwnerLeft(t *testing.T) {
	for _, gone := range []string{"killed", "stopped"} {
		t.Run(gone, func(t *testing.T) { queueOwnerLeft(t, gone == "stopped") })
	}
}

func queueOwnerLeft(t *testing.T, graceful bool) {
	agent := scriptedAgent(t, "acp.test.replicas", `{"turns": [`+waitTurn+`]}`)
	g := newReplicaGroup(t, agent)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hooks := newHookReceiver(t)
	a := g.startWithAlice(t, "a", agent, hooks)
	b := g.startWithAlice(t, "b", agent, hooks)
	created, err := a.alice.CreateSession(ctx, &agenticv1.CreateSessionRequest{AgentId: agent.ID, Config: &agenticv1.SessionConfig{Workspace: g.ws,
		Webhook: &agenticv1.SessionWebhook{Url: hooks.URL + "/sessions/q"}}})
	if err != nil {
		t.Fatalf("CreateSession through A: %v", err)
	}
	id := created.GetSession().GetSessionId()
	fromB := record(t, "B (the session, from the oldest)", b.alice, &agenticv1.SubscribeRequest{SessionIds: []string{id},
		Start: &agenticv1.SubscribeRequest_OldestHeld{OldestHeld: true}})
	first, err := a.alice.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("first")})
	if err != nil {
		t.Fatalf("SendMessage through A: %v", err)
	}
	fromB.wait(t, "the first turn's words", 20*time.Second, func(evs []*agenticv1.AgenticEvent, _ bool) bool {
		return slices.ContainsFunc(evs, isAssistantText("Working."))
	})
	later, err := a.alice.SendMessage(ctx, &agenticv1.SendMessageRequest{SessionId: id, Content: textContent("later"),
		Delivery: agenticv1.DeliveryMode_DELIVERY_MODE_QUEUE})
	if err != nil || later.GetOutcome() != agenticv1.DeliveryOutcome_DELIVERY_OUTCOME_QUEUED {
		t.Fatalf("SendMessage(QUEUE) through A = %v, %v", later, err)
	}

	if graceful {
		a.proc.stop(t)
	} else {
		a.proc.kill(t)
	}
	// The turn B runs does not wait.
	if err := os.WriteFile(filepath.Join(g.ws, ".go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	events := fromB.wait(t, "the queued turn's end", 30*time.Second, func(evs []*agenticv1.AgenticEvent, _ bool) bool {
		return slices.ContainsFunc(evs, endOf(later.GetMessageId()))
	})
	if end := events[slices.IndexFunc(events, endOf(later.GetMessageId()))].GetMessageEnd(); end.GetStopReason() != agenticv1.StopReason_STOP_REASON_END_TURN {
		t.Errorf("the queued turn ended %v", end)
	}
	if at := slices.IndexFunc(events, userEnd(later.GetUserMessageId())); at < 0 || events[at].GetMessageEnd().GetPrincipal() != "alice" {
		t.Errorf("the queued user message's MESSAGE_END (at %d) does not name alice: %s", at, describe(events))
	}
	// It left the queue once, when it started: not when A stopped.
	var dequeued []string
	for _, ev := range events {
		if d := ev.GetMessageDequeued(); d.GetMessageId() == later.GetMessageId() {
			dequeued = append(dequeued, d.GetReason().String())
		}
	}
	if !slices.Equal(dequeued, []string{"DEQUEUE_REASON_STARTED"}) {
		t.Errorf("the queued message left the queue %v, want once, started: %s", dequeued, describe(events))
	}
	if holder, expired := g.leaseHolder(t, id); holder != "b" || expired {
		t.Errorf("the lease is %q's (expired %v), want b's", holder, expired)
	}
	if senders := sendersOver(t, b.alice, b.addr, aliceToken, id); senders[later.GetUserMessageId()] != "alice" {
		t.Errorf("ListMessages through B names %q as the queued message's sender; all: %v", senders[later.GetUserMessageId()], senders)
	}
	if !graceful {
		// Deliveries go out in order: the interrupted turn's end, which B published, first.
		hooks.waitFor(t, "turn_ended", first.GetMessageId())
	}
	if n, _ := hooks.waitFor(t, "turn_ended", later.GetMessageId()); n.SessionID != id {
		t.Errorf("notice %+v, want session %s's", n, id)
	}
}

// stop ends the process as a service manager would (SIGTERM) and waits for it.
func (p *agenticdProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.exited; err != nil {
		t.Errorf("agenticd stopped with %v; its log:\n%s", err, p.logTail())
	}
	p.exited = nil
}

package service

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

func newTestHub(t *testing.T, opts HubOptions) *Hub {
	t.Helper()
	h, err := NewHub(bg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func TestHubProjection(t *testing.T) {
	h := newTestHub(t, HubOptions{})
	em := presenters.NewEmitter(h, "a", "s")
	em.MessageDelta("u1", presenters.RoleUser, "replayed user text")
	if got := h.snapshot("s"); got.InFlight != "" || got.AgentID != "a" {
		t.Errorf("a user delta set the message in flight: %+v", got)
	}
	em.ToolStart("m1", presenters.ToolCall{ToolID: "t"})
	if got := h.snapshot("s").InFlight; got != "m1" {
		t.Errorf("in flight after TOOL_START = %q, want m1", got)
	}
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r1"})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r2"})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r3"})
	em.PermissionDenied(presenters.PermissionDecision{RequestID: "r1"})
	em.PermissionGranted(presenters.PermissionDecision{RequestID: "r3"})
	snap := h.snapshot("s")
	if len(snap.Pending) != 1 || snap.Pending[0].RequestID != "r2" {
		t.Errorf("pending = %v, want [r2]", snap.Pending)
	}
	// The snapshot is a copy: changing it does not change the hub.
	snap.Pending[0].RequestID = "changed"
	if _, ok := h.pendingRequest("s", "r2"); !ok {
		t.Error("snapshot shares memory with the projection")
	}
	last := em.MessageEnd(presenters.MessageEndPayload{MessageID: "m1", Role: presenters.RoleAssistant})
	snap = h.snapshot("s")
	if snap.InFlight != "" || snap.Pending != nil || snap.Point != last {
		t.Errorf("after MESSAGE_END: %+v, want nothing in flight or pending, last %d", snap, last)
	}

	em.MessageBlock("m2", presenters.RoleAssistant, presenters.Block{Type: presenters.BlockReasoning})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r4"})
	em.SessionClosed("bye")
	if snap := h.snapshot("s"); snap.InFlight != "" || snap.Pending != nil {
		t.Errorf("after SESSION_CLOSED: %+v", snap)
	}
}

func TestHubForgetsIdleSessionsLeavingTheRing(t *testing.T) {
	h := newTestHub(t, HubOptions{Capacity: 4})
	idle := presenters.NewEmitter(h, "a", "idle").SessionReady(0)
	presenters.NewEmitter(h, "a", "waiting").PermissionRequired(presenters.PermissionRequest{RequestID: "r"})
	publishDeltas(h, "a", "busy", 6)
	var idleKept, waitingKept bool
	h.events.View(func(uint64) {
		_, idleKept = h.proj.sessions["idle"]
		_, waitingKept = h.proj.sessions["waiting"]
	})
	if idleKept || !waitingKept {
		t.Errorf("idle kept %v (want false), waiting kept %v (want true)", idleKept, waitingKept)
	}
	// A forgotten session's snapshot point is still the newest sequence.
	if snap := h.snapshot("idle"); snap.Point != h.LastSequence() || snap.Point <= idle || snap.AgentID != "" {
		t.Errorf("forgotten session snapshot %+v, want point %d", snap, h.LastSequence())
	}
}

// History replayed into a session (old assistant messages, each ending) leaves the turn in
// flight, its first sequence and its pending requests as they are.
func TestHubProjectionSurvivesReplayedHistory(t *testing.T) {
	h := newTestHub(t, HubOptions{})
	em := presenters.NewEmitter(h, "a", "s")
	first := em.MessageDelta("m2", presenters.RoleAssistant, "thinking")
	em.ToolStart("m2", presenters.ToolCall{ToolID: "t"})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r2", MessageID: "m2"})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r-old", MessageID: "m1"})
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "r-turn"})
	// A client loads the session: its history replays, an old reply ending.
	em.MessageDelta("u1", presenters.RoleUser, "question")
	em.MessageEnd(presenters.MessageEndPayload{MessageID: "u1", Role: presenters.RoleUser})
	em.MessageEnd(presenters.MessageEndPayload{MessageID: "m1", Role: presenters.RoleAssistant})
	snap := h.snapshot("s")
	if snap.InFlight != "m2" || snap.InFlightFirst != first {
		t.Errorf("in flight %q from %d, want m2 from %d", snap.InFlight, snap.InFlightFirst, first)
	}
	if ids := requestIDs(snap.Pending); ids != "r2 r-turn" {
		t.Errorf("pending %s, want r2 r-turn (r-old ended with m1)", ids)
	}
	em.MessageDelta("m2", presenters.RoleAssistant, " more")
	if got := h.snapshot("s").InFlightFirst; got != first {
		t.Errorf("first sequence moved to %d", got)
	}
	em.MessageEnd(presenters.MessageEndPayload{MessageID: "m2", Role: presenters.RoleAssistant})
	if snap := h.snapshot("s"); snap.InFlight != "" || snap.InFlightFirst != 0 || snap.Pending != nil {
		t.Errorf("after the turn's end: %+v", snap)
	}
	next := em.MessageBlock("m3", presenters.RoleAssistant, presenters.Block{Type: presenters.BlockText, Text: "x"})
	if snap := h.snapshot("s"); snap.InFlight != "m3" || snap.InFlightFirst != next {
		t.Errorf("next turn: %+v, want m3 from %d", snap, next)
	}
}

// A LoadSession replay shows old assistant messages again: none of them is in flight.
func TestHubProjectionIgnoresReplayedTurns(t *testing.T) {
	h := newTestHub(t, HubOptions{})
	replay := presenters.NewEmitter(h, "a", "s").Replaying()
	replay.MessageDelta("m0", presenters.RoleAssistant, "an old answer")
	replay.ToolStart("m0", presenters.ToolCall{ToolID: "t"})
	if snap := h.snapshot("s"); snap.InFlight != "" || snap.InFlightFirst != 0 {
		t.Errorf("a replayed message is in flight: %+v", snap)
	}
}

func requestIDs(rs []presenters.PermissionRequest) string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.RequestID
	}
	return strings.Join(ids, " ")
}

// Decisions are remembered with the kind of the option chosen, for decisionMemory and at
// most maxDecisions of them; an agent's own events change no session.
func TestHubRemembersDecisions(t *testing.T) {
	h := newTestHub(t, HubOptions{Capacity: 8})
	clock := time.Unix(1_700_000_000, 0)
	h.events.View(func(uint64) { h.proj.now = func() time.Time { return clock } })
	em := presenters.NewEmitter(h, "a", "s")
	em.PermissionRequired(presenters.PermissionRequest{RequestID: "p1", Options: []presenters.PermissionOption{{ID: "ok", Kind: presenters.AllowAlways}}})
	em.PermissionGranted(presenters.PermissionDecision{RequestID: "p1", OptionID: "ok", DecidedBy: presenters.DecidedByUser})
	d, ok := h.permissionDecision("s", "p1")
	if !ok || d.optionID != "ok" || d.kind != presenters.AllowAlways || !d.granted || d.decidedBy != presenters.DecidedByUser {
		t.Fatalf("decision %+v, %v", d, ok)
	}
	if _, ok := h.permissionDecision("other", "p1"); ok {
		t.Error("a decision of one session answers for another")
	}
	clock = clock.Add(decisionMemory)
	if _, ok := h.permissionDecision("s", "p1"); ok {
		t.Error("a decision outlived decisionMemory")
	}
	for i := range maxDecisions + 1 {
		em.PermissionDenied(presenters.PermissionDecision{RequestID: fmt.Sprint("q", i), DecidedBy: presenters.DecidedByPolicy})
	}
	h.events.View(func(uint64) {
		if n := len(h.proj.decisions.byKey); n != maxDecisions || h.proj.decisions.order.Len() != maxDecisions {
			t.Errorf("%d decisions remembered, want %d", n, maxDecisions)
		}
	})
	if _, ok := h.permissionDecision("s", "q0"); ok {
		t.Error("the oldest decision outlived the bound")
	}
	presenters.NewAgentEmitter(h, "a").AgentStatusChanged(presenters.AgentInfo{ID: "a"})
	h.events.View(func(uint64) {
		if _, ok := h.proj.sessions[""]; ok {
			t.Error("an agent's event made a session")
		}
	})
}

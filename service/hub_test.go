package service

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
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

func TestHubSequencesSurviveRestart(t *testing.T) {
	store := openStore(t)
	// A small block makes the background floor writes and the fallback both happen.
	first := newTestHub(t, HubOptions{Store: store, SequenceBlock: 4})
	var last uint64
	for i := range 500 {
		last = first.Publish(presenters.Event{SessionID: "s", Payload: presenters.SessionReadyPayload{}})
		floor, err := store.SequenceFloor(bg)
		if err != nil {
			t.Fatal(err)
		}
		if floor < last {
			t.Fatalf("event %d: sequence %d was issued above the stored floor %d", i, last, floor)
		}
	}
	second := newTestHub(t, HubOptions{Store: store, SequenceBlock: 4})
	if seq := second.Publish(presenters.Event{SessionID: "s", Payload: presenters.SessionReadyPayload{}}); seq <= last {
		t.Fatalf("after a restart the hub reused sequence %d (first hub reached %d)", seq, last)
	}
	// A point from before the restart is no longer held. (The very last one may still be
	// a valid point, when the floor was exactly there: nothing lies between.)
	if _, _, err := second.subscribe(nil, nil, last-1); !errors.Is(err, errOutOfRange) {
		t.Errorf("subscribe after a pre-restart point: %v, want out of range", err)
	}
}

func TestHubResumeBounds(t *testing.T) {
	h := newTestHub(t, HubOptions{Capacity: 4})
	quiet := presenters.NewEmitter(h, "a", "quiet").MessageDelta("m", presenters.RoleAssistant, "x") // 1
	seqs := publishDeltas(h, "a", "busy", 9)                                                         // 2..10; 7..10 held
	if quiet != 1 || seqs[8] != 10 {
		t.Fatalf("sequences %d, %v", quiet, seqs)
	}
	cases := []struct {
		name     string
		sessions []string
		after    uint64
		ok       bool
		backlog  int
	}{
		{"just before the oldest held", nil, 6, true, 4},
		{"in the middle", nil, 8, true, 2},
		{"the newest", nil, 10, true, 0},
		{"older than held", nil, 5, false, 0},
		{"in the future", nil, 11, false, 0},
		{"a filter does not widen what is held", []string{"quiet"}, 1, false, 0},
		{"a filtered replay", []string{"busy"}, 6, true, 4},
	}
	for _, c := range cases {
		sub, backlog, err := h.subscribe(c.sessions, nil, c.after)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, errOutOfRange)) {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		h.unsubscribe(sub)
		if len(backlog) != c.backlog {
			t.Errorf("%s: backlog of %d, want %d", c.name, len(backlog), c.backlog)
		}
		for i, he := range backlog {
			if he.sequence != c.after+uint64(i)+1 || !sub.matches(he) {
				t.Errorf("%s: backlog[%d] = %d, want %d", c.name, i, he.sequence, c.after+uint64(i)+1)
			}
		}
	}
}

func TestHubForgetsIdleSessionsLeavingTheRing(t *testing.T) {
	h := newTestHub(t, HubOptions{Capacity: 4})
	idle := presenters.NewEmitter(h, "a", "idle").SessionReady(0)
	presenters.NewEmitter(h, "a", "waiting").PermissionRequired(presenters.PermissionRequest{RequestID: "r"})
	publishDeltas(h, "a", "busy", 6)
	h.mu.Lock()
	_, idleKept := h.sessions["idle"]
	_, waitingKept := h.sessions["waiting"]
	h.mu.Unlock()
	if idleKept || !waitingKept {
		t.Errorf("idle kept %v (want false), waiting kept %v (want true)", idleKept, waitingKept)
	}
	// A forgotten session's snapshot point is still the newest sequence.
	if snap := h.snapshot("idle"); snap.Point != h.LastSequence() || snap.Point <= idle || snap.AgentID != "" {
		t.Errorf("forgotten session snapshot %+v, want point %d", snap, h.LastSequence())
	}
}

func TestHubOverflowEndsOnlyTheSlowSubscriber(t *testing.T) {
	h := newTestHub(t, HubOptions{SubscriberQueue: 2})
	slow, _, err := h.subscribe(nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := h.subscribe([]string{"other"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	publishDeltas(h, "a", "s", 3) // never blocks, although nobody reads
	if _, ok := <-slow.ch; !ok {
		t.Fatal("queued events were lost")
	}
	<-slow.ch
	if _, ok := <-slow.ch; ok {
		t.Fatal("an overflowed subscriber's queue stays open")
	}
	var overflow *overflowError
	if !errors.As(slow.end, &overflow) || overflow.Queue != 2 {
		t.Errorf("end = %v, want an overflow of a 2-event queue", slow.end)
	}
	publishDeltas(h, "a", "other", 1)
	if ev := <-other.ch; ev.sessionID != "other" {
		t.Errorf("the other subscriber got session %q", ev.sessionID)
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

func requestIDs(rs []presenters.PermissionRequest) string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.RequestID
	}
	return strings.Join(ids, " ")
}

// flakyFloorStore is the real store with writes that fail while failing is set (SQLite
// locked by another writer, a full disk).
type flakyFloorStore struct {
	*store.Store
	failing atomic.Bool
}

func (s *flakyFloorStore) SetSequenceFloor(ctx context.Context, floor uint64) error {
	if s.failing.Load() {
		return errors.New("disk I/O error")
	}
	return s.Store.SetSequenceFloor(ctx, floor)
}

// A floor write that fails reserves nothing: later events try again, and once a write
// lands every sequence issued is covered again.
func TestHubRetriesAFailedFloorWrite(t *testing.T) {
	store := &flakyFloorStore{Store: openStore(t)}
	h := newTestHub(t, HubOptions{Store: store, SequenceBlock: 4, Logger: discard})
	store.failing.Store(true)
	var last uint64
	for range 10 {
		last = publishDeltas(h, "a", "s", 1)[0]
	}
	h.Close() // waits for a background write in flight
	store.failing.Store(false)
	// Publishing still works after Close; the next event must write the floor itself.
	last = publishDeltas(h, "a", "s", 1)[0]
	floor, err := store.SequenceFloor(bg)
	if err != nil {
		t.Fatal(err)
	}
	if floor < last {
		t.Fatalf("sequence %d issued above the stored floor %d after the store recovered", last, floor)
	}
}

// The ring lets its oldest events go when their memory passes MaxBytes, also below
// Capacity; resuming before them is then OUT_OF_RANGE. The newest is always held.
func TestHubRingBoundedByBytes(t *testing.T) {
	text := strings.Repeat("x", 1000)
	per := heldSize(presenters.MessageDeltaPayload{Text: text})
	h := newTestHub(t, HubOptions{Capacity: 1000, MaxBytes: 10 * per})
	em := presenters.NewEmitter(h, "a", "s")
	var seqs []uint64
	for range 25 {
		seqs = append(seqs, em.MessageDelta("m", presenters.RoleAssistant, text))
	}
	h.mu.Lock()
	held, oldest := h.heldBytes, h.oldest
	h.mu.Unlock()
	if held != 10*per || oldest != seqs[15] {
		t.Errorf("holding %d bytes from %d, want %d bytes from %d", held, oldest, 10*per, seqs[15])
	}
	if _, _, err := h.subscribe(nil, nil, seqs[13]); !errors.Is(err, errOutOfRange) {
		t.Errorf("resume before the held events: %v, want out of range", err)
	}
	sub, backlog, err := h.subscribe(nil, nil, seqs[14])
	if err != nil || len(backlog) != 10 || backlog[0].sequence != seqs[15] {
		t.Fatalf("resume at the oldest held: %d events, %v", len(backlog), err)
	}
	h.unsubscribe(sub)
	huge := em.MessageDelta("m", presenters.RoleAssistant, strings.Repeat("y", int(20*per)))
	if _, backlog, err := h.subscribe(nil, nil, huge-1); err != nil || len(backlog) != 1 {
		t.Errorf("an event over the whole budget is not held: %d events, %v", len(backlog), err)
	}
}

// A replay longer than one chunk, while events keep being published, meets the live queue
// with no gap and no duplicate.
func TestHubLongReplayWhilePublishing(t *testing.T) {
	h := newTestHub(t, HubOptions{SubscriberQueue: 1 << 16})
	from := publishDeltas(h, "a", "s", 1)[0]
	want := publishDeltas(h, "a", "s", 5*replayChunk)
	publishDeltas(h, "a", "other", 10)
	done := make(chan []uint64)
	go func() { done <- publishDeltas(h, "a", "s", 2000) }()
	sub, backlog, err := h.subscribe([]string{"s"}, nil, from)
	if err != nil {
		t.Fatal(err)
	}
	defer h.unsubscribe(sub)
	want = append(want, <-done...)
	var got []uint64
	for _, he := range backlog {
		got = append(got, he.sequence)
	}
	for len(got) < len(want) {
		got = append(got, (<-sub.ch).sequence)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d has sequence %d, want %d (gap or duplicate)", i, got[i], want[i])
		}
	}
}

// Once a stream encoded an event, the ring keeps its wire bytes alone, and a replay sends
// those same bytes.
func TestHubKeepsOnlyWireBytesOnceEncoded(t *testing.T) {
	h := newTestHub(t, HubOptions{})
	sub, _, err := h.subscribe(nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.unsubscribe(sub)
	em := presenters.NewEmitter(h, "a", "s")
	em.StatusChanged(presenters.SessionIdle, "") // so that the delta can be resumed after
	<-sub.ch
	seq := em.MessageDelta("m", presenters.RoleAssistant, "held once")
	live := <-sub.ch
	if live.payload == nil {
		t.Fatal("the payload is gone before the event was encoded")
	}
	wire := live.encoded(discard)
	if live.payload != nil {
		t.Error("the payload is still held after encoding")
	}
	var got pb.AgenticEvent
	if err := proto.Unmarshal(wire.slice.Materialize(), &got); err != nil || got.GetSequence() != seq || got.GetSessionId() != "s" ||
		got.GetAgentId() != "a" || got.GetMessageDelta().GetText() != "held once" || got.GetTime() == nil {
		t.Fatalf("encoded event = %v, %v", &got, err)
	}
	replay, backlog, err := h.subscribe([]string{"s"}, []string{"a"}, seq-1)
	if err != nil || len(backlog) != 1 {
		t.Fatalf("replay: %d events, %v", len(backlog), err)
	}
	defer h.unsubscribe(replay)
	if again := backlog[0].encoded(discard); again != wire {
		t.Error("the replay encoded the event again instead of sending the held bytes")
	}
}

package events

import (
	"context"
	"slices"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// Stats counts the subscribers, the held events and the subscriptions ended by overflow.
func TestStatsCountsOverflows(t *testing.T) {
	h, err := New(context.Background(), Options[string]{SubscriberQueue: 2, Encode: func(presenters.Event) string { return "x" }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sub, err := h.Subscribe(Filter{}, Start{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if s := h.Stats(); s.Subscribers != 1 || s.Overflows != 0 {
		t.Fatalf("Stats = %+v, want one subscriber, no overflow", s)
	}
	for range 3 { // one more than the queue holds
		h.Publish(presenters.Event{SessionID: "s", AgentID: "a", Payload: presenters.MessageDeltaPayload{Text: "t"}})
	}
	s := h.Stats()
	if s.Subscribers != 0 || s.Overflows != 1 || s.HeldEvents != 3 || s.HeldBytes <= 0 || s.LastSequence != 3 {
		t.Errorf("Stats = %+v, want no subscriber, one overflow, 3 events held", s)
	}
}

// An idle hub trims its ring to a budget; what went is read from the log on a resume,
// with no gap; the newest event stays held. Without a log nothing goes.
func TestTrimHeld(t *testing.T) {
	h, _ := newLogHub(t, openStore(t), Options[*encodedTest]{Capacity: 1000, SubscriberQueue: 1 << 16})
	publishDeltas(h, "a1", "s1", 300)
	waitLogged(t, h)
	before := h.Stats()
	if n := h.TrimHeld(0); n != 299 {
		t.Fatalf("trimmed %d events, want all but the newest (299)", n)
	}
	if after := h.Stats(); after.HeldEvents != 1 || after.HeldBytes >= before.HeldBytes {
		t.Fatalf("after trimming: %+v (before %+v)", after, before)
	}
	sub, err := h.Subscribe(Filter{}, After(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := drain(t, sub, 300); !slices.Equal(got, seqRange(1, 300)) {
		t.Errorf("resumed after 0: %d events, want 1..300", len(got))
	}

	plain := newTestHub(t, Options[*encodedTest]{Capacity: 1000})
	publishDeltas(plain, "a1", "s1", 10)
	if n := plain.TrimHeld(0); n != 0 || plain.Stats().HeldEvents != 10 {
		t.Errorf("a hub without a log trimmed %d events", n)
	}
}

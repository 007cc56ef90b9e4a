package events

import (
	"context"
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

package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agenticd/agenticd/events"
	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

// next takes one event from a subscription.
func next(t *testing.T, sub eventSource) *wire.Event {
	t.Helper()
	b, err := sub.NextBatch(bg, nil, 1, maxBatchBytes, nil)
	if err != nil || len(b.Events) != 1 {
		t.Fatalf("NextBatch: %d events, %v", len(b.Events), err)
	}
	return b.Events[0]
}

// The hub's encoding is the wire form: each event's bytes are built once and every
// stream, live or replaying, sends those same bytes.
func TestHubSharesWireBytes(t *testing.T) {
	h := newTestHub(t, HubOptions{})
	live, err := h.subscribe(events.Filter{}, events.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	em := presenters.NewEmitter(h, "a", "s")
	em.StatusChanged(presenters.SessionIdle, "") // so that the delta can be resumed after
	next(t, live)
	seq := em.MessageDelta("m", presenters.RoleAssistant, "held once")
	wire := next(t, live)
	var got pb.AgenticEvent
	if err := proto.Unmarshal(wire.Bytes(), &got); err != nil || got.GetSequence() != seq || got.GetSessionId() != "s" ||
		got.GetAgentId() != "a" || got.GetMessageDelta().GetText() != "held once" || got.GetEventTime() == nil {
		t.Fatalf("encoded event = %v, %v", &got, err)
	}
	replay, err := h.subscribe(events.Filter{SessionIDs: []string{"s"}, AgentIDs: []string{"a"}}, events.After(seq-1))
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if again := next(t, replay); again != wire {
		t.Errorf("the replay got %p; want the held bytes %p", again, wire)
	}
}

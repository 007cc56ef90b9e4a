package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// The hub's encoding is the wire form: each event's bytes are built once and every
// stream, live or replaying, sends those same bytes.
func TestHubSharesWireBytes(t *testing.T) {
	h := newTestHub(t, HubOptions{})
	live, err := h.subscribe(nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	em := presenters.NewEmitter(h, "a", "s")
	em.StatusChanged(presenters.SessionIdle, "") // so that the delta can be resumed after
	if _, _, err := live.Next(bg); err != nil {
		t.Fatal(err)
	}
	seq := em.MessageDelta("m", presenters.RoleAssistant, "held once")
	_, wire, err := live.Next(bg)
	if err != nil {
		t.Fatal(err)
	}
	var got pb.AgenticEvent
	if err := proto.Unmarshal(wire.slice.Materialize(), &got); err != nil || got.GetSequence() != seq || got.GetSessionId() != "s" ||
		got.GetAgentId() != "a" || got.GetMessageDelta().GetText() != "held once" || got.GetTime() == nil {
		t.Fatalf("encoded event = %v, %v", &got, err)
	}
	replay, err := h.subscribe([]string{"s"}, []string{"a"}, seq-1)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if _, again, err := replay.Next(bg); err != nil || again != wire {
		t.Errorf("the replay got %p, %v; want the held bytes %p", again, err, wire)
	}
}

package wire

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// decodeFrame reads a frame as any protobuf decoder would.
func decodeFrame(t *testing.T, f *Frame) []*pb.AgenticEvent {
	t.Helper()
	var got pb.SubscribeResponse
	if err := proto.Unmarshal(f.slice.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	if got.GetEvents() == nil {
		t.Fatalf("frame %v is not an event batch", &got)
	}
	return got.GetEvents().GetEvents()
}

// mergedDeltas is the rule the frames follow, written over decoded events: consecutive
// MESSAGE_DELTAs of one session, agent, message, role and replay mark become the last of
// them with every text joined.
func mergedDeltas(evs []*pb.AgenticEvent) []*pb.AgenticEvent {
	var out []*pb.AgenticEvent
	for _, ev := range evs {
		ev = proto.CloneOf(ev)
		if n := len(out); n > 0 && ev.GetMessageDelta() != nil && out[n-1].GetMessageDelta() != nil {
			prev, d := out[n-1], ev.GetMessageDelta()
			pd := prev.GetMessageDelta()
			if prev.GetSessionId() == ev.GetSessionId() && prev.GetAgentId() == ev.GetAgentId() && prev.GetReplay() == ev.GetReplay() &&
				pd.GetMessageId() == d.GetMessageId() && pd.GetRole() == d.GetRole() {
				d.Text = pd.GetText() + d.GetText()
				out[n-1] = ev
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

func delta(seq uint64, session, message string, role presenters.MessageRole, text string) presenters.Event {
	return presenters.Event{Sequence: seq, SessionID: session, AgentID: "agent", Time: time.Unix(1700000000, int64(seq)),
		Payload: presenters.MessageDeltaPayload{MessageID: message, Role: role, Text: text}}
}

// reordered is b with its top-level fields in reverse order, and those of its embedded
// MessageDelta too: a valid encoding of the same event, unlike any this server writes.
func reordered(t *testing.T, b []byte) []byte {
	t.Helper()
	var fields [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			t.Fatalf("not protobuf: %x", b)
		}
		field := b[:n+m]
		if num == eventMessageDeltaField {
			inner, _ := protowire.ConsumeBytes(b[n:])
			field = protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), reordered(t, inner))
		}
		fields = append(fields, field)
		b = b[n+m:]
	}
	var out []byte
	for i := len(fields) - 1; i >= 0; i-- {
		out = append(out, fields[i]...)
	}
	return out
}

// A frame holds every event waiting, in order. Merging joins runs of one message's
// deltas (whichever way they were encoded) into the last of them, and nothing else;
// without it every event goes out as it was encoded.
func TestFrameMergesConsecutiveDeltasOfOneMessage(t *testing.T) {
	long := strings.Repeat("é", 200) // a two-byte length, and text that is not ASCII
	domain := []presenters.Event{
		delta(1, "s", "m1", presenters.RoleAssistant, "Hel"),
		delta(2, "s", "m1", presenters.RoleAssistant, "lo, "),
		delta(3, "s", "m1", presenters.RoleAssistant, long),
		{Sequence: 4, SessionID: "s", AgentID: "agent", Payload: presenters.StatusChangedPayload{Status: presenters.SessionGenerating}},
		delta(5, "s", "m1", presenters.RoleAssistant, "after a status"),
		delta(6, "s", "m1", presenters.RoleAssistant, ""),
		delta(7, "s", "m1", presenters.RoleAssistant, "!"),
		delta(8, "other", "m1", presenters.RoleAssistant, "another session"),
		delta(9, "s", "m2", presenters.RoleAssistant, "another message"),
		delta(10, "s", "m2", presenters.RoleUser, "another role"),
		delta(11, "s", "m2", presenters.RoleUser, " joined"),
	}
	replayed := delta(12, "s", "m2", presenters.RoleUser, " replayed")
	replayed.Replay = true
	otherAgent := delta(15, "s", "m3", presenters.RoleUser, " another agent")
	otherAgent.AgentID = "agent2"
	domain = append(domain, replayed, delta(13, "s", "m2", presenters.RoleUser, " live again"),
		delta(14, "s", "m3", presenters.RoleUser, " another message, as after a filtered-out MESSAGE_END"), otherAgent)

	var evs []*Event
	var want []*pb.AgenticEvent
	for i, ev := range domain {
		// Events as this server encodes them, and every other one in a field order of
		// its own (what another encoder, say an older log's, may have written): both
		// merge.
		b := encodeEvent(ev, slog.New(slog.DiscardHandler))
		if i%2 == 1 {
			b = reordered(t, b)
		}
		evs = append(evs, NewEvent(b))
		want = append(want, eventToPB(ev))
	}

	unmerged := Frames{}
	if got := decodeFrame(t, unmerged.Frame(evs)); !protoSliceEqual(got, want) {
		t.Errorf("unmerged frame:\n got %v\nwant %v", got, want)
	}

	merging := Frames{Merge: true}
	wantMerged := mergedDeltas(want)
	if len(wantMerged) != 10 {
		t.Fatalf("the rule merged %d events into %d; the test expects 10", len(want), len(wantMerged))
	}
	for range 2 { // the builder's scratch space is reused
		if got := decodeFrame(t, merging.Frame(evs)); !protoSliceEqual(got, wantMerged) {
			t.Errorf("merged frame:\n got %v\nwant %v", got, wantMerged)
		}
	}
	if got := decodeFrame(t, merging.Frame(evs[:1])); !protoSliceEqual(got, want[:1]) {
		t.Errorf("a frame of one event: %v", got)
	}
}

// An encoding the builder does not fully understand (here an extra field a newer
// encoder might add) is sent as it is and never merged: merging must not drop data.
func TestFrameSendsUnknownEncodingsAsTheyAre(t *testing.T) {
	first := encodeEvent(delta(1, "s", "m", presenters.RoleAssistant, "a"), slog.New(slog.DiscardHandler))
	odd := protowire.AppendTag(encodeEvent(delta(2, "s", "m", presenters.RoleAssistant, "b"), slog.New(slog.DiscardHandler)), 99, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 7)
	last := encodeEvent(delta(3, "s", "m", presenters.RoleAssistant, "c"), slog.New(slog.DiscardHandler))
	f := Frames{Merge: true}
	got := decodeFrame(t, f.Frame([]*Event{NewEvent(first), NewEvent(odd), NewEvent(last)}))
	if len(got) != 3 || len(got[1].ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("got %v; want the three events, the middle one with its unknown field", got)
	}
	for _, d := range []struct {
		name string
		b    []byte
	}{
		{"not a delta", encodeEvent(presenters.Event{Sequence: 1, SessionID: "s", Payload: presenters.StatusChangedPayload{Status: presenters.SessionIdle}}, slog.New(slog.DiscardHandler))},
		{"a repeated field", protowire.AppendVarint(protowire.AppendTag(first, eventSequenceField, protowire.VarintType), 9)},
		{"a field of another wire type", protowire.AppendBytes(protowire.AppendTag(first, eventReplayField, protowire.BytesType), nil)},
		{"cut short", first[:len(first)-1]},
	} {
		if _, ok := parseDelta(d.b); ok {
			t.Errorf("%s: parsed as a delta that can be merged", d.name)
		}
	}
}

func protoSliceEqual(a, b []*pb.AgenticEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// A large frame takes a buffer near its size, not gRPC's default 1 MiB tier.
func TestFrameBufferFitsItsSize(t *testing.T) {
	var evs []*Event
	for i := range 40 {
		evs = append(evs, NewEvent(encodeEvent(delta(uint64(i+1), "s", "m", presenters.RoleAssistant, strings.Repeat("x", 1000)), slog.New(slog.DiscardHandler))))
	}
	f := Frames{}
	frame := f.Frame(evs)
	defer frame.slice.Free()
	if b := frame.slice[0].ReadOnlyData(); len(b) < 40_000 || cap(b) > 64<<10 {
		t.Fatalf("a %d-byte frame in a buffer of %d", len(b), cap(b))
	}
}

package service

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// decodeFrame reads a frame as any protobuf decoder would.
func decodeFrame(t *testing.T, f *encodedFrame) []*pb.AgenticEvent {
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
	domain = append(domain, replayed, delta(13, "s", "m2", presenters.RoleUser, " live again"))

	var evs []*encodedEvent
	var want []*pb.AgenticEvent
	for i, ev := range domain {
		// Live deltas come from encodeMessageDelta, deltas read back from an older log
		// from proto.Marshal: both merge.
		b := encodeEvent(ev, discard)
		if i%2 == 1 {
			var err error
			if b, err = proto.Marshal(eventToPB(ev)); err != nil {
				t.Fatal(err)
			}
		}
		evs = append(evs, newEncodedEvent(b))
		want = append(want, eventToPB(ev))
	}

	unmerged := frameBuilder{}
	if got := decodeFrame(t, unmerged.frame(evs)); !protoSliceEqual(got, want) {
		t.Errorf("unmerged frame:\n got %v\nwant %v", got, want)
	}

	merging := frameBuilder{merge: true}
	wantMerged := mergedDeltas(want)
	if len(wantMerged) != 8 {
		t.Fatalf("the rule merged %d events into %d; the test expects 8", len(want), len(wantMerged))
	}
	for range 2 { // the builder's scratch space is reused
		if got := decodeFrame(t, merging.frame(evs)); !protoSliceEqual(got, wantMerged) {
			t.Errorf("merged frame:\n got %v\nwant %v", got, wantMerged)
		}
	}
	if got := decodeFrame(t, merging.frame(evs[:1])); !protoSliceEqual(got, want[:1]) {
		t.Errorf("a frame of one event: %v", got)
	}
}

// An encoding the builder does not fully understand (here an extra field a newer
// encoder might add) is sent as it is and never merged: merging must not drop data.
func TestFrameSendsUnknownEncodingsAsTheyAre(t *testing.T) {
	first := encodeEvent(delta(1, "s", "m", presenters.RoleAssistant, "a"), discard)
	odd := protowire.AppendTag(encodeEvent(delta(2, "s", "m", presenters.RoleAssistant, "b"), discard), 99, protowire.VarintType)
	odd = protowire.AppendVarint(odd, 7)
	last := encodeEvent(delta(3, "s", "m", presenters.RoleAssistant, "c"), discard)
	f := frameBuilder{merge: true}
	got := decodeFrame(t, f.frame([]*encodedEvent{newEncodedEvent(first), newEncodedEvent(odd), newEncodedEvent(last)}))
	if len(got) != 3 || len(got[1].ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("got %v; want the three events, the middle one with its unknown field", got)
	}
	for _, d := range []struct {
		name string
		b    []byte
	}{
		{"not a delta", encodeEvent(presenters.Event{Sequence: 1, SessionID: "s", Payload: presenters.StatusChangedPayload{Status: presenters.SessionIdle}}, discard)},
		{"a repeated field", protowire.AppendVarint(protowire.AppendTag(first, eventSequenceField, protowire.VarintType), 9)},
		{"a field of another wire type", protowire.AppendBytes(protowire.AppendTag(first, eventReplayField, protowire.BytesType), nil)},
		{"cut short", first[:len(first)-1]},
	} {
		if _, ok := parseDelta(d.b); ok {
			t.Errorf("%s: parsed as a delta that can be merged", d.name)
		}
	}
}

// A run stops merging before its text would pass maxMergedText, so a merged event stays
// far under MaxEventBytes.
func TestFrameBoundsMergedText(t *testing.T) {
	big := strings.Repeat("x", maxMergedText/2+1)
	evs := []*encodedEvent{
		newEncodedEvent(encodeEvent(delta(1, "s", "m", presenters.RoleAssistant, big), discard)),
		newEncodedEvent(encodeEvent(delta(2, "s", "m", presenters.RoleAssistant, big), discard)),
		newEncodedEvent(encodeEvent(delta(3, "s", "m", presenters.RoleAssistant, "tail"), discard)),
	}
	f := frameBuilder{merge: true}
	got := decodeFrame(t, f.frame(evs))
	if len(got) != 2 || got[0].GetSequence() != 1 || got[1].GetSequence() != 3 || got[1].GetMessageDelta().GetText() != big+"tail" {
		t.Fatalf("got %d events (sequences %v); want 1 alone, then 2 and 3 merged", len(got), frameSequences(&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Events{Events: &pb.EventBatch{Events: got}}}))
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

package wire

import (
	"bytes"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

func deltaEvent(seq uint64, session, agent, msg, text string, role presenters.MessageRole, at time.Time) presenters.Event {
	return presenters.Event{Sequence: seq, SessionID: session, AgentID: agent, Time: at,
		Payload: presenters.MessageDeltaPayload{MessageID: msg, Text: text, Role: role}}
}

// compareDelta fails unless encodeMessageDelta, where it takes the event, writes what
// proto.Marshal writes for the converted event. It reports whether it took it.
func compareDelta(t *testing.T, ev presenters.Event) bool {
	t.Helper()
	got, ok := encodeMessageDelta(ev, ev.Payload.(presenters.MessageDeltaPayload))
	if !ok {
		return false
	}
	want, err := proto.Marshal(eventToPB(ev))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeMessageDelta(%+v)\n got %x\nwant %x", ev, got, want)
	}
	return true
}

// checkDelta is compareDelta, and fails too unless the event was taken (wantOK) or
// declined, to go the general way.
func checkDelta(t *testing.T, ev presenters.Event, wantOK bool) {
	t.Helper()
	if ok := compareDelta(t, ev); ok != wantOK {
		t.Fatalf("encodeMessageDelta(%+v): ok=%v, want %v", ev, ok, wantOK)
	}
}

func TestEncodeMessageDeltaMatchesProtoMarshal(t *testing.T) {
	now := time.Date(2026, 11, 22, 4, 5, 6, 789, time.UTC)
	for _, ev := range []presenters.Event{
		deltaEvent(1, "s", "acp.x", "m", "hello", presenters.RoleAssistant, now),
		deltaEvent(1<<40, "3f1c0b9e-aaaa-bbbb-cccc-0123456789ab", "deepchat.default", "m-1", "héllo ✓ 🙂", presenters.RoleUser, now),
		deltaEvent(0, "", "", "", "", "", time.Time{}),
		deltaEvent(7, "s", "a", "m", "", presenters.RoleAssistant, time.Unix(0, 0)),
		deltaEvent(7, "s", "a", "m", "x", presenters.RoleAssistant, time.Unix(-5, 3)),
		deltaEvent(7, "s", "a", "m", "x", presenters.MessageRole("unknown"), time.Unix(1, 0)),
		deltaEvent(9, "s", "a", "m", strings.Repeat("long text ", 100_000), presenters.RoleAssistant, now),
	} {
		checkDelta(t, ev, true)
		ev.Replay = true
		checkDelta(t, ev, true)
	}
	// Left to encodeEvent, which cleans and cuts:
	checkDelta(t, deltaEvent(1, "s", "a", "m", "bad \xff byte", presenters.RoleAssistant, now), false)
	checkDelta(t, deltaEvent(1, "s\xc3", "a", "m", "x", presenters.RoleAssistant, now), false)
	checkDelta(t, deltaEvent(1, "s", "a", "m", strings.Repeat("x", MaxEventBytes), presenters.RoleAssistant, now), false)
}

func FuzzEncodeMessageDelta(f *testing.F) {
	f.Add(uint64(1), "s", "acp.x", "m", "hello", "assistant", int64(1_790_000_000), int64(789), false)
	f.Add(uint64(0), "", "", "", "", "", int64(0), int64(0), true)
	f.Fuzz(func(t *testing.T, seq uint64, session, agent, msg, text, role string, sec, nsec int64, replay bool) {
		at := time.Unix(sec, nsec%1_000_000_000)
		ev := deltaEvent(seq, session, agent, msg, text, presenters.MessageRole(role), at)
		ev.Replay = replay
		compareDelta(t, ev)
	})
}

// encodeMessageDelta writes fields by number. It must know every field the general
// path could set on a MESSAGE_DELTA event: a field added to the proto messages or to
// the domain types it is built from fails here until the encoder learns it.
func TestEncodeMessageDeltaKnowsEveryField(t *testing.T) {
	fieldsOf := func(d protoreflect.MessageDescriptor, skipOneof bool) map[string]protowire.Number {
		got := map[string]protowire.Number{}
		for i := range d.Fields().Len() {
			f := d.Fields().Get(i)
			if skipOneof && f.ContainingOneof() != nil && f.Name() != "message_delta" {
				continue
			}
			got[string(f.Name())] = f.Number()
		}
		return got
	}
	for _, c := range []struct {
		desc protoreflect.MessageDescriptor
		want map[string]protowire.Number
	}{
		{(&pb.AgenticEvent{}).ProtoReflect().Descriptor(), map[string]protowire.Number{
			"sequence": eventSequenceField, "session_id": eventSessionIDField, "agent_id": eventAgentIDField,
			"event_time": eventTimeField, "type": eventTypeField, "replay": eventReplayField, "message_delta": eventMessageDeltaField}},
		{(&pb.MessageDelta{}).ProtoReflect().Descriptor(), map[string]protowire.Number{
			"message_id": deltaMessageIDField, "text": deltaTextField, "role": deltaRoleField}},
		{(&timestamppb.Timestamp{}).ProtoReflect().Descriptor(), map[string]protowire.Number{
			"seconds": timestampSecondsField, "nanos": timestampNanosField}},
	} {
		if got := fieldsOf(c.desc, true); !maps.Equal(got, c.want) {
			t.Errorf("%s has fields %v; encodeMessageDelta knows %v", c.desc.FullName(), got, c.want)
		}
	}
	for typ, want := range map[reflect.Type]int{
		reflect.TypeFor[presenters.Event]():               6, // Sequence, SessionID, AgentID, Time, Replay, Payload
		reflect.TypeFor[presenters.MessageDeltaPayload](): 3, // MessageID, Text, Role
	} {
		if typ.NumField() != want {
			t.Errorf("%s has %d fields; encodeMessageDelta encodes %d", typ, typ.NumField(), want)
		}
	}
}

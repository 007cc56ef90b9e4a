package service

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

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
	}
	// Left to encodeEvent, which cleans and cuts:
	checkDelta(t, deltaEvent(1, "s", "a", "m", "bad \xff byte", presenters.RoleAssistant, now), false)
	checkDelta(t, deltaEvent(1, "s\xc3", "a", "m", "x", presenters.RoleAssistant, now), false)
	checkDelta(t, deltaEvent(1, "s", "a", "m", strings.Repeat("x", MaxEventBytes), presenters.RoleAssistant, now), false)
}

func FuzzEncodeMessageDelta(f *testing.F) {
	f.Add(uint64(1), "s", "acp.x", "m", "hello", "assistant", int64(1_790_000_000), int64(789))
	f.Add(uint64(0), "", "", "", "", "", int64(0), int64(0))
	f.Fuzz(func(t *testing.T, seq uint64, session, agent, msg, text, role string, sec, nsec int64) {
		at := time.Unix(sec, nsec%1_000_000_000)
		compareDelta(t, deltaEvent(seq, session, agent, msg, text, presenters.MessageRole(role), at))
	})
}

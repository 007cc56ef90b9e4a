package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// MESSAGE_DELTA is nearly every event of a streaming turn, and building its
// pb.AgenticEvent (five objects) to marshal it through reflection cost about a tenth of
// agenticd's CPU in a flood. encodeMessageDelta writes the same bytes
// proto.Marshal(eventToPB(ev)) writes (TestEncodeMessageDeltaMatchesProtoMarshal),
// straight from the domain event, in one allocation. The field numbers are those of
// proto/agentic/v1/events.proto.
const (
	eventSequenceField     protowire.Number = 1
	eventSessionIDField    protowire.Number = 2
	eventAgentIDField      protowire.Number = 3
	eventTimeField         protowire.Number = 4 // event_time
	eventTypeField         protowire.Number = 5
	eventReplayField       protowire.Number = 6
	eventMessageDeltaField protowire.Number = 14

	timestampSecondsField protowire.Number = 1
	timestampNanosField   protowire.Number = 2

	deltaMessageIDField protowire.Number = 1
	deltaTextField      protowire.Number = 2
	deltaRoleField      protowire.Number = 3
)

// encodeMessageDelta encodes a MESSAGE_DELTA event. ok is false when it must go the
// general way: a string that is not valid UTF-8 (cleaned there) or an event over
// MaxEventBytes (cut there).
func encodeMessageDelta(ev presenters.Event, p presenters.MessageDeltaPayload) (b []byte, ok bool) {
	if !utf8.ValidString(ev.SessionID) || !utf8.ValidString(ev.AgentID) || !utf8.ValidString(p.MessageID) ||
		!utf8.ValidString(p.Text) {
		return nil, false
	}
	role := uint64(roles[p.Role])
	deltaLen := stringFieldSize(deltaMessageIDField, p.MessageID) + stringFieldSize(deltaTextField, p.Text) +
		varintFieldSize(deltaRoleField, role)
	var seconds, nanos uint64
	timeLen := 0
	if !ev.Time.IsZero() {
		seconds, nanos = uint64(ev.Time.Unix()), uint64(ev.Time.Nanosecond())
		timeLen = varintFieldSize(timestampSecondsField, seconds) + varintFieldSize(timestampNanosField, nanos)
	}
	eventType := uint64(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA)
	var replay uint64
	if ev.Replay {
		replay = 1
	}
	size := varintFieldSize(eventSequenceField, ev.Sequence) + stringFieldSize(eventSessionIDField, ev.SessionID) +
		stringFieldSize(eventAgentIDField, ev.AgentID) + varintFieldSize(eventTypeField, eventType) +
		varintFieldSize(eventReplayField, replay) + protowire.SizeTag(eventMessageDeltaField) + protowire.SizeBytes(deltaLen)
	if !ev.Time.IsZero() {
		size += protowire.SizeTag(eventTimeField) + protowire.SizeBytes(timeLen)
	}
	if size > MaxEventBytes {
		return nil, false
	}

	b = make([]byte, 0, size)
	b = appendVarintField(b, eventSequenceField, ev.Sequence)
	b = appendStringField(b, eventSessionIDField, ev.SessionID)
	b = appendStringField(b, eventAgentIDField, ev.AgentID)
	if !ev.Time.IsZero() {
		b = protowire.AppendTag(b, eventTimeField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(timeLen))
		b = appendVarintField(b, timestampSecondsField, seconds)
		b = appendVarintField(b, timestampNanosField, nanos)
	}
	b = appendVarintField(b, eventTypeField, eventType)
	b = appendVarintField(b, eventReplayField, replay)
	b = protowire.AppendTag(b, eventMessageDeltaField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(deltaLen))
	b = appendStringField(b, deltaMessageIDField, p.MessageID)
	b = appendStringField(b, deltaTextField, p.Text)
	b = appendVarintField(b, deltaRoleField, role)
	return b, true
}

// proto3 leaves zero values out.

func varintFieldSize(n protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(n) + protowire.SizeVarint(v)
}

func stringFieldSize(n protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(n) + protowire.SizeBytes(len(s))
}

func appendVarintField(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), v)
}

func appendStringField(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), s)
}

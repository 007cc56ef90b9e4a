// Package wire is agenticd's wire encoding of events: the conversion of the domain
// (presenters) to protobuf (agentic.v1), each event encoded once for every subscriber
// (Encode, Event), the batch frames built from those bytes (Frames, Frame), and the gRPC
// codec that sends a Frame as it is and notes the requests that do not decode
// (CodecOption, Requests). It knows neither the store nor the service's handlers.
package wire

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// Event is an AgenticEvent's wire bytes, encoded once and shared by every
// subscriber: each stream's frames are built from them (Frames) instead of
// marshalling the event per stream. Nothing writes to b after it is made.
type Event struct {
	b       []byte
	delta   deltaLayout // where a MESSAGE_DELTA's fields are in b, for merging
	isDelta bool        // b is a MESSAGE_DELTA that parseDelta understood
}

// NewEvent wraps an AgenticEvent's wire bytes, as Encode made them (or the store kept
// them); b must not be written to afterwards.
func NewEvent(b []byte) *Event {
	ev := &Event{b: b}
	ev.delta, ev.isDelta = parseDelta(b)
	return ev
}

// Frame is a message's wire bytes, which the codec below sends as they are.
type Frame struct{ slice mem.BufferSlice }

// frameCodec is gRPC's proto codec, except for Frame and for requests with
// invalid UTF-8 (Requests).
type frameCodec struct {
	encoding.CodecV2
	invalid *Requests
}

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*Frame); ok {
		return f.slice, nil
	}
	return c.CodecV2.Marshal(v)
}

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.invalid.unmarshal(c.CodecV2, data, v)
}

// CodecOption installs the codec on a server; it notes the requests with
// invalid UTF-8 in invalid.
func CodecOption(invalid *Requests) grpc.ServerOption {
	return grpc.ForceServerCodecV2(frameCodec{CodecV2: encoding.GetCodecV2(protocodec.Name), invalid: invalid})
}

// Encode is an event's wire bytes, as every subscriber gets them.
func Encode(ev presenters.Event, logger *slog.Logger) *Event {
	return NewEvent(encodeEvent(ev, logger))
}

// Bytes is the event's wire bytes (an AgenticEvent); they must not be written to.
func (ev *Event) Bytes() []byte { return ev.b }

// encodeEvent marshals an event for every subscriber. One over MaxEventBytes is sent with
// its largest texts cut; one that cannot be encoded at all (or cut small enough) is
// replaced by an ERROR event with the same sequence, so that a stream never ends, nor
// skips a sequence, because of one event.
func encodeEvent(ev presenters.Event, logger *slog.Logger) (encoded []byte) {
	// Each event is encoded once for every stream: a payload that panics here would
	// otherwise break every stream that reaches its sequence, resumed ones included.
	defer func() {
		if r := recover(); r != nil {
			logger.Error("encoding an event panicked; an ERROR event takes its place",
				"session_id", ev.SessionID, "agent_id", ev.AgentID, "sequence", ev.Sequence, "panic", r, "stack", string(debug.Stack()))
			encoded = notSendable(ev, "unknown")
		}
	}()
	if p, ok := ev.Payload.(presenters.MessageDeltaPayload); ok {
		if b, ok := encodeMessageDelta(ev, p); ok {
			return b
		}
	}
	msg := eventToPB(ev)
	b, err := proto.Marshal(msg)
	if err == nil && len(b) <= MaxEventBytes {
		return b
	}
	attrs := []any{"session_id", ev.SessionID, "agent_id", ev.AgentID, "sequence", ev.Sequence, "type", msg.GetType().String()}
	if err == nil {
		size := len(b)
		if !FitWithin(msg, MaxEventBytes) {
			err = fmt.Errorf("%d bytes, over the %d an event may take, and cutting its texts is not enough", size, MaxEventBytes)
		} else if b, err = proto.Marshal(msg); err == nil {
			logger.Warn("event over the size cap sent with its largest texts cut", append(attrs, "bytes", size)...)
			return b
		}
	}
	logger.Error("event could not be sent as it is; an ERROR event takes its place", append(attrs, "err", err)...)
	return notSendable(ev, msg.GetType().String())
}

// notSendable is the ERROR event sent in place of one that cannot be encoded, with the
// same sequence, so no stream has a gap. Every string of it is valid UTF-8 (ids through
// clean, the rest ours), the one thing proto3 refuses to marshal.
func notSendable(ev presenters.Event, typ string) []byte {
	b, _ := proto.Marshal(&pb.AgenticEvent{
		Sequence:  ev.Sequence,
		SessionId: clean(ev.SessionID),
		AgentId:   clean(ev.AgentID),
		EventTime: timestamp(ev.Time),
		Type:      pb.AgenticEventType_AGENTIC_EVENT_TYPE_ERROR,
		Payload: &pb.AgenticEvent_Error{Error: &pb.ErrorReported{
			Reason: pb.ErrorReason_ERROR_REASON_EVENT_NOT_SENDABLE,
			Message: fmt.Sprintf("event %d (%s) could not be sent and this one takes its place (the server log says why); GetSession and ListMessages show the session's state",
				ev.Sequence, typ),
		}},
	})
	return b
}

// BufferSlice is the frame's bytes, as the codec sends them; gRPC frees them once written.
func (f *Frame) BufferSlice() mem.BufferSlice { return f.slice }

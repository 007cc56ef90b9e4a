package service

import (
	"bytes"
	"slices"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// Merging deltas. A stream that fell behind (a slow client, a flood, a replay) finds many
// events waiting at once, and in a streaming turn nearly all of them are MESSAGE_DELTAs
// of one message. Decoding each costs every client far more than the text it carries, so
// by default consecutive deltas of one message that wait together go out as one: their
// texts joined, with the sequence and event_time of the last, which is also the resume
// point. Nothing waits to be merged (a batch is what already waits), so a stream that
// keeps up gets every delta as it came, and one that does not catches up faster.
// SubscribeRequest.unmerged_deltas turns it off for a stream.

// frameTagSize is the size of the tag of SubscribeResponse.events and of
// EventBatch.events: field 1, length-delimited, one byte.
const frameTagSize = 1

// deltaParts are the fields of an encoded MESSAGE_DELTA event, as sub-slices of its
// bytes: whole fields (tag included), but for text, which is the text alone. A field
// left out (proto3 leaves out zero values) is nil.
type deltaParts struct {
	head      [6][]byte // sequence, session_id, agent_id, event_time, type, replay
	messageID []byte
	text      []byte
	role      []byte
}

// headWireTypes are the wire types of deltaParts.head's fields.
var headWireTypes = [6]protowire.Type{protowire.VarintType, protowire.BytesType, protowire.BytesType,
	protowire.BytesType, protowire.VarintType, protowire.VarintType}

// nextField splits b's first field off: its number and wire type, the whole field (tag
// included), and where its value starts in it. ok is false for bytes that are not one.
func nextField(b []byte) (num protowire.Number, typ protowire.Type, field []byte, valueAt int, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, 0, false
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, nil, 0, false
	}
	return num, typ, b[: n+m : n+m], n, true
}

// bytesValue is a length-delimited field's value, non-nil even when empty.
func bytesValue(field []byte, valueAt int) []byte {
	v, _ := protowire.ConsumeBytes(field[valueAt:])
	return v[:len(v):len(v)]
}

// parseDelta reads an event's bytes as a MESSAGE_DELTA. ok is false for any other event,
// and for bytes with fields it does not expect (repeated, unknown or of another wire
// type): such an event is sent as it is.
func parseDelta(b []byte) (d deltaParts, ok bool) {
	var delta []byte
	for len(b) > 0 {
		num, typ, field, valueAt, ok := nextField(b)
		if !ok {
			return d, false
		}
		b = b[len(field):]
		switch {
		case num >= eventSequenceField && num <= eventReplayField:
			if d.head[num-1] != nil || typ != headWireTypes[num-1] {
				return d, false
			}
			d.head[num-1] = field
		case num == eventMessageDeltaField && typ == protowire.BytesType && delta == nil:
			delta = bytesValue(field, valueAt)
		default:
			return d, false
		}
	}
	if delta == nil || d.head[eventTypeField-1] == nil {
		return d, false
	}
	if t, _ := protowire.ConsumeVarint(d.head[eventTypeField-1][1:]); t != uint64(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA) {
		return d, false
	}
	for len(delta) > 0 {
		num, typ, field, valueAt, ok := nextField(delta)
		if !ok {
			return d, false
		}
		delta = delta[len(field):]
		switch {
		case num == deltaMessageIDField && typ == protowire.BytesType && d.messageID == nil:
			d.messageID = field
		case num == deltaTextField && typ == protowire.BytesType && d.text == nil:
			d.text = bytesValue(field, valueAt)
		case num == deltaRoleField && typ == protowire.VarintType && d.role == nil:
			d.role = field
		default:
			return d, false
		}
	}
	return d, true
}

// sameMessage reports whether b continues a's message: same session, agent, message,
// role and replay mark.
func (a *deltaParts) sameMessage(b *deltaParts) bool {
	return bytes.Equal(a.head[eventSessionIDField-1], b.head[eventSessionIDField-1]) &&
		bytes.Equal(a.head[eventAgentIDField-1], b.head[eventAgentIDField-1]) &&
		bytes.Equal(a.head[eventReplayField-1], b.head[eventReplayField-1]) &&
		bytes.Equal(a.messageID, b.messageID) && bytes.Equal(a.role, b.role)
}

// frameBuilder builds one stream's EventBatch frames; its scratch space is reused from
// frame to frame.
type frameBuilder struct {
	merge   bool
	parts   []deltaParts // per event of the batch being built
	isDelta []bool       // whether parts[i] is a delta that may be merged
	runs    []frameRun   // the events that go out as one, in order
}

// frameRun is one event of a frame: evs[start:end] of the batch, merged when longer than
// one, with its sizes worked out once.
type frameRun struct {
	start, end int
	size       int // the event's encoded size
	deltaSize  int // merged: the MessageDelta's encoded size
	text       int // merged: the joined text's length
}

// framePool holds frame buffers in tiers up to what a full batch needs (maxBatchBytes and
// its framing fit 512 KiB). gRPC's default pool jumps from 32 KiB to 1 MiB, which a large
// frame would take, clear and, on a slow stream, hold until written.
var framePool = mem.NewTieredBufferPool(4<<10, 16<<10, 32<<10, 64<<10, 128<<10, 256<<10, 512<<10)

// frame is the SubscribeResponse whose EventBatch holds evs, deltas merged when the
// builder merges, in one buffer from framePool. gRPC returns it once written, so a
// frame is sent once.
func (f *frameBuilder) frame(evs []*encodedEvent) *encodedFrame {
	f.plan(evs)
	batchLen := 0
	for _, r := range f.runs {
		batchLen += frameTagSize + protowire.SizeVarint(uint64(r.size)) + r.size
	}
	size := frameTagSize + protowire.SizeVarint(uint64(batchLen)) + batchLen
	buf := framePool.Get(size)
	b := (*buf)[:0]
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(batchLen))
	for _, r := range f.runs {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.size))
		if r.end-r.start == 1 {
			b = append(b, evs[r.start].b...)
		} else {
			b = f.appendMerged(b, r)
		}
	}
	*buf = b
	clear(f.parts) // they point into the events' bytes
	return &encodedFrame{slice: mem.BufferSlice{mem.NewBuffer(buf, framePool)}}
}

// A merged delta is no larger than the batch it came in, which keeps it under
// MaxEventBytes: this fails to compile should maxBatchBytes ever pass it.
const _ = uint(MaxEventBytes - maxBatchBytes)

// plan splits evs into runs: a single event, or consecutive deltas of one message.
func (f *frameBuilder) plan(evs []*encodedEvent) {
	f.runs = f.runs[:0]
	if !f.merge || len(evs) < 2 {
		for i, ev := range evs {
			f.runs = append(f.runs, frameRun{start: i, end: i + 1, size: len(ev.b)})
		}
		return
	}
	f.parts = slices.Grow(f.parts[:0], len(evs))[:len(evs)]
	f.isDelta = slices.Grow(f.isDelta[:0], len(evs))[:len(evs)]
	for i, ev := range evs {
		f.parts[i], f.isDelta[i] = parseDelta(ev.b)
	}
	for start := 0; start < len(evs); {
		r := frameRun{start: start, end: start + 1, size: len(evs[start].b)}
		for f.isDelta[start] && r.end < len(evs) && f.isDelta[r.end] && f.parts[start].sameMessage(&f.parts[r.end]) {
			r.end++
		}
		if r.end-r.start > 1 {
			f.sizeMerged(&r)
		}
		f.runs = append(f.runs, r)
		start = r.end
	}
}

// sizeMerged works out the sizes of the one event a run of deltas goes out as: the last
// delta's fields with every text of the run.
func (f *frameBuilder) sizeMerged(r *frameRun) {
	last := &f.parts[r.end-1]
	for _, p := range f.parts[r.start:r.end] {
		r.text += len(p.text)
	}
	r.deltaSize = len(last.messageID) + len(last.role)
	if r.text > 0 {
		r.deltaSize += protowire.SizeTag(deltaTextField) + protowire.SizeBytes(r.text)
	}
	r.size = protowire.SizeTag(eventMessageDeltaField) + protowire.SizeBytes(r.deltaSize)
	for _, field := range last.head {
		r.size += len(field)
	}
}

// appendMerged appends the one event a run of deltas goes out as: the last delta's
// fields (its sequence and event_time among them) with every text of the run, in order.
func (f *frameBuilder) appendMerged(b []byte, r frameRun) []byte {
	last := &f.parts[r.end-1]
	for _, field := range last.head {
		b = append(b, field...)
	}
	b = protowire.AppendTag(b, eventMessageDeltaField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(r.deltaSize))
	b = append(b, last.messageID...)
	if r.text > 0 {
		b = protowire.AppendTag(b, deltaTextField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.text))
		for _, p := range f.parts[r.start:r.end] {
			b = append(b, p.text...)
		}
	}
	return append(b, last.role...)
}

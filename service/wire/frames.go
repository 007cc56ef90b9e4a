package wire

import (
	"bytes"

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

// deltaLayout locates the fields of an encoded MESSAGE_DELTA event in its bytes: whole
// fields (tag included), but for text, which is the text alone. A field left out (proto3
// leaves out zero values) is an empty span. It is worked out once per event
// (NewEvent) and kept with it, in offsets: 72 bytes, where slices would take 216.
type deltaLayout struct {
	head      [6]span // sequence, session_id, agent_id, event_time, type, replay
	messageID span
	text      span
	role      span
}

// span is b[from:to] of an event's bytes b.
type span struct{ from, to uint32 }

func (s span) of(b []byte) []byte { return b[s.from:s.to] }
func (s span) len() int           { return int(s.to - s.from) }

// headWireTypes are the wire types of deltaLayout.head's fields.
var headWireTypes = [6]protowire.Type{protowire.VarintType, protowire.BytesType, protowire.BytesType,
	protowire.BytesType, protowire.VarintType, protowire.VarintType}

// nextField finds the field at b[at:]: its number and wire type, its span (tag
// included), and where its value starts. ok is false for bytes that are not one.
func nextField(b []byte, at int) (num protowire.Number, typ protowire.Type, field span, valueAt int, ok bool) {
	num, typ, n := protowire.ConsumeTag(b[at:])
	if n < 0 {
		return 0, 0, span{}, 0, false
	}
	m := protowire.ConsumeFieldValue(num, typ, b[at+n:])
	if m < 0 {
		return 0, 0, span{}, 0, false
	}
	return num, typ, span{uint32(at), uint32(at + n + m)}, at + n, true
}

// bytesValue is the span of a length-delimited field's value, which starts at valueAt.
func bytesValue(b []byte, field span, valueAt int) span {
	v, n := protowire.ConsumeBytes(b[valueAt:field.to])
	return span{uint32(valueAt + n - len(v)), uint32(valueAt + n)}
}

// parseDelta reads an event's bytes as a MESSAGE_DELTA. ok is false for any other event,
// and for bytes with fields it does not expect (repeated, unknown or of another wire
// type): such an event is sent as it is.
func parseDelta(b []byte) (d deltaLayout, ok bool) {
	var delta span
	seenDelta := false
	for at := 0; at < len(b); {
		num, typ, field, valueAt, ok := nextField(b, at)
		if !ok {
			return d, false
		}
		at = int(field.to)
		switch {
		case num >= eventSequenceField && num <= eventReplayField:
			if d.head[num-1].to != 0 || typ != headWireTypes[num-1] {
				return d, false
			}
			d.head[num-1] = field
		case num == eventMessageDeltaField && typ == protowire.BytesType && !seenDelta:
			delta, seenDelta = bytesValue(b, field, valueAt), true
		default:
			return d, false
		}
	}
	typeField := d.head[eventTypeField-1]
	if !seenDelta || typeField.to == 0 {
		return d, false
	}
	if t, _ := protowire.ConsumeVarint(b[typeField.from+1 : typeField.to]); t != uint64(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA) {
		return d, false
	}
	seenText := false
	for at := int(delta.from); at < int(delta.to); {
		num, typ, field, valueAt, ok := nextField(b[:delta.to], at)
		if !ok {
			return d, false
		}
		at = int(field.to)
		switch {
		case num == deltaMessageIDField && typ == protowire.BytesType && d.messageID.to == 0:
			d.messageID = field
		case num == deltaTextField && typ == protowire.BytesType && !seenText:
			d.text, seenText = bytesValue(b, field, valueAt), true
		case num == deltaRoleField && typ == protowire.VarintType && d.role.to == 0:
			d.role = field
		default:
			return d, false
		}
	}
	return d, true
}

// continues reports whether delta ev continues delta prev's message: same session,
// agent, message, role and replay mark.
func (ev *Event) continues(prev *Event) bool {
	a, b := &prev.delta, &ev.delta
	same := func(x, y span) bool { return bytes.Equal(x.of(prev.b), y.of(ev.b)) }
	return same(a.head[eventSessionIDField-1], b.head[eventSessionIDField-1]) &&
		same(a.head[eventAgentIDField-1], b.head[eventAgentIDField-1]) &&
		same(a.head[eventReplayField-1], b.head[eventReplayField-1]) &&
		same(a.messageID, b.messageID) && same(a.role, b.role)
}

// Frames builds one stream's EventBatch frames; its scratch space is reused from
// frame to frame.
type Frames struct {
	Merge bool       // join each run of one message's deltas into one MESSAGE_DELTA
	runs  []frameRun // the events that go out as one, in order
}

// frameRun is one event of a frame: evs[start:end] of the batch, merged when longer than
// one, with its sizes worked out once.
type frameRun struct {
	start, end int
	size       int // the event's encoded size
	deltaSize  int // merged: the MessageDelta's encoded size
	text       int // merged: the joined text's length
}

// framePool holds frame buffers in tiers up to what a full batch needs (the service's
// batch bound and its framing fit 512 KiB). gRPC's default pool jumps from 32 KiB to 1 MiB, which a large
// frame would take, clear and, on a slow stream, hold until written.
var framePool = mem.NewTieredBufferPool(4<<10, 16<<10, 32<<10, 64<<10, 128<<10, 256<<10, 512<<10)

// Frame is the SubscribeResponse whose EventBatch holds evs, deltas merged when the
// builder merges, in one buffer from framePool. gRPC returns it once written, so a
// frame is sent once.
func (f *Frames) Frame(evs []*Event) *Frame {
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
			b = appendMerged(b, evs[r.start:r.end], r)
		}
	}
	*buf = b
	return &Frame{slice: mem.BufferSlice{mem.NewBuffer(buf, framePool)}}
}

// plan splits evs into runs: a single event, or consecutive deltas of one message.
func (f *Frames) plan(evs []*Event) {
	f.runs = f.runs[:0]
	for start := 0; start < len(evs); {
		r := frameRun{start: start, end: start + 1, size: len(evs[start].b)}
		if f.Merge && evs[start].isDelta {
			for r.end < len(evs) && evs[r.end].isDelta && evs[r.end].continues(evs[start]) {
				r.end++
			}
			if r.end-r.start > 1 {
				sizeMerged(evs[r.start:r.end], &r)
			}
		}
		f.runs = append(f.runs, r)
		start = r.end
	}
}

// sizeMerged works out the sizes of the one event a run of deltas goes out as: the last
// delta's fields with every text of the run.
func sizeMerged(run []*Event, r *frameRun) {
	last := &run[len(run)-1].delta
	for _, ev := range run {
		r.text += ev.delta.text.len()
	}
	r.deltaSize = last.messageID.len() + last.role.len()
	if r.text > 0 {
		r.deltaSize += protowire.SizeTag(deltaTextField) + protowire.SizeBytes(r.text)
	}
	r.size = protowire.SizeTag(eventMessageDeltaField) + protowire.SizeBytes(r.deltaSize)
	for _, field := range last.head {
		r.size += field.len()
	}
}

// appendMerged appends the one event a run of deltas goes out as: the last delta's
// fields (its sequence and event_time among them) with every text of the run, in order.
func appendMerged(b []byte, run []*Event, r frameRun) []byte {
	last := run[len(run)-1]
	for _, field := range last.delta.head {
		b = append(b, field.of(last.b)...)
	}
	b = protowire.AppendTag(b, eventMessageDeltaField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(r.deltaSize))
	b = append(b, last.delta.messageID.of(last.b)...)
	if r.text > 0 {
		b = protowire.AppendTag(b, deltaTextField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.text))
		for _, ev := range run {
			b = append(b, ev.delta.text.of(ev.b)...)
		}
	}
	return append(b, last.delta.role.of(last.b)...)
}

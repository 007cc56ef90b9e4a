package service

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// encodedEvent is an event's wire bytes, encoded once and sent as they are to every
// subscriber (the codec below recognises it), instead of being marshalled per stream.
type encodedEvent struct{ bytes []byte }

// sharedEventCodec is gRPC's proto codec, except for encodedEvent.
type sharedEventCodec struct{ encoding.CodecV2 }

func (c sharedEventCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedEvent); ok {
		// A SliceBuffer's Free does nothing: the shared bytes stay intact for the others.
		return mem.BufferSlice{mem.SliceBuffer(e.bytes)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// sharedEventCodecOption installs the codec on a server.
func sharedEventCodecOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(sharedEventCodec{encoding.GetCodecV2(protocodec.Name)})
}

// encoded returns the event's wire bytes, converting and marshalling on first use.
func (he *heldEvent) encoded() (*encodedEvent, error) {
	he.encodeOnce.Do(func() {
		b, err := proto.Marshal(eventToPB(he.ev))
		he.wire, he.wireErr = &encodedEvent{bytes: b}, err
	})
	return he.wire, he.wireErr
}

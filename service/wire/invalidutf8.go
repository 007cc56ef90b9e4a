package wire

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Requests holds the requests that did not decode: invalid UTF-8 in a string
// field (which proto3 refuses), a truncated field, an overlong varint. gRPC turns any
// decoding error into INTERNAL before an interceptor runs, yet the fault is the client's:
// so the codec hands such a request on empty, noted here, and the service's interceptors
// refuse it (Take) with INVALID_ARGUMENT saying what was wrong.
type Requests struct {
	// Limit is the largest request message accepted, in bytes; TooLarge is the refusal
	// (a status error) of one of n bytes over it. A zero Limit accepts any size.
	Limit    int
	TooLarge func(n int) error

	faults sync.Map // the request (a pointer) -> what was wrong with it: a message, or an error
}

// Take forgets a request and returns its refusal, a status error, if the codec noted it.
func (r *Requests) Take(req any) error {
	fault, ok := r.faults.LoadAndDelete(req)
	if !ok {
		return nil
	}
	if msg, ok := fault.(string); ok {
		return status.Error(codes.InvalidArgument, msg)
	}
	return fault.(error)
}

// unmarshal decodes data into v with the proto codec; a request that does not decode is
// reset, noted, and not an error.
//
// A request over Limit is noted too, as too large: grpc-go's own refusal of
// one (its receive limit, which the service sets) comes before any interceptor and
// carries no details, so its limit is set above ours and this one refuses first.
func (r *Requests) unmarshal(codec encoding.CodecV2, data mem.BufferSlice, v any) error {
	if n := data.Len(); r.Limit > 0 && n > r.Limit {
		if msg, ok := v.(proto.Message); ok {
			proto.Reset(msg)
			r.faults.Store(v, r.TooLarge(n))
			return nil
		}
	}
	err := codec.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	msg, ok := v.(proto.Message)
	if !ok {
		return err
	}
	fault := fmt.Sprintf("the request is not a valid %s in protobuf's binary encoding (%v): send a whole, well-formed message",
		msg.ProtoReflect().Descriptor().Name(), err)
	var invalid interface{ InvalidUTF8() bool }
	if errors.As(err, &invalid) && invalid.InvalidUTF8() {
		field, found := invalidUTF8Field(data.Materialize(), msg.ProtoReflect().Descriptor())
		if !found {
			field = "a string field"
		}
		fault = field + " is not valid UTF-8: every string field must be UTF-8 text (send binary data base64-encoded)"
	}
	proto.Reset(msg)
	r.faults.Store(v, fault)
	return nil
}

// invalidUTF8Field returns the path (proto field names joined by dots) of the first string
// field in b, a message of type md, that is not valid UTF-8.
func invalidUTF8Field(b []byte, md protoreflect.MessageDescriptor) (string, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return "", false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		switch {
		case fd == nil:
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			return string(fd.Name()), true
		case fd.Kind() == protoreflect.MessageKind:
			if path, ok := invalidUTF8Field(v, fd.Message()); ok {
				return string(fd.Name()) + "." + path, true
			}
		}
	}
	return "", false
}

package service

import (
	"errors"
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

// invalidUTF8Requests holds the requests whose bytes had invalid UTF-8 in a string field,
// which proto3 refuses to decode. gRPC turns any decoding error into INTERNAL before an
// interceptor runs, yet the fault is the client's: so the codec hands such a request on
// empty, noted here, and the interceptors (utf8Unary, utf8Stream) refuse it with
// INVALID_ARGUMENT naming the field.
type invalidUTF8Requests struct {
	fields sync.Map // the request (a pointer) -> the path of the field, like "config.workspace"
}

// take forgets a request and returns its INVALID_ARGUMENT if the codec noted it.
func (r *invalidUTF8Requests) take(req any) error {
	field, ok := r.fields.LoadAndDelete(req)
	if !ok {
		return nil
	}
	return status.Errorf(codes.InvalidArgument,
		"%s is not valid UTF-8: every string field must be UTF-8 text (send binary data base64-encoded)", field)
}

// unmarshal decodes data into v with the proto codec; a request refused only for invalid
// UTF-8 is reset, noted, and not an error.
func (r *invalidUTF8Requests) unmarshal(codec encoding.CodecV2, data mem.BufferSlice, v any) error {
	err := codec.Unmarshal(data, v)
	var invalid interface{ InvalidUTF8() bool }
	if err == nil || !errors.As(err, &invalid) || !invalid.InvalidUTF8() {
		return err
	}
	msg, ok := v.(proto.Message)
	if !ok {
		return err
	}
	field, found := invalidUTF8Field(data.Materialize(), msg.ProtoReflect().Descriptor())
	if !found {
		field = "a string field"
	}
	proto.Reset(msg)
	r.fields.Store(v, field)
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

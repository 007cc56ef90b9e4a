package service

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/proto"
)

// strictJSON is vanguard's JSON codec without its leniency: an unknown field or enum
// name is refused rather than passed over (a typo in a filter would widen it), and a
// body that does not decode is INVALID_ARGUMENT with its ErrorInfo, not UNKNOWN.
type strictJSON struct{ *vanguard.JSONCodec }

func newStrictJSON(res vanguard.TypeResolver) vanguard.Codec {
	c := vanguard.NewJSONCodec(res)
	c.UnmarshalOptions.DiscardUnknown = false
	return strictJSON{c}
}

func (c strictJSON) Unmarshal(data []byte, msg proto.Message) error {
	if err := c.JSONCodec.Unmarshal(data, msg); err != nil {
		return undecodableRequest(fmt.Errorf("the request is not a valid %s in JSON (%v): send the fields the API names, in its JSON form (enum values by name, numbers within range)",
			msg.ProtoReflect().Descriptor().Name(), err))
	}
	return nil
}

// undecodableRequest is err as the Connect error of a body that did not decode, with
// the details every error carries.
func undecodableRequest(err error) error {
	return asConnectError(invalidField("body", "%v", err))
}

// asConnectError is err as a Connect error, with its status's code and details.
func asConnectError(err error) *connect.Error {
	st, _ := toStatus(err)
	ce := connect.NewError(connect.Code(st.Code()), errors.New(st.Message())) // Connect's codes are gRPC's
	for _, d := range st.Details() {
		if m, ok := d.(proto.Message); ok {
			if detail, derr := connect.NewErrorDetail(m); derr == nil {
				ce.AddDetail(detail)
			}
		}
	}
	return ce
}

package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// responseTypes are the response types of the service's methods, by full method name.
var responseTypes = func() map[string]protoreflect.MessageType {
	sd := pb.File_agentic_v1_service_proto.Services().ByName("AgenticService")
	out := map[string]protoreflect.MessageType{}
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName()); err == nil {
			out["/"+string(sd.FullName())+"/"+string(m.Name())] = mt
		}
	}
	return out
}()

// NewResponse is an empty response message of a method of the service, for an answer
// that comes as bytes: a forwarded call's, or one kept for a repeated request_id.
func NewResponse(fullMethod string) (proto.Message, error) {
	mt := responseTypes[fullMethod]
	if mt == nil {
		return nil, fmt.Errorf("forward %s: not a method of %s", fullMethod, pb.AgenticService_ServiceDesc.ServiceName)
	}
	return mt.New().Interface(), nil
}

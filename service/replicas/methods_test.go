package replicas

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/service/wire"
)

// Every method whose request names one session is routed to the session's owner, and
// its response type is known for forwarding: a method added to the service without a
// routing decision fails here.
func TestSessionMethodsCoverTheService(t *testing.T) {
	sd := pb.File_agentic_v1_service_proto.Services().ByName("AgenticService")
	methods := sd.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		full := "/" + string(sd.FullName()) + "/" + string(m.Name())
		f := m.Input().Fields().ByName("session_id")
		names := f != nil && f.Kind() == protoreflect.StringKind && !f.IsList()
		_, routed := sessionMethods[full]
		if names != routed {
			t.Errorf("%s: its request names a session: %v; routed by session: %v", full, names, routed)
		}
		if !routed {
			continue
		}
		resp, err := wire.NewResponse(full)
		if err != nil {
			t.Errorf("%s: %v", full, err)
			continue
		}
		if got := resp.ProtoReflect().Descriptor().FullName(); got != m.Output().FullName() {
			t.Errorf("%s: forwarding would decode its answer as %s, want %s", full, got, m.Output().FullName())
		}
	}
	if _, err := wire.NewResponse("/" + pb.AgenticService_ServiceDesc.ServiceName + "/NoSuchMethod"); err == nil {
		t.Error("NewResponse of an unknown method: no error")
	}
}

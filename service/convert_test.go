package service

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

func TestSessionInfoToPBIsComplete(t *testing.T) {
	info := presenters.SessionInfo{
		SessionID: "s", AgentSessionID: "agent-side", AgentID: "a", Status: presenters.SessionPaused, StatusReason: "r", Workspace: "/w", Title: "t",
		CreatedAt: time.Unix(1, 0), UpdatedAt: time.Unix(2, 0),
		AvailableModes: []presenters.Mode{{ID: "m"}}, CurrentModeID: "m", AvailableModels: []presenters.Model{{ID: "x"}}, CurrentModelID: "x",
		AvailableCommands: []presenters.Command{{Name: "c"}}, Capabilities: presenters.Capabilities{SupportsLoad: true},
		ConfigOptions: []presenters.ConfigOption{{ID: "fast", Type: presenters.ConfigBoolean, CurrentValue: "true"}},
		Usage:         presenters.TokenUsage{TotalTokens: presenters.Reported[int64](4), Cost: presenters.Reported(0.5), CostCurrency: "USD"}, MessageInFlight: "m1",
		PendingPermissions: []presenters.PermissionRequest{{RequestID: "r", PermissionType: presenters.PermissionWrite,
			Options: []presenters.PermissionOption{{ID: "o", Kind: presenters.AllowAlways}}, Arguments: json.RawMessage(`["x"]`)}},
		MessageCount: 3, AdditionalDirectories: []string{"/w2"}, MCPServerNames: []string{"files"},
		PendingElicitations: []presenters.ElicitationRequest{{ElicitationID: "e", Mode: presenters.ElicitationURL, URL: "https://example.com"}},
		QueuedMessages:      []presenters.QueuedMessage{{MessageID: "q", UserMessageID: "qu", Content: presenters.TextContent("later")}},
	}
	got := sessionToPB(info, sessionSnapshot{Point: 7, InFlight: "m1", InFlightFirst: 5})
	// Every SessionInfo field of the wire is set, from the domain or the hub's snapshot.
	msg := got.ProtoReflect()
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		// The owner and the ACL come from the store (Service.withOwnership).
		if f := fields.Get(i); !msg.Has(f) && f.Name() != "owner" && f.Name() != "acl" {
			t.Errorf("SessionInfo.%s is not converted", f.Name())
		}
	}
	p := got.GetPendingPermissions()[0]
	if p.GetPermissionType() != pb.PermissionType_PERMISSION_TYPE_WRITE || p.GetOptions()[0].GetKind() != pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ALWAYS ||
		p.GetArguments().GetListValue().GetValues()[0].GetStringValue() != "x" {
		t.Errorf("pending = %v", p)
	}
	if !proto.Equal(got.GetUsage(), &pb.TokenUsage{TotalTokens: proto.Int64(4), Cost: proto.Float64(0.5), CostCurrency: "USD"}) {
		t.Errorf("usage = %v", got.GetUsage())
	}
	if got.GetLastSequence() != 7 || got.GetMessageInFlightFirstSequence() != 5 {
		t.Errorf("last_sequence %d, message_in_flight_first_sequence %d; want 7 and 5", got.GetLastSequence(), got.GetMessageInFlightFirstSequence())
	}
	// The first sequence belongs to the hub's message in flight, not to another one the
	// presenter names.
	info.MessageInFlight = "m0"
	if got := sessionToPB(info, sessionSnapshot{InFlight: "m1", InFlightFirst: 5}); got.GetMessageInFlightFirstSequence() != 0 {
		t.Errorf("first sequence %d given for another message than the hub's", got.GetMessageInFlightFirstSequence())
	}
}

// The parts of a message keep their order; a bad part is named by its index.
func TestContentFromPBKeepsPartsInOrder(t *testing.T) {
	in := &pb.MessageContent{Parts: []*pb.ContentPart{
		{Part: &pb.ContentPart_Text{Text: "first"}},
		{Part: &pb.ContentPart_Image{Image: &pb.ImageContent{Source: &pb.ImageContent_Data{Data: []byte{0, 1}}, MimeType: "image/png"}}},
		{Part: &pb.ContentPart_Text{Text: "second"}},
		{Part: &pb.ContentPart_File{File: &pb.FileContent{Path: "a.go"}}},
		{Part: &pb.ContentPart_Resource{Resource: &pb.EmbeddedResource{Uri: "mem://r", Contents: &pb.EmbeddedResource_Blob{Blob: []byte{2}}}}},
		{Part: &pb.ContentPart_Text{Text: "third"}},
	}}
	got, err := contentFromPB(in)
	if err != nil {
		t.Fatal(err)
	}
	want := presenters.MessageContent{Parts: []presenters.ContentPart{
		{Text: "first"},
		{Image: &presenters.Image{Kind: presenters.ImageBase64, Data: "AAE=", MimeType: "image/png"}},
		{Text: "second"},
		{File: &presenters.File{Path: "a.go"}},
		{Resource: &presenters.Resource{URI: "mem://r", Blob: "Ag=="}},
		{Text: "third"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("content = %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		parts []*pb.ContentPart
		field string
	}{
		{nil, "content is empty"},
		{[]*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "ok"}}, {Part: &pb.ContentPart_Text{}}}, "content.parts[1].text"},
		{[]*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: "ok"}}, {}}, "content.parts[1]"},
		{[]*pb.ContentPart{{Part: &pb.ContentPart_Image{Image: &pb.ImageContent{Source: &pb.ImageContent_Data{Data: []byte{1}}}}}}, "content.parts[0].image.mime_type"},
		{[]*pb.ContentPart{{Part: &pb.ContentPart_File{File: &pb.FileContent{}}}}, "content.parts[0].file.path"},
		{[]*pb.ContentPart{{Part: &pb.ContentPart_Resource{Resource: &pb.EmbeddedResource{Uri: "x"}}}}, "content.parts[0].resource"},
	} {
		_, err := contentFromPB(&pb.MessageContent{Parts: c.parts})
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("content %v: error %v, want one naming %s", c.parts, err, c.field)
		}
	}
}

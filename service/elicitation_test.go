package service

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// askForm emits a form elicitation: name (string, required), age (integer 0-150), color
// (enum), subscribe (boolean), tags (array of an enum).
func askForm(e *testEnv, sessionID, elicitationID string) {
	presenters.NewEmitter(e.hub, fakeID, sessionID).ElicitationRequired(presenters.ElicitationRequest{
		ElicitationID: elicitationID, Mode: presenters.ElicitationForm, Message: "Tell me about you",
		RequestedSchema: map[string]any{"type": "object", "required": []any{"name"}, "properties": map[string]any{
			"name":      map[string]any{"type": "string", "maxLength": 10.0},
			"age":       map[string]any{"type": "integer", "minimum": 0.0, "maximum": 150.0},
			"color":     map[string]any{"type": "string", "enum": []any{"red", "green"}},
			"subscribe": map[string]any{"type": "boolean"},
			"tags":      map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []any{"a", "b"}}},
		}},
	})
}

func content(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRespondElicitationChecksTheRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	askForm(e, sid, "f1")
	presenters.NewEmitter(e.hub, fakeID, sid).ElicitationRequired(presenters.ElicitationRequest{
		ElicitationID: "u1", Mode: presenters.ElicitationURL, Message: "Log in", URL: "https://example.com/login"})
	accept := pb.ElicitationAction_ELICITATION_ACTION_ACCEPT
	for name, tc := range map[string]struct {
		req   *pb.RespondElicitationRequest
		field string
	}{
		"no elicitation_id":    {&pb.RespondElicitationRequest{SessionId: sid, Action: accept}, "elicitation_id"},
		"no action":            {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1"}, "action"},
		"decline with content": {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: pb.ElicitationAction_ELICITATION_ACTION_DECLINE, Content: content(t, map[string]any{"name": "x"})}, "content"},
		"required missing":     {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"age": 3})}, "content.name"},
		"no content at all":    {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept}, "content.name"},
		"wrong type":           {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": 7})}, "content.name"},
		"too long":             {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "abcdefghijk"})}, "content.name"},
		"not an integer":       {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "x", "age": 1.5})}, "content.age"},
		"below the minimum":    {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "x", "age": -1})}, "content.age"},
		"not in the enum":      {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "x", "color": "blue"})}, "content.color"},
		"not a boolean":        {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "x", "subscribe": "yes"})}, "content.subscribe"},
		"array item":           {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "x", "tags": []any{"a", "z"}})}, "content.tags"},
		"unknown field":        {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: accept, Content: content(t, map[string]any{"name": "x", "zip": "1"})}, "content.zip"},
		"url with content":     {&pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "u1", Action: accept, Content: content(t, map[string]any{"name": "x"})}, "content"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.RespondElicitation(bg, tc.req)
			wantReason(t, err, codes.InvalidArgument, reason("INVALID_ARGUMENT"), tc.field)
		})
	}
	if n := len(e.fake.elicitationAnswers()); n != 0 {
		t.Fatalf("the presenter got %d answers for bad requests", n)
	}
	// Both still pending, in GetSession's snapshot.
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: sid})
	if err != nil {
		t.Fatal(err)
	}
	pending := got.GetSession().GetPendingElicitations()
	if len(pending) != 2 || pending[0].GetElicitationId() != "f1" || pending[0].GetMode() != pb.ElicitationMode_ELICITATION_MODE_FORM ||
		pending[0].GetRequestedSchema().GetFields()["required"] == nil || pending[1].GetUrl() != "https://example.com/login" {
		t.Fatalf("pending elicitations %v", pending)
	}
}

// The first answer resolves; the same answer again gets the resolution, another answer
// is ELICITATION_ALREADY_RESOLVED; an elicitation never asked is ELICITATION_NOT_PENDING.
func TestRespondElicitationAnswers(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	askForm(e, sid, "f1")
	good := &pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: pb.ElicitationAction_ELICITATION_ACTION_ACCEPT,
		Content: content(t, map[string]any{"name": "Ada", "age": 36, "color": "red", "subscribe": true, "tags": []any{"b"}})}
	first, err := e.client.RespondElicitation(bg, good)
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.ElicitationResolved{ElicitationId: "f1", Action: pb.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: good.GetContent(),
		DecidedBy: pb.ElicitationDecider_ELICITATION_DECIDER_USER}
	if !proto.Equal(first.GetResolution(), want) {
		t.Fatalf("resolution %v, want %v", first.GetResolution(), want)
	}
	again, err := e.client.RespondElicitation(bg, good)
	if err != nil || !proto.Equal(again.GetResolution(), want) {
		t.Fatalf("the same answer again: %v, %v", again, err)
	}
	if got := e.fake.elicitationAnswers(); len(got) != 1 || got[0].Content["name"] != "Ada" || got[0].Action != presenters.ElicitationAccept {
		t.Fatalf("the presenter got %+v, want one accept with the content", got)
	}
	other := proto.Clone(good).(*pb.RespondElicitationRequest)
	other.Content = content(t, map[string]any{"name": "Bob"})
	_, err = e.client.RespondElicitation(bg, other)
	md := wantReason(t, err, codes.FailedPrecondition, reason("ELICITATION_ALREADY_RESOLVED"), "", "action", "decided_by")
	if md["action"] != "ELICITATION_ACTION_ACCEPT" || md["decided_by"] != "ELICITATION_DECIDER_USER" {
		t.Errorf("metadata %v", md)
	}
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: sid})
	if err != nil || len(got.GetSession().GetPendingElicitations()) != 0 {
		t.Fatalf("after the answer: %v pending, %v", got.GetSession().GetPendingElicitations(), err)
	}
	_, err = e.client.RespondElicitation(bg, &pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f9", Action: pb.ElicitationAction_ELICITATION_ACTION_CANCEL})
	md = wantReason(t, err, codes.NotFound, reason("ELICITATION_NOT_PENDING"), "", "elicitation_id")
	if md["elicitation_id"] != "f9" || !strings.Contains(err.Error(), "f9") {
		t.Errorf("%v: should name f9", err)
	}
}

// A request_id makes a retry safe: the repeat gets the first answer, also after another
// client resolved the elicitation differently; the same id with another request is refused.
func TestRespondElicitationRequestID(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := e.createSession(t, fakeID).GetSessionId()
	askForm(e, sid, "f1")
	req := &pb.RespondElicitationRequest{SessionId: sid, ElicitationId: "f1", Action: pb.ElicitationAction_ELICITATION_ACTION_DECLINE, RequestId: requestUUID("5f0e-elicit")}
	first, err := e.client.RespondElicitation(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	// Resolved again under the projection's feet: only the remembered answer repeats.
	presenters.NewEmitter(e.hub, fakeID, sid).ElicitationResolved(presenters.ElicitationResolvedPayload{ElicitationID: "f1",
		Action: presenters.ElicitationCancel, DecidedBy: presenters.ElicitationByCancelled})
	again, err := e.client.RespondElicitation(bg, req)
	if err != nil || !proto.Equal(again, first) {
		t.Fatalf("repeat: %v, %v; want %v", again, err, first)
	}
	changed := proto.Clone(req).(*pb.RespondElicitationRequest)
	changed.Action = pb.ElicitationAction_ELICITATION_ACTION_CANCEL
	_, err = e.client.RespondElicitation(bg, changed)
	wantReason(t, err, codes.InvalidArgument, reason("REQUEST_ID_REUSED"), "request_id", "method")
	if n := len(e.fake.elicitationAnswers()); n != 1 {
		t.Fatalf("the presenter got %d answers, want 1", n)
	}
}

package service

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

// badUTF8 is text with a byte that is not UTF-8, as a misbehaving agent may send.
const badUTF8 = "ok\xffbad\xc3"

// An event with invalid UTF-8 reaches every subscriber (cleaned), live and replayed, and
// the events after it flow; the history holding it reads back.
func TestInvalidUTF8NeitherBreaksStreamsNorHistory(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{id}, UnmergedDeltas: true})
	em := presenters.NewEmitter(e.hub, fakeID, id)
	bad := em.MessageDelta("m", presenters.RoleAssistant, badUTF8)
	next := em.MessageDelta("m", presenters.RoleAssistant, "next")
	for _, want := range []string{"ok\uFFFDbad\uFFFD", "next"} {
		if got := recv(t, stream).GetMessageDelta().GetText(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	replay := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(bad - 1), UnmergedDeltas: true})
	if evs := recvN(t, replay, 2); evs[0].GetSequence() != bad || evs[1].GetSequence() != next {
		t.Errorf("replay %v", evs)
	}
	e.fake.messagesFn = func(context.Context, string, presenters.MessageQuery) ([]presenters.Message, error) {
		return []presenters.Message{{ID: "m", Role: presenters.RoleAssistant, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: badUTF8}}}}, nil
	}
	resp, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ListMessages with invalid UTF-8 in the history: %v", err)
	}
	if got := resp.GetMessages()[0].GetBlocks()[0].GetText().GetText(); got != "ok\uFFFDbad\uFFFD" {
		t.Errorf("history text %q", got)
	}
}

// An event over the cap reaches a default client (4 MiB limit) cut, with a marker, on a
// UTF-8 boundary; the stream goes on.
func TestOversizeEventIsCut(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s")
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"s"}})
	em := presenters.NewEmitter(e.hub, fakeID, "s")
	huge := strings.Repeat("é", 3<<20) // 6 MiB of two-byte characters
	em.MessageDelta("m", presenters.RoleAssistant, huge)
	em.ToolStart("m", presenters.ToolCall{ToolID: "t", Arguments: json.RawMessage(`{"content": "` + strings.Repeat("x", 5<<20) + `", "path": "a.txt"}`)})
	em.MessageDelta("m", presenters.RoleAssistant, "after")

	delta := recv(t, stream)
	text := delta.GetMessageDelta().GetText()
	if proto.Size(delta) > wire.MaxEventBytes || !utf8.ValidString(text) || !strings.HasPrefix(huge, strings.TrimSuffix(text, truncatedMarker(t, text))) {
		t.Errorf("cut delta: %d bytes, valid UTF-8 %v, ends %q", proto.Size(delta), utf8.ValidString(text), text[max(len(text)-40, 0):])
	}
	tool := recv(t, stream).GetToolStart().GetTool()
	fields := tool.GetArguments().GetStructValue().GetFields()
	if fields["path"].GetStringValue() != "a.txt" || !strings.HasSuffix(fields["content"].GetStringValue(), "bytes]") {
		t.Errorf("cut tool arguments: path %q, content ends %q", fields["path"].GetStringValue(), fields["content"].GetStringValue()[max(len(fields["content"].GetStringValue())-40, 0):])
	}
	if got := recv(t, stream).GetMessageDelta().GetText(); got != "after" {
		t.Errorf("the event after: %q", got)
	}
}

// truncatedMarker returns the "[truncated: N bytes]" ending text, failing if there is none.
func truncatedMarker(t *testing.T, text string) string {
	t.Helper()
	i := strings.LastIndex(text, "[truncated: ")
	if i < 0 || !strings.HasSuffix(text, " bytes]") {
		t.Fatalf("no truncation marker at the end of %q", text[max(len(text)-40, 0):])
	}
	n, err := strconv.Atoi(strings.TrimSuffix(text[i+len("[truncated: "):], " bytes]"))
	if err != nil || n <= 0 {
		t.Fatalf("marker %q does not count the bytes cut", text[i:])
	}
	return text[i:]
}

// An event too large even with every text cut (a huge plan of short entries) becomes an
// ERROR event with its sequence: never a gap, never a broken stream.
func TestUncuttableEventIsReplacedByError(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s")
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"s"}})
	entries := make([]presenters.PlanEntry, 300_000)
	for i := range entries {
		entries[i] = presenters.PlanEntry{Content: "step " + strconv.Itoa(i), Status: "pending", Priority: "low"}
	}
	em := presenters.NewEmitter(e.hub, fakeID, "s")
	seq := em.MessageBlock("m", presenters.RoleAssistant, presenters.Block{Type: presenters.BlockPlan, Plan: &presenters.PlanBlock{Entries: entries}})
	em.MessageDelta("m", presenters.RoleAssistant, "after")
	ev := recv(t, stream)
	if ev.GetSequence() != seq || ev.GetType() != pb.AgenticEventType_AGENTIC_EVENT_TYPE_ERROR || ev.GetError().GetReason() != pb.ErrorReason_ERROR_REASON_EVENT_NOT_SENDABLE ||
		ev.GetSessionId() != "s" || !strings.Contains(ev.GetError().GetMessage(), "MESSAGE_BLOCK") {
		t.Errorf("in place of the plan: %v", ev)
	}
	if got := recv(t, stream).GetMessageDelta().GetText(); got != "after" {
		t.Errorf("the event after: %q", got)
	}
}

// panickyPayload makes encoding its event panic, as a defect in a converter would.
type panickyPayload struct{}

func (panickyPayload) EventType() presenters.EventType { panic("a converter defect") }

// An event whose encoding panics becomes an ERROR event with its sequence, for this
// stream and every later one that resumes across it; the events after it arrive.
func TestEventThatPanicsInEncodingIsReplacedByError(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s")
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"s"}})
	seq := e.hub.Publish(presenters.Event{SessionID: "s", AgentID: fakeID, Payload: panickyPayload{}})
	presenters.NewEmitter(e.hub, fakeID, "s").MessageDelta("m", presenters.RoleAssistant, "after")
	for _, s := range []*eventStream{stream, e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{"s"}, Start: after(seq - 1)})} {
		ev := recv(t, s)
		if ev.GetSequence() != seq || ev.GetError().GetReason() != pb.ErrorReason_ERROR_REASON_EVENT_NOT_SENDABLE {
			t.Errorf("in place of the event that panicked: %v", ev)
		}
		if got := recv(t, s).GetMessageDelta().GetText(); got != "after" {
			t.Errorf("the event after: %q", got)
		}
	}
}

// ListMessages cuts a message over the cap rather than failing in the client.
func TestListMessagesCutsAMessageOverTheCap(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSession(t, fakeID).GetSessionId()
	e.fake.messagesFn = func(context.Context, string, presenters.MessageQuery) ([]presenters.Message, error) {
		return []presenters.Message{{ID: "big", Role: presenters.RoleAssistant, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: strings.Repeat("x", 6<<20)}}}}, nil
	}
	resp, err := e.client.ListMessages(bg, &pb.ListMessagesRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if text := resp.GetMessages()[0].GetBlocks()[0].GetText().GetText(); len(text) > wire.MaxEventBytes {
		t.Errorf("message of %d bytes sent", len(text))
	} else {
		truncatedMarker(t, text)
	}
}

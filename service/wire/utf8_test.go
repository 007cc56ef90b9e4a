package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agenticd/agenticd/presenters"
)

// badUTF8 is text with a byte that is not UTF-8, as a misbehaving agent may send.
const badUTF8 = "ok\xffbad\xc3"

// poison sets every string (and raw JSON) reachable from v to invalid UTF-8, allocating
// pointers and one element of each slice on the way.
func poison(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(badUTF8)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		poison(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				poison(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"k": "a` + "\xff" + `b", "` + "\xfe" + `": ["` + badUTF8 + `"]}`))
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			poison(v.Index(i))
		}
	}
}

// No string a presenter sends, however broken, makes an event or a message unencodable.
func TestConvertersCleanInvalidUTF8(t *testing.T) {
	payloads := []presenters.Payload{
		presenters.SessionCreatedPayload{}, presenters.SessionReadyPayload{}, presenters.SessionUpdatedPayload{},
		presenters.SessionClosedPayload{}, presenters.MessageDeltaPayload{}, presenters.MessageEndPayload{},
		presenters.ToolStartPayload{}, presenters.ToolRunningPayload{}, presenters.ToolEndPayload{},
		presenters.PermissionRequiredPayload{}, presenters.PermissionGrantedPayload{}, presenters.PermissionDeniedPayload{},
		presenters.StatusChangedPayload{}, presenters.ErrorPayload{},
	}
	// Every block variant, through MESSAGE_BLOCK.
	for _, typ := range []presenters.BlockType{presenters.BlockText, presenters.BlockReasoning, presenters.BlockTool, presenters.BlockError,
		presenters.BlockImage, presenters.BlockAction, presenters.BlockSearch, presenters.BlockMcpUIResource, presenters.BlockPlan,
		presenters.BlockDiff, presenters.BlockTerminal, presenters.BlockResource} {
		var b presenters.Block
		poison(reflect.ValueOf(&b))
		b.Type = typ
		payloads = append(payloads, presenters.MessageBlockPayload{MessageID: badUTF8, Block: b})
	}
	for _, p := range payloads {
		v := reflect.New(reflect.TypeOf(p))
		v.Elem().Set(reflect.ValueOf(p))
		if _, isBlock := p.(presenters.MessageBlockPayload); !isBlock {
			poison(v)
		}
		ev := presenters.Event{Sequence: 1, SessionID: badUTF8, AgentID: badUTF8, Payload: v.Elem().Interface().(presenters.Payload)}
		if _, err := proto.Marshal(eventToPB(ev)); err != nil {
			t.Errorf("%T: %v", p, err)
		}
	}
	var m presenters.Message
	poison(reflect.ValueOf(&m))
	if _, err := proto.Marshal(MessageToPB(m)); err != nil {
		t.Errorf("message: %v", err)
	}
	var a presenters.AgentInfo
	poison(reflect.ValueOf(&a))
	if _, err := proto.Marshal(AgentInfoToPB(a)); err != nil {
		t.Errorf("agent info: %v", err)
	}
	if got := eventToPB(presenters.Event{Payload: presenters.MessageDeltaPayload{Text: badUTF8}}).GetMessageDelta().GetText(); got != "ok\uFFFDbad\uFFFD" {
		t.Errorf("cleaned text %q", got)
	}
}

package acp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// decodeLikeSDK is what the reader's generic path (and the SDK) make of a line.
func decodeLikeSDK(line []byte) (sdk.SessionNotification, bool) {
	var env envelope
	if json.Unmarshal(line, &env) != nil || (len(env.ID) != 0 && string(env.ID) != "null") ||
		env.Method != sdk.ClientMethodSessionUpdate {
		return sdk.SessionNotification{}, false
	}
	var n sdk.SessionNotification
	if json.Unmarshal(env.Params, &n) != nil || n.Validate() != nil {
		return sdk.SessionNotification{}, false
	}
	return n, true
}

var chunkLines = []struct {
	line string
	fast bool // decodeTextChunk must take it
}{
	{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}}}`, true},
	{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","messageId":"m1","content":{"type":"text","text":"hmm"}}}}`, true},
	{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}}}`, true},
	{` { "method" : "session/update" , "params" : { "update" : { "content" : { "text" : "\u00e9\n\"q\"\ud83d\ude00" , "type" : "text" } , "sessionUpdate" : "agent_message_chunk" } , "sessionId" : "s" } , "jsonrpc" : "2.0" } `, true},
	{`{"jsonrpc":"2.0","id":null,"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, true},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","extra":1},"extra":[1]}}}`, true},
	{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","x":{"a":[1,-2.5e+3,0.1,true,false,null,"\u0041",{}],"b":[]},"update":{"sessionUpdate":"agent_message_chunk","messageId":null,"content":{"type":"text","text":null}}}}`, true},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\ud83d \udc00 \ud800\u0041 \t\/\b\f"}}}}`, true},
	// Left to the SDK's types:
	{`{"method":"session/update","params":{"sessionId":"s","x":[1,,2],"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","x":01,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","x":tru,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","x":"\q","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","text":"y"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","TEXT":"y"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}} x`, false},
	{`{"method":"session/update","params":{"s\u0065ssionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a` + "\t" + `b"}}}}`, false}, // a raw tab
	{`{"method":"session/update","params":null}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`, false},
	{`{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","_meta":{"k":1},"content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"_meta":{},"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","annotations":{"priority":1}}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","_meta":null}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"SessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"Type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":5,"content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":7,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"agent_message_chunk","title":"t","content":[{"type":"content","content":{"type":"text","text":"x"}}]}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":"text"}}}`, false},
	{`{"method":"session/request_permission","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`, false},
	{`{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`, false},
}

// The fast path takes plain text chunks, and whatever it takes decodes exactly as the
// SDK would decode it.
func TestDecodeTextChunkMatchesTheSDK(t *testing.T) {
	for _, last := range []string{"", "s", "other"} { // the last chunk's session id
		for _, c := range chunkLines {
			got, ok := decodeTextChunk([]byte(c.line), last)
			if ok != c.fast {
				t.Errorf("decodeTextChunk(%s, %q): ok=%v, want %v", c.line, last, ok, c.fast)
			}
			if !ok {
				continue
			}
			want, sdkOK := decodeLikeSDK([]byte(c.line))
			if !sdkOK {
				t.Errorf("decodeTextChunk took %s, which the SDK drops", c.line)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decodeTextChunk(%s, %q)\n got %#v\nwant %#v", c.line, last, got, want)
			}
		}
	}
}

func FuzzDecodeTextChunk(f *testing.F) {
	for _, c := range chunkLines {
		f.Add([]byte(c.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := decodeTextChunk(line, "s")
		if !ok {
			return
		}
		want, sdkOK := decodeLikeSDK(line)
		if !sdkOK {
			t.Fatalf("decodeTextChunk took %q, which the SDK drops", line)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeTextChunk(%q)\n got %#v\nwant %#v", line, got, want)
		}
	})
}

package acpmodels

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMoveFromMeta(t *testing.T) {
	const key = "x/models"
	for _, tc := range []struct{ name, in, want string }{
		{"meta holds only the models",
			`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","_meta":{"x/models":{"currentModelId":"a"}}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","models":{"currentModelId":"a"}}}`},
		{"other meta stays",
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"keep":1,"x/models":{"currentModelId":"a"}}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"keep":1},"models":{"currentModelId":"a"}}}`},
		{"the key elsewhere", `{"jsonrpc":"2.0","method":"x/models","params":{}}`, ``},
		{"no key", `{"jsonrpc":"2.0","id":1,"result":{}}`, ``},
		{"not JSON", `x/models {`, ``},
	} {
		got := MoveFromMeta([]byte(tc.in+"\n"), key)
		if tc.want == "" {
			if string(got) != tc.in+"\n" {
				t.Errorf("%s: %s became %s, want it unchanged", tc.name, tc.in, got)
			}
			continue
		}
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("%s: %s: %v", tc.name, got, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &wantV)
		if !reflect.DeepEqual(gotV, wantV) || got[len(got)-1] != '\n' {
			t.Errorf("%s: got %s, want %s and a newline", tc.name, got, tc.want)
		}
	}
}

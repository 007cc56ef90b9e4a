package acpbridge

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The reader renames set_model requests and nothing else: not a notification of that
// name, not a prompt that mentions it, not a line longer than its buffer.
func TestEditorReaderRenamesOnlySetModelRequests(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"` +
		strings.Repeat("x", 200<<10) + ` {\"method\":\"session/set_model\"}"}]}}`
	lines := []string{
		long,
		`{"jsonrpc":"2.0","method":"session/set_model","params":{"sessionId":"s","modelId":"m"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/set_model","params":{"sessionId":"s","modelId":"m"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"session/set_model"}]}}`,
	}
	ready := make(chan struct{})
	close(ready)
	out, err := io.ReadAll(newEditorReader(strings.NewReader(strings.Join(lines, "\n")+"\n"), ready))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("%d lines out of %d", len(got), len(lines))
	}
	for i, line := range got {
		if i == 2 {
			var msg struct {
				ID     int             `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.ID != 2 || msg.Method != extSetModel || string(msg.Params) != `{"sessionId":"s","modelId":"m"}` {
				t.Errorf("the set_model request became %q", line)
			}
			continue
		}
		if line != lines[i] {
			t.Errorf("line %d changed: %.80q", i, line)
		}
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// modelsScript: an agent that offers models the old way (`models`, session/set_model)
// and two config options of its own, a select and a boolean.
const modelsScript = `{
  "session": {
    "models": {"currentModelId": "small", "availableModels": [{"modelId": "small", "name": "Small"}, {"modelId": "large", "name": "Large", "description": "slower"}]},
    "configOptions": [
      {"type": "select", "id": "effort", "name": "Effort", "category": "thought_level", "currentValue": "low",
       "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}]},
      {"type": "boolean", "id": "fast", "name": "Fast mode", "currentValue": false}
    ]
  },
  "turns": [[{"text": "ok"}]]
}`

// rawEditor speaks JSON-RPC to `agenticctl acp` line by line, as an editor written
// before ACP's config options does: no SDK between it and the wire, so the test sees
// exactly what goes over it.
type rawEditor struct {
	t       *testing.T
	w       io.Writer
	lines   chan []byte
	next    int
	notices []map[string]json.RawMessage // session/update params received
}

// rpcError is a JSON-RPC error as it came over the wire.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (d *agenticd) rawEditor(t *testing.T) *rawEditor {
	t.Helper()
	inW, outR, done := d.runACP(d.addr, acpAgentID)
	e := &rawEditor{t: t, w: inW, lines: make(chan []byte, 1024)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(e.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 10<<20)
		for sc.Scan() {
			e.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		<-done
		<-read
	})
	return e
}

// call sends a request and waits for its answer, keeping the notifications that come
// before it.
func (e *rawEditor) call(method string, params any) (json.RawMessage, *rpcError) {
	e.t.Helper()
	e.next++
	id := e.next
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
	for {
		msg := e.read(fmt.Sprintf("the answer to %s", method))
		var got struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(msg["id"], &got.ID); err == nil && got.ID != nil && *got.ID == id && msg["method"] == nil {
			_ = json.Unmarshal(msg["error"], &got.Error)
			return msg["result"], got.Error
		}
	}
}

// read takes the next message from agenticctl, keeping it if it is a session/update.
func (e *rawEditor) read(what string) map[string]json.RawMessage {
	e.t.Helper()
	select {
	case line, ok := <-e.lines:
		if !ok {
			e.t.Fatalf("agenticctl ended the connection before %s", what)
		}
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(line, &msg); err != nil {
			e.t.Fatalf("agenticctl sent a line that is not JSON: %q", line)
		}
		if string(msg["method"]) == `"session/update"` {
			var p map[string]json.RawMessage
			_ = json.Unmarshal(msg["params"], &p)
			e.notices = append(e.notices, p)
		}
		return msg
	case <-time.After(30 * time.Second):
		e.t.Fatalf("no %s within 30s", what)
		return nil
	}
}

// waitUpdate waits for a session/update whose update satisfies ok.
func (e *rawEditor) waitUpdate(what string, ok func(update map[string]any) bool) {
	e.t.Helper()
	seen := 0
	for {
		for ; seen < len(e.notices); seen++ {
			var u map[string]any
			if json.Unmarshal(e.notices[seen]["update"], &u) == nil && ok(u) {
				return
			}
		}
		e.read(what)
	}
}

// legacyModels is the old `models` object of an answer.
type legacyModels struct {
	CurrentModelID  string `json:"currentModelId"`
	AvailableModels []struct {
		ModelID     string `json:"modelId"`
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"availableModels"`
}

// sessionAnswer is what the test reads of a session/new or session/load answer.
type sessionAnswer struct {
	SessionID     string           `json:"sessionId"`
	Models        *legacyModels    `json:"models"`
	Meta          map[string]any   `json:"_meta"`
	ConfigOptions []map[string]any `json:"configOptions"`
}

func (a sessionAnswer) option(id string) map[string]any {
	for _, o := range a.ConfigOptions {
		if o["id"] == id {
			return o
		}
	}
	return nil
}

// An editor that chooses models the old way sees the models in session/new and
// session/load, and its session/set_model changes the agent's model through agenticd's
// SetModel; the agent's own config options pass through both ways.
func TestACPModelsAndConfigOptions(t *testing.T) {
	d := startAgenticd(t, modelsScript)
	api := d.apiClient(t)
	e := d.rawEditor(t)
	if _, rerr := e.call("initialize", map[string]any{"protocolVersion": 1}); rerr != nil {
		t.Fatalf("initialize: %+v", rerr)
	}
	raw, rerr := e.call("session/new", map[string]any{"cwd": d.ws, "mcpServers": []any{}})
	if rerr != nil {
		t.Fatalf("session/new: %+v", rerr)
	}
	var created sessionAnswer
	if err := json.Unmarshal(raw, &created); err != nil {
		t.Fatal(err)
	}
	if m := created.Models; m == nil || m.CurrentModelID != "small" || len(m.AvailableModels) != 2 ||
		m.AvailableModels[1].ModelID != "large" || m.AvailableModels[1].Name != "Large" || m.AvailableModels[1].Description != "slower" {
		t.Errorf("session/new's models: %s; want small of small and large", raw)
	}
	if created.Meta != nil {
		t.Errorf("session/new's _meta: %v; want the models moved out of it", created.Meta)
	}
	for _, id := range []string{"model", "effort", "fast"} {
		if created.option(id) == nil {
			t.Errorf("session/new offers no config option %q: %s", id, raw)
		}
	}
	if o := created.option("fast"); o != nil && (o["type"] != "boolean" || o["currentValue"] != false) {
		t.Errorf("config option fast: %v; want a boolean, off", o)
	}
	if o := created.option("effort"); o != nil && (o["type"] != "select" || o["category"] != "thought_level" || o["currentValue"] != "low") {
		t.Errorf("config option effort: %v; want the agent's select, low", o)
	}
	id := created.SessionID

	// session/set_model: the model changes in agenticd, and the editor hears of it.
	raw, rerr = e.call("session/set_model", map[string]any{"sessionId": id, "modelId": "large"})
	if rerr != nil || string(raw) != "{}" {
		t.Fatalf("session/set_model: %s, %+v; want {}", raw, rerr)
	}
	got, err := api.GetSession(t.Context(), &pb.GetSessionRequest{SessionId: id})
	if err != nil || got.GetSession().GetCurrentModelId() != "large" {
		t.Fatalf("GetSession after session/set_model: model %q, %v; want large", got.GetSession().GetCurrentModelId(), err)
	}
	e.waitUpdate("a config_option_update with the model large", func(u map[string]any) bool {
		if u["sessionUpdate"] != "config_option_update" {
			return false
		}
		opts, _ := u["configOptions"].([]any)
		return slices.ContainsFunc(opts, func(o any) bool {
			m, _ := o.(map[string]any)
			return m["id"] == "model" && m["currentValue"] == "large"
		})
	})
	if _, rerr := e.call("session/set_model", map[string]any{"sessionId": id, "modelId": "huge"}); rerr == nil || rerr.Code != -32602 || !strings.Contains(rerr.Message, "huge") {
		t.Errorf("session/set_model to a model not offered: %+v; want invalid params naming it", rerr)
	}

	// The agent's own options: a select and a boolean, set through SetConfigOption.
	raw, rerr = e.call("session/set_config_option", map[string]any{"sessionId": id, "configId": "effort", "value": "high"})
	var set sessionAnswer
	if rerr != nil || json.Unmarshal(raw, &set) != nil || set.option("effort")["currentValue"] != "high" {
		t.Errorf("session/set_config_option effort high: %s, %+v", raw, rerr)
	}
	raw, rerr = e.call("session/set_config_option", map[string]any{"sessionId": id, "configId": "fast", "type": "boolean", "value": true})
	if rerr != nil || json.Unmarshal(raw, &set) != nil || set.option("fast")["currentValue"] != true {
		t.Errorf("session/set_config_option fast true: %s, %+v", raw, rerr)
	}
	got, err = api.GetSession(t.Context(), &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, o := range got.GetSession().GetConfigOptions() {
		values[o.GetId()] = o.GetCurrentValue()
	}
	if values["effort"] != "high" || values["fast"] != "true" {
		t.Errorf("agenticd's config options after the editor set them: %v", values)
	}

	// Another editor opening the session sees the model chosen.
	other := d.rawEditor(t)
	if _, rerr := other.call("initialize", map[string]any{"protocolVersion": 1}); rerr != nil {
		t.Fatalf("initialize: %+v", rerr)
	}
	raw, rerr = other.call("session/load", map[string]any{"sessionId": id, "cwd": d.ws, "mcpServers": []any{}})
	var loaded sessionAnswer
	if rerr != nil || json.Unmarshal(raw, &loaded) != nil || loaded.Models == nil || loaded.Models.CurrentModelID != "large" {
		t.Errorf("session/load: %s, %+v; want models with large current", raw, rerr)
	}
}

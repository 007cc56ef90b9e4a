package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// ElicitStep sends elicitation/create and says what came back as a text chunk:
// "elicitation: <action> <content as JSON>" (the content only for an accept with one).
type ElicitStep struct {
	// Mode is "form" (default) or "url".
	Mode    string `json:"mode"`
	Message string `json:"message"`
	// Schema is the form's requestedSchema (default: an empty object schema).
	Schema json.RawMessage `json:"schema"`
	// URL and ID are the url mode's url and elicitationId (default "elicit-1").
	URL string `json:"url"`
	ID  string `json:"id"`
	// ToolCallID ties the elicitation to a tool call.
	ToolCallID string `json:"toolCallId"`
	// CompleteAfter (a time.Duration) sends elicitation/complete for ID that long after
	// the request, while it waits (url mode).
	CompleteAfter string `json:"completeAfter"`
}

// scopeMetaKey is where the agent's handlers put an elicitation's scope in _meta;
// lineWriter moves it to the top of the params, where ACP has sessionId and toolCallId
// but the SDK's request types have no field for them.
const scopeMetaKey = "testagent/scope"

func (t *turn) elicit(e *ElicitStep) error {
	scope := map[string]any{"sessionId": t.s.id}
	if e.ToolCallID != "" {
		scope["toolCallId"] = e.ToolCallID
	}
	meta := map[string]any{scopeMetaKey: scope}
	var req sdk.UnstableCreateElicitationRequest
	if e.Mode == "url" {
		id := e.ID
		if id == "" {
			id = "elicit-1"
		}
		req.Url = &sdk.UnstableCreateElicitationUrl{Meta: meta, Message: e.Message, Mode: "url", Url: e.URL, ElicitationId: sdk.UnstableElicitationId(id)}
		if e.CompleteAfter != "" {
			d, err := time.ParseDuration(e.CompleteAfter)
			if err != nil {
				return fmt.Errorf("script elicit completeAfter: %w", err)
			}
			timer := time.AfterFunc(d, func() {
				_ = t.a.conn.UnstableCompleteElicitation(sendCtx, sdk.UnstableCompleteElicitationNotification{ElicitationId: sdk.UnstableElicitationId(id)})
			})
			defer timer.Stop()
		}
	} else {
		form := &sdk.UnstableCreateElicitationForm{Meta: meta, Message: e.Message, Mode: "form"}
		if e.Schema != nil {
			if err := json.Unmarshal(e.Schema, &form.RequestedSchema); err != nil {
				return fmt.Errorf("script elicit schema: %w", err)
			}
		}
		req.Form = form
	}
	resp, err := t.a.conn.UnstableCreateElicitation(sendCtx, req)
	if err != nil {
		return t.say("elicitation error: " + errorText(err))
	}
	switch {
	case resp.Accept != nil && resp.Accept.Content != nil:
		b, err := json.Marshal(resp.Accept.Content)
		if err != nil {
			return err
		}
		return t.say("elicitation: accept " + string(b))
	case resp.Accept != nil:
		return t.say("elicitation: accept")
	case resp.Decline != nil:
		return t.say("elicitation: decline")
	}
	return t.say("elicitation: cancel")
}

// withElicitationScope moves a request's params._meta[scopeMetaKey] fields to the top of
// its params; any other line is returned as it is.
func withElicitationScope(line []byte) []byte {
	if !bytes.Contains(line, []byte(scopeMetaKey)) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return line
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil || meta[scopeMetaKey] == nil {
		return line
	}
	var scope map[string]json.RawMessage
	if json.Unmarshal(meta[scopeMetaKey], &scope) != nil {
		return line
	}
	for k, v := range scope {
		params[k] = v
	}
	delete(meta, scopeMetaKey)
	if len(meta) == 0 {
		delete(params, "_meta")
	} else {
		params["_meta"], _ = json.Marshal(meta)
	}
	msg["params"], _ = json.Marshal(params)
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return append(out, '\n')
}

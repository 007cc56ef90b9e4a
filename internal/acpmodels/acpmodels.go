// Package acpmodels is ACP's old way of choosing a model, which agents and editors still
// use and the ACP SDK no longer knows: a `models` object in the answers of session/new
// and session/load, and the unstable session/set_model request. agenticd reads the
// object beside the SDK on the agent side and writes it beside the SDK to editors.
package acpmodels

import (
	"bytes"
	"encoding/json"
)

// SetModelMethod is the unstable request that switches a session's model the old way.
const SetModelMethod = "session/set_model"

// Model is one model of the old `models` object.
type Model struct {
	ModelID     string  `json:"modelId"`
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
}

// State is the old `models` object of a session.
type State struct {
	CurrentModelID  string  `json:"currentModelId"`
	AvailableModels []Model `json:"availableModels"`
}

// MoveFromMeta moves an answer's result._meta[key] to result.models, dropping _meta when
// nothing else is left in it, for a writer whose SDK can only put the object in _meta.
// Any other line (and one that does not decode) is returned as it is.
func MoveFromMeta(line []byte, key string) []byte {
	if !bytes.Contains(line, []byte(key)) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(msg["result"], &result) != nil {
		return line
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(result["_meta"], &meta) != nil || meta[key] == nil {
		return line
	}
	result["models"] = meta[key]
	delete(meta, key)
	if len(meta) == 0 {
		delete(result, "_meta")
	} else {
		result["_meta"], _ = json.Marshal(meta)
	}
	msg["result"], _ = json.Marshal(result)
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return append(out, '\n')
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/acpmodels"
)

// Models the old way, which the SDK no longer knows: the script's session "models"
// (a SessionModelState of older ACP) go into the answers of session/new, load and resume
// as `models`, and session/set_model switches the current one. The agent's handlers put
// the state under legacyMetaKey in the answer's _meta; lineWriter moves it to `models`
// on the way out. session/set_model requests are taken off stdin (legacyReader) before
// the SDK, which would answer "method not found", sees them.

const legacyMetaKey = "testagent/models"

// legacyModelState is the old `models` object.
type legacyModelState struct {
	CurrentModelID  string            `json:"currentModelId"`
	AvailableModels []json.RawMessage `json:"availableModels"`
}

// legacyReader is the agent's stdin less the session/set_model requests, which it
// answers itself.
type legacyReader struct {
	src *bufio.Reader
	a   *agent
	cur []byte
}

func (r *legacyReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		line, err := r.src.ReadBytes('\n')
		if len(line) > 0 && !r.setModel(line) {
			r.cur = line
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// setModel answers a session/set_model request; it reports whether line was one.
func (r *legacyReader) setModel(line []byte) bool {
	if !bytes.Contains(line, []byte(`"`+acpmodels.SetModelMethod+`"`)) {
		return false
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			SessionID sdk.SessionId `json:"sessionId"`
			ModelID   string        `json:"modelId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil || req.Method != acpmodels.SetModelMethod {
		return false
	}
	answer := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	s, err := r.a.session(req.Params.SessionID)
	switch {
	case err != nil:
		answer["error"] = err
	case len(r.a.script.Session.Models) == 0:
		answer["error"] = sdk.NewMethodNotFound(acpmodels.SetModelMethod)
	default:
		s.mu.Lock()
		s.modelID = req.Params.ModelID
		s.mu.Unlock()
		answer["result"] = map[string]any{}
	}
	log.Printf("session/set_model %s %s", req.Params.SessionID, req.Params.ModelID)
	b, _ := json.Marshal(answer)
	_, _ = r.a.out.Write(append(b, '\n'))
	return true
}

var _ io.Reader = (*legacyReader)(nil)

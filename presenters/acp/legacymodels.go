package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/internal/acpmodels"
)

// Models the old way.
//
// ACP now chooses models through session config options of category "model"
// (session/set_config_option). Agents written before that advertise a `models` object
// in the answers of session/new, session/load and session/resume and switch with the
// unstable session/set_model; the SDK no longer knows either (it drops the field and
// has no such method). So that those agents keep working, agenticd reads the field
// from the answers itself and sends session/set_model on its own:
//
//   - agentWriter sits between the SDK and the agent's stdin: it notes which request
//     ids are session/new, load and resume (and for which session), and serializes the
//     SDK's lines with agenticd's own requests (each is one Write of one whole line).
//   - agentReader (flowreader.go) hands every response to legacyCalls first: an answer
//     to one of agenticd's own requests is taken there and never reaches the SDK; the
//     `models` of a noted lifecycle answer is kept for its session until the caller
//     takes it, and the line goes on to the SDK unchanged.
//
// agenticd's own request ids are strings ("agenticd-N"); the SDK's are numbers, so the
// two never meet.

// ownIDPrefix marks the ids of agenticd's own requests.
const ownIDPrefix = `"agenticd-`

// rawResponse is the answer to one of agenticd's own requests.
type rawResponse struct {
	result json.RawMessage
	err    *sdk.RequestError
}

// legacyCalls keeps what the SDK cannot: the old `models` of lifecycle answers and the
// answers to agenticd's own requests.
type legacyCalls struct {
	mu sync.Mutex
	// lifecycle maps the id of a session/new, load or resume request in flight to the
	// session it names ("" for session/new, whose answer names it).
	lifecycle map[string]sdk.SessionId
	// models are the old `models` of answered lifecycle requests, by session, until taken.
	models  map[sdk.SessionId]*acpmodels.State
	nextID  uint64
	pending map[string]chan rawResponse
}

func newLegacyCalls() *legacyCalls {
	return &legacyCalls{
		lifecycle: map[string]sdk.SessionId{},
		models:    map[sdk.SessionId]*acpmodels.State{},
		pending:   map[string]chan rawResponse{},
	}
}

// lifecycleMethods are the requests whose answers may carry the old `models`, as the
// SDK writes them (a string inside a prompt's text is escaped, so it never matches).
var lifecycleMethods = [][]byte{
	[]byte(`"method":"` + sdk.AgentMethodSessionNew + `"`),
	[]byte(`"method":"` + sdk.AgentMethodSessionLoad + `"`),
	[]byte(`"method":"` + sdk.AgentMethodSessionResume + `"`),
}

// noteRequest records a lifecycle request the SDK is about to send. Only such lines are
// decoded: prompts and answers pass with a byte search.
func (l *legacyCalls) noteRequest(line []byte) {
	if !slices.ContainsFunc(lifecycleMethods, func(m []byte) bool { return bytes.Contains(line, m) }) {
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			SessionID sdk.SessionId `json:"sessionId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 || req.Method == "" {
		return
	}
	l.mu.Lock()
	l.lifecycle[string(req.ID)] = req.Params.SessionID
	l.mu.Unlock()
}

// response looks at an answer from the agent before the SDK does. It reports whether the
// answer was one to agenticd's own request (consumed here).
func (l *legacyCalls) response(id json.RawMessage, line []byte) bool {
	key := string(bytes.TrimSpace(id))
	if strings.HasPrefix(key, ownIDPrefix) {
		var msg struct {
			Result json.RawMessage   `json:"result"`
			Error  *sdk.RequestError `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			msg.Error = &sdk.RequestError{Code: -32700, Message: "the agent's answer does not decode: " + err.Error()}
		}
		l.mu.Lock()
		ch := l.pending[key]
		delete(l.pending, key)
		l.mu.Unlock()
		if ch != nil {
			ch <- rawResponse{result: msg.Result, err: msg.Error}
		}
		return true
	}
	l.mu.Lock()
	sessionID, ok := l.lifecycle[key]
	delete(l.lifecycle, key)
	l.mu.Unlock()
	if !ok || !bytes.Contains(line, []byte(`"models"`)) {
		return false
	}
	var msg struct {
		Result struct {
			SessionID sdk.SessionId    `json:"sessionId"`
			Models    *acpmodels.State `json:"models"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Result.Models == nil {
		return false
	}
	if sessionID == "" {
		sessionID = msg.Result.SessionID
	}
	l.mu.Lock()
	l.models[sessionID] = msg.Result.Models
	l.mu.Unlock()
	return false
}

// takeModels returns and forgets the old `models` the last lifecycle answer for the
// session carried, nil when it carried none.
func (l *legacyCalls) takeModels(id sdk.SessionId) *acpmodels.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.models[id]
	delete(l.models, id)
	return m
}

// call sends one of agenticd's own requests and waits for its answer, the end of the
// connection (done) or ctx.
func (l *legacyCalls) call(ctx context.Context, w io.Writer, done <-chan struct{}, method string, params any) (json.RawMessage, error) {
	l.mu.Lock()
	l.nextID++
	id := ownIDPrefix + strconv.FormatUint(l.nextID, 10) + `"`
	ch := make(chan rawResponse, 1)
	l.pending[id] = ch
	l.mu.Unlock()
	forget := func() {
		l.mu.Lock()
		delete(l.pending, id)
		l.mu.Unlock()
	}
	line, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params"`
	}{"2.0", json.RawMessage(id), method, params})
	if err != nil {
		forget()
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		forget()
		return nil, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return r.result, nil
	case <-done:
		forget()
		return nil, fmt.Errorf("send %s: the agent connection has closed", method)
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// agentWriter is the agent's stdin as the SDK and agenticd's own requests share it.
type agentWriter struct {
	mu     sync.Mutex
	w      io.Writer
	legacy *legacyCalls
}

// Write writes one whole line; a lifecycle request is noted before it can be answered.
func (w *agentWriter) Write(p []byte) (int, error) {
	w.legacy.noteRequest(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// setLegacyModel switches a session's model with the unstable session/set_model.
func (c *agentConn) setLegacyModel(ctx context.Context, id sdk.SessionId, modelID string) error {
	_, err := c.legacy.call(ctx, c.stdin, c.rpc.Done(), acpmodels.SetModelMethod, map[string]string{"sessionId": string(id), "modelId": modelID})
	return err
}

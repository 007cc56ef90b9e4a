package acpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	acp "github.com/coder/acp-go-sdk"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/acpmodels"
)

// Models the old way.
//
// ACP now chooses models through config options of category "model", which the bridge
// offers. Editors written before that read a `models` object in the answers of
// session/new and session/load and switch with the unstable session/set_model; the SDK
// knows neither (it has no such field and answers "method not found"). So that those
// editors can choose a model too:
//
//   - editorReader renames each session/set_model request to extSetModel before the SDK
//     reads it, so the SDK hands it to HandleExtensionMethod like any extension call,
//     with its own cancellation and answer;
//   - the bridge puts the models into the answer's _meta under modelsMetaKey, and
//     editorWriter moves them to `models` on the way out.

const (
	extSetModel   = "_agenticd/session/set_model"
	modelsMetaKey = "agenticd/models"
)

var _ acp.ExtensionMethodHandler = (*bridge)(nil)

// modelsMeta is the _meta of a session/new or session/load answer that carries the
// session's models for editorWriter; nil when the agent offers no choice of model.
func modelsMeta(s *pb.SessionInfo) map[string]any {
	ms := s.GetAvailableModels()
	if len(ms) == 0 {
		return nil
	}
	st := acpmodels.State{CurrentModelID: s.GetCurrentModelId(), AvailableModels: make([]acpmodels.Model, 0, len(ms))}
	for _, m := range ms {
		lm := acpmodels.Model{ModelID: m.GetId(), Name: cmpOr(m.GetName(), m.GetId())}
		if m.GetDescription() != "" {
			lm.Description = new(m.GetDescription())
		}
		st.AvailableModels = append(st.AvailableModels, lm)
	}
	return map[string]any{modelsMetaKey: st}
}

// HandleExtensionMethod serves the renamed session/set_model: SetModel.
func (b *bridge) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method != extSetModel {
		return nil, acp.NewMethodNotFound(method)
	}
	var p struct {
		SessionID string `json:"sessionId"`
		ModelID   string `json:"modelId"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" || p.ModelID == "" {
		return nil, &acp.RequestError{Code: codeInvalidParams, Message: acpmodels.SetModelMethod + " takes a sessionId and a modelId"}
	}
	cctx, cancel := b.call(ctx)
	defer cancel()
	if _, err := b.opts.Client.SetModel(cctx, &pb.SetModelRequest{SessionId: p.SessionID, ModelId: p.ModelID}); err != nil {
		return nil, b.requestError(err)
	}
	return struct{}{}, nil
}

// renameSetModel gives a session/set_model request the method name extSetModel; any
// other line is returned as it is. Only lines that mention the method are decoded.
func renameSetModel(line []byte) []byte {
	if !bytes.Contains(line, []byte(acpmodels.SetModelMethod)) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil || msg["id"] == nil {
		return line
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method != acpmodels.SetModelMethod {
		return line
	}
	msg["method"], _ = json.Marshal(extSetModel)
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return append(out, '\n')
}

// editorReader is what the editor sends, as the SDK reads it: session/set_model requests
// renamed (renameSetModel). It holds reads until ready is closed: the SDK reads at once,
// and nothing may reach the bridge before its connection is set.
type editorReader struct {
	src   *bufio.Reader
	ready <-chan struct{}
	cur   []byte // the rest of the line being read
	// midLine: the last piece read was not a whole line (longer than the buffer). Its
	// remaining pieces pass as they are: a set_model request is never that long.
	midLine bool
	err     error
}

func newEditorReader(r io.Reader, ready <-chan struct{}) *editorReader {
	return &editorReader{src: bufio.NewReaderSize(r, 64<<10), ready: ready}
}

func (r *editorReader) Read(p []byte) (int, error) {
	<-r.ready
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.src.ReadSlice('\n')
		whole := err == nil && !r.midLine
		r.midLine = errors.Is(err, bufio.ErrBufferFull)
		if !r.midLine {
			r.err = err
		}
		r.cur = line
		if whole {
			r.cur = renameSetModel(line)
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// editorWriter is what the SDK sends the editor, with the models of session/new and
// session/load answers moved from _meta to `models`. The SDK writes each
// message whole, in one Write.
type editorWriter struct{ w io.Writer }

func (w editorWriter) Write(p []byte) (int, error) {
	if _, err := w.w.Write(acpmodels.MoveFromMeta(p, modelsMetaKey)); err != nil {
		return 0, err
	}
	return len(p), nil
}

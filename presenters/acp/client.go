package acp

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// client serves one connection's requests and notifications from the agent.
type client struct {
	c *agentConn
}

var _ sdk.Client = (*client)(nil)

// SessionUpdate must never block (see flowreader.go): it routes the update to its
// session, which normalizes it and publishes. The agentReader calls it on the reading
// goroutine, in the order the agent sent the updates.
func (h *client) SessionUpdate(_ context.Context, n sdk.SessionNotification) (err error) {
	defer h.recoverPanic(sdk.ClientMethodSessionUpdate, &err)
	h.c.route(n)
	return nil
}

// extUpdate takes a session/update of a kind the SDK does not know (normalize_ext.go).
func (h *client) extUpdate(sessionID sdk.SessionId, u extUpdate) {
	defer h.recoverPanic(sdk.ClientMethodSessionUpdate, new(error))
	if s := h.c.session(sessionID); s != nil {
		s.applyExt(u)
		return
	}
	h.c.log.Info("dropping an update for a session this server does not know", "acp_session_id", sessionID, "kind", u.Kind)
}

// recoverPanic is the backstop of every handler: the SDK runs them in goroutines that
// do not recover, so a panic would end the daemon. It is logged, and the agent gets
// an internal error.
func (h *client) recoverPanic(method string, err *error) {
	if v := recover(); v != nil {
		h.c.log.Error("panic while serving an agent request", "method", method, "panic", v, "stack", string(debug.Stack()))
		*err = sdk.NewInternalError(map[string]any{"error": "the client failed to serve " + method})
	}
}

func (h *client) RequestPermission(ctx context.Context, req sdk.RequestPermissionRequest) (_ sdk.RequestPermissionResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodSessionRequestPermission, &err)
	s := h.c.session(req.SessionId)
	if s == nil {
		h.c.log.Warn("permission request for an unknown session answered cancelled", "acp_session_id", req.SessionId)
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return s.requestPermission(ctx, req), nil
}

// sandbox finds the session of a request and its workspace and terminals. The updates
// the agent sent before the request were handled already (see flowreader.go).
func (h *client) sandbox(id sdk.SessionId) (*session, *sandbox.Workspace, *sandbox.Terminals, error) {
	s := h.c.session(id)
	if s == nil {
		return nil, nil, nil, sdk.NewInvalidParams(map[string]any{"sessionId": id, "error": "unknown session"})
	}
	ws, terms, err := s.sandbox()
	if err != nil {
		return nil, nil, nil, sdk.NewInvalidParams(map[string]any{"sessionId": id, "error": err.Error()})
	}
	return s, ws, terms, nil
}

func (h *client) ReadTextFile(ctx context.Context, req sdk.ReadTextFileRequest) (_ sdk.ReadTextFileResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodFsReadTextFile, &err)
	s, ws, _, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	ws = s.dirFor(ws, req.Path)
	content, err := ws.ReadTextFile(req.Path, sandbox.ReadOptions{Line: deref(req.Line), Limit: deref(req.Limit)})
	if errors.Is(err, sandbox.ErrNotFound) && s.p.missingIsEmpty() {
		// A new file in the session's directories, for an agent that must read it to
		// create it. Every other agent gets resource-not-found, which they read as ENOENT.
		return sdk.ReadTextFileResponse{}, nil
	}
	if err != nil {
		return sdk.ReadTextFileResponse{}, s.clientError("read", req.Path, err)
	}
	return sdk.ReadTextFileResponse{Content: content}, nil
}

func (h *client) WriteTextFile(ctx context.Context, req sdk.WriteTextFileRequest) (_ sdk.WriteTextFileResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodFsWriteTextFile, &err)
	s, ws, _, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	ws = s.dirFor(ws, req.Path)
	if err := ws.WriteTextFile(req.Path, req.Content); err != nil {
		return sdk.WriteTextFileResponse{}, s.clientError("write", req.Path, err)
	}
	return sdk.WriteTextFileResponse{}, nil
}

func (h *client) CreateTerminal(ctx context.Context, req sdk.CreateTerminalRequest) (_ sdk.CreateTerminalResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodTerminalCreate, &err)
	s, _, terms, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.CreateTerminalResponse{}, err
	}
	spec := sandbox.TerminalSpec{Command: req.Command, Args: req.Args, Cwd: deref(req.Cwd)}
	if req.OutputByteLimit != nil {
		spec.OutputByteLimit = int64(*req.OutputByteLimit)
	}
	if len(req.Env) > 0 {
		spec.Env = make(map[string]string, len(req.Env))
		for _, e := range req.Env {
			spec.Env[e.Name] = e.Value
		}
	}
	id, err := terms.Create(ctx, spec)
	if err != nil {
		target := spec.Cwd
		if target == "" {
			target = req.Command
		}
		return sdk.CreateTerminalResponse{}, s.clientError("run a terminal in", target, err)
	}
	s.terminalCreated(id, req.Command, req.Args)
	return sdk.CreateTerminalResponse{TerminalId: id}, nil
}

func (h *client) TerminalOutput(ctx context.Context, req sdk.TerminalOutputRequest) (_ sdk.TerminalOutputResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodTerminalOutput, &err)
	s, _, terms, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	out, err := terms.Output(req.TerminalId)
	if err != nil {
		return sdk.TerminalOutputResponse{}, s.clientError("read terminal", req.TerminalId, err)
	}
	resp := sdk.TerminalOutputResponse{Output: out.Output, Truncated: out.Truncated}
	if out.Exit != nil {
		resp.ExitStatus = &sdk.TerminalExitStatus{ExitCode: out.Exit.Code, Signal: nonEmpty(out.Exit.Signal)}
	}
	return resp, nil
}

func (h *client) WaitForTerminalExit(ctx context.Context, req sdk.WaitForTerminalExitRequest) (_ sdk.WaitForTerminalExitResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodTerminalWaitForExit, &err)
	s, _, terms, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, err
	}
	st, err := terms.WaitForExit(ctx, req.TerminalId)
	if err != nil {
		if ctx.Err() != nil {
			return sdk.WaitForTerminalExitResponse{}, sdk.NewRequestCancelled(map[string]any{"terminalId": req.TerminalId})
		}
		return sdk.WaitForTerminalExitResponse{}, s.clientError("wait for terminal", req.TerminalId, err)
	}
	return sdk.WaitForTerminalExitResponse{ExitCode: st.Code, Signal: nonEmpty(st.Signal)}, nil
}

func (h *client) KillTerminal(ctx context.Context, req sdk.KillTerminalRequest) (_ sdk.KillTerminalResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodTerminalKill, &err)
	s, _, terms, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.KillTerminalResponse{}, err
	}
	if err := terms.Kill(req.TerminalId); err != nil {
		return sdk.KillTerminalResponse{}, s.clientError("kill terminal", req.TerminalId, err)
	}
	return sdk.KillTerminalResponse{}, nil
}

func (h *client) ReleaseTerminal(ctx context.Context, req sdk.ReleaseTerminalRequest) (_ sdk.ReleaseTerminalResponse, err error) {
	defer h.recoverPanic(sdk.ClientMethodTerminalRelease, &err)
	s, _, terms, err := h.sandbox(req.SessionId)
	if err != nil {
		return sdk.ReleaseTerminalResponse{}, err
	}
	s.terminalReleasing(req.TerminalId)
	if err := terms.Release(req.TerminalId); err != nil {
		return sdk.ReleaseTerminalResponse{}, s.clientError("release terminal", req.TerminalId, err)
	}
	return sdk.ReleaseTerminalResponse{}, nil
}

// clientError turns a sandbox error into the ACP error the agent gets. A path outside
// the workspace is also reported to the session's subscribers.
func (s *session) clientError(op, target string, err error) error {
	data := map[string]any{"error": err.Error()}
	switch {
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		s.reportError(presenters.ErrorPayload{
			Code:    "path_outside_workspace",
			Message: fmt.Sprintf("the agent tried to %s %s, outside the session's workspace; it was refused", op, target),
		})
		return sdk.NewInvalidParams(data)
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrTerminalNotFound):
		return &sdk.RequestError{Code: codeResourceNotFound, Message: "Resource not found", Data: data}
	case errors.Is(err, sandbox.ErrInvalidPath), errors.Is(err, sandbox.ErrInvalidArgument),
		errors.Is(err, sandbox.ErrTooLarge), errors.Is(err, sandbox.ErrNotText):
		return sdk.NewInvalidParams(data)
	}
	return sdk.NewInternalError(data)
}

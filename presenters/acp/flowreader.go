package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// Reading an agent's stdout without the SDK's notification queue overflowing.
//
// acp-go-sdk (v0.13.5) queues every incoming notification in a fixed 1024-entry channel,
// closes the connection when it is full and never stops reading, so an agent that
// streams faster than its updates are handled (session/load replay, tool output) would
// kill its own connection. The SDK therefore reads the agent through an agentReader,
// which handles session/update notifications itself, one at a time, in order, on the
// goroutine that reads (the SDK's receive goroutine, inside Read): it decodes each one
// once into sdk.SessionNotification (text chunks through a narrow decoder of their
// own, chunkdecode.go), validates it as the SDK would, and calls the same
// Client.SessionUpdate the SDK would have called. A line that does not decode or
// validate is logged and skipped, as the SDK would have dropped it. Every other line
// (requests, responses, other notifications, $/cancel_request) goes to the SDK as it is,
// except that an elicitation/create gets its scope copied where the SDK keeps it
// (withElicitationScope).
//
// What follows from that:
//   - Backpressure is implicit: while an update is handled nothing more is read from
//     the agent's stdout, so a burst fills the pipe and blocks the agent on write. The
//     SDK's notification queue never sees a session/update, so it cannot overflow.
//   - Order holds: a request or response that follows some updates on the wire reaches
//     the SDK only after those updates were handled. A request_permission cannot
//     overtake its tool_call, nor a Prompt response the turn's updates.
//   - It cannot deadlock: SessionUpdate never waits on the agent or on I/O (it
//     normalizes and publishes, Publish never blocks, persistence is batched
//     elsewhere), so reading always resumes. Requests run in the SDK's own goroutines.
//   - A line longer than maxLineBytes cannot be handed on whole, and dropping it could
//     leave a caller waiting forever for a response: Read fails with errLineTooLong,
//     which ends the connection, and the agent goes through the crash path.

// maxLineBytes matches the SDK's scanner limit: a longer line would end the connection.
const maxLineBytes = 10 * 1024 * 1024

// errLineTooLong ends the connection when the agent writes an over-long line.
var errLineTooLong = fmt.Errorf("the agent sent a line longer than %d MiB", maxLineBytes>>20)

// agentReader hands the SDK the agent's lines except the session/updates it handles
// itself. Read is called by one goroutine only (the SDK's receive loop).
type agentReader struct {
	src    *bufio.Reader
	client sdk.Client
	log    *slog.Logger
	cur    []byte // rest of the line being handed to the SDK

	lastSessionID string // of the last text chunk, reused while the same
	// legacy sees every answer before the SDK (legacymodels.go); nil in tests of the
	// reader alone.
	legacy *legacyCalls

	mu    sync.Mutex
	fatal error // why reading ended for good, if the agent's output was at fault
}

func newAgentReader(src io.Reader, client sdk.Client, log *slog.Logger) *agentReader {
	return &agentReader{src: bufio.NewReaderSize(src, 64*1024), client: client, log: log}
}

// envelope is what routing a line needs; params are decoded only for session/update.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Read hands the SDK the next line (or the rest of it), after handling the
// session/updates in front of it.
func (r *agentReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		line, err := r.readLine()
		if len(line) >= maxLineBytes {
			r.mu.Lock()
			r.fatal = errLineTooLong
			r.mu.Unlock()
			r.log.Error("ending the agent connection: it sent an over-long line", "bytes_at_least", len(line))
			return 0, errLineTooLong
		}
		if len(line) > 0 && !r.handled(line) {
			// A copy: the SDK reads it after the buffer moves on.
			r.cur = withElicitationScope(bytes.Clone(line))
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

// clientNotifications are the notifications from the agent a client handles, besides
// the protocol's own ($/cancel_request); the SDK logs the others as errors.
var clientNotifications = []string{sdk.ClientMethodSessionUpdate, sdk.ClientMethodElicitationComplete}

// fatalError is why the agent's output was refused, or nil.
func (r *agentReader) fatalError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// readLine returns the next line including its newline (the last one may lack it),
// or maxLineBytes bytes of a longer one. A line that fits the buffer is not copied:
// it is valid until the next read, which is all a session/update needs.
func (r *agentReader) readLine() ([]byte, error) {
	line, err := r.src.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	buf := append([]byte(nil), line...)
	for len(buf) < maxLineBytes {
		more, err := r.src.ReadSlice('\n')
		buf = append(buf, more...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
	return buf, nil
}

// handled reports whether the line was consumed here: a session/update (handled), an
// empty line or one that is not JSON (which the SDK would only log).
func (r *agentReader) handled(line []byte) bool {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return true
	}
	if n, ok := decodeTextChunk(trimmed, r.lastSessionID); ok {
		r.lastSessionID = string(n.SessionId)
		r.sessionUpdate(n)
		return true
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		r.log.Warn("dropping a line from the agent that is not JSON-RPC", "err", err, "line", truncateForLog(trimmed))
		return true
	}
	isNotification := len(env.ID) == 0 || string(env.ID) == "null"
	if !isNotification && env.Method == "" && r.legacy != nil {
		return r.legacy.response(env.ID, trimmed)
	}
	if isNotification && env.Method != "" && !strings.HasPrefix(env.Method, "$/") && !slices.Contains(clientNotifications, env.Method) {
		// Vendors' own notifications (qwen's prompt suggestions, say): the SDK would log
		// each as an error, every turn.
		r.log.Debug("passing over a notification agenticd does not handle", "method", env.Method)
		return true
	}
	if !isNotification || env.Method != sdk.ClientMethodSessionUpdate {
		return false
	}
	if eu, ok := r.client.(extUpdater); ok {
		if sessionID, u, ok := extUpdateOf(env.Params); ok {
			eu.extUpdate(sessionID, u)
			return true
		}
	}
	var n sdk.SessionNotification
	err := json.Unmarshal(env.Params, &n)
	if err == nil {
		err = n.Validate()
	}
	if err != nil {
		r.log.Warn("dropping a session/update that does not decode", "err", err, "line", truncateForLog(trimmed))
		return true
	}
	withToolName(&n, env.Params)
	r.sessionUpdate(n)
	return true
}

// withToolName copies a tool call's top-level name, which the SDK's types do not have,
// into its _meta (toolNameMeta). Only lines that name one are decoded again.
func withToolName(n *sdk.SessionNotification, params json.RawMessage) {
	var meta *map[string]any
	switch {
	case n.Update.ToolCall != nil:
		meta = &n.Update.ToolCall.Meta
	case n.Update.ToolCallUpdate != nil:
		meta = &n.Update.ToolCallUpdate.Meta
	default:
		return
	}
	if !bytes.Contains(params, []byte(`"name"`)) {
		return
	}
	var raw struct {
		Update struct {
			Name string `json:"name"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &raw) != nil || raw.Update.Name == "" {
		return
	}
	m := make(map[string]any, len(*meta)+1)
	maps.Copy(m, *meta)
	m[toolNameMeta] = raw.Update.Name
	*meta = m
}

func (r *agentReader) sessionUpdate(n sdk.SessionNotification) {
	// The SDK hands notification handlers a context that lives as long as the
	// connection; SessionUpdate does not block and does not use it.
	if err := r.client.SessionUpdate(context.Background(), n); err != nil {
		r.log.Warn("handling a session/update failed", "err", err)
	}
}

func truncateForLog(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

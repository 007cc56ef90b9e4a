package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// Flow control between an agent's stdout and the SDK (issue 7).
//
// acp-go-sdk v0.13.0 queues every incoming notification in a fixed 1024-entry channel
// and closes the connection when it is full; it never stops reading. An agent that
// streams faster than notifications are handled (session/load replay, tool output)
// therefore kills its own connection. The SDK reads the agent through a flowReader
// instead of the raw pipe: the reader counts the session/update lines it has handed
// to the SDK, our SessionUpdate reports each one it finished, and while handed minus
// finished reaches the high-water mark the reader stops reading. The pipe then fills
// and the agent blocks on write: a burst slows the agent down instead of breaking it.
//
// Why this cannot deadlock:
//   - Only lines at a line boundary are held back, and only session/update lines are
//     counted. Every counted line is exactly one that the SDK will queue and hand to
//     SessionUpdate: the reader decodes its params with the SDK's own type first and
//     drops (with a log line) what the SDK would reject, and it drops other
//     notifications the SDK would only log and skip. So no count can leak.
//   - The SDK's queue therefore never holds more than highWater (< 1024) entries.
//   - SessionUpdate never blocks: it normalizes, publishes to the hub (Publish never
//     blocks), appends to the in-memory transcript and returns; it takes session locks
//     that no holder keeps across I/O. So while the reader waits, finished catches up
//     with handed and the reader resumes, always.
//   - Requests and responses are never counted and never held back on their own: they
//     wait only behind notifications that precede them on the wire, which drain by
//     the previous point. The SDK runs each incoming request (request_permission,
//     fs/*, terminal/*) in its own goroutine, so a permission that waits for a user
//     blocks neither the reader nor the notification queue. A Prompt response that
//     the SDK holds until the notifications sent before it are handled waits only on
//     those, which drain.
//   - If the connection shuts down while the reader waits, Close wakes it.

// defaultHighWater is how many session/update notifications may wait unhandled in the
// SDK at most; far below the SDK's queue of 1024.
const defaultHighWater = 256

// maxLineBytes matches the SDK's scanner limit: a longer line would end the connection.
const maxLineBytes = 10 * 1024 * 1024

// errFlowReaderClosed ends Read after Close.
var errFlowReaderClosed = errors.New("agent output closed")

type flowReader struct {
	src       *bufio.Reader
	highWater uint64
	log       *slog.Logger

	cur  []byte // rest of the line being handed to the SDK
	held []byte // a counted line read from the agent but not admitted yet

	mu          sync.Mutex
	changed     *sync.Cond
	handed      uint64 // counted lines handed to the SDK
	finished    uint64 // counted lines SessionUpdate finished
	maxInFlight uint64 // the largest handed-finished seen (tests check the bound)
	closed      bool
	eof         bool // src is exhausted: no more lines will be handed
}

func newFlowReader(src io.Reader, highWater int, log *slog.Logger) *flowReader {
	if highWater <= 0 {
		highWater = defaultHighWater
	}
	r := &flowReader{src: bufio.NewReaderSize(src, 64*1024), highWater: uint64(highWater), log: log}
	r.changed = sync.NewCond(&r.mu)
	return r
}

// envelope is the part of a JSON-RPC message the reader needs to classify a line.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Read hands the SDK whole lines, holding back a session/update line while too many
// are unhandled. It returns what it has rather than block with bytes in hand.
func (r *flowReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.cur) > 0 {
			c := copy(p[n:], r.cur)
			r.cur = r.cur[c:]
			n += c
			continue
		}
		if r.held == nil {
			if n > 0 && !r.lineBuffered() {
				return n, nil
			}
			line, counted, err := r.nextLine()
			if err != nil {
				if n > 0 {
					return n, nil
				}
				return 0, err
			}
			if !counted {
				r.cur = line
				continue
			}
			r.held = line
		}
		if !r.admit(n == 0) {
			return n, nil
		}
		if r.held == nil { // closed while waiting
			return n, errFlowReaderClosed
		}
		r.cur, r.held = r.held, nil
	}
	return n, nil
}

// lineBuffered reports whether a whole line can be read without blocking.
func (r *flowReader) lineBuffered() bool {
	b, _ := r.src.Peek(r.src.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// nextLine reads lines until one is to be handed to the SDK and says whether it counts.
func (r *flowReader) nextLine() ([]byte, bool, error) {
	for {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return nil, false, errFlowReaderClosed
		}
		line, err := r.readLine()
		if len(line) == 0 {
			if err == nil {
				continue
			}
			r.mu.Lock()
			r.eof = true
			r.changed.Broadcast()
			r.mu.Unlock()
			return nil, false, err
		}
		if len(line) > maxLineBytes {
			r.log.Error("dropping an over-long line from the agent", "bytes", len(line))
			continue
		}
		keep, counted := r.classify(line)
		if !keep {
			continue
		}
		return line, counted, nil
	}
}

// readLine returns the next line including its newline (the last one may lack it).
func (r *flowReader) readLine() ([]byte, error) {
	line, err := r.src.ReadSlice('\n')
	if err == nil {
		return append([]byte(nil), line...), nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return append([]byte(nil), line...), err
	}
	buf := append([]byte(nil), line...)
	for {
		more, err := r.src.ReadSlice('\n')
		if len(buf) <= maxLineBytes {
			buf = append(buf, more...)
		} else {
			buf = buf[:maxLineBytes+1] // keep the marker that it is too long, not the bytes
		}
		if err == nil || !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

// classify decides whether a line goes to the SDK and whether it counts against the
// high-water mark.
func (r *flowReader) classify(line []byte) (keep, counted bool) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return false, false
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		r.log.Warn("dropping a line from the agent that is not JSON-RPC", "err", err, "line", truncateForLog(trimmed))
		return false, false
	}
	isNotification := env.Method != "" && (len(env.ID) == 0 || string(env.ID) == "null")
	if !isNotification {
		return true, false // a request or a response
	}
	switch env.Method {
	case sdk.ClientMethodSessionUpdate:
		// The SDK hands a session/update to SessionUpdate exactly when its params
		// decode into SessionNotification (whose Validate accepts everything).
		var n sdk.SessionNotification
		if err := json.Unmarshal(env.Params, &n); err != nil {
			r.log.Warn("dropping a session/update the SDK cannot decode", "err", err, "line", truncateForLog(trimmed))
			return false, false
		}
		return true, true
	case "$/cancel_request":
		return true, false // handled by the SDK at once, never queued
	default:
		r.log.Info("ignoring an agent notification this client does not handle", "method", env.Method)
		return false, false
	}
}

// admit counts the held line as handed once fewer than highWater are unhandled,
// waiting for that if wait is set. It reports false if it would have to wait.
func (r *flowReader) admit(wait bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.handed-r.finished >= r.highWater {
		if r.closed {
			r.held = nil
			return true
		}
		if !wait {
			return false
		}
		r.changed.Wait()
	}
	r.handed++
	if d := r.handed - r.finished; d > r.maxInFlight {
		r.maxInFlight = d
	}
	return true
}

// notificationDone is called by SessionUpdate for every session/update it finished.
func (r *flowReader) notificationDone() {
	r.mu.Lock()
	r.finished++
	// Wake the reader (room again), waitDrained and barriers. Broadcasting on every
	// finish is a mutex round-trip per notification; cheap next to the decoding.
	r.changed.Broadcast()
	r.mu.Unlock()
}

// barrier waits until every counted line handed so far has been finished (or ctx
// ends or the reader closes). The SDK runs each incoming request in its own goroutine
// while notifications wait in its queue, so a request_permission could otherwise be
// served before the tool_call the agent sent just ahead of it. Waiting cannot
// deadlock: finishing notifications never waits for a request handler, and the lines
// handed after the request (an agent that keeps streaming) finish just the same.
func (r *flowReader) barrier(ctx context.Context) {
	r.mu.Lock()
	target := r.handed
	if r.finished >= target || r.closed {
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.changed.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.finished < target && !r.closed && ctx.Err() == nil {
		r.changed.Wait()
	}
}

// waitDrained blocks until the source is exhausted and every counted line was
// finished, or until stop is closed.
func (r *flowReader) waitDrained(stop <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		select {
		case <-stop:
			r.mu.Lock()
			r.changed.Broadcast()
			r.mu.Unlock()
		case <-done:
		}
	}()
	defer close(done)
	r.mu.Lock()
	defer r.mu.Unlock()
	for !(r.eof && r.handed == r.finished) {
		select {
		case <-stop:
			return
		default:
		}
		r.changed.Wait()
	}
}

// Close makes a waiting or later Read return an error.
func (r *flowReader) Close() {
	r.mu.Lock()
	r.closed = true
	r.changed.Broadcast()
	r.mu.Unlock()
}

// stats reports the counters (for tests and diagnostics).
func (r *flowReader) stats() (handed, finished, maxInFlight uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handed, r.finished, r.maxInFlight
}

func truncateForLog(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// Package fakeopenai is a local OpenAI-compatible chat completions server for
// benchmarks: every streamed request is answered with the same scripted reply, sent as
// server-sent events in the real wire format (one chat.completion.chunk per event, a
// finish_reason, a usage chunk when asked, then [DONE]), flushed event by event as a
// real provider does.
package fakeopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Model is the one model the server offers.
const Model = "bench-model"

// Server streams Chunks content deltas of ChunkSize bytes per completion request.
type Server struct {
	chunks    int
	chunkSize int
	srv       *http.Server
	lis       net.Listener
	requests  atomic.Int64
	served    chan struct{}
}

// Chunk is the text of delta i: its zero-padded index, then 'x' padding to size bytes.
func Chunk(i, size int) string {
	s := fmt.Sprintf("%06d ", i)
	if len(s) < size {
		s += strings.Repeat("x", size-len(s))
	}
	return s
}

// Reply is the whole text a completion streams.
func Reply(chunks, size int) string {
	var b strings.Builder
	for i := 0; i < chunks; i++ {
		b.WriteString(Chunk(i, size))
	}
	return b.String()
}

// Start listens on 127.0.0.1 (a free port) and serves until Close.
func Start(chunks, chunkSize int) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{chunks: chunks, chunkSize: chunkSize, lis: lis, served: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.completions)
	mux.HandleFunc("GET /v1/models", s.models)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

// BaseURL is what an agent's base_url should be.
func (s *Server) BaseURL() string { return "http://" + s.lis.Addr().String() + "/v1" }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.served
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list",
		"data": []any{map[string]any{"id": Model, "object": "model", "owned_by": "bench"}}})
}

type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	s.requests.Add(1)
	id := fmt.Sprintf("chatcmpl-bench-%d", s.requests.Load())
	created := time.Now().Unix()
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": Reply(s.chunks, s.chunkSize)}, "finish_reason": "stop"}},
			"usage":   usage(s.chunks)})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	for i := 0; i < s.chunks; i++ {
		if !send(chunk(map[string]any{"content": Chunk(i, s.chunkSize)}, nil)) {
			return
		}
	}
	if !send(chunk(map[string]any{}, "stop")) {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		if !send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage(s.chunks)}) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func usage(chunks int) map[string]any {
	return map[string]any{"prompt_tokens": 12, "completion_tokens": chunks, "total_tokens": 12 + chunks}
}

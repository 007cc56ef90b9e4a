package deepchat

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
	"go.uber.org/goleak"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/sandbox/confine"
	"github.com/agenticd/agenticd/store"
)

// testMCPPath is the MCP test server (internal/testmcp), built once for the package.
var testMCPPath string

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	dir, err := os.MkdirTemp("", "deepchat-testmcp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testMCPPath = filepath.Join(dir, "testmcp")
	build := exec.Command("go", "build", "-o", testMCPPath, "../../internal/testmcp")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "building the MCP test server:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	// goleak.VerifyTestMain would exit before the cleanup; check by hand.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitLimit bounds every wait for an event; reaching it fails the test.
const waitLimit = 20 * time.Second

// ---- fake OpenAI-compatible provider ----

// fakeReply scripts one answer of the fake provider.
type fakeReply struct {
	status  int // 0: 200 with an SSE stream
	headers map[string]string
	body    string   // the body of a non-200 answer
	events  []string // data payloads, each sent as one SSE event
	noDone  bool     // end without data: [DONE]
	hangup  bool     // after the events, cut the TCP connection
	hold    bool     // after the events, wait until the client goes away
	trickle bool     // send the stream one byte per write, so writes split characters
}

type recordedRequest struct {
	auth        string
	traceparent string
	body        chatRequest
}

type fakeLLM struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	replies  []fakeReply
	requests []recordedRequest
	gone     chan struct{} // receives once per held request whose client went away
}

func newFakeLLM(t testing.TB) *fakeLLM {
	f := &fakeLLM{t: t, gone: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

func (f *fakeLLM) script(replies ...fakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, replies...)
}

func (f *fakeLLM) requestsSoFar() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.requests...)
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"wrong path"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var req chatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		f.t.Errorf("fake provider: request is not JSON: %v", err)
	}
	f.mu.Lock()
	f.requests = append(f.requests, recordedRequest{auth: r.Header.Get("Authorization"), traceparent: r.Header.Get("Traceparent"), body: req})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("fake provider: unexpected request %d", len(f.requests))
		http.Error(w, `{"error":{"message":"no scripted reply"}}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()

	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	for _, ev := range rep.events {
		frame := fmt.Sprintf("data: %s\n\n", ev)
		if !rep.trickle {
			io.WriteString(w, frame)
			continue
		}
		for i := range len(frame) {
			io.WriteString(w, frame[i:i+1])
			flusher.Flush()
		}
	}
	flusher.Flush()
	switch {
	case rep.hangup:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case rep.hold:
		<-r.Context().Done()
		f.gone <- struct{}{}
		return
	}
	if !rep.noDone {
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func deltaEvent(delta map[string]any) string {
	return mustJSON(map[string]any{"id": "c1", "object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
}

func textEvent(s string) string { return deltaEvent(map[string]any{"content": s}) }

func reasoningEvent(field, s string) string { return deltaEvent(map[string]any{field: s}) }

func finishEvent(reason string) string {
	return mustJSON(map[string]any{"id": "c1", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}})
}

func usageEvent(in, out int) string {
	return mustJSON(map[string]any{"id": "c1", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
}

// toolEvents streams one tool call: a first chunk with id and name, then the argument
// text in pieces, as OpenAI does.
func toolEvents(index int, id, name string, argPieces ...string) []string {
	evs := []string{deltaEvent(map[string]any{"tool_calls": []any{map[string]any{
		"index": index, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""}}}})}
	for _, p := range argPieces {
		evs = append(evs, deltaEvent(map[string]any{"tool_calls": []any{map[string]any{
			"index": index, "function": map[string]any{"arguments": p}}}}))
	}
	return evs
}

// textReply is a whole plain answer in chunks, with usage at the end.
func textReply(chunks ...string) fakeReply {
	var evs []string
	for _, c := range chunks {
		evs = append(evs, textEvent(c))
	}
	evs = append(evs, finishEvent("stop"), usageEvent(10, len(chunks)))
	return fakeReply{events: evs}
}

// toolReply is an answer that calls one tool.
func toolReply(id, name, args string) fakeReply {
	mid := len(args) / 2
	evs := toolEvents(0, id, name, args[:mid], args[mid:])
	return fakeReply{events: append(evs, finishEvent("tool_calls"), usageEvent(5, 3))}
}

// syncBuffer is a log destination that tests read while the presenter writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sleepLog stands in for the wait between provider attempts: it records the duration
// asked for and returns at once.
type sleepLog struct {
	mu    sync.Mutex
	asked []time.Duration
}

func (l *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	l.mu.Lock()
	l.asked = append(l.asked, d)
	l.mu.Unlock()
	return ctx.Err()
}

func (l *sleepLog) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.asked...)
}

// ---- recording publisher ----

type recorder struct {
	mu      sync.Mutex
	events  []presenters.Event
	changed chan struct{}
	hook    func(presenters.Event) // runs inside Publish, before the event is recorded
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Publish(ev presenters.Event) uint64 {
	r.mu.Lock()
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ev.Sequence = uint64(len(r.events) + 1)
	ev.Time = time.Now()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
	return ev.Sequence
}

func (r *recorder) setHook(h func(presenters.Event)) {
	r.mu.Lock()
	r.hook = h
	r.mu.Unlock()
}

func (r *recorder) all() []presenters.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]presenters.Event(nil), r.events...)
}

// waitFor returns the first recorded event (from the start) that matches.
func (r *recorder) waitFor(t testing.TB, what string, match func(presenters.Event) bool) presenters.Event {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if match(ev) {
				r.mu.Unlock()
				return ev
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no event %s within %s; events: %s", what, waitLimit, r.summary())
		}
	}
}

func (r *recorder) summary() string {
	var parts []string
	for _, ev := range r.all() {
		parts = append(parts, describe(ev))
	}
	return strings.Join(parts, " ")
}

func describe(ev presenters.Event) string {
	switch p := ev.Payload.(type) {
	case presenters.StatusChangedPayload:
		return "status:" + string(p.Status)
	case presenters.MessageEndPayload:
		if p.Role == presenters.RoleUser {
			return "user_end"
		}
		return "end:" + string(p.StopReason)
	case presenters.MessageBlockPayload:
		return "block:" + string(p.Block.Type)
	case presenters.ToolStartPayload:
		return "tool_start:" + p.Tool.ToolName
	case presenters.ToolRunningPayload:
		return "tool_running:" + p.Tool.ToolName
	case presenters.ToolEndPayload:
		return "tool_end:" + p.Tool.ToolName + ":" + string(p.Tool.Status)
	case presenters.ErrorPayload:
		return "error:" + p.Code
	case presenters.MessageDeltaPayload:
		if p.Role == presenters.RoleUser {
			return "user_delta"
		}
		return "delta"
	case presenters.PermissionRequiredPayload:
		return "perm_required"
	case presenters.PermissionGrantedPayload:
		return "perm_granted"
	case presenters.PermissionDeniedPayload:
		return "perm_denied"
	case presenters.SessionUpdatedPayload:
		return "updated"
	case presenters.SessionCreatedPayload:
		return "created"
	case presenters.SessionReadyPayload:
		return "ready"
	case presenters.SessionClosedPayload:
		return "closed"
	}
	return fmt.Sprintf("%T", ev.Payload)
}

func isEnd(messageID string) func(presenters.Event) bool {
	return func(ev presenters.Event) bool {
		p, ok := ev.Payload.(presenters.MessageEndPayload)
		return ok && p.MessageID == messageID
	}
}

func isPermissionRequired(ev presenters.Event) bool {
	_, ok := ev.Payload.(presenters.PermissionRequiredPayload)
	return ok
}

func ofType[T presenters.Payload](events []presenters.Event) []T {
	var out []T
	for _, ev := range events {
		if p, ok := ev.Payload.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

// ---- harness: presenter + real SQLite + real sandbox + fake provider ----

type harness struct {
	t         testing.TB
	p         *Presenter
	logs      *syncBuffer // the presenter's log, as text
	sleeps    *sleepLog   // the waits between provider attempts
	store     *store.Store
	db        *gorm.DB
	dbPath    string
	rec       *recorder
	llm       *fakeLLM
	roots     *sandbox.Roots
	workspace string
	cfg       Config
	openDB    func(path string) (*gorm.DB, error)
}

const testKeyEnv = "DEEPCHAT_TEST_API_KEY"

func newHarness(t testing.TB, options ...func(*harness)) *harness {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := sandbox.NewRoots([]string{dir}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, rec: newRecorder(), llm: newFakeLLM(t), roots: roots, workspace: ws,
		dbPath: filepath.Join(dir, "data", "agenticd.db"), openDB: store.OpenSQLite,
		logs: &syncBuffer{}, sleeps: &sleepLog{}}
	t.Cleanup(h.llm.srv.Close)
	t.Setenv(testKeyEnv, "sk-test-123")
	h.cfg = Config{ID: "deepchat.fake.test", Provider: "fake", BaseURL: h.llm.srv.URL + "/v1", APIKeyEnv: testKeyEnv,
		Models: []string{"fake-small", "fake-large"}, DefaultModel: "fake-small", PermissionTimeout: waitLimit}
	for _, option := range options {
		option(h)
	}
	h.start()
	return h
}

// start opens the database and a presenter on it (again, after stop: a restart).
func (h *harness) start() {
	t := h.t
	t.Helper()
	db, err := h.openDB(h.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	store, err := store.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.MarkInterrupted(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := New(h.cfg, Deps{Publisher: h.rec, Roots: h.roots, Store: store, Logger: slog.New(slog.NewTextHandler(h.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.client.sleep = h.sleeps.sleep
	t.Cleanup(func() { p.Close(context.Background()) })
	h.p, h.store, h.db = p, store, db
}

// stop closes the presenter and the database, as a shutdown does.
func (h *harness) stop() {
	h.t.Helper()
	if err := h.p.Close(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	sqlDB, _ := h.db.DB()
	if err := sqlDB.Close(); err != nil {
		h.t.Fatal(err)
	}
}

// opened opens dir as the service does before it calls CreateSession.
func (h *harness) opened(dir string) *sandbox.Workspace {
	h.t.Helper()
	ws, err := h.roots.Open(dir)
	if err != nil {
		h.t.Fatal(err)
	}
	return ws
}

func (h *harness) createSession(mode string) presenters.SessionInfo {
	h.t.Helper()
	info, err := h.p.CreateSession(context.Background(), presenters.SessionConfig{Workspace: h.opened(h.workspace), ModeID: mode})
	if err != nil {
		h.t.Fatalf("CreateSession: %v", err)
	}
	return info
}

func (h *harness) send(sessionID, text string) presenters.SendResult {
	h.t.Helper()
	res, err := h.p.SendMessage(context.Background(), sessionID, presenters.TextContent(text), presenters.SendOptions{})
	if err != nil {
		h.t.Fatalf("SendMessage: %v", err)
	}
	return res
}

// turn sends text and waits until the turn has ended.
func (h *harness) turn(sessionID, text string) (presenters.SendResult, presenters.MessageEndPayload) {
	h.t.Helper()
	res := h.send(sessionID, text)
	return res, h.waitEnd(res.MessageID)
}

// waitEnd waits for a turn's MESSAGE_END and the status change that closes the turn.
func (h *harness) waitEnd(messageID string) presenters.MessageEndPayload {
	h.t.Helper()
	end := h.rec.waitFor(h.t, "MESSAGE_END", isEnd(messageID))
	h.rec.waitFor(h.t, "status change after MESSAGE_END", func(ev presenters.Event) bool {
		p, ok := ev.Payload.(presenters.StatusChangedPayload)
		return ok && ev.SessionID == end.SessionID && ev.Sequence > end.Sequence &&
			(p.Status == presenters.SessionIdle || p.Status == presenters.SessionError)
	})
	return end.Payload.(presenters.MessageEndPayload)
}

func (h *harness) messages(sessionID string) []presenters.Message {
	h.t.Helper()
	msgs, err := h.p.GetMessages(context.Background(), sessionID, presenters.MessageQuery{})
	if err != nil {
		h.t.Fatalf("GetMessages: %v", err)
	}
	return msgs
}

func (h *harness) respond(sessionID, requestID, option string) {
	h.t.Helper()
	if err := h.p.RespondPermission(context.Background(), sessionID, presenters.PermissionResponse{RequestID: requestID, OptionID: option}); err != nil {
		h.t.Fatalf("RespondPermission(%s): %v", option, err)
	}
}

func (h *harness) writeFile(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.workspace, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) readFile(rel string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(h.workspace, rel))
	return string(data), err == nil
}

// toolMessages returns the tool results a request carried back to the model.
func toolMessages(req chatRequest) []chatMessage {
	var out []chatMessage
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// commits counts the commits of databases opened by openCountingDB.
var commits atomic.Int64

func init() {
	sql.Register("sqlite3_commit_counting", &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		c.RegisterCommitHook(func() int {
			commits.Add(1)
			return 0
		})
		return nil
	}})
}

// countCommits is a harness option: open the database with the commit-counting driver.
func countCommits(h *harness) { h.openDB = openCountingDB }

// openCountingDB opens the database as store.OpenSQLite does, through a driver
// whose connections count their commits.
func openCountingDB(path string) (*gorm.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	dsn := path + "?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000&_foreign_keys=on&_txlock=immediate"
	return gorm.Open(gormsqlite.New(gormsqlite.Config{DriverName: "sqlite3_commit_counting", DSN: dsn}),
		&gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }

func reportedAs(count *int64, want int64) bool { return count != nil && *count == want }

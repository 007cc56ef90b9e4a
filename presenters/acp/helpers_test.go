package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/store"
)

// waitLimit only keeps a broken test from hanging; no assertion depends on time.
const waitLimit = 60 * time.Second

// recorder is a Publisher that keeps every event, like the hub would deliver them.
type recorder struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events []presenters.Event
}

func newRecorder() *recorder {
	r := &recorder{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *recorder) Publish(ev presenters.Event) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev.Sequence = uint64(len(r.events) + 1)
	ev.Time = time.Now()
	r.events = append(r.events, ev)
	r.cond.Broadcast()
	return ev.Sequence
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// waitFrom returns the first event at index >= from that matches, and the index after it.
func (r *recorder) waitFrom(t *testing.T, from int, what string, match func(presenters.Event) bool) (presenters.Event, int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	stop := time.AfterFunc(waitLimit, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := from; ; {
		for ; i < len(r.events); i++ {
			if match(r.events[i]) {
				return r.events[i], i + 1
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event %s after index %d within %s; events since: %s", what, from, waitLimit, describe(r.events[min(from, len(r.events)):]))
		}
		r.cond.Wait()
	}
}

// eventsOf returns a session's events from index from.
func (r *recorder) eventsOf(sessionID string, from int) []presenters.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []presenters.Event
	for _, ev := range r.events[min(from, len(r.events)):] {
		if _, agentEvent := ev.Payload.(presenters.AgentStatusChangedPayload); ev.SessionID == sessionID && !agentEvent {
			out = append(out, ev)
		}
	}
	return out
}

// agentStatuses are the statuses the agent's AGENT_STATUS_CHANGED events carried, from
// event number from on, each checked to belong to no session.
func (r *recorder) agentStatuses(t *testing.T, from int) []presenters.AgentStatus {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []presenters.AgentStatus
	for _, ev := range r.events[min(from, len(r.events)):] {
		if p, ok := ev.Payload.(presenters.AgentStatusChangedPayload); ok {
			if ev.SessionID != "" || ev.AgentID != p.Info.ID {
				t.Errorf("agent event with session %q and agent %q for agent %s: want no session and its agent", ev.SessionID, ev.AgentID, p.Info.ID)
			}
			out = append(out, p.Info.Status)
		}
	}
	return out
}

func describe(evs []presenters.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		if i == 40 {
			fmt.Fprintf(&b, " ... (%d more)", len(evs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s %+v", typeName(ev.Payload.EventType()), ev.Payload)
	}
	return b.String()
}

func typeName(t presenters.EventType) string {
	names := map[presenters.EventType]string{
		presenters.EventSessionCreated: "SESSION_CREATED", presenters.EventSessionReady: "SESSION_READY",
		presenters.EventSessionUpdated: "SESSION_UPDATED", presenters.EventSessionClosed: "SESSION_CLOSED",
		presenters.EventMessageDelta: "MESSAGE_DELTA", presenters.EventMessageBlock: "MESSAGE_BLOCK",
		presenters.EventMessageEnd: "MESSAGE_END", presenters.EventToolStart: "TOOL_START",
		presenters.EventToolRunning: "TOOL_RUNNING", presenters.EventToolEnd: "TOOL_END",
		presenters.EventToolPermissionRequired: "TOOL_PERMISSION_REQUIRED", presenters.EventToolPermissionGranted: "TOOL_PERMISSION_GRANTED",
		presenters.EventToolPermissionDenied: "TOOL_PERMISSION_DENIED", presenters.EventStatusChanged: "STATUS_CHANGED",
		presenters.EventError: "ERROR",
	}
	return names[t]
}

func isType(t presenters.EventType) func(presenters.Event) bool {
	return func(ev presenters.Event) bool { return ev.Payload.EventType() == t }
}

func isEnd(messageID string) func(presenters.Event) bool {
	return func(ev presenters.Event) bool {
		end, ok := ev.Payload.(presenters.MessageEndPayload)
		return ok && end.MessageID == messageID
	}
}

// harness is a workspace root, a store and a recorder for presenters under test.
type harness struct {
	t     *testing.T
	dir   string
	ws    string // a workspace inside the root
	rec   *recorder
	roots *sandbox.Roots
	store *store.Store
	log   *syncBuffer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	ws := filepath.Join(root, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := sandbox.NewRoots([]string{root}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, rec: newRecorder(), roots: roots}
	h.ws, err = filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	h.openStore()
	return h
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

// openStore opens (or reopens, as after a restart) the SQLite store.
func (h *harness) openStore() {
	h.t.Helper()
	db, err := store.OpenSQLite(filepath.Join(h.dir, "agenticd.db"))
	if err != nil {
		h.t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sqlDB.Close() })
	h.store, err = store.New(context.Background(), db)
	if err != nil {
		h.t.Fatal(err)
	}
}

// script writes an agent script and returns its path.
func (h *harness) script(body string) string {
	h.t.Helper()
	f, err := os.CreateTemp(h.dir, "script-*.json")
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	var check any
	if err := json.Unmarshal([]byte(body), &check); err != nil {
		h.t.Fatalf("bad test script: %v\n%s", err, body)
	}
	if _, err := f.WriteString(body); err != nil {
		h.t.Fatal(err)
	}
	return f.Name()
}

func (h *harness) config(script string) Config {
	return Config{ID: "acp.test.scripted", Command: testAgentPath, Env: map[string]string{"TESTAGENT_SCRIPT": h.script(script)}}
}

// presenter starts a presenter for the scripted agent; it is closed at cleanup.
func (h *harness) presenter(cfg Config) *Presenter {
	h.t.Helper()
	logger, buf := testLog(h.t)
	h.log = buf
	p, err := New(cfg, Deps{Publisher: h.rec, Roots: h.roots, Store: h.store, Logger: logger})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { closePresenter(h.t, p) })
	return p
}

func closePresenter(t *testing.T, p *Presenter) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testLogger keeps the presenter's log and shows it if the test fails.
func testLogger(t *testing.T) *slog.Logger {
	l, _ := testLog(t)
	return l
}

func testLog(t *testing.T) (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("presenter log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// timeline summarizes a session's events for comparison; message ids are replaced
// by the names given in ids.
func timeline(evs []presenters.Event, ids map[string]string) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		s := eventSummary(ev.Payload)
		for id, name := range ids {
			s = strings.ReplaceAll(s, id, name)
		}
		out = append(out, s)
	}
	return out
}

func eventSummary(p presenters.Payload) string {
	switch v := p.(type) {
	case presenters.SessionCreatedPayload:
		return "SESSION_CREATED"
	case presenters.SessionReadyPayload:
		return fmt.Sprintf("SESSION_READY %d", v.MessageCount)
	case presenters.SessionClosedPayload:
		return "SESSION_CLOSED"
	case presenters.SessionUpdatedPayload:
		var fields []string
		pt := v.Patch
		if pt.Title != nil {
			fields = append(fields, "title="+*pt.Title)
		}
		if pt.AvailableModes != nil {
			fields = append(fields, fmt.Sprintf("modes=%d", len(*pt.AvailableModes)))
		}
		if pt.CurrentModeID != nil {
			fields = append(fields, "mode="+*pt.CurrentModeID)
		}
		if pt.AvailableModels != nil {
			fields = append(fields, fmt.Sprintf("models=%d", len(*pt.AvailableModels)))
		}
		if pt.CurrentModelID != nil {
			fields = append(fields, "model="+*pt.CurrentModelID)
		}
		if pt.AvailableCommands != nil {
			fields = append(fields, fmt.Sprintf("commands=%d", len(*pt.AvailableCommands)))
		}
		if pt.Capabilities != nil {
			fields = append(fields, "capabilities")
		}
		if pt.Usage != nil {
			fields = append(fields, fmt.Sprintf("usage=%s/%s", count(pt.Usage.TotalTokens), count(pt.Usage.ContextUsed)))
		}
		return "SESSION_UPDATED " + strings.Join(fields, " ")
	case presenters.StatusChangedPayload:
		return "STATUS " + string(v.Status)
	case presenters.PermissionRequiredPayload:
		return fmt.Sprintf("PERMISSION_REQUIRED %s %v", v.Request.ToolID, v.Request.Paths)
	case presenters.PermissionGrantedPayload:
		return fmt.Sprintf("PERMISSION_GRANTED %s %s by %s", v.ToolID, v.OptionID, v.DecidedBy)
	case presenters.PermissionDeniedPayload:
		return fmt.Sprintf("PERMISSION_DENIED %s %q by %s", v.ToolID, v.OptionID, v.DecidedBy)
	case presenters.ElicitationRequiredPayload:
		return fmt.Sprintf("ELICITATION_REQUIRED %s %s %q", v.Request.Mode, v.Request.ToolID, v.Request.Message)
	case presenters.ElicitationResolvedPayload:
		return fmt.Sprintf("ELICITATION_RESOLVED %s by %s %q", v.Action, v.DecidedBy, v.Reason)
	case presenters.ErrorPayload:
		return "ERROR " + v.Code
	case presenters.MessageEndPayload:
		if v.Usage != nil {
			return fmt.Sprintf("END %s %s %s usage=%s", v.Role, v.MessageID, v.StopReason, count(v.Usage.TotalTokens))
		}
	}
	return summary(p)
}

func (h *harness) create(p *Presenter) presenters.SessionInfo {
	h.t.Helper()
	info, err := p.CreateSession(testContext(h.t), presenters.SessionConfig{Workspace: h.opened(h.ws)})
	if err != nil {
		h.t.Fatal(err)
	}
	return info
}

// send starts a turn and returns it with the index of the first event it may cause.
func (h *harness) send(p *Presenter, sessionID, text string) (presenters.SendResult, int) {
	h.t.Helper()
	from := h.rec.len()
	res, err := p.SendMessage(testContext(h.t), sessionID, presenters.TextContent(text), presenters.SendOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return res, from
}

// finish waits for the turn's MESSAGE_END and the session's return to a resting
// status, and returns the turn's timeline.
func (h *harness) finish(sessionID string, res presenters.SendResult, from int) []string {
	h.t.Helper()
	_, next := h.rec.waitFrom(h.t, from, "the turn's end", isEnd(res.MessageID))
	h.rec.waitFrom(h.t, next, "a resting status", func(ev presenters.Event) bool {
		s, ok := ev.Payload.(presenters.StatusChangedPayload)
		return ok && ev.SessionID == sessionID && s.Status != presenters.SessionGenerating && s.Status != presenters.SessionPaused
	})
	return timeline(h.rec.eventsOf(sessionID, from), map[string]string{res.MessageID: "A", res.UserMessageID: "U"})
}

// permissionRequired waits for the next permission request of a session.
func (h *harness) permissionRequired(sessionID string, from int) presenters.PermissionRequest {
	h.t.Helper()
	ev, _ := h.rec.waitFrom(h.t, from, "a permission request", func(ev presenters.Event) bool {
		_, ok := ev.Payload.(presenters.PermissionRequiredPayload)
		return ok && ev.SessionID == sessionID
	})
	return ev.Payload.(presenters.PermissionRequiredPayload).Request
}

// afterPreamble drops the events every turn starts with (the user's message, the
// title, STATUS generating).
func afterPreamble(t *testing.T, lines []string) []string {
	t.Helper()
	pre := []string{"DELTA user", "END user", "SESSION_UPDATED title", "STATUS generating"}
	i := 0
	for _, p := range pre {
		if i < len(lines) && strings.HasPrefix(lines[i], p) {
			i++
		} else if p != "SESSION_UPDATED title" {
			t.Fatalf("turn does not start with %q: %q", p, lines)
		}
	}
	return lines[i:]
}

// soleConnLocked is the presenter's one agent process (p.mu held), nil when none runs;
// for tests whose sessions all share one workspace.
func soleConnLocked(p *Presenter) *agentConn {
	for _, c := range p.conns {
		return c
	}
	return nil
}

// count shows a usage count: "-" when not reported.
func count(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

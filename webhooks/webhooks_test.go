package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/presenters"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("0123456789abcdef-server-secret")

// recorder keeps the records it is given.
type recorder struct {
	mu      sync.Mutex
	records []Record
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) RecordDeliveries(_ context.Context, records []Record) error {
	r.mu.Lock()
	r.records = append(r.records, records...)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until the records satisfy done, and returns them.
func (r *recorder) waitFor(t *testing.T, what string, done func([]Record) bool) []Record {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		got := slices.Clone(r.records)
		r.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; records: %+v", what, got)
		}
	}
}

func hasOutcome(o Outcome) func([]Record) bool {
	return func(rs []Record) bool { return slices.ContainsFunc(rs, func(r Record) bool { return r.Outcome == o }) }
}

// receiver is a webhook receiver that checks what it gets as docs/webhooks.md tells
// receivers to: the signature over "<t>.<body>" with the shared secret, a timestamp
// within five minutes, the delivery id.
type receiver struct {
	t      *testing.T
	secret []byte
	// answer is the status to reply; nil: 204.
	answer func(n int) int

	mu       sync.Mutex
	requests int
	bodies   [][]byte
	problems []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.requests++
	n := rc.requests
	if p := verify(rc.secret, r.Header, body, time.Now()); p != "" {
		rc.problems = append(rc.problems, p)
	}
	rc.bodies = append(rc.bodies, body)
	rc.mu.Unlock()
	status := http.StatusNoContent
	if rc.answer != nil {
		status = rc.answer(n)
	}
	w.WriteHeader(status)
}

// verify is the recipe of docs/webhooks.md, written out apart from Sign so that a wrong
// Sign fails it. It returns what is wrong, or "".
func verify(key []byte, h http.Header, body []byte, now time.Time) string {
	var ts, sig string
	for _, part := range strings.Split(h.Get("Agenticd-Signature"), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "no timestamp in " + h.Get("Agenticd-Signature")
	}
	if d := now.Sub(time.Unix(unix, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "timestamp off by " + d.String()
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "signature " + sig + " is not " + want
	}
	var n struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &n); err != nil || n.ID == "" || n.ID != h.Get("Agenticd-Delivery") {
		return "delivery id header " + h.Get("Agenticd-Delivery") + " does not match the body's " + n.ID
	}
	return ""
}

func (rc *receiver) check(t *testing.T) (requests int, bodies [][]byte) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range rc.problems {
		t.Error(p)
	}
	return rc.requests, slices.Clone(rc.bodies)
}

// start runs n until the test ends, and waits for Run to return then.
func start(t *testing.T, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func fast(opts Options) Options {
	opts.FirstRetry, opts.MaxRetryDelay, opts.AttemptTimeout = 20*time.Millisecond, 50*time.Millisecond, 2*time.Second
	opts.Logger = slog.New(slog.DiscardHandler)
	return opts
}

// The events whose notices carry something secret in the session, to see it never leaves.
const leak = "TOP-SECRET-CONTENT"

func permissionEvent(session string, seq uint64) presenters.Event {
	return presenters.Event{Sequence: seq, SessionID: session, AgentID: "deepchat.default", Time: time.Now(),
		Payload: presenters.PermissionRequiredPayload{Request: presenters.PermissionRequest{RequestID: "perm-1", ToolID: "tool-1",
			MessageID: "msg-1", Description: "write " + leak, Paths: []string{"/w/" + leak}, Arguments: json.RawMessage(`{"content":"` + leak + `"}`),
			CommandInfo: &presenters.CommandInfo{Command: "echo " + leak}}}}
}

func TestSignedNoticeWithIDsOnly(t *testing.T) {
	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	rec := newRecorder()
	n, err := New(fast(Options{Hooks: []Hook{{Name: "ops", URL: srv.URL + "/hook?key=" + leak, Secret: secret}}, Recorder: rec}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	n.Published(permissionEvent("s1", 7))
	n.Published(presenters.Event{Sequence: 8, SessionID: "s1", AgentID: "deepchat.default", Time: time.Now(),
		Payload: presenters.ErrorPayload{Code: "PROVIDER", Message: leak, MessageID: "msg-1"}})
	records := rec.waitFor(t, "two deliveries", func(rs []Record) bool { return len(rs) == 2 })
	for _, r := range records {
		if r.Outcome != Delivered || r.Hook != "ops" || r.Host != strings.TrimPrefix(srv.URL, "http://") || r.Attempt != 1 || r.HTTPStatus != 204 || r.SessionID != "s1" {
			t.Errorf("record %+v: want delivered to ops on the first attempt", r)
		}
	}
	requests, bodies := rc.check(t)
	if requests != 2 {
		t.Fatalf("%d requests, want 2", requests)
	}
	var first map[string]any
	if err := json.Unmarshal(bodies[0], &first); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(first))
	for k := range first {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"agent_id", "id", "message_id", "request_id", "sequence", "session_id", "time", "type"}; !slices.Equal(keys, want) {
		t.Errorf("notice fields %v, want only ids, type and time %v", keys, want)
	}
	if first["type"] != "permission_required" || first["request_id"] != "perm-1" || first["sequence"] != float64(7) {
		t.Errorf("notice %s", bodies[0])
	}
	for _, b := range bodies {
		if strings.Contains(string(b), leak) {
			t.Errorf("a notice carries the session's content: %s", b)
		}
	}
}

// A receiver that is down when the event happens gets it once it is up.
func TestRetriesReachAReceiverThatComesUp(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // down: connections are refused
	rec := newRecorder()
	n, err := New(fast(Options{Hooks: []Hook{{URL: "http://" + addr + "/hook", Secret: secret}}, Recorder: rec, MaxAttempts: 50}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	n.Published(presenters.Event{Sequence: 3, SessionID: "s1", AgentID: "a", Time: time.Now(), Payload: presenters.MessageEndPayload{MessageID: "m1", Role: presenters.RoleAssistant}})
	rec.waitFor(t, "failed attempts", func(rs []Record) bool { return len(rs) >= 2 })

	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewUnstartedServer(rc)
	if srv.Listener, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv.Start()
	defer srv.Close()
	records := rec.waitFor(t, "the delivery", hasOutcome(Delivered))
	last := records[len(records)-1]
	if last.Outcome != Delivered || last.Attempt < 3 || last.Hook != "webhooks[0]" || last.Kind != TurnEnded {
		t.Errorf("last record %+v: want delivered after at least two failed attempts", last)
	}
	for _, r := range records[:len(records)-1] {
		if r.Outcome != Failed || r.DeliveryID != last.DeliveryID || r.Err == "" || r.HTTPStatus != 0 {
			t.Errorf("record %+v: want a failed attempt of the same delivery, with why", r)
		}
	}
	if requests, _ := rc.check(t); requests != 1 {
		t.Errorf("%d requests once up, want 1", requests)
	}
}

// A receiver that never answers is given up after MaxAttempts, and the record says so.
func TestNeverAnsweredIsGivenUp(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	rec := newRecorder()
	opts := fast(Options{Hooks: []Hook{{URL: srv.URL + "/?key=" + leak, Secret: secret}}, Recorder: rec, MaxAttempts: 3})
	opts.AttemptTimeout = 50 * time.Millisecond
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	n.Published(presenters.Event{Sequence: 1, SessionID: "s1", AgentID: "a", Time: time.Now(), Payload: presenters.SessionClosedPayload{Reason: "bye"}})
	records := rec.waitFor(t, "the delivery given up", hasOutcome(GaveUp))
	if len(records) != 3 {
		t.Fatalf("records %+v: want two failed attempts and the given up third", records)
	}
	for i, r := range records {
		want := Failed
		if i == 2 {
			want = GaveUp
		}
		if r.Outcome != want || r.Attempt != i+1 || r.Kind != SessionClosed || r.Err == "" || strings.Contains(r.Err, leak) {
			t.Errorf("record %d %+v: want outcome %d of attempt %d with why, without the URL's key", i, r, want, i+1)
		}
	}
}

// The total time bounds the retries too, whatever the attempts left.
func TestRetriesStopAtMaxElapsed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer srv.Close()
	rec := newRecorder()
	opts := fast(Options{Hooks: []Hook{{URL: srv.URL, Secret: secret}}, Recorder: rec, MaxAttempts: 1000, MaxElapsed: 300 * time.Millisecond})
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	began := time.Now()
	n.Published(presenters.Event{Sequence: 1, SessionID: "s1", AgentID: "a", Time: time.Now(), Payload: presenters.ErrorPayload{Code: "X"}})
	records := rec.waitFor(t, "the delivery given up", hasOutcome(GaveUp))
	last := records[len(records)-1]
	if took := time.Since(began); took > 2*time.Second || last.Attempt >= 1000 || last.HTTPStatus != http.StatusBadGateway {
		t.Errorf("given up after %s and %d attempts (%+v): want within the bound", took, last.Attempt, last)
	}
}

// A session's own hook gets that session's events, signed with the session secret,
// until the session closes; the server's hooks get every session's.
func TestSessionHooks(t *testing.T) {
	sessionSecret := []byte("fedcba9876543210-session-secret")
	own := &receiver{t: t, secret: sessionSecret}
	ownSrv := httptest.NewServer(own)
	defer ownSrv.Close()
	rec := newRecorder()
	n, err := New(fast(Options{SessionURLs: []string{ownSrv.URL + "/allowed/"}, SessionSecret: sessionSecret, Recorder: rec}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		hook SessionHook
		want error
	}{
		{SessionHook{URL: "http://elsewhere.example/allowed/"}, ErrURLNotAllowed},
		{SessionHook{URL: ownSrv.URL + "/other"}, ErrURLNotAllowed},
		{SessionHook{URL: "ftp://x/"}, ErrBadURL},
		{SessionHook{URL: strings.Replace(ownSrv.URL, "http://", "http://evil.example@", 1) + "/allowed/"}, ErrURLNotAllowed},
		{SessionHook{URL: ownSrv.URL + "0/allowed/"}, ErrURLNotAllowed},
		{SessionHook{URL: ownSrv.URL + "/allowed/x", Kinds: []Kind{"nonsense"}}, ErrUnknownKind},
	} {
		if err := n.CheckSessionHook(c.hook); !errors.Is(err, c.want) {
			t.Errorf("hook %+v: err %v, want %v", c.hook, err, c.want)
		}
	}
	if err := n.WatchSession("s1", SessionHook{URL: ownSrv.URL + "/allowed/s1", Kinds: []Kind{TurnEnded, SessionClosed}}); err != nil {
		t.Fatal(err)
	}
	start(t, n)
	end := func(session string, seq uint64, role presenters.MessageRole) presenters.Event {
		return presenters.Event{Sequence: seq, SessionID: session, AgentID: "a", Time: time.Now(), Payload: presenters.MessageEndPayload{MessageID: "m", Role: role}}
	}
	n.Published(permissionEvent("s1", 1))          // not a kind it asked for
	n.Published(end("s1", 2, presenters.RoleUser)) // a user's message ends no turn
	n.Published(end("s2", 3, ""))                  // another session
	n.Published(presenters.Event{Sequence: 4, SessionID: "s1", AgentID: "a", Time: time.Now(), Replay: true, Payload: presenters.MessageEndPayload{MessageID: "old"}})
	n.Published(end("s1", 5, presenters.RoleAssistant))
	n.Published(presenters.Event{Sequence: 6, SessionID: "s1", AgentID: "a", Time: time.Now(), Payload: presenters.SessionClosedPayload{}})
	n.Published(end("s1", 7, presenters.RoleAssistant)) // after the close: the hook is gone
	rec.waitFor(t, "two deliveries", func(rs []Record) bool { return len(rs) >= 2 })
	// Anything more would have been queued before the sentinel below and delivered first.
	if err := n.WatchSession("s3", SessionHook{URL: ownSrv.URL + "/allowed/s3"}); err != nil {
		t.Fatal(err)
	}
	n.Published(end("s3", 8, ""))
	records := rec.waitFor(t, "the sentinel", func(rs []Record) bool {
		return slices.ContainsFunc(rs, func(r Record) bool { return r.SessionID == "s3" })
	})
	var seqs []uint64
	for _, r := range records {
		if r.Outcome != Delivered || r.Hook != SessionHookName {
			t.Errorf("record %+v: want delivered to the session's hook", r)
		}
		seqs = append(seqs, r.Sequence)
	}
	if !slices.Equal(seqs, []uint64{5, 6, 8}) {
		t.Errorf("delivered the events %v, want 5 (turn ended) and 6 (closed) of s1, then 8 of s3", seqs)
	}
	own.check(t)
}

// Without allowed URLs, no session may have a hook of its own.
func TestSessionHooksOffByDefault(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WatchSession("s", SessionHook{URL: "https://example.com/"}); !errors.Is(err, ErrSessionHooksOff) {
		t.Fatalf("err %v, want %v", err, ErrSessionHooksOff)
	}
}

// A full queue drops deliveries without blocking the hub, and the drop is recorded.
func TestOverflowIsRecorded(t *testing.T) {
	rc := &receiver{t: t, secret: secret}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	rec := newRecorder()
	n, err := New(fast(Options{Hooks: []Hook{{URL: srv.URL, Secret: secret}}, Recorder: rec, QueueSize: 2}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // Run is not started: nothing drains
		n.Published(presenters.Event{Sequence: uint64(i + 1), SessionID: "s", AgentID: "a", Time: time.Now(), Payload: presenters.ErrorPayload{Code: "X"}})
	}
	start(t, n)
	records := rec.waitFor(t, "the drop and the two queued", func(rs []Record) bool { return len(rs) == 3 })
	if records[0].Outcome != Dropped || records[0].Dropped != 3 {
		t.Errorf("first record %+v: want 3 dropped", records[0])
	}
	for _, r := range records[1:] {
		if r.Outcome != Delivered {
			t.Errorf("record %+v: want delivered", r)
		}
	}
}

// Run ends when its context does, recording what it had not delivered as given up.
func TestStopGivesUpWhatWaits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer srv.Close()
	rec := newRecorder()
	opts := fast(Options{Hooks: []Hook{{URL: srv.URL, Secret: secret}}, Recorder: rec})
	opts.FirstRetry, opts.MaxRetryDelay, opts.MaxElapsed = time.Hour, time.Hour, 3*time.Hour
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx)
	}()
	n.Published(presenters.Event{Sequence: 1, SessionID: "s", AgentID: "a", Time: time.Now(), Payload: presenters.ErrorPayload{Code: "X"}})
	rec.waitFor(t, "the failed first attempt", hasOutcome(Failed))
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	records := rec.waitFor(t, "the delivery given up", hasOutcome(GaveUp))
	if last := records[len(records)-1]; last.Err != "the server stopped" || last.Attempt != 1 {
		t.Errorf("record %+v: want given up at the stop after one attempt", last)
	}
}

func TestHookSettingsAreChecked(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want error
	}{
		{Options{Hooks: []Hook{{URL: "example.com/hook", Secret: secret}}}, ErrBadURL},
		{Options{Hooks: []Hook{{URL: "https://example.com/hook", Secret: []byte("short")}}}, ErrWeakSecret},
		{Options{Hooks: []Hook{{URL: "https://example.com/hook", Secret: secret, Kinds: []Kind{"turn_end"}}}}, ErrUnknownKind},
		{Options{SessionURLs: []string{"https://example.com/"}}, ErrWeakSecret},
		{Options{SessionURLs: []string{"/relative"}, SessionSecret: secret}, ErrBadURL},
	} {
		if _, err := New(c.opts); !errors.Is(err, c.want) {
			t.Errorf("%+v: err %v, want %v", c.opts, err, c.want)
		}
	}
}

// Sign follows the documented recipe (the receiver above checks it apart).
func TestSignMatchesTheRecipe(t *testing.T) {
	at := time.Unix(1700000000, 0)
	got := Sign([]byte("k"), at, []byte(`{"a":1}`))
	mac := hmac.New(sha256.New, []byte("k"))
	mac.Write([]byte(`1700000000.{"a":1}`))
	if want := "t=1700000000,v1=" + hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// An allowed prefix without a path still pins the host: a longer host name or user info
// before another host does not pass for it.
func TestAllowedURLsPinTheHost(t *testing.T) {
	n, err := New(Options{SessionURLs: []string{"https://hooks.example.com"}, SessionSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]error{
		"https://hooks.example.com/x":          nil,
		"https://hooks.example.com.evil.net/x": ErrURLNotAllowed,
		"https://hooks.example.com@evil.net/x": ErrURLNotAllowed,
		"http://hooks.example.com/x":           ErrURLNotAllowed,
		"https://hooks.example.com:8443/x":     ErrURLNotAllowed,
	} {
		if err := n.CheckSessionHook(SessionHook{URL: url}); !errors.Is(err, want) {
			t.Errorf("%s: err %v, want %v", url, err, want)
		}
	}
}

package events

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// storeLog is the real store as the hub's EventLog (the service adapts it the same way).
type storeLog struct {
	st      *store.Store
	appends atomic.Int64 // transactions
}

func (l *storeLog) AppendEvents(ctx context.Context, batch []LoggedEvent) error {
	rows := make([]store.LoggedEvent, len(batch))
	for i, ev := range batch {
		rows[i] = store.LoggedEvent{Sequence: ev.Sequence, SessionID: ev.SessionID, AgentID: ev.AgentID, Type: int(ev.Type), MessageID: ev.MessageID, Time: ev.Time, Data: ev.Data}
	}
	l.appends.Add(1)
	return l.st.AppendEvents(ctx, rows)
}

func (l *storeLog) ReadEvents(ctx context.Context, after, until uint64, f Filter, limit int) ([]LoggedEvent, error) {
	rows, err := l.st.ReadEvents(ctx, after, until, storeFilter(f), limit)
	out := make([]LoggedEvent, len(rows))
	for i, r := range rows {
		out[i] = LoggedEvent{Sequence: r.Sequence, SessionID: r.SessionID, AgentID: r.AgentID, Type: presenters.EventType(r.Type), MessageID: r.MessageID, Time: r.Time, Data: r.Data}
	}
	return out, err
}

func (l *storeLog) EventLogRange(ctx context.Context) (uint64, uint64, error) {
	return l.st.EventLogRange(ctx)
}

func storeFilter(f Filter) store.EventFilter {
	sf := store.EventFilter{SessionIDs: f.SessionIDs, AgentIDs: f.AgentIDs}
	for _, t := range f.Types {
		sf.Types = append(sf.Types, int(t))
	}
	return sf
}

func (l *storeLog) SessionHeads(ctx context.Context, f Filter) (map[string]uint64, error) {
	return l.st.SessionHeads(ctx, storeFilter(f))
}

func (l *storeLog) ReadSessionEvents(ctx context.Context, after map[string]uint64, f Filter, limit int) ([]LoggedEvent, error) {
	rows, err := l.st.ReadSessionEvents(ctx, after, storeFilter(f), limit)
	out := make([]LoggedEvent, len(rows))
	for i, r := range rows {
		out[i] = LoggedEvent{Sequence: r.Sequence, SessionID: r.SessionID, AgentID: r.AgentID, Type: presenters.EventType(r.Type), MessageID: r.MessageID, Time: r.Time, Data: r.Data}
	}
	return out, err
}

func (l *storeLog) PruneEvents(ctx context.Context, r LogRetention) (int64, error) {
	return l.st.PruneEvents(ctx, r.MaxEvents, r.MaxBytes, r.MaxAge)
}

// loggedTest is what the tests' Marshal keeps of an encoded event.
type loggedTest struct {
	Sequence  uint64
	SessionID string
	AgentID   string
	Type      presenters.EventType
	Text      string
}

func marshalTest(enc *encodedTest) []byte {
	lt := loggedTest{Sequence: enc.ev.Sequence, SessionID: enc.ev.SessionID, AgentID: enc.ev.AgentID, Type: enc.ev.Payload.EventType()}
	if d, ok := enc.ev.Payload.(presenters.MessageDeltaPayload); ok {
		lt.Text = d.Text
	}
	b, _ := json.Marshal(lt)
	return b
}

func unmarshalTest(b []byte) *encodedTest {
	var lt loggedTest
	if err := json.Unmarshal(b, &lt); err != nil {
		panic(err)
	}
	ev := presenters.Event{Sequence: lt.Sequence, SessionID: lt.SessionID, AgentID: lt.AgentID}
	switch lt.Type {
	case presenters.EventMessageDelta:
		ev.Payload = presenters.MessageDeltaPayload{MessageID: "m", Text: lt.Text, Role: presenters.RoleAssistant}
	default:
		ev.Payload = presenters.SessionReadyPayload{}
	}
	return &encodedTest{ev: ev}
}

// newLogHub is a hub on the store, keeping the sequence floor and the log in it.
func newLogHub(t testing.TB, st *store.Store, opts Options[*encodedTest]) (*testHub, *storeLog) {
	t.Helper()
	log := &storeLog{st: st}
	opts.Store, opts.Log, opts.Marshal, opts.Unmarshal = st, log, marshalTest, unmarshalTest
	if opts.Logger == nil {
		opts.Logger = discard
	}
	return newTestHub(t, opts), log
}

// waitLogged waits until the log writer has appended every event published.
func waitLogged(t testing.TB, h *testHub) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		h.mu.Lock()
		done := h.loggedEnd == h.end
		h.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the log writer did not catch up")
		}
		time.Sleep(time.Millisecond)
	}
}

// drain takes events until CaughtUp and then until the newest is at least until; it
// returns the sequences taken.
func drain(t testing.TB, sub *Subscription[*encodedTest], until uint64) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	var got []uint64
	var buf []*encodedTest
	for len(got) == 0 || got[len(got)-1] < until {
		b, err := sub.NextBatch(ctx, nil, 256, 1<<20, buf)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		for _, enc := range b.Events {
			got = append(got, enc.ev.Sequence)
		}
		buf = b.Events
		sub.CaughtUp()
	}
	return got
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// A point the ring no longer holds resumes from the log, then the ring, then live, with
// no gap and no duplicate, while events keep coming; a filter applies to the log too.
func TestHubResumesFromTheLog(t *testing.T) {
	h, _ := newLogHub(t, openStore(t), Options[*encodedTest]{Capacity: 64, SubscriberQueue: 1 << 16})
	for range 250 {
		publishDeltas(h, "a1", "s1", 1)
		publishDeltas(h, "a2", "s2", 1)
	}
	waitLogged(t, h)
	if oldest, newest := h.HeldRange(); oldest != 1 || newest != 500 {
		t.Fatalf("HeldRange = %d, %d; want 1, 500 (the log's oldest)", oldest, newest)
	}
	h.mu.Lock()
	ringOldest := h.oldestLocked()
	h.mu.Unlock()
	if ringOldest < 400 {
		t.Fatalf("the ring still holds from %d", ringOldest)
	}

	all, err := h.Subscribe(Filter{}, After(10))
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	s1, err := h.Subscribe(Filter{SessionIDs: []string{"s1"}}, After(10))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	none, err := h.Subscribe(Filter{Types: []presenters.EventType{presenters.EventSessionReady}}, After(10))
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	var published sync.WaitGroup
	defer published.Wait()
	published.Go(func() {
		for range 300 { // many rings' worth, while the replay is read
			publishDeltas(h, "a1", "s1", 1)
			publishDeltas(h, "a2", "s2", 1)
		}
	})
	const last = 1100
	if got := drain(t, all, last); !slices.Equal(got, seqRange(11, last)) {
		t.Errorf("resumed after 10: %d events %v ... %v, want 11..%d", len(got), got[:min(5, len(got))], got[max(0, len(got)-5):], last)
	}
	var wantS1 []uint64
	for s := uint64(11); s <= last; s += 2 {
		wantS1 = append(wantS1, s)
	}
	if got := drain(t, s1, wantS1[len(wantS1)-1]); !slices.Equal(got, wantS1) {
		t.Errorf("resumed s1 after 10: %v, want the odd sequences 11..%d", got, last)
	}
	// No event of that type: the replay ends at once.
	if _, ok := none.CaughtUp(); ok {
		t.Error("caught up before the log was read")
	}
	b, err := none.NextBatch(bg, nil, 10, 1<<20, nil)
	if err != nil || len(b.Events) != 0 {
		t.Errorf("a type filter matching nothing read %v, %v", batchSequences(b), err)
	}
	if seq, ok := none.CaughtUp(); !ok || seq < 500 {
		t.Errorf("CaughtUp = %d, %v", seq, ok)
	}
	// Oldest held starts at the log's oldest.
	oldestHeld, err := h.Subscribe(Filter{}, OldestHeld())
	if err != nil {
		t.Fatal(err)
	}
	defer oldestHeld.Close()
	if got := drain(t, oldestHeld, last); !slices.Equal(got, seqRange(1, last)) {
		t.Errorf("oldest held: %d events from %v, want 1..%d", len(got), got[:min(3, len(got))], last)
	}
}

// After Close and a new hub on the same database (a restart), a point from before resumes
// from the log, and new sequences are above every old one.
func TestHubResumesFromTheLogAfterARestart(t *testing.T) {
	st := openStore(t)
	first, _ := newLogHub(t, st, Options[*encodedTest]{})
	publishDeltas(first, "a", "s", 30)
	firstLast := first.LastSequence()
	first.Close()

	second, _ := newLogHub(t, st, Options[*encodedTest]{})
	oldest, newest := second.HeldRange()
	if oldest != 1 || newest < firstLast {
		t.Fatalf("HeldRange after the restart = %d, %d; want 1 (the log's oldest) to at least %d", oldest, newest, firstLast)
	}
	sub, err := second.Subscribe(Filter{}, After(5))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seq := publishDeltas(second, "a", "s", 1)[0]
	if seq <= firstLast {
		t.Fatalf("the restarted hub issued %d, not above %d", seq, firstLast)
	}
	want := append(seqRange(6, firstLast), seq)
	if got := drain(t, sub, seq); !slices.Equal(got, want) {
		t.Errorf("resumed after 5 across the restart: %v, want %v", got, want)
	}
	// The data round-trips: what the log returns is the event that was published.
	logged, err := st.ReadEvents(bg, 5, 6, store.EventFilter{}, 0)
	if err != nil || len(logged) != 1 {
		t.Fatalf("%v, %v", logged, err)
	}
	if enc := unmarshalTest(logged[0].Data); enc.ev.SessionID != "s" || enc.ev.Payload.(presenters.MessageDeltaPayload).Text != "x" {
		t.Errorf("logged event 6 = %+v", enc.ev)
	}
}

// A subscriber that had everything before a restart resumes at the log's newest: the
// log part holds nothing for it, and the replay ends at once instead of waiting for a
// live event.
func TestResumeAtTheLogsEndCatchesUpAtOnce(t *testing.T) {
	st := openStore(t)
	first, _ := newLogHub(t, st, Options[*encodedTest]{})
	publishDeltas(first, "a", "s", 10)
	last := first.LastSequence()
	first.Close()

	second, _ := newLogHub(t, st, Options[*encodedTest]{})
	sub, err := second.Subscribe(Filter{}, After(last))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	b, err := sub.NextBatch(ctx, nil, 16, 1<<20, nil)
	if err != nil || len(b.Events) != 0 || !b.ReplayEnded {
		t.Fatalf("NextBatch = %+v, %v; want an empty batch that ends the replay", b, err)
	}
	if _, ok := sub.CaughtUp(); !ok {
		t.Error("not caught up after the replay ended")
	}
}

// Close appends what waits before it returns, and events published after it go to the
// log at once.
func TestHubCloseFlushesTheLog(t *testing.T) {
	st := openStore(t)
	h, _ := newLogHub(t, st, Options[*encodedTest]{LogInterval: time.Hour})
	publishDeltas(h, "a", "s", 10)
	h.Close()
	if oldest, newest, err := st.EventLogRange(bg); err != nil || oldest != 1 || newest != 10 {
		t.Fatalf("after Close the log holds %d..%d (%v), want 1..10", oldest, newest, err)
	}
	after := publishDeltas(h, "a", "s", 1)[0]
	if _, newest, _ := st.EventLogRange(bg); newest != after {
		t.Errorf("an event published after Close is not in the log (newest %d, want %d)", newest, after)
	}
}

// blockingLog is a log whose appends wait until release is closed.
type blockingLog struct {
	EventLog
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (l *blockingLog) AppendEvents(ctx context.Context, batch []LoggedEvent) error {
	l.once.Do(func() { close(l.entered) })
	<-l.release
	return l.EventLog.AppendEvents(ctx, batch)
}

// A log that does not answer holds neither Publish nor live delivery, until a quarter of
// the ring's capacity waits for it; then Publish waits, and the ring has let none of the
// waiting events go.
func TestPublishDoesNotWaitForASlowLog(t *testing.T) {
	st := openStore(t)
	log := &blockingLog{EventLog: &storeLog{st: st}, release: make(chan struct{}), entered: make(chan struct{})}
	h := newTestHub(t, Options[*encodedTest]{Capacity: 64, Store: st, Log: log, Marshal: marshalTest, Unmarshal: unmarshalTest, Logger: discard})
	sub, err := h.Subscribe(Filter{}, Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	released := false
	defer func() { // before anything that takes the hub's lock
		if !released {
			close(log.release)
		}
	}()
	bound := int(h.logBacklog)
	if bound != 64/4 {
		t.Fatalf("the bound is %d events, want 16", bound)
	}
	published := make(chan struct{})
	go func() {
		defer close(published)
		publishDeltas(h, "a", "s", 1)
		<-log.entered // the writer is stuck in its first append
		publishDeltas(h, "a", "s", bound-1)
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish waited for the log below the bound")
	}
	if got := drain(t, sub, uint64(bound)); !slices.Equal(got, seqRange(1, uint64(bound))) {
		t.Errorf("live events while the log is stuck: %v", got)
	}
	// Every event waits for the log: the ring holds them all.
	if oldest, newest := h.HeldRange(); oldest != 1 || newest != uint64(bound) {
		t.Errorf("HeldRange = %d, %d; want 1, %d", oldest, newest, bound)
	}
	beyond := make(chan uint64)
	go func() { beyond <- publishDeltas(h, "a", "s", 1)[0] }()
	select {
	case seq := <-beyond:
		t.Fatalf("Publish of event %d did not wait with %d events waiting for the log", seq, bound)
	case <-time.After(100 * time.Millisecond):
	}
	close(log.release)
	released = true
	select {
	case seq := <-beyond:
		if seq != uint64(bound)+1 {
			t.Errorf("the waiting Publish got %d", seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish still waits after the log caught up")
	}
	waitLogged(t, h)
	if _, newest, _ := st.EventLogRange(bg); newest != uint64(bound)+1 {
		t.Errorf("the log holds up to %d, want %d", newest, bound+1)
	}
}

// failingLog is a log whose next fails appends fail; fails < 0 fails them all.
type failingLog struct {
	EventLog
	fails atomic.Int64
}

func (l *failingLog) AppendEvents(ctx context.Context, batch []LoggedEvent) error {
	if l.fails.Load() < 0 || l.fails.Add(-1) >= 0 {
		return errors.New("the disk is full")
	}
	return l.EventLog.AppendEvents(ctx, batch)
}

// logLines is a logger's output, safe to read while the hub writes to it.
type logLines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), msg)
}

// A failed append is tried again until it lands; the outage is logged once, and its end
// once, with the number of tries.
func TestLogWriterRetriesAFailedAppend(t *testing.T) {
	st := openStore(t)
	log := &failingLog{EventLog: &storeLog{st: st}}
	log.fails.Store(3)
	var out logLines
	h := newTestHub(t, Options[*encodedTest]{Store: st, Log: log, Marshal: marshalTest, Unmarshal: unmarshalTest,
		Logger: slog.New(slog.NewTextHandler(&out, nil))})
	publishDeltas(h, "a", "s", 5)
	waitLogged(t, h)
	if oldest, newest, err := st.EventLogRange(bg); err != nil || oldest != 1 || newest != 5 {
		t.Fatalf("the log holds %d..%d (%v), want 1..5", oldest, newest, err)
	}
	if n := out.count("could not append events to the event log"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, out.String())
	}
	if n := out.count("the event log is written again"); n != 1 || out.count("attempts=4") != 1 {
		t.Errorf("the recovery is logged %d times, want once with attempts=4:\n%s", n, out.String())
	}
	if n := out.count("events are missing"); n != 0 {
		t.Errorf("events reported missing although they were appended:\n%s", out.String())
	}
}

// Close does not wait for a log that keeps failing: after one more try it gives the
// events up, says so, and counts them as logged.
func TestCloseGivesUpOnAFailingLog(t *testing.T) {
	st := openStore(t)
	log := &failingLog{EventLog: &storeLog{st: st}}
	log.fails.Store(-1)
	var out logLines
	h := newTestHub(t, Options[*encodedTest]{Store: st, Log: log, Marshal: marshalTest, Unmarshal: unmarshalTest,
		Logger: slog.New(slog.NewTextHandler(&out, nil))})
	publishDeltas(h, "a", "s", 3)
	h.Close()
	if !h.WaitLogged(bg) {
		t.Fatal("WaitLogged after Close: the given-up events do not count as logged")
	}
	if _, newest, err := st.EventLogRange(bg); err != nil || newest != 0 {
		t.Errorf("the log holds up to %d (%v), want nothing", newest, err)
	}
	if n := out.count("events are missing from the event log"); n != 1 {
		t.Errorf("the loss is logged %d times, want once:\n%s", n, out.String())
	}
	if n := out.count("the event log is written again"); n != 0 {
		t.Errorf("a recovery is logged although every append failed:\n%s", out.String())
	}
}

// The ring lets no event go before it is logged, even past MaxBytes; once the log has
// them, it sheds what it held beyond its bound.
func TestRingKeepsWhatIsNotLogged(t *testing.T) {
	st := openStore(t)
	log := &blockingLog{EventLog: &storeLog{st: st}, release: make(chan struct{}), entered: make(chan struct{})}
	text := strings.Repeat("x", 1000)
	per := heldSize(presenters.MessageDeltaPayload{Text: text})
	h := newTestHub(t, Options[*encodedTest]{Capacity: 100, MaxBytes: 10 * per, Store: st, Log: log, Marshal: marshalTest, Unmarshal: unmarshalTest, Logger: discard})
	released := false
	defer func() {
		if !released {
			close(log.release)
		}
	}()
	em := presenters.NewEmitter(h, "a", "s")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 4 { // under the half of MaxBytes that may wait for the log
			em.MessageDelta("m", presenters.RoleAssistant, text)
		}
		// Over MaxBytes with the four before it, none of them logged.
		em.MessageDelta("m", presenters.RoleAssistant, strings.Repeat("y", int(8*per)))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish waited")
	}
	if oldest, newest := h.HeldRange(); oldest != 1 || newest != 5 {
		t.Fatalf("HeldRange with nothing logged = %d, %d; want 1, 5", oldest, newest)
	}
	h.mu.Lock()
	ringOldest := h.oldestLocked()
	h.mu.Unlock()
	if ringOldest != 1 {
		t.Fatalf("the ring let events go that were not logged: it holds from %d", ringOldest)
	}
	close(log.release)
	released = true
	waitLogged(t, h)
	h.mu.Lock()
	ringOldest, heldBytes := h.oldestLocked(), h.heldBytes
	h.mu.Unlock()
	if ringOldest == 1 || heldBytes > 10*per {
		t.Errorf("once logged, the ring holds %d bytes from %d; want within %d", heldBytes, ringOldest, 10*per)
	}
	sub, err := h.Subscribe(Filter{}, After(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := drain(t, sub, 5); !slices.Equal(got, seqRange(1, 5)) {
		t.Errorf("resumed after 0: %v", got)
	}
}

// A point older than the log's oldest (after retention) is out of range, with the log's
// oldest as the oldest held; so is a replay the log's retention overtakes.
func TestHubOutOfRangeBelowTheLog(t *testing.T) {
	st := openStore(t)
	first, _ := newLogHub(t, st, Options[*encodedTest]{})
	publishDeltas(first, "a", "s", 50)
	first.Close()

	h, _ := newLogHub(t, st, Options[*encodedTest]{Capacity: 4})
	overtaken, err := h.Subscribe(Filter{}, After(0)) // before retention: all in the log
	if err != nil {
		t.Fatal(err)
	}
	defer overtaken.Close()
	h.mu.Lock()
	h.retention = LogRetention{MaxEvents: 10}
	h.mu.Unlock()
	h.prune() // as the writer does now and then
	if oldest, newest := h.HeldRange(); oldest != 41 || newest < 50 {
		t.Fatalf("HeldRange after retention = %d, %d; want 41 and at least 50", oldest, newest)
	}
	var outOfRange *OutOfRangeError
	if _, err := h.Subscribe(Filter{}, After(39)); !errors.As(err, &outOfRange) || outOfRange.Oldest != 41 || outOfRange.After != 39 {
		t.Errorf("resume after 39: %v, want out of range with oldest 41", err)
	}
	sub, err := h.Subscribe(Filter{}, After(40))
	if err != nil {
		t.Fatalf("resume after 40: %v", err)
	}
	defer sub.Close()
	if got := drain(t, sub, 50); !slices.Equal(got, seqRange(41, 50)) {
		t.Errorf("resumed after 40: %v", got)
	}
	if _, err := overtaken.NextBatch(bg, nil, 10, 1<<20, nil); !errors.As(err, &outOfRange) || outOfRange.Oldest != 41 || outOfRange.After != 0 {
		t.Errorf("a replay retention overtook: %v, want out of range", err)
	}
}

// Retention runs when the writer starts.
func TestHubAppliesRetentionAtStart(t *testing.T) {
	st := openStore(t)
	first, _ := newLogHub(t, st, Options[*encodedTest]{})
	publishDeltas(first, "a", "s", 30)
	first.Close()
	h, _ := newLogHub(t, st, Options[*encodedTest]{LogRetention: LogRetention{MaxEvents: 5}})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if oldest, _ := h.HeldRange(); oldest == 26 {
			break
		}
		if time.Now().After(deadline) {
			oldest, _ := h.HeldRange()
			t.Fatalf("the held range starts at %d, want 26 after retention", oldest)
		}
	}
}

func TestNewNeedsMarshalWithALog(t *testing.T) {
	_, err := New(bg, Options[*encodedTest]{Encode: encodeTest, Log: &storeLog{st: openStore(t)}})
	if err == nil {
		t.Fatal("New with a log and no Marshal: no error")
	}
}

// wireEncode is a benchmark's encoder: the event's protobuf wire bytes, as the service
// makes them, kept as they are by the log (identity Marshal and Unmarshal).
func wireEncode(ev presenters.Event) []byte {
	msg := &pb.AgenticEvent{Sequence: ev.Sequence, SessionId: ev.SessionID, AgentId: ev.AgentID, EventTime: timestamppb.New(ev.Time),
		Type: pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA}
	if d, ok := ev.Payload.(presenters.MessageDeltaPayload); ok {
		msg.Payload = &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: d.MessageID, Text: d.Text, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
	}
	b, _ := proto.Marshal(msg)
	return b
}

func identity(b []byte) []byte { return b }

// wireHub is a benchmark's hub on st, encoding events to wire bytes and logging them.
func wireHub(b *testing.B, st *store.Store, log EventLog) *Hub[[]byte] {
	h, err := New(bg, Options[[]byte]{Encode: wireEncode, Store: st, Log: log, Marshal: identity, Unmarshal: identity, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkLogFlood publishes 100,000 deltas of 64 bytes of text as fast as it can, with
// the log on a real database, and waits until they are all logged: it reports the write
// transactions per second, the events per transaction, the events per second, the
// database file's growth per 100,000 events, and the WAL's size at the end.
func BenchmarkLogFlood(b *testing.B) {
	const n = 100_000
	text := strings.Repeat("x", 64)
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		st, err := store.Open(bg, filepath.Join(dir, "agenticd.db"))
		if err != nil {
			b.Fatal(err)
		}
		before := dbSize(b, dir, "")
		log := &storeLog{st: st}
		h := wireHub(b, st, log)
		em := presenters.NewEmitter(h, "deepchat.default", "0193a4b2-7c3d-7e8f-9a0b-1c2d3e4f5a6b")
		b.StartTimer()
		start := time.Now()
		for range n {
			em.MessageDelta("0193a4b2-7c3d-7e8f-9a0b-1c2d3e4f5a6c", presenters.RoleAssistant, text)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Microsecond) {
			h.mu.Lock()
			done := h.loggedEnd == h.end
			h.mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the log writer did not catch up")
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		h.Close()
		txns := log.appends.Load()
		b.ReportMetric(float64(txns)/elapsed.Seconds(), "txn/s")
		b.ReportMetric(float64(n)/float64(txns), "events/txn")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(dbSize(b, dir, "")-before)/(1<<20), "MiB/100k")
		b.ReportMetric(float64(dbSize(b, dir, "-wal"))/(1<<20), "wal-MiB")
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// dbSize is the size of the database in dir (suffix ""), or of its WAL ("-wal").
func dbSize(b *testing.B, dir, suffix string) int64 {
	fi, err := os.Stat(filepath.Join(dir, "agenticd.db"+suffix))
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// BenchmarkResumeFromLog resumes after the first of 100,001 logged events (deltas of 64
// bytes of text) after a restart, so all from the log, and takes them all: the time a
// client reconnecting after a restart waits for its backlog.
func BenchmarkResumeFromLog(b *testing.B) {
	const n = 100_000
	st, err := store.Open(bg, filepath.Join(b.TempDir(), "agenticd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	text := strings.Repeat("x", 64)
	first := wireHub(b, st, &storeLog{st: st})
	em := presenters.NewEmitter(first, "deepchat.default", "0193a4b2-7c3d-7e8f-9a0b-1c2d3e4f5a6b")
	for range n + 1 {
		em.MessageDelta("0193a4b2-7c3d-7e8f-9a0b-1c2d3e4f5a6c", presenters.RoleAssistant, text)
	}
	first.Close()
	h := wireHub(b, st, &storeLog{st: st})
	defer h.Close()
	b.ReportAllocs()
	for b.Loop() {
		sub, err := h.Subscribe(Filter{}, After(1))
		if err != nil {
			b.Fatal(err)
		}
		var buf [][]byte
		taken := 0
		for {
			batch, err := sub.NextBatch(bg, nil, 256, 1<<20, buf)
			if err != nil {
				b.Fatal(err)
			}
			taken += len(batch.Events)
			buf = batch.Events
			if _, ok := sub.CaughtUp(); ok {
				break
			}
		}
		sub.Close()
		if taken != n {
			b.Fatalf("resumed %d events, want %d", taken, n)
		}
	}
}

// WaitLogged returns once everything published before it is in the log, and not while
// the log writer is stuck (then only its context ends it).
func TestWaitLogged(t *testing.T) {
	st := openStore(t)
	log := &blockingLog{EventLog: &storeLog{st: st}, release: make(chan struct{}), entered: make(chan struct{})}
	h := newTestHub(t, Options[*encodedTest]{Store: st, Log: log, Marshal: marshalTest, Unmarshal: unmarshalTest, Logger: discard})
	publishDeltas(h, "a", "s", 3)
	<-log.entered
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if h.WaitLogged(ctx) {
		close(log.release)
		t.Fatal("WaitLogged reported the events logged while the log writer was stuck")
	}
	close(log.release)
	if !h.WaitLogged(bg) {
		t.Fatal("WaitLogged without a deadline returned false")
	}
	logged, err := st.ReadEvents(bg, 0, 0, store.EventFilter{}, 0)
	if err != nil || len(logged) != 3 {
		t.Errorf("after WaitLogged the log holds %d events (%v); want 3", len(logged), err)
	}
}

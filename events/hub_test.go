package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	bg      = context.Background()
	discard = slog.New(slog.DiscardHandler)
)

// encodedTest is the encoded form in these tests: the event as the encoder saw it.
type encodedTest struct{ ev presenters.Event }

// encodings counts the calls of encodeTest.
var encodings atomic.Int64

func encodeTest(ev presenters.Event) *encodedTest {
	encodings.Add(1)
	return &encodedTest{ev: ev}
}

type testHub = Hub[*encodedTest]

func newTestHub(t testing.TB, opts Options[*encodedTest]) *testHub {
	t.Helper()
	opts.Encode = encodeTest
	h, err := New(bg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(bg, filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return st
}

// publishDeltas emits n assistant deltas in a session and returns their sequences.
func publishDeltas(pub presenters.Publisher, agentID, sessionID string, n int) []uint64 {
	em := presenters.NewEmitter(pub, agentID, sessionID)
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = em.MessageDelta("m", presenters.RoleAssistant, "x")
	}
	return seqs
}

// subscribe is Subscribe filtered on sessions and agents, after the point after (0: live).
func subscribe(h *testHub, sessions, agents []string, after uint64) (*Subscription[*encodedTest], error) {
	start := Live()
	if after > 0 {
		start = After(after)
	}
	return h.Subscribe(Filter{SessionIDs: sessions, AgentIDs: agents}, start)
}

// next takes one event (skipping bookmarks).
func next(ctx context.Context, sub *Subscription[*encodedTest]) (uint64, *encodedTest, error) {
	for {
		b, err := sub.NextBatch(ctx, nil, 1, 0, nil)
		if err != nil {
			return 0, nil, err
		}
		if len(b.Events) == 1 {
			return b.Last, b.Events[0], nil
		}
	}
}

func batchSequences(b Batch[*encodedTest]) []uint64 {
	out := make([]uint64, len(b.Events))
	for i, enc := range b.Events {
		out[i] = enc.ev.Sequence
	}
	return out
}

func TestNewNeedsAnEncoder(t *testing.T) {
	if _, err := New(bg, Options[[]byte]{}); err == nil || !strings.Contains(err.Error(), "Encode") {
		t.Errorf("New without Encode: %v, want an error naming Encode", err)
	}
}

func TestHubSequencesSurviveRestart(t *testing.T) {
	store := openStore(t)
	// A small block makes the background floor writes and the fallback both happen.
	first := newTestHub(t, Options[*encodedTest]{Store: store, SequenceBlock: 4})
	var last uint64
	for i := range 500 {
		last = first.Publish(presenters.Event{SessionID: "s", Payload: presenters.SessionReadyPayload{}})
		floor, err := store.SequenceFloor(bg)
		if err != nil {
			t.Fatal(err)
		}
		if floor < last {
			t.Fatalf("event %d: sequence %d was issued above the stored floor %d", i, last, floor)
		}
	}
	second := newTestHub(t, Options[*encodedTest]{Store: store, SequenceBlock: 4})
	if seq := second.Publish(presenters.Event{SessionID: "s", Payload: presenters.SessionReadyPayload{}}); seq <= last {
		t.Fatalf("after a restart the hub reused sequence %d (first hub reached %d)", seq, last)
	}
	// A point from before the restart is no longer held. (The very last one may still be
	// a valid point, when the floor was exactly there: nothing lies between.)
	if _, err := subscribe(second, nil, nil, last-1); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("subscribe after a pre-restart point: %v, want out of range", err)
	}
}

func TestHubResumeBounds(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{Capacity: 4})
	quiet := presenters.NewEmitter(h, "a", "quiet").MessageDelta("m", presenters.RoleAssistant, "x") // 1
	seqs := publishDeltas(h, "a", "busy", 9)                                                         // 2..10; 7..10 held
	if quiet != 1 || seqs[8] != 10 {
		t.Fatalf("sequences %d, %v", quiet, seqs)
	}
	cases := []struct {
		name     string
		sessions []string
		after    uint64
		ok       bool
		backlog  int
		ahead    bool
	}{
		{"just before the oldest held", nil, 6, true, 4, false},
		{"in the middle", nil, 8, true, 2, false},
		{"the newest", nil, 10, true, 0, false},
		{"older than held", nil, 5, false, 0, false},
		{"in the future", nil, 11, false, 0, true},
		{"a filter does not widen what is held", []string{"quiet"}, 1, false, 0, false},
		{"a filtered replay", []string{"busy"}, 6, true, 4, false},
	}
	for _, c := range cases {
		sub, err := subscribe(h, c.sessions, nil, c.after)
		var outOfRange *OutOfRangeError
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &outOfRange) || !errors.Is(err, ErrOutOfRange))) {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			if ahead := outOfRange.After > outOfRange.Newest; ahead != c.ahead || outOfRange.After != c.after || outOfRange.Newest != 10 || outOfRange.Oldest != 7 {
				t.Errorf("%s: %+v, want ahead=%v after %d, newest 10, oldest 7", c.name, outOfRange, c.ahead, c.after)
			}
			continue
		}
		sub.Close()
		if len(sub.backlog) != c.backlog {
			t.Errorf("%s: backlog of %d, want %d", c.name, len(sub.backlog), c.backlog)
		}
		for i, he := range sub.backlog {
			if he.sequence != c.after+uint64(i)+1 || !sub.matches(he) {
				t.Errorf("%s: backlog[%d] = %d, want %d", c.name, i, he.sequence, c.after+uint64(i)+1)
			}
		}
	}
}

func TestHubOverflowEndsOnlyTheSlowSubscriber(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{SubscriberQueue: 2})
	slow, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := subscribe(h, []string{"other"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seqs := publishDeltas(h, "a", "s", 3) // never blocks, although nobody reads
	for _, want := range seqs[:2] {
		if seq, _, err := next(bg, slow); err != nil || seq != want {
			t.Fatalf("queued event: %d, %v; want %d", seq, err, want)
		}
	}
	_, _, err = next(bg, slow)
	var overflow *OverflowError
	if !errors.As(err, &overflow) || overflow.Queue != 2 || overflow.Last != seqs[1] {
		t.Errorf("end = %v, want an overflow of a 2-event queue after %d", err, seqs[1])
	}
	want := publishDeltas(h, "a", "other", 1)[0]
	if seq, enc, err := next(bg, other); err != nil || seq != want || enc.ev.SessionID != "other" {
		t.Errorf("the other subscriber got %d (session %q), %v", seq, enc.ev.SessionID, err)
	}
}

// Close ends every subscriber with its resume point and refuses new ones; Next also ends
// with its context.
func TestHubCloseEndsSubscribers(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{})
	sub, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq := publishDeltas(h, "a", "s", 1)[0]
	ctx, cancel := context.WithCancel(bg)
	if got, _, err := next(ctx, sub); err != nil || got != seq {
		t.Fatalf("Next = %d, %v; want %d", got, err, seq)
	}
	cancel()
	if _, _, err := next(ctx, sub); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with an ended context: %v", err)
	}
	h.Close()
	var closed *ClosedError
	if _, _, err := next(bg, sub); !errors.As(err, &closed) || closed.Last != seq || !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want closed after %d", err, seq)
	}
	if _, err := subscribe(h, nil, nil, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

// flakyFloorStore is the real store with writes that fail while failing is set (SQLite
// locked by another writer, a full disk).
type flakyFloorStore struct {
	*store.Store
	failing atomic.Bool
}

func (s *flakyFloorStore) SetSequenceFloor(ctx context.Context, floor uint64) error {
	if s.failing.Load() {
		return errors.New("disk I/O error")
	}
	return s.Store.SetSequenceFloor(ctx, floor)
}

// A floor write that fails reserves nothing: later events try again, and once a write
// lands every sequence issued is covered again. The failures are logged once, and so is
// the write that ends them.
func TestHubRetriesAFailedFloorWrite(t *testing.T) {
	store := &flakyFloorStore{Store: openStore(t)}
	var out logLines
	h := newTestHub(t, Options[*encodedTest]{Store: store, SequenceBlock: 4, Logger: slog.New(slog.NewTextHandler(&out, nil))})
	store.failing.Store(true)
	for range 10 {
		publishDeltas(h, "a", "s", 1)
	}
	h.Close() // waits for a background write in flight
	store.failing.Store(false)
	// Publishing still works after Close; the next event must write the floor itself.
	last := publishDeltas(h, "a", "s", 1)[0]
	floor, err := store.SequenceFloor(bg)
	if err != nil {
		t.Fatal(err)
	}
	if floor < last {
		t.Fatalf("sequence %d issued above the stored floor %d after the store recovered", last, floor)
	}
	if n := out.count("could not persist the event sequence floor"); n != 1 {
		t.Errorf("the failed writes are logged %d times, want once:\n%s", n, out.String())
	}
	if n := out.count("the event sequence floor is persisted again"); n != 1 {
		t.Errorf("the recovery is logged %d times, want once:\n%s", n, out.String())
	}
}

// The ring lets its oldest events go when their memory passes MaxBytes, also below
// Capacity; resuming before them is then out of range. The newest is always held.
func TestHubRingBoundedByBytes(t *testing.T) {
	text := strings.Repeat("x", 1000)
	per := heldSize(presenters.MessageDeltaPayload{Text: text})
	h := newTestHub(t, Options[*encodedTest]{Capacity: 1000, MaxBytes: 10 * per})
	em := presenters.NewEmitter(h, "a", "s")
	var seqs []uint64
	for range 25 {
		seqs = append(seqs, em.MessageDelta("m", presenters.RoleAssistant, text))
	}
	h.mu.Lock()
	heldBytes, oldest := h.heldBytes, h.oldestLocked()
	h.mu.Unlock()
	if heldBytes != 10*per || oldest != seqs[15] {
		t.Errorf("holding %d bytes from %d, want %d bytes from %d", heldBytes, oldest, 10*per, seqs[15])
	}
	if _, err := subscribe(h, nil, nil, seqs[13]); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("resume before the held events: %v, want out of range", err)
	}
	sub, err := subscribe(h, nil, nil, seqs[14])
	if err != nil || len(sub.backlog) != 10 || sub.backlog[0].sequence != seqs[15] {
		t.Fatalf("resume at the oldest held: %v, %v", err, sub)
	}
	sub.Close()
	huge := em.MessageDelta("m", presenters.RoleAssistant, strings.Repeat("y", int(20*per)))
	if sub, err := subscribe(h, nil, nil, huge-1); err != nil || len(sub.backlog) != 1 {
		t.Errorf("an event over the whole budget is not held: %v", err)
	} else {
		sub.Close()
	}
}

// A replay longer than one chunk, while events keep being published, meets the live queue
// with no gap and no duplicate.
func TestHubLongReplayWhilePublishing(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{SubscriberQueue: 1 << 16})
	from := publishDeltas(h, "a", "s", 1)[0]
	want := publishDeltas(h, "a", "s", 5*replayChunk)
	publishDeltas(h, "a", "other", 10)
	done := make(chan []uint64)
	go func() { done <- publishDeltas(h, "a", "s", 2000) }()
	sub, err := subscribe(h, []string{"s"}, nil, from)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want = append(want, <-done...)
	got := make([]uint64, 0, len(want))
	for len(got) < len(want) {
		seq, _, err := next(bg, sub)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seq)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d has sequence %d, want %d (gap or duplicate)", i, got[i], want[i])
		}
	}
	if sub.backlog != nil {
		t.Error("the replay is still held after it was sent")
	}
}

// Each event is encoded once, when a subscriber first takes it; from then on the ring
// keeps the encoded form alone, and every subscriber (live or replaying) gets that same
// encoded form.
func TestHubEncodesEachEventOnce(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{})
	live, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	other, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	em := presenters.NewEmitter(h, "a", "s")
	em.StatusChanged(presenters.SessionIdle, "") // so that the delta can be resumed after
	for _, sub := range []*Subscription[*encodedTest]{live, other} {
		if _, _, err := next(bg, sub); err != nil {
			t.Fatal(err)
		}
	}
	before := encodings.Load()
	seq := em.MessageDelta("m", presenters.RoleAssistant, "held once")
	h.mu.Lock()
	he := h.ring[h.positionLocked(seq)%uint64(len(h.ring))]
	h.mu.Unlock()
	if he.payload == nil || encodings.Load() != before {
		t.Fatal("the event was encoded before a subscriber took it")
	}
	_, wire, err := next(bg, live)
	if err != nil {
		t.Fatal(err)
	}
	if he.payload != nil {
		t.Error("the payload is still held after encoding")
	}
	if ev := wire.ev; ev.Sequence != seq || ev.SessionID != "s" || ev.AgentID != "a" || ev.Time.IsZero() ||
		ev.Payload.(presenters.MessageDeltaPayload).Text != "held once" {
		t.Fatalf("encoded event = %+v", ev)
	}
	_, again, err := next(bg, other)
	if err != nil || again != wire {
		t.Errorf("the other subscriber got %p, %v; want the shared %p", again, err, wire)
	}
	replay, err := subscribe(h, []string{"s"}, []string{"a"}, seq-1)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if _, replayed, err := next(bg, replay); err != nil || replayed != wire {
		t.Errorf("the replay got %p, %v; want the held %p", replayed, err, wire)
	}
	if n := encodings.Load() - before; n != 1 {
		t.Errorf("encoded %d times, want once", n)
	}
}

// recorder is an Observer that keeps what it was told.
type recorder struct {
	published []uint64
	evicted   []uint64
}

func (r *recorder) Published(ev presenters.Event) { r.published = append(r.published, ev.Sequence) }
func (r *recorder) Evicted(_ string, seq uint64)  { r.evicted = append(r.evicted, seq) }

// The Observer sees every event in order, numbered, and every eviction; View reads its
// state at the newest sequence, under the same lock.
func TestHubObserver(t *testing.T) {
	rec := &recorder{}
	h := newTestHub(t, Options[*encodedTest]{Capacity: 2, Observer: rec})
	seqs := publishDeltas(h, "a", "s", 3)
	h.View(func(newest uint64) {
		if newest != seqs[2] || len(rec.published) != 3 || rec.published[2] != newest {
			t.Errorf("newest %d, observed %v; want %v", newest, rec.published, seqs)
		}
		if len(rec.evicted) != 1 || rec.evicted[0] != seqs[0] {
			t.Errorf("evicted %v, want [%d]", rec.evicted, seqs[0])
		}
	})
}

// BenchmarkHubPublish measures Publish with subscribers that take every event (each
// encoded once, by the first), so the cost includes the fan-out.
func BenchmarkHubPublish(b *testing.B) {
	for _, subscribers := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			h, err := New(bg, Options[*encodedTest]{SubscriberQueue: 1 << 16, Encode: encodeTest})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for range subscribers {
				sub, err := subscribe(h, nil, nil, 0)
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					var buf []*encodedTest
					for {
						batch, err := sub.NextBatch(bg, nil, 256, 256<<10, buf)
						if err != nil {
							return
						}
						buf = batch.Events
					}
				})
			}
			em := presenters.NewEmitter(h, "agent", "session")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				em.MessageDelta("m", presenters.RoleAssistant, "a chunk of text")
			}
			b.StopTimer()
			h.Close()
			wg.Wait()
		})
	}
}

// BenchmarkSubscribeReplay measures subscribing with a session filter after the oldest of
// 100,000 held events (1 in 100 of them the session's): the replay a reconnecting client
// asks for. Publish waits only for the part under the hub's lock.
func BenchmarkSubscribeReplay(b *testing.B) {
	h, err := New(bg, Options[*encodedTest]{Encode: encodeTest})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for i := range DefaultCapacity + 1 {
		presenters.NewEmitter(h, "agent", fmt.Sprintf("s%d", i%100)).MessageDelta("m", presenters.RoleAssistant, "x")
	}
	after := h.LastSequence() - DefaultCapacity
	b.ReportAllocs()
	for b.Loop() {
		sub, err := subscribe(h, []string{"s7"}, nil, after)
		if err != nil || len(sub.backlog) != DefaultCapacity/100 {
			b.Fatalf("%v, %v", sub, err)
		}
		sub.Close()
	}
}

// A batch takes what already waits, up to its limits, replay and live apart; one event
// at a time when they come one at a time.
func TestNextBatchTakesWhatWaits(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{Size: func(*encodedTest) int { return 10 }})
	from := publishDeltas(h, "a", "s", 1)[0]
	replayed := publishDeltas(h, "a", "s", 5)
	sub, err := subscribe(h, nil, nil, from)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	live := publishDeltas(h, "a", "s", 7)
	for _, want := range [][]uint64{replayed[:3], replayed[3:], live[:3], live[3:6], live[6:]} {
		if _, ok := sub.CaughtUp(); ok != (want[0] == live[0]) {
			t.Fatalf("CaughtUp before %v: %v", want, ok)
		}
		b, err := sub.NextBatch(bg, nil, 3, 1000, nil)
		if err != nil || !slices.Equal(batchSequences(b), want) || b.Last != want[len(want)-1] || b.Bookmark != 0 {
			t.Fatalf("batch %v (last %d, bookmark %d), %v; want %v", batchSequences(b), b.Last, b.Bookmark, err, want)
		}
	}
	// The byte bound: 25 bytes hold two events of 10.
	more := publishDeltas(h, "a", "s", 3)
	if b, _ := sub.NextBatch(bg, nil, 100, 25, nil); !slices.Equal(batchSequences(b), more[:2]) {
		t.Errorf("byte-bounded batch %v, want %v", batchSequences(b), more[:2])
	}
	if b, _ := sub.NextBatch(bg, nil, 100, 25, nil); !slices.Equal(batchSequences(b), more[2:]) {
		t.Errorf("the event left out %v, want %v", batchSequences(b), more[2:])
	}
	// One at a time when they come one at a time: nothing waits for a second event.
	for range 3 {
		seq := publishDeltas(h, "a", "s", 1)[0]
		if b, _ := sub.NextBatch(bg, nil, 100, 1000, nil); !slices.Equal(batchSequences(b), []uint64{seq}) {
			t.Fatalf("batch %v, want only %d", batchSequences(b), seq)
		}
	}
	// Idle: an empty batch when the channel fires first.
	idle := make(chan time.Time, 1)
	idle <- time.Now()
	if b, err := sub.NextBatch(bg, idle, 100, 1000, nil); err != nil || len(b.Events) != 0 || b.Bookmark != 0 {
		t.Errorf("idle batch %v, %v", b, err)
	}
}

// CaughtUp reports the newest sequence at registration once the replay is taken, once;
// for a live subscription right away.
func TestCaughtUp(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{})
	seqs := publishDeltas(h, "a", "s", 4)
	publishDeltas(h, "a", "other", 2)
	newest := h.LastSequence()
	sub, err := subscribe(h, []string{"s"}, nil, seqs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, ok := sub.CaughtUp(); ok {
		t.Fatal("caught up before the replay was taken")
	}
	if b, _ := sub.NextBatch(bg, nil, 10, 0, nil); !slices.Equal(batchSequences(b), seqs[1:]) {
		t.Fatalf("replay %v", batchSequences(b))
	}
	if seq, ok := sub.CaughtUp(); !ok || seq != newest || sub.Last() != newest {
		t.Errorf("CaughtUp = %d, %v (last %d); want %d", seq, ok, sub.Last(), newest)
	}
	if _, ok := sub.CaughtUp(); ok {
		t.Error("CaughtUp reported twice")
	}
	live, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if seq, ok := live.CaughtUp(); !ok || seq != newest {
		t.Errorf("live CaughtUp = %d, %v; want %d", seq, ok, newest)
	}
}

// A filtered subscriber is sent a bookmark every eighth of the ring of events it skips,
// queued behind the matching events before it; the events after a bookmark supersede it.
func TestBookmarksForFilteredSubscribers(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{Capacity: 80}) // a bookmark every 10 skipped
	sub, err := subscribe(h, []string{"a"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mine := publishDeltas(h, "x", "a", 1)[0]
	others := publishDeltas(h, "x", "b", 25)
	b, err := sub.NextBatch(bg, nil, 100, 1<<20, nil)
	if err != nil || !slices.Equal(batchSequences(b), []uint64{mine}) || b.Bookmark != others[19] || sub.Last() != others[19] {
		t.Fatalf("batch %v bookmark %d (last %d), %v; want [%d] and bookmark %d", batchSequences(b), b.Bookmark, sub.Last(), err, mine, others[19])
	}
	// A matching event restarts the count; one after a bookmark supersedes it.
	publishDeltas(h, "x", "b", 9)
	mine = publishDeltas(h, "x", "a", 1)[0]
	others = publishDeltas(h, "x", "b", 10)
	last := publishDeltas(h, "x", "a", 1)[0]
	b, err = sub.NextBatch(bg, nil, 100, 1<<20, nil)
	if err != nil || !slices.Equal(batchSequences(b), []uint64{mine, last}) || b.Bookmark != 0 {
		t.Fatalf("batch %v bookmark %d, %v; want [%d %d] and no bookmark (bookmarked %d is older)", batchSequences(b), b.Bookmark, err, mine, last, others[9])
	}
	// An unfiltered subscriber is never sent one.
	all, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	publishDeltas(h, "x", "b", 30)
	if b, _ := all.NextBatch(bg, nil, 100, 1<<20, nil); len(b.Events) != 30 || b.Bookmark != 0 {
		t.Errorf("unfiltered: %d events, bookmark %d", len(b.Events), b.Bookmark)
	}
}

// The types filter, alone and with the others; OldestHeld replays the whole ring.
func TestTypesFilterAndOldestHeld(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{Capacity: 4})
	em := presenters.NewEmitter(h, "x", "s")
	em.StatusChanged(presenters.SessionIdle, "") // leaves the ring
	delta := em.MessageDelta("m", presenters.RoleAssistant, "d")
	status := em.StatusChanged(presenters.SessionGenerating, "")
	end := em.MessageEnd(presenters.MessageEndPayload{MessageID: "m"})
	other := presenters.NewEmitter(h, "x", "t").StatusChanged(presenters.SessionIdle, "")
	for _, c := range []struct {
		f    Filter
		want []uint64
	}{
		{Filter{}, []uint64{delta, status, end, other}},
		{Filter{Types: []presenters.EventType{presenters.EventStatusChanged}}, []uint64{status, other}},
		{Filter{Types: []presenters.EventType{presenters.EventStatusChanged, presenters.EventMessageEnd}, SessionIDs: []string{"s"}}, []uint64{status, end}},
		{Filter{Types: []presenters.EventType{presenters.EventToolEnd}}, nil},
	} {
		sub, err := h.Subscribe(c.f, OldestHeld())
		if err != nil {
			t.Fatal(err)
		}
		idle := make(chan time.Time, 1)
		idle <- time.Now() // an empty replay returns at once
		b, _ := sub.NextBatch(bg, idle, 100, 0, nil)
		if got := batchSequences(b); !slices.Equal(got, c.want) {
			t.Errorf("%+v from the oldest held: %v, want %v", c.f, got, c.want)
		}
		if seq, ok := sub.CaughtUp(); !ok || seq != other {
			t.Errorf("%+v: CaughtUp %d, %v", c.f, seq, ok)
		}
		sub.Close()
	}
	if oldest, newest := h.HeldRange(); oldest != delta || newest != other {
		t.Errorf("HeldRange = %d, %d; want %d, %d", oldest, newest, delta, other)
	}
}

// The encoder sees an event as it was published: a LoadSession's replay stays marked.
func TestHubEncodesTheReplayMark(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{})
	sub, err := subscribe(h, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	presenters.NewEmitter(h, "a", "s").Replaying().MessageDelta("m", presenters.RoleUser, "old question")
	presenters.NewEmitter(h, "a", "s").MessageDelta("m2", presenters.RoleAssistant, "new answer")
	for _, want := range []bool{true, false} {
		_, enc, err := next(bg, sub)
		if err != nil {
			t.Fatal(err)
		}
		if enc.ev.Replay != want {
			t.Errorf("event %d: replay %v, want %v", enc.ev.Sequence, enc.ev.Replay, want)
		}
	}
}

package events

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// logged is an event as a hub logs it, for appending to a log directly.
func logged(seq uint64, sessionID string, at time.Time) LoggedEvent {
	ev := presenters.Event{Sequence: seq, SessionID: sessionID, AgentID: "a", Payload: presenters.MessageDeltaPayload{MessageID: "m", Text: "x"}}
	return LoggedEvent{Sequence: seq, SessionID: sessionID, AgentID: "a", Type: presenters.EventMessageDelta, MessageID: "m", Time: at,
		Data: marshalTest(&encodedTest{ev: ev})}
}

// appendLogged appends events to the log, one batch each, as the session and sequence
// pairs say ("a", 3, "b", 1, ...), stamped at.
func appendLogged(t *testing.T, log EventLog, at time.Time, pairs ...any) {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if err := log.AppendEvents(bg, []LoggedEvent{logged(uint64(pairs[i+1].(int)), pairs[i].(string), at)}); err != nil {
			t.Fatal(err)
		}
	}
}

// tailed is what a tail took: the events by session, and every sequence in the order taken.
type tailed struct {
	bySession map[string][]uint64
	order     []uint64
}

// takeTail takes from the tail until it has n events, asking CaughtUp before each batch as
// Subscribe does.
func takeTail(t testing.TB, tail *Tail[*encodedTest], n int) tailed {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	got := tailed{bySession: map[string][]uint64{}}
	var buf []*encodedTest
	for len(got.order) < n {
		tail.CaughtUp()
		b, err := tail.NextBatch(ctx, nil, 100, 1<<20, buf)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got.order), err)
		}
		for _, enc := range b.Events {
			got.bySession[enc.ev.SessionID] = append(got.bySession[enc.ev.SessionID], enc.ev.Sequence)
			got.order = append(got.order, enc.ev.Sequence)
		}
		buf = b.Events
	}
	return got
}

// quiet fails if the tail takes an event within a short while.
func quiet(t *testing.T, tail *Tail[*encodedTest]) {
	t.Helper()
	idle := time.After(50 * time.Millisecond)
	for {
		b, err := tail.NextBatch(bg, idle, 100, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) > 0 {
			t.Fatalf("unexpected events %v", batchSequences(b))
		}
		if !b.ReplayEnded {
			return
		}
	}
}

// newTail starts a tail and closes it when the test ends.
func newTail(t testing.TB, h *testHub, f Filter, start Start) *Tail[*encodedTest] {
	t.Helper()
	tail, err := h.Tail(f, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tail.Close)
	return tail
}

// tailHub is a hub on log whose tails its appends wake.
func tailHub(t testing.TB, log *memLog) *testHub {
	t.Helper()
	h := newMemHub(t, log, 1000, Options[*encodedTest]{})
	log.wake(h)
	return h
}

func TestTailNeedsATailLog(t *testing.T) {
	h := newTestHub(t, Options[*encodedTest]{})
	if _, err := h.Tail(Filter{}, Live()); err == nil {
		t.Error("a tail without a log started")
	}
}

// Sessions' events reach the log out of sequence order; a tail takes each session's in
// order, each once, and what one read finds in sequence order.
func TestTailOrderPerSession(t *testing.T) {
	log := &memLog{}
	h := tailHub(t, log)
	tail := newTail(t, h, Filter{}, Live())
	if seq, ok := tail.CaughtUp(); !ok || seq != 0 {
		t.Errorf("a live tail on an empty log: CaughtUp = %d, %v; want 0, true", seq, ok)
	}
	appendLogged(t, log, time.Now(), "a", 20, "b", 5, "a", 21, "b", 6, "c", 1)
	got := takeTail(t, tail, 5)
	want := map[string][]uint64{"a": {20, 21}, "b": {5, 6}, "c": {1}}
	if !maps.EqualFunc(got.bySession, want, slices.Equal) {
		t.Errorf("taken %v, want %v", got.bySession, want)
	}
	// Woken together, they come in one read, in sequence order.
	if err := log.AppendEvents(bg, []LoggedEvent{logged(30, "a", time.Now()), logged(7, "b", time.Now())}); err != nil {
		t.Fatal(err)
	}
	if got := takeTail(t, tail, 2); !slices.Equal(got.order, []uint64{7, 30}) {
		t.Errorf("one read: %v, want [7 30]", got.order)
	}
	if tail.Last() != 30 {
		t.Errorf("Last = %d, want 30", tail.Last())
	}
	quiet(t, tail)
}

// A live tail starts each session after its newest logged event: a session's later
// events come even when they are below other sessions' older ones, and a new session's
// all come.
func TestTailLiveStart(t *testing.T) {
	log := &memLog{}
	h := tailHub(t, log)
	appendLogged(t, log, time.Now(), "a", 10, "b", 5)
	tail := newTail(t, h, Filter{}, Live())
	if seq, ok := tail.CaughtUp(); !ok || seq != 10 {
		t.Errorf("CaughtUp = %d, %v; want 10, true", seq, ok)
	}
	if _, ok := tail.CaughtUp(); ok {
		t.Error("CaughtUp reported twice")
	}
	appendLogged(t, log, time.Now(), "b", 6, "c", 3, "a", 11)
	got := takeTail(t, tail, 3)
	if want := map[string][]uint64{"a": {11}, "b": {6}, "c": {3}}; !maps.EqualFunc(got.bySession, want, slices.Equal) {
		t.Errorf("taken %v, want %v", got.bySession, want)
	}
	quiet(t, tail)
}

// A resume replays the events after the point in sequence order, reports CaughtUp, then
// follows each session from where the replay left it.
func TestTailResume(t *testing.T) {
	log := &memLog{}
	h := tailHub(t, log)
	appendLogged(t, log, time.Now(), "a", 1, "b", 2, "a", 3, "b", 4, "a", 5, "b", 6, "c", 100)
	tail := newTail(t, h, Filter{}, After(3))
	if _, ok := tail.CaughtUp(); ok {
		t.Fatal("caught up before the replay")
	}
	b, err := tail.NextBatch(bg, nil, 100, 1<<20, nil)
	if err != nil || !slices.Equal(batchSequences(b), []uint64{4, 5, 6, 100}) {
		t.Fatalf("replay = %v, %v; want [4 5 6 100]", batchSequences(b), err)
	}
	if seq, ok := tail.CaughtUp(); !ok || seq != 100 {
		t.Errorf("CaughtUp = %d, %v; want 100, true", seq, ok)
	}
	appendLogged(t, log, time.Now(), "b", 7, "a", 101)
	if got := takeTail(t, tail, 2); !slices.Equal(got.bySession["b"], []uint64{7}) || !slices.Equal(got.bySession["a"], []uint64{101}) {
		t.Errorf("after the replay: %v", got.bySession)
	}

	// From the oldest, filtered: a replay that finds nothing ends at once.
	tail = newTail(t, h, Filter{SessionIDs: []string{"none"}}, OldestHeld())
	b, err = tail.NextBatch(bg, nil, 100, 1<<20, nil)
	if err != nil || len(b.Events) != 0 || !b.ReplayEnded {
		t.Errorf("an empty replay: %v, ReplayEnded %v, %v", batchSequences(b), b.ReplayEnded, err)
	}
	if seq, ok := tail.CaughtUp(); !ok || seq != 0 {
		t.Errorf("CaughtUp after an empty replay from the oldest = %d, %v; want 0 (before the oldest)", seq, ok)
	}
}

// A replay longer than one read goes in several, bounded by maxEvents and maxBytes, never
// mixed with what comes after it.
func TestTailBatches(t *testing.T) {
	log := &memLog{}
	h := newMemHub(t, log, 10_000, Options[*encodedTest]{Size: func(*encodedTest) int { return 10 }})
	log.wake(h)
	var batch []LoggedEvent
	for seq := range uint64(tailRead + 10) {
		batch = append(batch, logged(seq+1, "s", time.Now()))
	}
	if err := log.AppendEvents(bg, batch); err != nil {
		t.Fatal(err)
	}
	tail := newTail(t, h, Filter{}, After(0))
	b, err := tail.NextBatch(bg, nil, 7, 1<<20, nil)
	if err != nil || len(b.Events) != 7 || b.Last != 7 {
		t.Fatalf("maxEvents 7: %v, %v", batchSequences(b), err)
	}
	if b, err = tail.NextBatch(bg, nil, 100, 35, nil); err != nil || len(b.Events) != 3 || b.Last != 10 {
		t.Fatalf("maxBytes 35 of events of 10: %v, %v", batchSequences(b), err)
	}
	taken := uint64(10)
	for {
		if seq, ok := tail.CaughtUp(); ok {
			if taken != tailRead+10 || seq != taken {
				t.Fatalf("caught up at %d after %d events, want %d", seq, taken, tailRead+10)
			}
			break
		}
		b, err := tail.NextBatch(bg, nil, 1000, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range batchSequences(b) {
			if taken++; seq != taken {
				t.Fatalf("took %d, want %d", seq, taken)
			}
		}
	}
	idle := make(chan time.Time, 1)
	idle <- time.Now()
	if b, err := tail.NextBatch(bg, idle, 100, 1<<20, nil); err != nil || len(b.Events) != 0 || b.ReplayEnded {
		t.Errorf("idle: %v, ReplayEnded %v, %v", batchSequences(b), b.ReplayEnded, err)
	}
}

// Filters hold in the replay and after; a wake-up of sessions a tail does not follow is
// not its concern.
func TestTailFilters(t *testing.T) {
	log := &memLog{}
	h := tailHub(t, log)
	tail := newTail(t, h, Filter{SessionIDs: []string{"a", "b"}, AgentIDs: []string{"x"}}, After(0))
	if err := log.AppendEvents(bg, []LoggedEvent{
		{Sequence: 1, SessionID: "a", AgentID: "x", Data: marshalTest(&encodedTest{ev: presenters.Event{Sequence: 1, SessionID: "a", Payload: presenters.SessionReadyPayload{}}})},
		{Sequence: 2, SessionID: "a", AgentID: "y", Data: marshalTest(&encodedTest{ev: presenters.Event{Sequence: 2, SessionID: "a", Payload: presenters.SessionReadyPayload{}}})},
		{Sequence: 3, SessionID: "c", AgentID: "x", Data: marshalTest(&encodedTest{ev: presenters.Event{Sequence: 3, SessionID: "c", Payload: presenters.SessionReadyPayload{}}})},
	}); err != nil {
		t.Fatal(err)
	}
	if got := takeTail(t, tail, 1); !slices.Equal(got.order, []uint64{1}) {
		t.Errorf("filtered: %v", got.order)
	}
	quiet(t, tail) // reads session a again, for the wake-up of its append
	h.WakeTails([]string{"c", "d"}, false)
	select {
	case <-tail.wake:
		t.Error("woken for sessions the tail does not follow")
	default:
	}
	h.tailMu.Lock()
	woken := len(tail.woken)
	h.tailMu.Unlock()
	if woken != 0 {
		t.Errorf("%d sessions the tail does not follow are to be read", woken)
	}
	quiet(t, tail)
}

// A wake-up of every session (the notifications were lost) reads what each session has
// above its cursor, and nothing twice.
func TestTailWakeAll(t *testing.T) {
	log := &memLog{}
	h := newMemHub(t, log, 1000, Options[*encodedTest]{}) // appends wake nothing
	appendLogged(t, log, time.Now(), "a", 10, "b", 3)
	tail := newTail(t, h, Filter{}, Live())
	appendLogged(t, log, time.Now(), "a", 11, "b", 4, "c", 1)
	quiet(t, tail)
	h.WakeTails(nil, true)
	if got := takeTail(t, tail, 3); !slices.Equal(got.order, []uint64{1, 4, 11}) {
		t.Errorf("after a wake-up of all: %v, want [1 4 11]", got.order)
	}
	h.WakeTails(nil, true)
	quiet(t, tail)
}

// An event logged while a read is under way, which the read missed, wakes the tail for
// another read; so does one logged while a live tail reads where each session starts.
func TestTailWakeDuringARead(t *testing.T) {
	log := &memLog{}
	h := tailHub(t, log)
	var once sync.Once
	during := func(sessionID string, seq int) func() {
		return func() { once.Do(func() { appendLogged(t, log, time.Now(), sessionID, seq) }) }
	}
	log.mu.Lock()
	log.duringRead = during("new", 2)
	log.mu.Unlock()
	tail := newTail(t, h, Filter{}, Live())
	if got := takeTail(t, tail, 1); !slices.Equal(got.order, []uint64{2}) {
		t.Errorf("logged while the tail started: %v", got.order)
	}
	once = sync.Once{}
	log.mu.Lock()
	log.duringRead = during("a", 4)
	log.mu.Unlock()
	appendLogged(t, log, time.Now(), "a", 3)
	if got := takeTail(t, tail, 2); !slices.Equal(got.order, []uint64{3, 4}) {
		t.Errorf("logged while the tail read: %v, want [3 4]", got.order)
	}
	once = sync.Once{}
	log.mu.Lock()
	log.duringRead = during("a", 6)
	log.mu.Unlock()
	tail = newTail(t, h, Filter{}, After(4))
	appendLogged(t, log, time.Now(), "a", 5)
	if got := takeTail(t, tail, 2); !slices.Equal(got.order, []uint64{5, 6}) {
		t.Errorf("logged while the replay read: %v, want [5 6]", got.order)
	}
}

// A point older than the log's oldest is out of range; so is a replay that retention
// overtakes, and a woken session whose new events retention took before the tail read
// them. A quiet session whose last event retention took is not.
func TestTailOutOfRange(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	log := &memLog{}
	h := tailHub(t, log)
	for seq := 1; seq <= 10; seq++ {
		appendLogged(t, log, long, "s", seq)
	}
	if _, err := log.PruneEvents(bg, LogRetention{MaxEvents: 5}); err != nil {
		t.Fatal(err)
	}
	var outOfRange *OutOfRangeError
	if _, err := h.Tail(Filter{}, After(4)); !errors.As(err, &outOfRange) || outOfRange.After != 4 || outOfRange.Oldest != 6 {
		t.Errorf("after 4 with the log from 6: %v", err)
	}
	newTail(t, h, Filter{}, After(5)).Close()
	floor, _ := log.SequenceFloor(bg)
	if _, err := h.Tail(Filter{}, After(floor+1)); !errors.As(err, &outOfRange) || outOfRange.After <= outOfRange.Newest {
		t.Errorf("after a sequence never reserved: %v", err)
	}

	t.Run("replay", func(t *testing.T) {
		log := &memLog{}
		h := tailHub(t, log)
		var batch []LoggedEvent
		for seq := range uint64(2 * tailRead) {
			batch = append(batch, logged(seq+1, "s", time.Now()))
		}
		if err := log.AppendEvents(bg, batch); err != nil {
			t.Fatal(err)
		}
		tail := newTail(t, h, Filter{}, After(0))
		if got := takeTail(t, tail, tailRead); got.order[tailRead-1] != tailRead {
			t.Fatalf("first read: %v", got.order[tailRead-1])
		}
		if _, err := log.PruneEvents(bg, LogRetention{MaxEvents: 10}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // it stays ended
			if _, err := tail.NextBatch(bg, nil, 100, 1<<20, nil); !errors.As(err, &outOfRange) || outOfRange.After != tailRead {
				t.Errorf("a replay retention overtook: %v", err)
			}
		}
	})
	t.Run("woken", func(t *testing.T) {
		log := &memLog{}
		h := tailHub(t, log)
		appendLogged(t, log, long, "a", 1)
		tail := newTail(t, h, Filter{SessionIDs: []string{"a"}}, Live())
		appendLogged(t, log, time.Now(), "a", 2, "a", 3, "b", 10)
		if _, err := log.PruneEvents(bg, LogRetention{MaxEvents: 1}); err != nil {
			t.Fatal(err)
		}
		_, err := tail.NextBatch(bg, nil, 100, 1<<20, nil)
		if !errors.As(err, &outOfRange) || outOfRange.After != 1 || outOfRange.Oldest != 10 {
			t.Errorf("a woken session whose events retention took: %v", err)
		}
	})
	t.Run("quiet", func(t *testing.T) {
		log := &memLog{}
		h := tailHub(t, log)
		appendLogged(t, log, long, "a", 1)
		for seq := 2; seq <= 50; seq++ {
			appendLogged(t, log, long, "x", seq)
		}
		tail := newTail(t, h, Filter{SessionIDs: []string{"a"}}, Live())
		if _, err := log.PruneEvents(bg, LogRetention{MaxEvents: 10}); err != nil {
			t.Fatal(err)
		}
		appendLogged(t, log, time.Now(), "a", 51)
		if got := takeTail(t, tail, 1); !slices.Equal(got.order, []uint64{51}) {
			t.Errorf("a quiet session: %v", got.order)
		}
	})
}

// Close ends a tail, and Hub.Close every tail, with the resume point; a closed hub
// starts none.
func TestTailClose(t *testing.T) {
	log := &memLog{}
	h := tailHub(t, log)
	tail := newTail(t, h, Filter{}, Live())
	appendLogged(t, log, time.Now(), "a", 5)
	takeTail(t, tail, 1)
	tail.Close()
	var closed *ClosedError
	if _, err := tail.NextBatch(bg, nil, 100, 1<<20, nil); !errors.As(err, &closed) || closed.Last != 5 {
		t.Errorf("after Close: %v", err)
	}

	waiting := newTail(t, h, Filter{}, Live())
	ended := make(chan error)
	go func() {
		_, err := waiting.NextBatch(bg, nil, 100, 1<<20, nil)
		ended <- err
	}()
	h.Close()
	select {
	case err := <-ended:
		if !errors.As(err, &closed) || closed.Last != 5 || !errors.Is(err, ErrClosed) {
			t.Errorf("a waiting tail when the hub closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Hub.Close did not end a waiting tail")
	}
	if _, err := h.Tail(Filter{}, Live()); !errors.Is(err, ErrClosed) {
		t.Errorf("Tail after Hub.Close: %v", err)
	}
	h.WakeTails([]string{"a"}, true) // no tail left to wake
}

// checkTailed fails unless the tail took each session's events once, in order, as
// published.
func checkTailed(t *testing.T, got tailed, published map[string][]uint64) {
	t.Helper()
	for id, want := range published {
		if !slices.Equal(got.bySession[id], want) {
			t.Errorf("session %s: took %v, want %v", id, got.bySession[id], want)
		}
	}
	if len(got.bySession) != len(published) {
		t.Errorf("took events of %d sessions, want %d", len(got.bySession), len(published))
	}
}

// publishSessions publishes n events in each session on its hub at once and returns
// each session's sequences. Now and then a hub skips ahead, and every hub's tails are
// woken for all sessions.
func publishSessions(t *testing.T, sessions map[string]*testHub, n int) map[string][]uint64 {
	t.Helper()
	var (
		mu        sync.Mutex
		published = map[string][]uint64{}
		wg        sync.WaitGroup
		hubs      = map[*testHub]bool{}
	)
	for _, h := range sessions {
		hubs[h] = true
	}
	for id, h := range sessions {
		wg.Go(func() {
			em := presenters.NewEmitter(h, "a", id)
			var seqs []uint64
			for i := range n {
				seqs = append(seqs, em.MessageDelta("m", presenters.RoleAssistant, "x"))
				if i%50 == 25 {
					if err := h.SkipAhead(bg); err != nil {
						t.Error(err)
					}
					for h := range hubs {
						h.WakeTails(nil, true)
					}
				}
			}
			mu.Lock()
			published[id] = seqs
			mu.Unlock()
		})
	}
	wg.Wait()
	return published
}

// Two hubs log to one log from interleaved blocks; the tails on either, live and
// resuming, take every session's events once and in order.
func TestTailTwoHubs(t *testing.T) {
	log := &memLog{}
	b := newMemHub(t, log, 16, Options[*encodedTest]{})
	a := newMemHub(t, log, 16, Options[*encodedTest]{}) // its first block is above b's
	log.wake(a, b)
	tails := []*Tail[*encodedTest]{
		newTail(t, a, Filter{}, Live()),
		newTail(t, b, Filter{}, After(0)),
		newTail(t, a, Filter{SessionIDs: []string{"a1", "b2"}}, Live()),
	}
	const n = 200
	published := publishSessions(t, map[string]*testHub{"a1": a, "a2": a, "b1": b, "b2": b}, n)
	if aFirst, bFirst := min(published["a1"][0], published["a2"][0]), min(published["b1"][0], published["b2"][0]); aFirst < bFirst {
		t.Fatalf("a's first block is below b's: %d, %d", aFirst, bFirst)
	}
	checkTailed(t, takeTail(t, tails[0], 4*n), published)
	checkTailed(t, takeTail(t, tails[1], 4*n), published)
	checkTailed(t, takeTail(t, tails[2], 2*n), map[string][]uint64{"a1": published["a1"], "b2": published["b2"]})
	for _, tail := range tails {
		quiet(t, tail)
	}
}

// Tails take everything while hubs publish, skip ahead and wake them, and while
// appends land during their reads (run with -race -count=20).
func TestTailWakeRaces(t *testing.T) {
	log := &memLog{}
	a := newMemHub(t, log, 8, Options[*encodedTest]{LogInterval: time.Millisecond})
	b := newMemHub(t, log, 8, Options[*encodedTest]{LogInterval: time.Millisecond})
	log.wake(a, b)
	var reads atomic.Int64
	log.mu.Lock()
	log.duringRead = func() {
		if reads.Add(1)%3 == 0 {
			time.Sleep(100 * time.Microsecond) // appends land meanwhile
		}
	}
	log.mu.Unlock()
	sessions := map[string]*testHub{}
	for i := range 6 {
		sessions[fmt.Sprintf("s%d", i)] = []*testHub{a, b}[i%2]
	}
	const n = 100
	type result struct {
		got tailed
		err error
	}
	var (
		wg      sync.WaitGroup
		results = make([]result, 4)
	)
	for i := range results {
		tail := newTail(t, []*testHub{a, b}[i%2], Filter{}, []Start{Live(), After(0)}[i/2])
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(bg, 20*time.Second)
			defer cancel()
			got := tailed{bySession: map[string][]uint64{}}
			for len(got.order) < len(sessions)*n {
				tail.CaughtUp()
				b, err := tail.NextBatch(ctx, nil, 7, 1<<20, nil)
				if err != nil {
					results[i] = result{got, err}
					return
				}
				for _, enc := range b.Events {
					got.bySession[enc.ev.SessionID] = append(got.bySession[enc.ev.SessionID], enc.ev.Sequence)
					got.order = append(got.order, enc.ev.Sequence)
				}
			}
			results[i] = result{got: got}
		})
	}
	published := publishSessions(t, sessions, n)
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("tail %d after %d events: %v", i, len(r.got.order), r.err)
		}
		checkTailed(t, r.got, published)
	}
}

// wakingLog is the store's log, waking the tails of hubs after each append as the
// store's notifications do.
type wakingLog struct {
	*storeLog
	hubs []*testHub
}

func (l *wakingLog) AppendEvents(ctx context.Context, batch []LoggedEvent) error {
	if err := l.storeLog.AppendEvents(ctx, batch); err != nil {
		return err
	}
	var sessions []string
	for _, ev := range batch {
		if !slices.Contains(sessions, ev.SessionID) {
			sessions = append(sessions, ev.SessionID)
		}
	}
	for _, h := range l.hubs {
		h.WakeTails(sessions, false)
	}
	return nil
}

// Two hubs on one store, with exclusive blocks and one event log: tails read the log as
// the store keeps it.
func TestTailOnTheStore(t *testing.T) {
	st := openStore(t)
	log := &wakingLog{storeLog: &storeLog{st: st}}
	var hubs []*testHub
	for range 2 {
		hubs = append(hubs, newTestHub(t, Options[*encodedTest]{Store: st, ExclusiveBlocks: true, SequenceBlock: 16,
			Log: log, Marshal: marshalTest, Unmarshal: unmarshalTest, Logger: discard}))
	}
	log.hubs = hubs
	live := newTail(t, hubs[0], Filter{}, Live())
	resumed := newTail(t, hubs[1], Filter{}, After(0))
	const n = 100
	published := publishSessions(t, map[string]*testHub{"a1": hubs[0], "a2": hubs[0], "b1": hubs[1]}, n)
	checkTailed(t, takeTail(t, live, 3*n), published)
	checkTailed(t, takeTail(t, resumed, 3*n), published)
	for _, h := range hubs {
		waitLogged(t, h)
	}
	later := newTail(t, hubs[1], Filter{SessionIDs: []string{"a2"}}, Live())
	if seq, ok := later.CaughtUp(); !ok || seq != published["a2"][n-1] {
		t.Errorf("a live tail of a2 caught up at %d, %v; want a2's newest, %d", seq, ok, published["a2"][n-1])
	}
}

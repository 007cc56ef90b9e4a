package events

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestExclusiveBlocksNeedAReserver(t *testing.T) {
	floorOnly := struct{ SequenceStore }{&memLog{}}
	_, err := New(bg, Options[*encodedTest]{Encode: encodeTest, Store: floorOnly, ExclusiveBlocks: true})
	if err == nil || !strings.Contains(err.Error(), "SequenceReserver") {
		t.Errorf("New with exclusive blocks on a floor-only store: %v, want an error naming SequenceReserver", err)
	}
}

// rising fails unless seqs rise strictly.
func rising(t *testing.T, what string, seqs []uint64) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("%s: sequence %d after %d", what, seqs[i], seqs[i-1])
		}
	}
}

// publishOn publishes n events on each hub at once, each hub from goroutines of its own,
// and returns the sequences each got.
func publishOn(hubs []*testHub, goroutines, n int) [][]uint64 {
	got := make([][]uint64, len(hubs)*goroutines)
	var wg sync.WaitGroup
	for i := range got {
		h := hubs[i%len(hubs)]
		wg.Go(func() { got[i] = publishDeltas(h, "a", "s"+string(rune('a'+i)), n) })
	}
	wg.Wait()
	return got
}

// Hubs with exclusive blocks on one store never issue the same sequence; each one's
// sequences rise, with gaps where the other's blocks lie; every one is covered by a
// reservation; and both hubs log to one log without a conflict.
func TestHubExclusiveBlocks(t *testing.T) {
	check := func(t *testing.T, hubs []*testHub, floor func() uint64) {
		t.Helper()
		got := publishOn(hubs, 2, 300)
		var all []uint64
		for i, seqs := range got {
			rising(t, "one publisher", seqs)
			all = append(all, seqs...)
			if i%len(hubs) == 0 {
				// One hub's two publishers together rise too.
				mine := slices.Sorted(slices.Values(append(slices.Clone(seqs), got[i+1]...)))
				if mine[len(mine)-1]-mine[0]+1 == uint64(len(mine)) {
					t.Errorf("hub %d issued %d..%d without a gap: the other hub's blocks lie elsewhere", i, mine[0], mine[len(mine)-1])
				}
			}
		}
		slices.Sort(all)
		if len(slices.Compact(slices.Clone(all))) != len(all) {
			t.Fatal("two events got the same sequence")
		}
		if f := floor(); all[len(all)-1] > f {
			t.Errorf("sequence %d is above the reserved %d", all[len(all)-1], f)
		}
		for _, h := range hubs {
			waitLogged(t, h)
		}
	}
	t.Run("memory", func(t *testing.T) {
		log := &memLog{}
		hubs := []*testHub{newMemHub(t, log, 4, Options[*encodedTest]{}), newMemHub(t, log, 4, Options[*encodedTest]{})}
		check(t, hubs, func() uint64 { f, _ := log.SequenceFloor(bg); return f })
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.events) != 4*300 {
			t.Errorf("the log holds %d events, want %d", len(log.events), 4*300)
		}
	})
	t.Run("store", func(t *testing.T) {
		st := openStore(t)
		var hubs []*testHub
		for range 2 {
			h, _ := newLogHub(t, st, Options[*encodedTest]{ExclusiveBlocks: true, SequenceBlock: 4})
			hubs = append(hubs, h)
		}
		check(t, hubs, func() uint64 { f, _ := st.SequenceFloor(bg); return f })
	})
}

// The ring finds resume points among sequences with gaps, and so does the log behind it.
func TestHubResumesAcrossGaps(t *testing.T) {
	log := &memLog{}
	h := newMemHub(t, log, 4, Options[*encodedTest]{Capacity: 8})
	var published []uint64
	for i := range 40 {
		if i%3 == 0 {
			if err := h.SkipAhead(bg); err != nil {
				t.Fatal(err)
			}
		}
		published = append(published, publishDeltas(h, "a", "s", 1)...)
	}
	waitLogged(t, h)
	newest := published[len(published)-1]
	if oldest, _ := h.HeldRange(); oldest != published[0] {
		t.Errorf("HeldRange starts at %d, want %d", oldest, published[0])
	}
	for after := published[0] - 1; after <= newest; after++ {
		sub, err := h.Subscribe(Filter{}, After(after))
		if err != nil {
			t.Fatalf("resume after %d: %v", after, err)
		}
		want := slices.DeleteFunc(slices.Clone(published), func(seq uint64) bool { return seq <= after })
		if got := replayOf(t, sub); !slices.Equal(got, want) {
			t.Fatalf("resumed after %d: %v, want %v", after, got, want)
		}
		sub.Close()
	}
	sub, err := h.Subscribe(Filter{}, OldestHeld())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := replayOf(t, sub); !slices.Equal(got, published) {
		t.Errorf("from the oldest held: %v, want %v", got, published)
	}
	if got := h.Stats().HeldEvents; got != 8 {
		t.Errorf("the ring holds %d events, want 8", got)
	}
}

// replayOf takes a subscription's replay, up to its caught-up point.
func replayOf(t *testing.T, sub *Subscription[*encodedTest]) []uint64 {
	t.Helper()
	idle := make(chan time.Time)
	close(idle) // nothing waits: return at once
	var got []uint64
	for {
		if _, ok := sub.CaughtUp(); ok {
			return got
		}
		b, err := sub.NextBatch(bg, idle, 3, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, batchSequences(b)...)
	}
}

// A reservation that fails at the end of a block holds Publish, and only Publish, until
// one lands: no event gets a sequence no block covers.
func TestPublishWaitsForABlock(t *testing.T) {
	log := &memLog{}
	reserver := &flakyReserver{memLog: log}
	h := newMemHub(t, log, 4, Options[*encodedTest]{Store: reserver})
	reserver.setFailing(true)
	publishDeltas(h, "a", "s", 4) // the block's last; the reservation ahead failed
	published := make(chan uint64, 1)
	go func() { published <- publishDeltas(h, "a", "s", 1)[0] }()
	// The reservation ahead, then the waiting Publish's own tries, all failing.
	for deadline := time.Now().Add(10 * time.Second); reserver.tries() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reservations tried; want the waiting Publish to try again", reserver.tries())
		}
	}
	select {
	case seq := <-published:
		t.Fatalf("Publish issued %d while no block could be reserved", seq)
	default:
	}
	if _, newest := h.HeldRange(); newest != 4 { // the hub's lock is free meanwhile
		t.Errorf("newest issued while waiting for a block = %d, want 4", newest)
	}
	reserver.setFailing(false)
	select {
	case seq := <-published:
		if floor, _ := log.SequenceFloor(bg); seq <= 4 || seq > floor {
			t.Errorf("the waiting Publish got %d, want one of a new block (up to %d)", seq, floor)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish still waits after the store recovered")
	}
}

// After SkipAhead every event is above every sequence another hub issued before, and the
// sequences keep rising past the block it left.
func TestSkipAhead(t *testing.T) {
	log := &memLog{}
	a := newMemHub(t, log, 10, Options[*encodedTest]{})
	b := newMemHub(t, log, 10, Options[*encodedTest]{}) // its block is above a's
	mine := publishDeltas(a, "a", "s", 6)               // halfway: a has the next block reserved
	theirs := publishDeltas(b, "b", "t", 3)
	if mine[len(mine)-1] > theirs[0] {
		t.Fatalf("a's block is above b's: %v, %v", mine, theirs)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		upcoming := a.upcoming
		a.mu.Unlock()
		if upcoming != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no block was reserved ahead halfway through the first")
		}
	}
	if err := a.SkipAhead(bg); err != nil {
		t.Fatal(err)
	}
	if last := a.LastSequence(); last < theirs[len(theirs)-1] {
		t.Errorf("LastSequence after SkipAhead = %d, below b's %d", last, theirs[len(theirs)-1])
	}
	after := publishDeltas(a, "a", "s", 25) // past the block SkipAhead took
	if after[0] <= theirs[len(theirs)-1] {
		t.Errorf("after SkipAhead a issued %d, not above b's %d", after[0], theirs[len(theirs)-1])
	}
	rising(t, "a", append(mine, after...))

	single := newTestHub(t, Options[*encodedTest]{Store: log})
	before := publishDeltas(single, "a", "s", 1)[0]
	if err := single.SkipAhead(bg); err != nil {
		t.Fatal(err)
	}
	if seq := publishDeltas(single, "a", "s", 1)[0]; seq != before+1 {
		t.Errorf("a hub that keeps the floor moved from %d to %d on SkipAhead; it has no other hub to skip", before, seq)
	}
}

// SkipAhead reports a failed reservation and leaves the sequences as they were.
func TestSkipAheadFails(t *testing.T) {
	log := &memLog{}
	reserver := &flakyReserver{memLog: log}
	h := newMemHub(t, log, 100, Options[*encodedTest]{Store: reserver})
	first := publishDeltas(h, "a", "s", 1)[0]
	reserver.setFailing(true)
	if err := h.SkipAhead(bg); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("SkipAhead with a failing store: %v", err)
	}
	if seq := publishDeltas(h, "a", "s", 1)[0]; seq != first+1 {
		t.Errorf("after a failed SkipAhead: %d, want %d", seq, first+1)
	}
}

// Once the hub is closed, a reservation that keeps failing at the end of a block is given
// up after closedReserveBudget: Publish issues the sequences past the block instead of
// holding the shutdown forever.
func TestPublishAfterCloseGivesUpOnABlock(t *testing.T) {
	defer func(b time.Duration) { closedReserveBudget = b }(closedReserveBudget)
	closedReserveBudget = 300 * time.Millisecond
	log := &memLog{}
	reserver := &flakyReserver{memLog: log}
	h := newMemHub(t, log, 4, Options[*encodedTest]{Store: reserver})
	reserver.setFailing(true)
	publishDeltas(h, "a", "s", 4) // the block's last; the reservation ahead failed
	h.Close()
	published := make(chan []uint64)
	go func() { published <- publishDeltas(h, "a", "s", 3) }()
	select {
	case seqs := <-published:
		if !slices.Equal(seqs, []uint64{5, 6, 7}) {
			t.Errorf("Publish after Close with no block issued %v, want 5, 6, 7: past the block", seqs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish after Close still waits for a block the store cannot reserve")
	}
	if n := reserver.tries(); n < 2 {
		t.Errorf("%d reservations tried, want the one ahead and a retry after Close", n)
	}
}

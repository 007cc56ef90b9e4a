package daemon

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

var memorySink [][]byte

// Garbage past the threshold is collected and given back; right after, there is nothing
// left to give back.
func TestHeapReturnerGivesGarbageBack(t *testing.T) {
	h := heapReturner{threshold: 64 << 20, quietThreshold: 8 << 20, quietAllocs: 4 << 20}
	h.check()
	for range 128 {
		memorySink = append(memorySink, make([]byte, 1<<20))
	}
	runtime.GC() // the 128 MiB are live at this collection
	memorySink = nil
	if n, ok := h.check(); !ok {
		t.Fatalf("128 MiB of garbage not returned (heap footprint %d bytes, live %d)", n, h.live)
	}
	if h.live > 64<<20 {
		t.Errorf("live after the collection: %d bytes", h.live)
	}
	if n, ok := h.check(); ok {
		t.Errorf("returned again right after: heap footprint %d bytes", n)
	}
}

// Garbage under the threshold is kept while the server allocates, and given back once it
// is quiet.
func TestHeapReturnerGivesGarbageBackWhenQuiet(t *testing.T) {
	h := heapReturner{threshold: 64 << 20, quietThreshold: 8 << 20, quietAllocs: 4 << 20}
	runtime.GC()
	h.check()
	h.check() // quiet: what the test started with is given back
	for range 32 {
		memorySink = append(memorySink, make([]byte, 1<<20))
	}
	runtime.GC() // the 32 MiB are live at this collection
	memorySink = nil
	if n, ok := h.check(); ok {
		t.Fatalf("returned %d bytes of heap footprint right after allocating 32 MiB", n)
	}
	if n, ok := h.check(); !ok {
		t.Fatalf("32 MiB of garbage not returned once quiet (heap footprint %d bytes, live %d)", n, h.live)
	}
	if n, ok := h.check(); ok {
		t.Errorf("returned again right after: heap footprint %d bytes", n)
	}
}

// A quiet server trims what it holds before measuring; a busy one does not.
func TestHeapReturnerTrimsWhenQuiet(t *testing.T) {
	trims := 0
	h := heapReturner{threshold: 64 << 20, quietThreshold: 8 << 20, quietAllocs: 4 << 20, trim: func() int { trims++; return 0 }}
	h.check()
	h.check() // quiet
	if trims == 0 {
		t.Fatal("a quiet check did not trim")
	}
	before := trims
	for range 16 {
		memorySink = append(memorySink, make([]byte, 1<<20))
	}
	memorySink = nil
	h.check() // 16 MiB allocated since the last check: busy
	if trims != before {
		t.Error("a busy check trimmed")
	}
	// What a trim lets go is collected at once, however little.
	h.trim = func() int { return 1 }
	h.check()
	if _, ok := h.check(); !ok {
		t.Error("a trim that let go of something was not followed by a collection")
	}
}

// The soft memory limit rises above a live heap that nears it, and stays where it is
// otherwise.
func TestRaiseMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	if raised, _ := raiseMemoryLimit(); raised != 0 {
		t.Fatalf("no limit set, yet raised to %d", raised)
	}
	for range 64 {
		memorySink = append(memorySink, make([]byte, 1<<20))
	}
	defer func() { memorySink = nil }()
	runtime.GC()
	debug.SetMemoryLimit(1 << 40)
	if raised, _ := raiseMemoryLimit(); raised != 0 {
		t.Fatalf("a limit far above the live heap raised to %d", raised)
	}
	debug.SetMemoryLimit(32 << 20) // below the 64 MiB live
	raised, live := raiseMemoryLimit()
	if raised < int64(live) || debug.SetMemoryLimit(-1) != raised {
		t.Fatalf("limit raised to %d for a live heap of %d", raised, live)
	}
}

package daemon

import (
	"runtime"
	"testing"
)

var memorySink [][]byte

// Garbage past the threshold is collected and given back; right after, there is nothing
// left to give back.
func TestHeapReturnerGivesGarbageBack(t *testing.T) {
	h := heapReturner{threshold: 64 << 20}
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

package daemon

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// A long reply leaves the Go heap far larger than what stays live (the runtime sizes its
// next collection to twice the live peak, and returns freed pages to the OS only slowly),
// so agenticd's RSS stayed hundreds of MiB up after a 100 MiB reply. Every
// memoryCheckInterval the server looks at how much of the heap is garbage or free but
// not yet returned, and above memoryReturnThreshold collects it and gives it back. Once
// the server is quiet (it allocated less than memoryQuietAllocs since the last look) the
// bar is memoryQuietThreshold: a finished burst's garbage is not kept while nothing runs,
// and collecting costs nothing then. While busy the bar stays high, since the heap
// would grow right back.
const (
	memoryCheckInterval   = 10 * time.Second
	memoryReturnThreshold = 64 << 20
	memoryQuietThreshold  = 8 << 20
	memoryQuietAllocs     = 4 << 20
)

// The held events are most of agenticd's live heap in a long reply, and the Go heap grows
// to twice its live data: a full 64 MiB ring made a 150 MB heap. agenticd (Run, the
// program; not a server embedded in another one) therefore sets a soft memory limit of
// the ring's byte budget plus memoryLimitHeadroom, unless GOMEMLIMIT sets one. Should the
// live heap near that limit (many sessions, large tool outputs: what the ring budget does
// not cover), the returner raises it to 5/4 of the live heap, so that the collector never
// runs back to back. Once the server is quiet, the ring is trimmed to an eighth of its
// budget (the event log serves resumes from before that), so an idle server's memory is
// not a long reply's events.
const (
	memoryLimitHeadroom = 32 << 20
	idleRingFraction    = 8
)

// setMemoryLimit sets agenticd's soft memory limit for a ring of ringBytes, unless the
// environment set one; it returns the limit it set (0: none) and the one to restore.
func setMemoryLimit(ringBytes int64) (limit, previous int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, 0
	}
	limit = ringBytes + memoryLimitHeadroom
	return limit, debug.SetMemoryLimit(limit)
}

// memoryReturner runs a heapReturner every interval until Stop.
type memoryReturner struct {
	stop chan struct{}
	done chan struct{}
	// raiseLimit is set when agenticd owns the soft memory limit and may raise it.
	raiseLimit atomic.Bool
}

// ownLimit lets the returner raise the soft memory limit agenticd set.
func (m *memoryReturner) ownLimit() { m.raiseLimit.Store(true) }

// startMemoryReturner checks every interval; trim, when set, is called once the server is
// quiet, before the garbage is measured, and returns how many things it let go.
func startMemoryReturner(interval time.Duration, threshold uint64, trim func() int, logger *slog.Logger) *memoryReturner {
	m := &memoryReturner{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		h := heapReturner{threshold: threshold, quietThreshold: memoryQuietThreshold, quietAllocs: memoryQuietAllocs, trim: trim}
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				if footprint, ok := h.check(); ok {
					logger.Debug("returned freed memory to the OS", "heap_bytes_before", footprint, "live_bytes", h.live)
				}
				if m.raiseLimit.Load() {
					if raised, live := raiseMemoryLimit(); raised > 0 {
						logger.Info("raised the soft memory limit: the live heap neared it", "limit_bytes", raised, "live_bytes", live)
					}
				}
			}
		}
	}()
	return m
}

// Stop ends the returner and waits for it.
func (m *memoryReturner) Stop() {
	close(m.stop)
	<-m.done
}

// heapReturner collects the heap and gives its free pages back to the OS when the heap's
// footprint (objects, live or garbage, plus free pages not yet returned) has grown more
// than threshold above what was live after its last collection, or more than
// quietThreshold when less than quietAllocs were allocated since the previous check.
type heapReturner struct {
	threshold      uint64
	quietThreshold uint64
	quietAllocs    uint64
	trim           func() int // called when quiet, says how much it let go; nil: nothing to trim
	live           uint64     // live heap after the last collection it forced
	allocs         uint64     // bytes allocated ever, at the previous check
	samples        []metrics.Sample
}

func (h *heapReturner) check() (footprint uint64, returned bool) {
	if h.samples == nil {
		h.samples = []metrics.Sample{
			{Name: "/memory/classes/heap/objects:bytes"}, // live objects and garbage not yet swept
			{Name: "/memory/classes/heap/free:bytes"},    // free pages not yet given back
			{Name: "/gc/heap/live:bytes"},                // live at the last collection
			{Name: "/gc/heap/allocs:bytes"},              // allocated ever
		}
	}
	metrics.Read(h.samples)
	footprint = h.samples[0].Value.Uint64() + h.samples[1].Value.Uint64()
	allocs := h.samples[3].Value.Uint64()
	threshold := h.threshold
	if allocs-h.allocs < h.quietAllocs {
		threshold = min(threshold, h.quietThreshold)
		// What the trim let go is garbage only the next collection finds: collect now.
		if h.trim != nil && h.trim() > 0 {
			threshold = 0
		}
	}
	h.allocs = allocs
	if threshold > 0 && footprint < h.live+threshold {
		return footprint, false
	}
	debug.FreeOSMemory()
	metrics.Read(h.samples)
	h.live = h.samples[2].Value.Uint64()
	return footprint, true
}

// raiseMemoryLimit raises the soft memory limit to 5/4 of the live heap when the live heap
// passed 9/10 of it; it returns the new limit (0: unchanged) and the live heap.
func raiseMemoryLimit() (raised int64, live uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	live = sample[0].Value.Uint64()
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 || live < uint64(limit)/10*9 {
		return 0, live
	}
	raised = int64(live / 4 * 5)
	debug.SetMemoryLimit(raised)
	return raised, live
}

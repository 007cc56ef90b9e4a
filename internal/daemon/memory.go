package daemon

import (
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// A long reply leaves the Go heap far larger than what stays live (the runtime sizes its
// next collection to twice the live peak, and returns freed pages to the OS only slowly),
// so agenticd's RSS stayed hundreds of MiB up after a 100 MiB reply. Every
// memoryCheckInterval the server looks at how much of the heap is garbage or free but
// not yet returned, and above memoryReturnThreshold collects it and gives it back.
const (
	memoryCheckInterval   = 10 * time.Second
	memoryReturnThreshold = 64 << 20
)

// memoryReturner runs a heapReturner every interval until Stop.
type memoryReturner struct {
	stop chan struct{}
	done chan struct{}
}

func startMemoryReturner(interval time.Duration, threshold uint64, logger *slog.Logger) *memoryReturner {
	m := &memoryReturner{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		h := heapReturner{threshold: threshold}
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				if footprint, ok := h.check(); ok {
					logger.Debug("returned freed memory to the OS", "heap_bytes_before", footprint, "live_bytes", h.live)
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
// than threshold above what was live after its last collection.
type heapReturner struct {
	threshold uint64
	live      uint64 // live heap after the last collection it forced
	samples   []metrics.Sample
}

func (h *heapReturner) check() (footprint uint64, returned bool) {
	if h.samples == nil {
		h.samples = []metrics.Sample{
			{Name: "/memory/classes/heap/objects:bytes"}, // live objects and garbage not yet swept
			{Name: "/memory/classes/heap/free:bytes"},    // free pages not yet given back
			{Name: "/gc/heap/live:bytes"},                // live at the last collection
		}
	}
	metrics.Read(h.samples)
	footprint = h.samples[0].Value.Uint64() + h.samples[1].Value.Uint64()
	if footprint < h.live+h.threshold {
		return footprint, false
	}
	debug.FreeOSMemory()
	metrics.Read(h.samples)
	h.live = h.samples[2].Value.Uint64()
	return footprint, true
}

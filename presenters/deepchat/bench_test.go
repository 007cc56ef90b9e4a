package deepchat

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// BenchmarkCreateCloseSession measures CreateSession followed by CloseSession (target:
// >= 2,000 pairs/s).
func BenchmarkCreateCloseSession(b *testing.B) {
	h := newHarness(b)
	ctx := context.Background()
	ws := h.opened(h.workspace)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		info, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.p.CloseSession(ctx, info.SessionID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkIdleSessionMemory opens 10,000 sessions and reports the heap each one keeps
// while idle (target: <= 32 KiB).
func BenchmarkIdleSessionMemory(b *testing.B) {
	const sessions = 10000
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b)
		ctx := context.Background()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for i := 0; i < sessions; i++ {
			if _, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace)}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		h.rec.mu.Lock()
		h.rec.events = nil // the recorder is the test's, not the presenter's memory
		h.rec.mu.Unlock()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if n := len(h.p.sessions); n != sessions {
			b.Fatalf("%d sessions open", n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/sessions, "heap-B/session")
		b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
		h.stop()
		b.StartTimer()
	}
}

// BenchmarkLongReply streams a 10,000-chunk reply from the local fake provider and
// reports the SQLite commits of the turn (target: <= 20).
func BenchmarkLongReply(b *testing.B) {
	h := newHarness(b, countCommits)
	info := h.createSession("")
	chunks := make([]string, 10000)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("token%d ", i)
	}
	var total int64
	for b.Loop() {
		h.llm.script(textReply(chunks...))
		before := commits.Load()
		_, end := h.turn(info.SessionID, "long")
		total += commits.Load() - before
		if end.StopReason != presenters.StopEndTurn {
			b.Fatalf("end = %+v", end)
		}
	}
	b.ReportMetric(float64(total)/float64(b.N), "commits/turn")
	b.ReportMetric(float64(len(strings.Join(chunks, ""))), "reply-bytes")
}

// BenchmarkDescribeSessions describes a ListSessions page of 1000 stored (closed)
// sessions: GetSession per session, and one GetSessions batch.
func BenchmarkDescribeSessions(b *testing.B) {
	h := newHarness(b)
	ctx := context.Background()
	ids := make([]string, 1000)
	for i := range ids {
		info, err := h.p.CreateSession(ctx, presenters.SessionConfig{Workspace: h.opened(h.workspace)})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.p.CloseSession(ctx, info.SessionID); err != nil {
			b.Fatal(err)
		}
		ids[i] = info.SessionID
	}
	b.Run("per-session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, id := range ids {
				if _, err := h.p.GetSession(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("batched", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if infos, err := h.p.GetSessions(ctx, ids); err != nil || len(infos) != len(ids) {
				b.Fatalf("%d sessions, %v", len(infos), err)
			}
		}
	})
}
